"""Pages: model data in, HTML text out. No file I/O except reading templates and their compiled form.

Every page of a single log's report is a plain Python function (`html/`), which `render_page` calls:
the pages a big log writes thousands of, once per compile id or record (the compile, compilation
metrics, code, pass diff, guards, guard details, kernel stack traces and provenance pages), the index,
the failures page, and the page put in place of one that could not be built. The index, a report's
biggest page, can be had in pieces (`render_pieces`), which its writer writes as they come; so are the
pieces it writes once per compile or compile id (its compiles table's rows, "Files by compile id",
the stack trie: `html.index_rows`), which a live report renders again as its compiles change
(`render_macro`).

The other pages (the multi-rank landing, the diff and vLLM pages, the notebook's summary, ...) are
Jinja templates (templates/), rendered by Jinja itself through its public API (`template_env`),
which is imported only when one of them is rendered: a single log's report never imports Jinja. They
call the pieces of markup the Python pages share (`html.parts`, `html.index_rows`, `html.shell`) as
the globals `html` and `shell_head` / `shell_foot`, so each piece of markup is defined once.

Autoescape is on for every template, and the Python pages escape every value (`html.escaping.esc`).
The only trusted HTML comes from the pieces of `html/` (escaped text or Pygments output, line by
line), `script_json` and the user's own `--custom-header-html` (`trusted_html`), made Markup in
`html.escaping` and nowhere else.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from markupsafe import Markup

from .._version import __version__
from ..analysis.summary import STATUS_LABELS, STATUS_SEVERITY
from ..units import format_seconds
from .html import index_rows, parts, shell, timeline_svg
from .html.compile_page import compile_page_html
from .html.escaping import safe_href, trusted_html
from .html.failures_page import error_page_html, failures_page_html
from .html.index_page import index_page_html, index_page_pieces
from .html.links import SourceLinks, check_source_url
from .html.metrics_page import metrics_page_html
from .html.parts import plural, source_link
from .html.record_pages import (
    code_page_html, guard_info_page_html, guards_page_html, pass_diff_page_html, provenance_page_html, stack_traces_page_html,
)

if TYPE_CHECKING:
    import jinja2

# what other modules take from here (SourceLinks, check_source_url, source_link and trusted_html are html/'s)
__all__ = [
    "STATIC_DIR", "TEMPLATE_DIR", "Model", "SourceLinks", "check_source_url", "compile_templates", "environment", "render", "render_macro",
    "render_page", "render_pieces", "source_link", "trusted_html",
]

HERE = Path(__file__).resolve().parent.parent  # the package folder (tlparse_py/)
# Installed wheels carry the templates inside the package; a source checkout (and `pip install -e`)
# keeps them at the repository root, which wins so template edits show up without reinstalling.
TEMPLATE_DIR = next(p for p in (HERE.parent / "templates", HERE / "templates") if (p / "base.html.j2").is_file())
STATIC_DIR = TEMPLATE_DIR / "static"
COMPILED_DIR = HERE / "compiled_templates"  # in wheels only (see hatch_build.py)


@functools.cache
def environment() -> jinja2.Environment:
    """Jinja, with the pages' globals and filters (imported now: the first template page)."""
    from . import template_env

    return template_env.environment(TEMPLATE_DIR, COMPILED_DIR, _globals(), _filters())


# The pieces of markup the Python pages share with the templates: `{{ html.stack(frames, root) }}`
TEMPLATE_PARTS: dict[str, Callable[..., str]] = {
    "frame": parts.frame, "stack": parts.stack, "status": parts.status, "artifact_list": parts.artifact_list,
    "name_notes": parts.name_notes, "break_site": parts.break_site, "program_exit": parts.program_exit, "perfetto": parts.perfetto,
    "compile_rows": index_rows.compile_rows, "compile_row": index_rows.compile_row, "compile_id_sections": index_rows.compile_id_sections,
    "compile_id_section": index_rows.compile_id_section, "trie": index_rows.trie, "ids": index_rows.ids,
    "recompiled_frame": index_rows.recompiled_frame,
}


