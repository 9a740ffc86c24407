"""Templates: model data in, HTML text out. No file I/O except reading templates and their
compiled form: compiling them costs more than a small report. An installed wheel carries them
compiled (`compiled_templates/`, made by `compile_templates` when the wheel is built, turned into
bytecode by pip at install), so even its first run compiles nothing; a source checkout keeps the
compiled form in the user's cache folder instead.

Autoescape is on for every template. The only trusted HTML comes from `code_html` and
`side_by_side_html` (escaped text or Pygments output, line by line), `script_json` and the user's own `--custom-header-html`, all wrapped
in `Markup` here and nowhere else.
"""

from __future__ import annotations

import difflib

import functools
import hashlib
import json
import posixpath
import re
from pathlib import Path
from typing import Any, ClassVar, Protocol
from urllib.parse import quote, urlsplit

import jinja2
from markupsafe import Markup, escape
from msgspec import Struct

from . import cache
from .._version import __version__
from ..analysis.stacks import is_user_code
from ..analysis.summary import STATUS_LABELS, STATUS_SEVERITY
from ..units import format_seconds
from .highlight import LANGUAGES, Lines

HERE = Path(__file__).resolve().parent.parent  # the package folder (tlparse_py/)
PAGE_COLOUR_LINES = 50_000  # static/colour.js colours a text up to this line (MAX_LINES there)
# Installed wheels carry the templates inside the package; a source checkout (and `pip install -e`)
# keeps them at the repository root, which wins so template edits show up without reinstalling.
TEMPLATE_DIR = next(p for p in (HERE.parent / "templates", HERE / "templates") if (p / "base.html.j2").is_file())
STATIC_DIR = TEMPLATE_DIR / "static"
COMPILED_DIR = HERE / "compiled_templates"  # in wheels only (see hatch_build.py)
COMPILED_STAMP = "stamp.json"  # what the compiled templates were compiled from


class QuietBytecodeCache(jinja2.FileSystemBytecodeCache):
    """Compiled templates on disk; a cache file that cannot be read or written only costs a compile."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except Exception:  # noqa: BLE001 - a truncated or foreign file fails in pickle or marshal, any way they like
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


@functools.cache
def environment() -> jinja2.Environment:
    env = _environment(_source_loader())
    stamp = compiled_stamp(COMPILED_DIR)
    if stamp is not None and stamp == source_stamp():
        env.loader = jinja2.ModuleLoader(str(COMPILED_DIR))
    else:
        folder = cache.folder(f"templates-{__version__}-{jinja2.__version__}")
        # Jinja checks each template's source against the cached code, so an edited template recompiles
        env.bytecode_cache = QuietBytecodeCache(str(folder)) if folder is not None else None
    return env


def _source_loader() -> jinja2.FileSystemLoader:
    return jinja2.FileSystemLoader(TEMPLATE_DIR)


class PageEnvironment(jinja2.Environment):
    """Jinja's environment, with `x.name` on a dict found as the key it nearly always is.

    Jinja first looks for an attribute and only then for the key: on a dict that is a raised and
    caught AttributeError per lookup, and the pages make hundreds of thousands of them on a big
    log. Same answers in the same order: a dict's own attributes (`items`, `get`...) still win.
    """

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                pass
        return super().getattr(obj, attribute)


_DICT_ATTRIBUTES = frozenset(dir(dict))


def _environment(loader: jinja2.BaseLoader) -> jinja2.Environment:
    env = PageEnvironment(
        loader=loader,
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.globals["version"] = __version__
    env.globals["plural"] = plural
    env.globals["status_labels"] = STATUS_LABELS
    env.globals["status_rank"] = {status: rank for rank, status in enumerate(STATUS_SEVERITY)}
    env.filters["safe_href"] = safe_href
    env.filters["seconds"] = format_seconds
    env.globals["side_by_side_html"] = side_by_side_html
    env.globals["code_html"] = code_html
    env.globals["source_link"] = source_link
    return env


def render(template: str, context: dict[str, Any]) -> str:
    return environment().get_template(template).render(**context)


class Model(Protocol):
    """A page's view model: its template, and the variables the template reads."""

    template: ClassVar[str]

    def context(self) -> dict[str, Any]: ...


def render_macro(name: str, *args: Any) -> Markup:
    """One macro of `_macros.html.j2`, alone (a fragment a page reuses)."""
    return Markup(getattr(environment().get_template("_macros.html.j2").module, name)(*args))


