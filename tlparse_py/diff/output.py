"""Writing a diff: `DIR/index.html` and `DIR/diff.json`, all or nothing (like a report), and the Markdown."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from ..pipeline import write_static
from ..report.markdown import append_markdown, destination, path_destination
from ..report.render import render_page
from ..report.writer import ReportWriter
from .view import diff_page, markdown

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "diff.schema.json"


def diff_json(diff: dict[str, Any]) -> bytes:
    return orjson.dumps(diff, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)


def write_diff(diff: dict[str, Any], out: Path, overwrite: bool = False, violations: list[str] | None = None) -> Path:
    """The diff page and diff.json in `out`. Raises OutputError before any work if `out` cannot be
    used, OSError if writing fails; either way an existing folder at `out` is left as it was."""
    writer = ReportWriter(out, overwrite)
    try:
        write_static(writer)
        writer.write("diff.json", diff_json(diff))
        writer.write("index.html", render_page(diff_page(diff, violations)))
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    return out


def write_markdown(diff: dict[str, Any], file: Path, out: Path, violations: list[str] | None = None, report_url: str = "") -> None:
    """The Markdown summary appended to `file` (as `>>`: a CI job summary keeps what earlier steps
    wrote), linking to `out/index.html`: at `report_url` (where the diff folder is uploaded) when
    given, else by a path relative to the file."""
    if report_url:  # as a link destination: what Markdown would read in it percent-encoded
        page = destination(report_url.rstrip("/") + "/index.html")
    else:
        page = path_destination(Path(os.path.relpath(out.absolute() / "index.html", file.absolute().parent)).as_posix())
    file.absolute().parent.mkdir(parents=True, exist_ok=True)
    append_markdown(file, markdown(diff, page, violations))