def _globals() -> dict[str, Any]:
    from .html import ranks_svg  # the landing's picture: a report of one log never renders a template, nor loads it

    return {
        "range": range,
        "dict": dict,
        "version": __version__,
        "plural": plural,
        "status_labels": STATUS_LABELS,
        "status_rank": {status: rank for rank, status in enumerate(STATUS_SEVERITY)},
        "source_link": source_link,
        "shell_head": _markup(shell.shell_head),
        "shell_foot": _markup(shell.shell_foot),
        "html": SimpleNamespace(**{name: _markup(piece) for name, piece in TEMPLATE_PARTS.items()}),
        # the index's pictures (`html.timeline_svg`), drawn from the analysis' timeline: `{{ pictures.timeline(timeline) }}`;
        # the landing's, of the ranks on one axis (`html.ranks_svg`): `{{ pictures.ranks(landing.timeline) }}`
        "pictures": SimpleNamespace(timeline=_markup(timeline_svg.timeline_figure), frames=_markup(timeline_svg.frames_figure),
                                    ranks=_markup(ranks_svg.ranks_figure)),
    }


def _markup(build: Callable[..., str]) -> Callable[..., Markup]:
    """A piece of `html/` as a template calls it: its HTML as Markup, inserted as it is."""

    @functools.wraps(build)
    def markup(*args: Any) -> Markup:
        return Markup(build(*args))

    return markup


def _filters() -> dict[str, Callable[..., Any]]:
    return {"safe_href": safe_href, "seconds": format_seconds}


def render(template: str, context: dict[str, Any]) -> str:
    return environment().get_template(template).render(context)


class Model(Protocol):
    """A page's view model: its template, and the variables the template reads."""

    template: ClassVar[str]

    def context(self) -> dict[str, Any]: ...


def render_macro(name: str, *args: Any) -> Markup:
    """A piece of a page alone (a fragment a live page reuses): one of `html/` the templates call (`TEMPLATE_PARTS`)."""
    return Markup(TEMPLATE_PARTS[name](*args))


# The pages of a single log's report, as Python functions (page model, live mark → HTML), by their
# model's class (views.compile.CompilePage, views.pages.*, views.index.*, jobs.ErrorPage): as
# templates, on a log of thousands of small compiles, those written once per compile were most of the
# run, and importing Jinja a good part of a small log's.
PYTHON_PAGES: dict[str, Callable[[Any, Any], str]] = {
    "CompilePage": compile_page_html, "MetricsPage": metrics_page_html, "CodePage": code_page_html, "PassDiffPage": pass_diff_page_html,
    "GuardsPage": guards_page_html, "GuardInfoPage": guard_info_page_html, "StackTracesPage": stack_traces_page_html,
    "ProvenancePage": provenance_page_html, "IndexPage": index_page_html, "FailuresPage": failures_page_html, "ErrorPage": error_page_html,
}
# The pages that can be had in pieces (page model, live mark → the HTML's pieces, in order)
PAGE_PIECES: dict[str, Callable[[Any, Any], Iterable[str]]] = {"IndexPage": index_page_pieces}


def render_page(page: Model, live: Any = None) -> str:
    """The page's HTML; `live` (a `views.live.LiveMark`): written while the log is still being read."""
    python_page = PYTHON_PAGES.get(type(page).__name__)
    if python_page is not None:
        return python_page(page, live)
    context = page.context()
    if live is not None:
        context["live"] = live
    return render(page.template, context)


def render_pieces(page: Model, live: Any = None) -> Iterable[str]:
    """`render_page` in pieces, to be written as they come: a big page (the index) is never held whole."""
    pieces = PAGE_PIECES.get(type(page).__name__)
    return pieces(page, live) if pieces is not None else [render_page(page, live)]


def compile_templates(folder: Path) -> None:
    """Every template compiled by Jinja into `folder` (the package `compiled_templates` of a wheel,
    loaded by `environment`). Run when a wheel is built (hatch_build.py)."""
    from . import template_env

    template_env.compile_templates(folder, TEMPLATE_DIR, _filters())