def render_page(page: Model, live: Any = None) -> str:
    """The page's HTML; `live` (a `views.live.LiveMark`): written while the log is still being read."""
    context = page.context()
    if live is not None:
        context["live"] = live
    return render(page.template, context)


def plural(count: int, word: str, words: str | None = None) -> str:
    return word if count == 1 else (words or f"{word}s")


def template_names() -> list[str]:
    return [name for name in _source_loader().list_templates() if name.endswith(".j2")]


def source_stamp() -> dict[str, str]:
    """What compiled templates must have been compiled from to be used: these very template
    sources (one hash over them all), this tlparse-py and this Jinja (its generated code calls
    Jinja's runtime)."""
    digest = hashlib.sha256()
    for name in template_names():
        digest.update(name.encode() + b"\0" + (TEMPLATE_DIR / name).read_bytes() + b"\0")
    return {"templates": digest.hexdigest(), "tlparse_py": __version__, "jinja2": jinja2.__version__}


def compiled_stamp(folder: Path) -> dict[str, str] | None:
    try:
        stamp = json.loads((folder / COMPILED_STAMP).read_bytes())
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def compile_templates(folder: Path) -> None:
    """Every page template compiled to a Python module in `folder` (read by `jinja2.ModuleLoader`),
    with the stamp `environment()` checks before it uses them. Run when a wheel is built."""
    folder.mkdir(parents=True, exist_ok=True)
    env = _environment(_source_loader())
    env.compile_templates(str(folder), zip=None, extensions=["j2"], ignore_errors=False)
    (folder / COMPILED_STAMP).write_text(json.dumps(source_stamp(), indent=1) + "\n")


def code_html(lines: Lines, prefix: str = "") -> Markup:
    """The `<pre class="code">` of a text: every line a block with an `#<prefix>L<n>` anchor.

    Built with one join rather than a template loop, and with no per-line markup beyond the anchor
    (line numbers are CSS counters): pages of big logs hold millions of lines.
    """
    body = "".join(f'<span id="{prefix}L{n}">{line}</span>' for n, line in enumerate(lines.html, start=1))
    if lines.highlighted or lines.lang not in LANGUAGES:
        return Markup(f'<pre class="code">{body}</pre>')
    note = ""
    if len(lines.html) > PAGE_COLOUR_LINES:
        note = f'<p class="note">The page script colours this text up to line {PAGE_COLOUR_LINES:,}; the lines after it stay plain.</p>'
    return Markup(f'{note}<pre class="code" data-colour="{lines.lang}">{body}</pre>')


def side_by_side_html(before: Lines, after: Lines, context: int = 3) -> Markup:
    """A side-by-side diff table of two texts (their highlighted lines): hunks with `context` lines
    around each change, removed lines beside the lines that replaced them, as a code review shows them."""
    old = [_plain(line) for line in before.html]
    new = [_plain(line) for line in after.html]
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
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


_TAG = re.compile(r"<[^>]*>")


def _plain(line_html: str) -> str:
    """A highlighted line's text, for comparing lines (the spans differ only with the text)."""
    return _TAG.sub("", line_html)


SAFE_SCHEMES = {"http", "https"}


def safe_href(url: str) -> str | None:
    """A URL from a log, if it is safe to link to (http/https only); None otherwise."""
    try:
        scheme = urlsplit(url.strip()).scheme.lower()
    except ValueError:
        return None
    return url if scheme in SAFE_SCHEMES else None


# Frames in these places are torch's or Python's, never the user's repository: they are not linked.
_LOCATION = re.compile(r"(.+?):(\d+)")


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


def source_link(location: Any, links: SourceLinks | None) -> Markup:
    """A `file.py:23` location, escaped, as a link into the user's repository where one is configured."""
    text = "" if location is None else str(location)
    href = links.href_of(text) if links is not None else None
    if href is None:
        return escape(text)
    return Markup('<a class="source" href="{}" rel="noopener noreferrer">{}</a>').format(href, text)


def script_json(value: Any) -> Markup:
    """JSON for a `<script type="application/json">` block: `<`, `>` and `&` become \\u escapes, so
    no text from a log can close the script element, and the JSON stays parseable as is."""
    text = json.dumps(value, indent=2, sort_keys=True)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def trusted_html(text: str) -> Markup:
    """The user's own --custom-header-html: inserted as HTML on purpose (it never comes from a log)."""
    return Markup(text)
