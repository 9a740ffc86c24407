"""What every view shares: compile-id labels and anchors, frames, artifacts, values, the base page context.

Views are pure functions of the analysis (and of spooled record summaries): they return the plain
values a template shows. URLs are relative to the report root; templates prefix them with `root`
so every page works from `file://` and from a zip.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import orjson

from ... import limits
from ...model import Artifact, CompileId
from ...model import display_key as label
from ...paths import compile_page_url, provenance_page_url
from ..render import SourceLinks, safe_href
from ...analysis.stacks import Frame, eval_with_key, simplify_filename
from ...analysis.store import Store

MAX_VALUE_CHARS = 4000

__all__ = ["label", "compile_page_url", "provenance_page_url"]


@dataclass(slots=True)
class FrameView:
    file: str
    line: int
    name: str
    loc: str
    href: str | None  # root-relative link to FX-generated source, when we have it
    source_href: str | None = None  # absolute link into the user's repository (--source-url)


def source_links(report: Store) -> SourceLinks:
    """How user-code locations link into the user's repository (nowhere without --source-url)."""
    return SourceLinks(report.source_url, report.source_root)


def frame_view(frame: Frame, report: Store) -> FrameView:
    filename = simplify_filename(report.resolve_filename(frame.filename))
    key = eval_with_key(filename)
    page = f"dump_file/eval_with_key_{key}.html" if key else None
    href = f"{page}#L{frame.line}" if page in report.global_files else None
    source_href = source_links(report).href(filename, frame.line) if href is None and report.source_url else None
    return FrameView(filename, frame.line, frame.name, frame.loc, href, source_href)


def anchor(key: CompileId | None) -> str:
    return "cid-unknown" if key is None else f"cid-{key.dirname}"


def index_anchor(report: Store, key: CompileId | None) -> str:
    """Where the index lists a compile id: its entry under "Files by compile id", or that section
    when the list stops before it (`limits.INDEX_ROWS`)."""
    listed = report.index_by("index_listed", itertools.islice(report.directory, limits.INDEX_ROWS), lambda k: k)
    return anchor(key) if key in listed else "compile-ids"


def artifact_view(artifact: Artifact) -> dict[str, Any]:
    href = safe_href(artifact.url) if artifact.is_link else artifact.url
    return {
        "url": artifact.url,
        "href": href,
        "external": artifact.is_link,
        "name": artifact.name,
        "number": artifact.number,
        "suffix": artifact.suffix,
        "readable_url": artifact.readable_url or None,
        "kind": artifact.kind,
    }


def format_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        text = value
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (int, float)):
        text = repr(value)
    else:
        try:
            text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
        except (TypeError, orjson.JSONEncodeError):
            text = repr(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS] + f"… ({len(text)} characters)"


def pretty_value(value: Any) -> str:
    """Metadata as indented JSON (one escaped block per record is far cheaper than a table)."""
    try:
        text = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        text = repr(value)
    return text if len(text) <= MAX_VALUE_CHARS * 4 else text[: MAX_VALUE_CHARS * 4] + f"\n… ({len(text):,} characters)"


def base_context(report: Store, title: str, root: str = "") -> dict[str, Any]:
    return {
        "title": title,
        "root": root,
        "source": report.source,
        "compile_id": None,
        "kind": "",
        "lineno": None,
        "compile_page": None,
        "source_links": source_links(report),
    }




def key_of(compile_id: CompileId | None) -> CompileId | None:
    """The directory key a record or fact belongs to."""
    return compile_id.directory_key() if compile_id is not None else None
