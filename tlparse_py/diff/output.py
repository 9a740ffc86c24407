"""Writing a diff: `DIR/index.html` and `DIR/diff.json`, all or nothing (like a report), and the Markdown."""

from __future__ import annotations

import os
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import msgspec
import orjson

from ..analysis.compared import Diff
from ..analysis.spools import Spool, as_json, batches
from ..analysis.totals import GateFailure, GateUnchecked
from ..pipeline import write_static
from ..report.markdown import destination, path_destination
from ..report.render import render_page
from ..report.output_file import append_output
from ..report.staging import ReportWriter
from .view import diff_page, markdown

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "diff.schema.json"


JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
BATCH = 1000  # items of a long list encoded at a time


def diff_json(diff: Diff | dict[str, Any]) -> bytes:
    return orjson.dumps(diff, option=JSON_OPTIONS, default=as_json)


def _fields(value: msgspec.Struct) -> dict[str, Any]:
    """A Struct's fields by their JSON names, as `msgspec.to_builtins` writes them (values left as they are)."""
    return {f.encode_name: getattr(value, f.name) for f in msgspec.structs.fields(value) if getattr(value, f.name) is not msgspec.UNSET}


def diff_json_pieces(value: Any, depth: int = 0) -> Iterator[bytes]:
    """The bytes of `diff_json(value)`, in pieces: a diff of 100,000s of compiles lists a row for each,
    and its text need never be whole in memory. Dicts and Structs are walked; a list of more than
    BATCH items is encoded BATCH items at a time, each piece indented as orjson indents it in place
    (no JSON string holds a newline, so indenting is a replace)."""
    pad = b"\n" + b"  " * depth
    if isinstance(value, msgspec.Struct):
        value = _fields(value)
    if isinstance(value, dict) and value and type(value) is dict:
        yield b"{"
        for position, (key, item) in enumerate(value.items()):
            encoded = orjson.dumps({key: None}, option=orjson.OPT_NON_STR_KEYS)[1:-6]  # the key as orjson writes it
            yield (b"," if position else b"") + pad + b"  " + encoded + b": "
            yield from diff_json_pieces(item, depth + 1)
        yield pad + b"}"
    elif (isinstance(value, list) and len(value) > BATCH and type(value) is list) or (isinstance(value, Spool) and value):
        yield b"["
        for position, batch in enumerate(batches(value, BATCH)):  # a spool's rows are read a batch at a time
            text = orjson.dumps(batch, option=JSON_OPTIONS, default=as_json)
            # "[\n  item,\n  item\n]": the items, `depth` levels deeper
            yield (b"," if position else b"") + pad + text[2:-2].replace(b"\n", pad)
        yield pad + b"]"
    else:
        yield orjson.dumps(value, option=JSON_OPTIONS, default=as_json).replace(b"\n", pad)


def write_diff(diff: Diff, out: Path, overwrite: bool = False, violations: list[GateFailure] | None = None,
               unchecked: list[GateUnchecked] | None = None) -> Path:
    """The diff page and diff.json in `out`. Raises OutputError before any work if `out` cannot be
    used, OSError if writing fails; either way an existing folder at `out` is left as it was."""
    writer = ReportWriter(out, overwrite)
    try:
        write_static(writer)
        with writer.open("diff.json") as handle:  # piece by piece: never the whole text at once
            for piece in diff_json_pieces(diff):
                handle.write(piece)
        writer.write("index.html", render_page(diff_page(diff, violations, unchecked)))
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    return out


def write_markdown(diff: Diff, file: Path, out: Path, violations: list[GateFailure] | None = None, report_url: str = "",
                   unchecked: list[GateUnchecked] | None = None) -> None:
    """The Markdown summary appended to `file` (as `>>`: a CI job summary keeps what earlier steps
    wrote), linking to `out/index.html`: at `report_url` (where the diff folder is uploaded) when
    given, else by a path relative to the file."""
    if report_url:  # as a link destination: what Markdown would read in it percent-encoded
        page = destination(report_url.rstrip("/") + "/index.html")
    else:
        page = path_destination(Path(os.path.relpath(out.absolute() / "index.html", file.absolute().parent)).as_posix())
    file.absolute().parent.mkdir(parents=True, exist_ok=True)
    append_output(file, markdown(diff, page, violations, unchecked=unchecked))  # /dev/stdout, a pipe: written in place
