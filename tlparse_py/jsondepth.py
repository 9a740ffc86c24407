"""The one bounded JSON decode: every JSON text the tool reads (records' envelopes and payloads,
summary.json and diff.json given to `diff`, vLLM's config, artifacts) is decoded here.

A JSON text nested deeper than MAX_JSON_DEPTH levels is refused (`TooDeep`), however it would be
decoded otherwise: orjson refuses past 1024 levels with its own error, Python's json and msgspec
recurse on the C stack and raise RecursionError (a traceback) near 1000, and a value decoded deeper
than 254 levels crashes orjson.dumps ("Recursion limit reached") wherever the report writes it again
(raw.jsonl, summary.json, pretty JSON pages). The limit sits under all three, with room for the
levels the report's own files wrap around a logged value (summary.json puts vLLM's config 4 levels
down), so a value this module returns can be written back by any of them. Real traces nest a few
levels (configs, stack frames, metrics); only a hostile or broken log comes near the limit.

`TooDeep` is an `orjson.JSONDecodeError` (so a ValueError): a caller that already treats "not JSON"
as a counted, shown problem treats "too deep" the same way, with this module's words.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import orjson

MAX_JSON_DEPTH = 200  # docs/limits.md: arrays and objects nested deeper than this are not read
# A report's own summary.json wraps logged values (at most MAX_JSON_DEPTH deep) in a few levels of its
# own (vLLM's config: 5), so `diff` reads it up to this depth: tlparse-py never wrote a deeper one
OWN_FILE_DEPTH = MAX_JSON_DEPTH + 16


class TooDeep(orjson.JSONDecodeError):
    """A JSON text nested deeper than the limit it was read with (MAX_JSON_DEPTH unless said)."""

    def __init__(self, limit: int = MAX_JSON_DEPTH) -> None:
        super().__init__(f"JSON nested deeper than {limit} levels (the limit tlparse-py reads)", "", 0)
        self.limit = limit

    def __str__(self) -> str:
        return str(self.msg)


def loads(data: bytes | bytearray | memoryview | str, limit: int = MAX_JSON_DEPTH) -> Any:
    """orjson.loads, bounded: raises orjson.JSONDecodeError when `data` is not JSON, `TooDeep` when
    it nests deeper than `limit`."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):  # orjson's own limit (1024): deeper than ours all the more
            raise TooDeep(limit) from None
        raise
    _check(data, value, limit)
    return value


def loads_text(text: str | bytes, **hooks: Any) -> Any:
    """json.loads (what reads NaN, Infinity and integers beyond 64 bits), bounded the same way:
    raises ValueError when `text` is not JSON, `TooDeep` when it nests too deep. `hooks`: json.loads'
    parse_constant, parse_float, ... (no record needs more than MAX_JSON_DEPTH)"""
    try:
        value = json.loads(text, **hooks)
    except RecursionError:  # the C scanner's recursion guard: far deeper than ours
        raise TooDeep() from None
    _check(text, value, MAX_JSON_DEPTH)
    return value


# Past this many characters a text is checked by walking its decoded value, not by counting its
# brackets first: a long JSON text of a real log (a chromium event's 100 KB of cache components)
# holds far fewer containers than characters, and two passes over it in C cost four times the walk
# of its containers (and most such texts hold more than `limit` brackets, and were walked as well).
COUNT_UP_TO = 4096


def _check(data: bytes | bytearray | memoryview | str, value: Any, limit: int) -> None:
    # A text of depth d holds at least d opening brackets (and 2d characters): most texts, every
    # envelope of a real log among them, are cleared without looking at the decoded value.
    if len(data) <= 2 * limit:
        return
    if len(data) > COUNT_UP_TO:
        if _deeper_than(value, limit):
            raise TooDeep(limit)
        return
    if isinstance(data, str):
        openings = data.count("[") + data.count("{")
    else:
        raw = data if isinstance(data, bytes) else bytes(data)
        openings = raw.count(b"[") + raw.count(b"{")
    if openings > limit and _deeper_than(value, limit):
        raise TooDeep(limit)


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests more than `limit` containers deep: walked level by level (no recursion,
    so no depth can overflow the stack), each container once."""
    level = [value] if type(value) in (dict, list) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        inner: list[Any] = []
        for container in level:
            items = container.values() if type(container) is dict else container
            inner.extend([item for item in items if type(item) is dict or type(item) is list])
        level = inner
    return False


def split(data: bytes | msgspec.Raw, kind: Any, limit: int = MAX_JSON_DEPTH) -> Any:
    """msgspec.json.decode of `data` as `kind` (a container of msgspec.Raw: the parts, each still a
    text, to be decoded by `loads` one at a time). Raises msgspec.DecodeError when it is not that,
    `TooDeep` where msgspec's recursion guard trips (a part nested far deeper than MAX_JSON_DEPTH,
    which it skips over recursively)."""
    try:
        return msgspec.json.decode(data, type=kind)
    except RecursionError:
        raise TooDeep(limit) from None
