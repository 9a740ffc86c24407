"""What every view shares: what views read (`Inputs`), the page model every page extends (`Page`),
compile-id labels and anchors, frames, artifacts and values.

Views are pure functions of the finished analysis (and of spooled record summaries): each page kind
has a view model, a plain record (a msgspec Struct), that its template renders. URLs are relative to the report
root; templates prefix them with `root` so every page works from `file://` and from a zip.
"""

from __future__ import annotations

import itertools
from typing import Any, ClassVar

from msgspec import Struct, field
import orjson

from ... import limits
from ...model import Artifact, CompileId
from ...model import display_key as label
from ...paths import compile_page_url, provenance_page_url
from ..html.escaping import safe_href
from ..html.links import SourceLinks
from ...analysis.compiles import Analysis
from ...analysis.stacks import Frame, eval_with_key, simplify_filename
from ...analysis.store import InputInfo
from ...analysis.vllm import USUAL_INDEX as VLLM_USUAL_INDEX  # re-exported: live.py and the vLLM view name it
from ...options import Options

MAX_VALUE_CHARS = 4000

__all__ = ["label", "compile_page_url", "provenance_page_url"]


class Inputs(Struct):
    """What the views read: the finished analysis, how the report was asked for, and the pages the
    outputs layer wrote at fixed paths (FX-generated sources, provenance pages)."""

    analysis: Analysis
    settings: Options = field(default_factory=Options)
    global_files: set[str] = field(default_factory=set)  # dump_file pages written
    provenance_pages: list[tuple[CompileId | None, str, bool]] = field(default_factory=list)  # (key, url, has data)

    @property
    def source_links(self) -> SourceLinks:
        """How user-code locations link into the user's repository (nowhere without --source-url)."""
        return SourceLinks(self.settings.source_url, self.settings.source_root)


class Page(Struct, kw_only=True, eq=False):  # a view model: never compared or printed
    """What every report page shows around its content; each page kind's model extends it."""

    template: ClassVar[str] = ""
    title: str
    root: str = ""  # the report root, relative to the page
    source: InputInfo | dict[str, Any]  # the log(s) the report was written from
    source_links: SourceLinks = field(default_factory=SourceLinks)
    compile_id: CompileId | None = None  # the compile the page belongs to
    kind: str = ""  # the record kind it shows
    lineno: int | None = None  # the record's line in the log
    usual_index: str = "index.html"  # the index of every compile (tlparse_index.html when index.html is the vLLM summary)
    compile_page: str | None = None
    failures_link: bool = True  # the top bar links failures_and_restarts.html (a single report has one)

    def context(self) -> dict[str, Any]:
        """The template's variables: the model's fields."""
        return {name: getattr(self, name) for name in self.__struct_fields__}




def usual_index(inputs: Inputs) -> str:
    return VLLM_USUAL_INDEX if inputs.analysis.vllm.active else "index.html"


def page_base(inputs: Inputs, title: str, root: str = "") -> dict[str, Any]:
    """The `Page` fields of a page that belongs to no compile."""
    return {"title": title, "root": root, "source": inputs.analysis.source, "source_links": inputs.source_links,
            "usual_index": usual_index(inputs)}


class FrameView(Struct):
    file: str
    line: int
    name: str
    loc: str
    href: str | None  # root-relative link to FX-generated source, when we have it
    source_href: str | None = None  # absolute link into the user's repository (--source-url)


def frame_view(frame: Frame, inputs: Inputs) -> FrameView:
    filename = simplify_filename(inputs.analysis.resolve_filename(frame.filename))
    key = eval_with_key(filename)
    page = f"dump_file/eval_with_key_{key}.html" if key else None
    href = f"{page}#L{frame.line}" if page in inputs.global_files else None
    source_href = inputs.source_links.href(filename, frame.line) if href is None and inputs.settings.source_url else None
    return FrameView(filename, frame.line, frame.name, frame.loc, href, source_href)


def anchor(key: CompileId | None) -> str:
    return "cid-unknown" if key is None else f"cid-{key.dirname}"


def index_anchor(analysis: Analysis, key: CompileId | None) -> str:
    """Where the index lists a compile id: its entry under "Files by compile id", or that section
    when the list stops before it (`limits.INDEX_ROWS`)."""
    if len(analysis.directory) <= limits.INDEX_ROWS:  # every compile id is listed (not indexed again after each live update)
        return anchor(key) if key in analysis.directory else "compile-ids"
    listed = analysis.index_by("index_listed", itertools.islice(analysis.directory, limits.INDEX_ROWS), lambda k: k)
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


def key_of(compile_id: CompileId | None) -> CompileId | None:
    """The directory key a record or fact belongs to."""
    return compile_id.directory_key() if compile_id is not None else None
