"""A record's line of raw.jsonl: its envelope with tlparse's extra keys, as JSON bytes.

tlparse writes each record's envelope with the glog time, thread (pid), source path and line, and
the payload file's name; keys sorted, compact. All but the payload file's name is known where the
record is read, so a forked scanning child encodes the line beside its scanning, in two pieces: the
keys that sort before `payload_filename` and those after. The process that analyses the log puts
the name in between once the record's parsers have named the file (`joined`): at 10,000s of small
compiles the encoding is a tenth of that process's reading.
"""

from __future__ import annotations

from typing import Any

import orjson

RAW_JSONL_KEYS = ("timestamp", "thread", "pathname", "lineno", "payload_filename")
PAYLOAD_KEY = "payload_filename"
_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS

Pieces = tuple[bytes, bytes]  # the line's keys before PAYLOAD_KEY, and after it, each as a JSON object


def raw_line(envelope: dict[str, Any], timestamp: str, thread: int, pathname: str, lineno: int) -> dict[str, Any] | None:
    """The line as a dict; None when the envelope already has one of tlparse's keys (left out of raw.jsonl)."""
    if any(key in envelope for key in RAW_JSONL_KEYS):
        return None
    line = dict(envelope)
    line.update(timestamp=timestamp, thread=thread, pathname=pathname, lineno=lineno)
    return line


# Where the payload file's name goes: the line is encoded once with this in its place, and cut there
_PLACE = "\x00tlparse-py: the payload file's name"
_PLACED = orjson.dumps({PAYLOAD_KEY: _PLACE})[1:-1]


def pieces_of(envelope: dict[str, Any], timestamp: str, thread: int, pathname: str, lineno: int) -> Pieces | None:
    """The line in its two pieces; None where only the whole line's own encoding can say what to do
    (a key conflict; a value orjson cannot encode, which the whole line encodes otherwise)."""
    line = raw_line(envelope, timestamp, thread, pathname, lineno)
    if line is None:
        return None
    line[PAYLOAD_KEY] = _PLACE
    try:
        text = orjson.dumps(line, option=_OPTIONS)
        if text.count(_PLACED) == 1:  # (a log may hold the same bytes in a value: then cut by the keys)
            # keys sorted, compact: the keys before the place, and after it, as objects of their own
            before, _, after = text.partition(_PLACED)
            return before[:-1] + b"}" if len(before) > 1 else b"{}", b"{" + after[1:] if len(after) > 1 else b"{}"
        return (orjson.dumps({k: v for k, v in line.items() if k < PAYLOAD_KEY}, option=_OPTIONS),
                orjson.dumps({k: v for k, v in line.items() if k > PAYLOAD_KEY}, option=_OPTIONS))
    except (TypeError, orjson.JSONEncodeError):
        return None


def joined(pieces: Pieces, payload_file: str | None) -> bytes | None:
    """The whole line, as orjson encodes it with sorted keys: the pieces with the payload file's
    name between them (None: its name does not encode)."""
    before, after = pieces
    parts = [before[1:-1], after[1:-1]]
    if payload_file is not None:
        try:
            parts.insert(1, b'"' + PAYLOAD_KEY.encode() + b'":' + orjson.dumps(payload_file))
        except (TypeError, orjson.JSONEncodeError):
            return None
    return b"{" + b",".join(part for part in parts if part) + b"}"
