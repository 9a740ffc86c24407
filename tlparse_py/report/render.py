"""Templates: model data in, HTML text out. No file I/O except reading templates and their
compiled form.

The pages written once per compile id (the compile and compilation-metrics pages) are plain Python
functions (`html/`): `render_page` calls them. The other pages are Jinja templates (templates/),
which call the pieces of markup the Python pages share (`html.parts`, `html.shell`) as the globals
`html` and `shell_head` / `shell_foot`. A report never imports Jinja: `codegen` compiles
each template into a Python module that runs on `templating` alone (importing Jinja, its lexer,
parser and compiler, was a tenth of a small report's run). An installed wheel carries them compiled
(`compiled_templates/`, written by `compile_templates` when the wheel is built, turned into bytecode
by pip at install); a source checkout compiles a template when it first uses it after an edit, and
keeps the code in the user's cache folder. Either is used only when compiled from this very source
(`source_key`).

Autoescape is on for every template, and the Python pages escape every value (`html.escaping.esc`).
The only trusted HTML comes from the pieces of `html/`, `code_html` and
`side_by_side_html` (escaped text or Pygments output, line by line), `script_json` and the user's own `--custom-header-html`, all wrapped
in `Markup` here and nowhere else.
"""

from __future__ import annotations

import functools
import hashlib
import json
import marshal
import os
import posixpath
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar, Protocol
from urllib.parse import quote

from markupsafe import Markup
from msgspec import Struct

from ..patterns import lazy
from . import cache, templating
from .._version import __version__
from ..analysis.stacks import is_user_code
from ..analysis.summary import STATUS_LABELS, STATUS_SEVERITY
from ..units import format_seconds
from .highlight import Lines
from .html import parts, shell, timeline_svg
from .html.code import code_html
from .html.compile_page import compile_page_html
from .html.escaping import safe_href
from .html.metrics_page import metrics_page_html
from .html.parts import plural, source_link

HERE = Path(__file__).resolve().parent.parent  # the package folder (tlparse_py/)
# Installed wheels carry the templates inside the package; a source checkout (and `pip install -e`)
# keeps them at the repository root, which wins so template edits show up without reinstalling.
TEMPLATE_DIR = next(p for p in (HERE.parent / "templates", HERE / "templates") if (p / "base.html.j2").is_file())
STATIC_DIR = TEMPLATE_DIR / "static"
COMPILED_DIR = HERE / "compiled_templates"  # in wheels only (see hatch_build.py)
COMPILED_PACKAGE = "tlparse_py.compiled_templates"


@functools.cache
def templates() -> templating.Templates:
    """The compiled templates, with the pages' globals and filters."""
    return templating.Templates(load_template, _globals(), _filters())


def _globals() -> dict[str, Any]:
    return {
        "range": range,
        "dict": dict,
        "version": __version__,
        "plural": plural,
        "status_labels": STATUS_LABELS,
        "status_rank": {status: rank for rank, status in enumerate(STATUS_SEVERITY)},
        "side_by_side_html": side_by_side_html,
        "code_html": code_html,
        "source_link": source_link,
        "shell_head": _markup(shell.shell_head),
        "shell_foot": _markup(shell.shell_foot),
        # the pieces of markup the Python pages share with the templates: `{{ html.stack(frames, root) }}`
        "html": SimpleNamespace(**{name: _markup(getattr(parts, name)) for name in TEMPLATE_PARTS}),
        # the index's pictures (`html.timeline_svg`), drawn from the analysis' timeline: `{{ pictures.timeline(timeline) }}`
        "pictures": SimpleNamespace(timeline=_markup(timeline_svg.timeline_figure), frames=_markup(timeline_svg.frames_figure)),
    }


TEMPLATE_PARTS = ("frame", "stack", "status", "artifact_list", "name_notes", "break_site")


def _markup(build: Callable[..., str]) -> Callable[..., Markup]:
    """A piece of `html/` as a template calls it: its HTML as Markup, inserted as it is."""

    @functools.wraps(build)
    def markup(*args: Any) -> Markup:
        return Markup(build(*args))

    return markup


def _filters() -> dict[str, Any]:
    return {"safe_href": safe_href, "seconds": format_seconds}


def render(template: str, context: dict[str, Any]) -> str:
    return templates().render(template, context)


class Model(Protocol):
    """A page's view model: its template, and the variables the template reads."""

    template: ClassVar[str]

    def context(self) -> dict[str, Any]: ...


def render_macro(name: str, *args: Any) -> Markup:
    """One macro of `_macros.html.j2`, or one piece of `html.parts` the templates call, alone (a
    fragment a page reuses)."""
    if name in TEMPLATE_PARTS:
        return Markup(getattr(parts, name)(*args))
    return Markup(getattr(templates().module("_macros.html.j2"), name)(*args))


