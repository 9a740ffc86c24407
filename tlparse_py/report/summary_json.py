"""summary.json, written in pieces: its lists of one entry per compile (`compiles`, the timeline's
spans) a batch at a time, so that neither their dicts nor the whole text (45 MB at 40,000 compiles)
is ever held at once. The bytes are those of `orjson.dumps(summary_dict(summary))`, indented by 2.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from ..analysis.compiles import summary_dict
from ..analysis.summary import Summary

OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
BATCH = 500  # entries dumped, then handed on, at a time
ENTRY_INDENT = b"    "  # an entry of a top-level list is 2 levels deep


def summary_json(summary: Summary) -> Iterator[bytes]:
    """summary.json's bytes, in pieces."""
    text = orjson.dumps(summary_dict(summary, lists=False), option=OPTIONS)
    lists: list[tuple[str, Iterable[Any]]] = [("compiles", (c.to_dict() for c in summary.compiles))]
    if summary.timeline is not None:
        lists.append(("timeline", summary.timeline))
    position = 0
    for key, entries in lists:
        # a top-level key is the only one indented by 2 at the start of a line (a string's newline is escaped)
        marker = b'\n  "' + key.encode() + b'": []'
        at = text.index(marker, position)
        yield text[position : at + len(marker) - 2]
        yield from _list(entries)
        position = at + len(marker)
    yield text[position:]


def _list(entries: Iterable[Any]) -> Iterator[bytes]:
    """A top-level list's text, as orjson indents it: `[]`, or one entry to a line run, 4 spaces in."""
    batch: list[bytes] = []
    opened = False
    for entry in entries:
        batch.append(ENTRY_INDENT + orjson.dumps(entry, option=OPTIONS).replace(b"\n", b"\n" + ENTRY_INDENT))
        if len(batch) == BATCH:
            yield (b",\n" if opened else b"[\n") + b",\n".join(batch)
            opened, batch = True, []
    if batch:
        yield (b",\n" if opened else b"[\n") + b",\n".join(batch)
        opened = True
    yield b"\n  ]" if opened else b"[]"