# The pages written once per compile id, as Python functions (page model, live mark → HTML), by their
# model's class (views.compile.CompilePage, views.pages.MetricsPage): as templates, on a log of
# thousands of small compiles, they were nearly half the run.
PYTHON_PAGES: dict[str, Callable[[Any, Any], str]] = {"CompilePage": compile_page_html, "MetricsPage": metrics_page_html}


def render_page(page: Model, live: Any = None) -> str:
    """The page's HTML; `live` (a `views.live.LiveMark`): written while the log is still being read."""
    python_page = PYTHON_PAGES.get(type(page).__name__)
    if python_page is not None:
        return python_page(page, live)
    context = page.context()
    if live is not None:
        context["live"] = live
    return render(page.template, context)


def template_names() -> list[str]:
    return sorted(p.relative_to(TEMPLATE_DIR).as_posix() for p in TEMPLATE_DIR.rglob("*.j2"))


def module_name(template: str) -> str:
    """The compiled template's module name: `index.html.j2` → `t_index_html`."""
    return "t_" + re.sub(r"\W", "_", template.removesuffix(".j2"))


@functools.cache
def _compiler_digest() -> bytes:
    """What compiled code depends on beside its template: this tlparse-py, the code generator and the
    helpers the code calls."""
    digest = hashlib.sha256(f"{__version__}\0".encode())
    for module in ("codegen.py", "templating.py"):
        try:
            digest.update((Path(__file__).parent / module).read_bytes())
        except OSError:  # pragma: no cover - a wheel without sources: its version says enough
            pass
    return digest.digest()


def source_key(name: str, source: bytes) -> str:
    """The key of a template's compiled code: its source, and what compiled it."""
    return hashlib.sha256(_compiler_digest() + name.encode() + b"\0" + source).hexdigest()


def load_template(name: str) -> dict[str, Any]:
    """The namespace of a template's compiled module: shipped in the wheel, cached from an earlier
    run, or compiled now (and cached)."""
    source = (TEMPLATE_DIR / name).read_bytes()
    key = source_key(name, source)
    shipped = _shipped(name)
    if shipped is not None and shipped.get("SOURCE") == key:
        return shipped
    folder = cache.folder(f"pages-{__version__}")
    # marshalled code: for this very Python only
    entry = folder / f"{key}-{hashlib.sha256(sys.version.encode()).hexdigest()[:16]}.code" if folder is not None else None
    if entry is not None:
        try:
            code = marshal.loads(entry.read_bytes())
        except (OSError, ValueError, EOFError, TypeError):
            code = None
        if isinstance(code, type(_run.__code__)):  # a damaged entry only costs a compile
            return _run(name, code)
    code = compile(generate_module(name, source.decode(), key), f"<compiled template {name}>", "exec")
    if entry is not None:
        _write_atomically(entry, marshal.dumps(code))
    return _run(name, code)


def _shipped(name: str) -> dict[str, Any] | None:
    """The wheel's compiled module of a template (its bytecode, written by pip at install)."""
    path = COMPILED_DIR / f"{module_name(name)}.py"
    if not path.is_file():
        return None
    from importlib.util import module_from_spec, spec_from_file_location

    try:
        spec = spec_from_file_location(f"{COMPILED_PACKAGE}.{module_name(name)}", path)
        assert spec is not None and spec.loader is not None
        module = module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception:  # noqa: BLE001 - a broken install compiles the template instead
        return None
    return vars(module)


def _run(name: str, code: Any) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": f"{COMPILED_PACKAGE}.{module_name(name)}"}
    exec(code, namespace)  # noqa: S102 - code compiled from our own templates
    return namespace


def _write_atomically(path: Path, data: bytes) -> None:
    """A cache entry that cannot be written only costs a compile next time."""
    try:
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temp, path)
    except OSError:
        pass


def generate_module(name: str, source: str, key: str) -> str:
    """The Python source of a template's compiled module (imports Jinja: only when compiling)."""
    from . import codegen

    parser = codegen.parser([*templating.FILTERS, *_filters()], templating.TESTS)
    return codegen.generate(parser, name, source, key)


def compile_templates(folder: Path) -> None:
    """Every template compiled to a Python module in `folder` (the package `compiled_templates` of a
    wheel, imported by `load_template`). Run when a wheel is built."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text('"""The page templates, compiled when the wheel was built (see report.render)."""\n')
    for name in template_names():
        source = (TEMPLATE_DIR / name).read_bytes()
        (folder / f"{module_name(name)}.py").write_text(generate_module(name, source.decode(), source_key(name, source)))


def side_by_side_html(before: Lines, after: Lines, context: int = 3) -> Markup:
    """A side-by-side diff table of two texts (their highlighted lines): hunks with `context` lines
    around each change, removed lines beside the lines that replaced them, as a code review shows them."""
    from ..linediff import LineMatcher  # only for the pass diff pages (it imports difflib)

    old = [_plain(line) for line in before.html]
    new = [_plain(line) for line in after.html]
    matcher = LineMatcher(old, new)  # the matcher of the counts the analysis gives the pass (near-linear on repeated lines)
    rows: list[str] = []
    for group in matcher.get_grouped_opcodes(context):
        a0, b0 = group[0][1], group[0][3]
        a1, b1 = group[-1][2], group[-1][4]
        rows.append(f'<tr class="diff-hunk"><td colspan="4">@@ -{a0 + 1},{a1 - a0} +{b0 + 1},{b1 - b0} @@</td></tr>')
        for tag, i0, i1, j0, j1 in group:
            for k in range(max(i1 - i0, j1 - j0)):
                i, j = i0 + k, j0 + k
                left = (i + 1, before.html[i]) if i < i1 else None
                right = (j + 1, after.html[j]) if j < j1 else None
                rows.append(_diff_row(left, right, "" if tag == "equal" else " diff-del", "" if tag == "equal" else " diff-add"))
    if not rows:
        return Markup('<p class="no-changes">(no changes)</p>')
    head = '<colgroup><col class="line-num-col"><col class="code-col"><col class="line-num-col"><col class="code-col"></colgroup>'
    return Markup(f'<div class="diff-wrapper"><table class="diff-table">{head}{"".join(rows)}</table></div>')


def _diff_row(left: tuple[int, str] | None, right: tuple[int, str] | None, left_class: str, right_class: str) -> str:
    cells = []
    for side, cls in ((left, left_class), (right, right_class)):
        if side is None:
            cells.append('<td class="line-num"></td><td class="code-cell"></td>')
        else:
            cells.append(f'<td class="line-num">{side[0]}</td><td class="code-cell{cls}">{side[1]}</td>')
    return f"<tr>{''.join(cells)}</tr>"


_TAG = lazy(r"<[^>]*>")


def _plain(line_html: str) -> str:
    """A highlighted line's text, for comparing lines (the spans differ only with the text)."""
    return _TAG.sub("", line_html)


# Frames in these places are torch's or Python's, never the user's repository: they are not linked.
_LOCATION = lazy(r"(.+?):(\d+)")


def check_source_url(template: str) -> str | None:
    """Why a --source-url template cannot be used; None when it can."""
    if "{path}" not in template:
        return "must contain {path} (e.g. https://github.com/org/repo/blob/SHA/{path}#L{line})"
    if safe_href(template.replace("{path}", "x").replace("{line}", "1")) is None:
        return "must be an http:// or https:// URL"
    return None


class SourceLinks(Struct, frozen=True):
    """--source-url / --source-root: user-code locations as links into the user's repository."""

    url: str = ""  # a template with {path} and optionally {line}; empty: no links
    root: str = ""  # stripped from a log's file names to make {path}

    def href(self, filename: str, line: int) -> str | None:
        """The link to `filename:line`, or None (no --source-url, torch or library code, outside the root)."""
        if not self.url or line <= 0 or not is_user_code(filename):
            return None
        # `..` is resolved first: a logged `/repo/../../attacker/x.py` must not climb out of the root,
        # nor a relative `../x.py` out of the repository a browser resolves the link in
        path = posixpath.normpath(filename.replace("\\", "/")) if filename else ""
        if self.root:
            root = posixpath.normpath(self.root).rstrip("/") + "/"
            if path.startswith(root):
                path = path[len(root):]
            elif path.startswith("/"):
                return None  # an absolute path elsewhere: not in the repository
        path = path.lstrip("/")
        if not path or path == "." or path == ".." or path.startswith("../"):
            return None
        url = self.url.replace("{path}", quote(path, safe="/")).replace("{line}", str(line))
        return safe_href(url)

    def href_of(self, location: str) -> str | None:
        """The link for a `file.py:23` location string."""
        match = _LOCATION.fullmatch(location.strip()) if location else None
        return self.href(match.group(1), int(match.group(2))) if match else None


def script_json(value: Any) -> Markup:
    """JSON for a `<script type="application/json">` block: `<`, `>` and `&` become \\u escapes, so
    no text from a log can close the script element, and the JSON stays parseable as is."""
    text = json.dumps(value, indent=2, sort_keys=True)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def trusted_html(text: str) -> Markup:
    """The user's own --custom-header-html: inserted as HTML on purpose (it never comes from a log)."""
    return Markup(text)
