"""Templates and highlighting: model data in, HTML text out. No file I/O except reading templates.

Autoescape is on for every template. The only trusted HTML comes from `code_html` (escaped text or
Pygments output, line by line), `script_json` and the user's own `--custom-header-html`, all wrapped
in `Markup` here and nowhere else.
"""

from __future__ import annotations

import functools
import hashlib
import json
import multiprocessing
import os
import re
import sys
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote, urlsplit

import jinja2
from markupsafe import Markup, escape
from pygments import format as pygments_format
from pygments import highlight as pygments_highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import CppLexer, DiffLexer, JsonLexer, TextLexer
from pygments.token import String

from ._version import __version__
from .lexers import GeneratedPythonLexer

HERE = Path(__file__).resolve().parent
# Installed wheels carry the templates inside the package; a source checkout (and `pip install -e`)
# keeps them at the repository root, which wins so template edits show up without reinstalling.
TEMPLATE_DIR = next(p for p in (HERE.parent / "templates", HERE / "templates") if (p / "base.html.j2").is_file())
STATIC_DIR = TEMPLATE_DIR / "static"

# Above this size a payload is shown as escaped text with line anchors, not highlighted.
HIGHLIGHT_LIMIT = 1_000_000
SMALL_TEXT = 200_000  # diffs up to this size are highlighted outside the budget
PYGMENTS_STYLE = "default"
PYGMENTS_DARK_STYLE = "monokai"

_LEXERS = {"python": GeneratedPythonLexer, "json": JsonLexer, "cpp": CppLexer, "diff": DiffLexer, "text": TextLexer}


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.globals["version"] = __version__
    env.filters["safe_href"] = safe_href
    env.filters["seconds"] = format_seconds
    env.globals["code_html"] = code_html
    env.globals["source_link"] = source_link
    return env


def render(template: str, context: dict[str, Any]) -> str:
    return environment().get_template(template).render(**context)


def template_names() -> list[str]:
    return environment().list_templates(extensions=["j2"])


@functools.lru_cache(maxsize=8)
def _formatter() -> HtmlFormatter:
    return HtmlFormatter(nowrap=True)


@dataclass(slots=True)
class Lines:
    """A text as one HTML fragment per line (escaped, or Pygments spans closed at each line end).

    `html` holds trusted HTML; it only becomes Markup through `code_html`.
    """

    html: list[str]
    highlighted: bool
    note: str = ""  # why it was not highlighted, for the page
    lang: str = "text"  # the language it would be highlighted as (the page script colours plain Python)


def plain_lines(text: str, note: str = "", lang: str = "text") -> Lines:
    """Escaped lines: the whole text escaped at once (fast), then split."""
    return Lines(str(escape(text)).split("\n"), False, note, lang)


def highlight_lines(text: str, lang: str) -> Lines:
    """The text highlighted by Pygments, one self-contained fragment per source line.

    Pygments closes its spans at every line end, so each fragment can carry its own `#L<n>`
    anchor. A lexer result with a different line count falls back to plain text, so anchors
    never shift.
    """
    if lang not in _LEXERS:
        return plain_lines(text)
    lexer = _LEXERS[lang](stripnl=False, ensurenl=True)
    kernels = cpp_kernels(text) if lang == "python" else []
    if kernels:
        lines = _python_with_cpp(text, kernels).split("\n")
    else:
        lines = pygments_highlight(text, lexer, _formatter()).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    expected = text.count("\n") + 1
    if len(lines) == expected - 1 and text.endswith("\n"):
        lines.append("")  # the empty last line of a text ending in a newline
    if len(lines) != expected:
        return plain_lines(text)
    return Lines(lines, True)


# Inductor's CPU output code: C++ kernels inside Python string literals, e.g.
# `cpp_fused_add_0 = async_compile.cpp_pybinding(['float*'], r'''<C++>''')` (or `async_compile.cpp(...)`).
_CPP_KERNEL_OPEN = re.compile(r"async_compile\.cpp(?:_pybinding)?\((?:(?!''')[^)]){0,2000}?([rR]?''')")


def cpp_kernels(text: str) -> list[tuple[int, int, int]]:
    """(opening quote, start, end) of every CPU kernel literal in Python output code.

    `text[start:end]` is the C++ (the literal's contents); a literal that never closes is not a kernel.
    """
    if "async_compile.cpp" not in text:  # the fast path: most texts hold no C++
        return []
    spans = []
    position = 0
    while True:
        match = _CPP_KERNEL_OPEN.search(text, position)
        if match is None:
            return spans
        start = match.end()
        end = text.find("'''", start)
        if end < 0:
            return spans
        spans.append((match.start(1), start, end))
        position = end + 3


def _python_with_cpp(text: str, kernels: list[tuple[int, int, int]]) -> str:
    """Pygments HTML of Python output code whose kernel literals are lexed as C++ (one token stream,
    so the formatter closes spans at line ends exactly as for plain Python)."""
    if not text.endswith("\n"):
        text += "\n"  # as the lexers' ensurenl does
    python = GeneratedPythonLexer(stripnl=False)
    cpp = CppLexer(stripnl=False)

    def tokens():
        position = 0
        for opening, start, end in kernels:
            yield from ((t, v) for _, t, v in python.get_tokens_unprocessed(text[position:opening]))
            yield String.Doc, text[opening:start]
            yield from ((t, v) for _, t, v in cpp.get_tokens_unprocessed(text[start:end]))
            yield String.Doc, "'''"
            position = end + 3
        yield from ((t, v) for _, t, v in python.get_tokens_unprocessed(text[position:]))

    return pygments_format(tokens(), _formatter())


class Highlighter:
    """Pygments highlighting with a budget, in worker processes, cached on disk by (text md5, language).

    Highlighting costs about a second per MB of text, so a report highlights at most `budget`
    bytes of text (and no single text above `limit`), in the order they are asked for, and shows
    the rest as escaped text with the same line anchors. Texts are handed to worker processes as
    soon as they are read (`request`), so highlighting runs alongside reading; a text shown twice
    (its own page and its compile-id page) is highlighted once, and the HTML waits on disk.
    """

    def __init__(self, spool: IO[bytes], budget: float = 4e6, limit: int = HIGHLIGHT_LIMIT, workers: int = 0):
        self.spool = spool
        self.budget = budget
        self.limit = limit
        self.used = 0
        self.index: dict[tuple[bytes, str], tuple[int, int]] = {}
        self.pending: dict[tuple[bytes, str], Future[Lines]] = {}
        self.store = True  # False in a forked page-building process: the cache file is the parent's
        self.approved: set[tuple[bytes, str]] = set()  # within the budget, to highlight when asked
        self.denied: dict[tuple[bytes, str], str] = {}  # over the budget: why
        # forkserver, not fork: see highlight_workers
        self.pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("forkserver")) if workers > 0 else None

    @staticmethod
    def _key(text: str, lang: str) -> tuple[bytes, str]:
        return hashlib.md5(text.encode("utf-8", "surrogatepass")).digest(), lang

    def _take_budget(self, text: str) -> str:
        """Reserve the text's share of the budget; the reason it cannot be highlighted otherwise."""
        if len(text) > self.limit:
            return f"too large to highlight here ({len(text):,} characters)"
        if self.used + len(text) > self.budget:
            return f"this report already highlighted {self.used / 1e6:.1f} MB of text (--highlight-mb)"
        self.used += len(text)
        return ""

    def request(self, text: str, lang: str) -> None:
        """Decide now, in log order, whether the text gets highlighted; start it in the background
        when there are workers. Deciding early keeps the outcome the same whatever order the pages
        are later built in."""
        if lang == "text":
            return
        key = self._key(text, lang)
        if key in self.index or key in self.pending or key in self.approved or key in self.denied:
            return
        reason = self._take_budget(text)
        if reason:
            self.denied[key] = reason
            return
        if self.pool is None:
            self.approved.add(key)
            return
        try:
            self.pending[key] = self.pool.submit(highlight_lines, text, lang)
        except (BrokenProcessPool, RuntimeError, OSError):
            self.approved.add(key)  # highlighted here, in the main process, when asked for
            self._give_up_pool()

    def lines(self, text: str, lang: str, budgeted: bool = True) -> Lines:
        """The text's lines, highlighted if it is cached, requested, or fits the budget.

        `budgeted=False` (small diffs) highlights without touching the budget, so what a page shows
        never depends on the order in which pages are built.
        """
        if lang == "text":
            return plain_lines(text)
        key = self._key(text, lang)
        hit = self.index.get(key)
        if hit is not None:
            offset, size = hit
            self.spool.seek(offset)
            html = self.spool.read(size).decode("utf-8", "surrogatepass")
            self.spool.seek(0, 2)
            return Lines(html.split("\n"), True)
        future = self.pending.pop(key, None)
        result = None
        if future is not None:
            try:
                result = future.result()
            except (BrokenProcessPool, CancelledError, RuntimeError, OSError):
                self._give_up_pool()
                result = highlight_lines(text, lang)
        if result is None:
            if key in self.approved:
                reason = ""
            elif key in self.denied:
                reason = self.denied[key]
            elif budgeted:
                reason = self._take_budget(text)
            else:
                reason = "" if len(text) <= SMALL_TEXT else "too large to highlight here"
            if reason:
                return plain_lines(text, reason, lang)
            result = highlight_lines(text, lang)
        if result.highlighted and self.store:
            data = "\n".join(result.html).encode("utf-8", "surrogatepass")
            self.spool.seek(0, 2)
            self.index[key] = (self.spool.tell(), len(data))
            self.spool.write(data)
        return result

    def drain(self) -> None:
        """Collect every background result into the cache and stop the workers (before a fork:
        a forked child cannot wait on its parent's futures)."""
        for key, future in list(self.pending.items()):
            try:
                result = future.result()
            except (BrokenProcessPool, CancelledError, RuntimeError, OSError):
                continue
            if result.highlighted:
                data = "\n".join(result.html).encode("utf-8", "surrogatepass")
                self.spool.seek(0, 2)
                self.index[key] = (self.spool.tell(), len(data))
                self.spool.write(data)
        self.pending.clear()
        self.close()

    def _give_up_pool(self) -> None:
        """A worker died (or cannot start): highlight in this process from now on."""
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


def highlight_workers(input_bytes: int = 1 << 40) -> int:
    """Worker processes for highlighting beside the reader: the other cores, at most four.

    None for small logs, whose highlighting takes less time than starting a worker. Workers come
    from a fork server, never forked from the reader: a forked worker shares the reader's memory
    copy-on-write, and the page faults that follow cost seconds of system time on a big log.
    """
    if input_bytes < 8_000_000 or not _main_is_importable():
        return 0
    return max(0, min(4, (os.cpu_count() or 1) - 1))


def _main_is_importable() -> bool:
    """Fork-server workers re-import `__main__`; from a REPL or stdin that fails (noisily)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    return bool(path) and os.path.isfile(path)


def code_html(lines: Lines, prefix: str = "") -> Markup:
    """The `<pre class="code">` of a text: every line a block with an `#<prefix>L<n>` anchor.

    Built with one join rather than a template loop, and with no per-line markup beyond the anchor
    (line numbers are CSS counters): pages of big logs hold millions of lines.
    """
    body = "".join(f'<span id="{prefix}L{n}">{line}</span>' for n, line in enumerate(lines.html, start=1))
    colour_later = ' data-colour="python"' if not lines.highlighted and lines.lang == "python" else ""
    return Markup(f'<pre class="code"{colour_later}>{body}</pre>')


@functools.lru_cache(maxsize=1)
def pygments_css() -> str:
    """Light and dark token colours, so highlighted code follows the browser's colour scheme."""
    light = HtmlFormatter(style=PYGMENTS_STYLE).get_style_defs(".code")
    dark = HtmlFormatter(style=PYGMENTS_DARK_STYLE).get_style_defs(".code")
    return f"{light}\n@media (prefers-color-scheme: dark) {{\n{dark}\n}}\n"


SAFE_SCHEMES = {"http", "https"}


def safe_href(url: str) -> str | None:
    """A URL from a log, if it is safe to link to (http/https only); None otherwise."""
    try:
        scheme = urlsplit(url.strip()).scheme.lower()
    except ValueError:
        return None
    return url if scheme in SAFE_SCHEMES else None


# Frames in these places are torch's or Python's, never the user's repository: they are not linked.
LIBRARY_PATHS = ("/site-packages/", "/dist-packages/", "/torch/", "/lib/python3")
_LOCATION = re.compile(r"(.+?):(\d+)")


def check_source_url(template: str) -> str | None:
    """Why a --source-url template cannot be used; None when it can."""
    if "{path}" not in template:
        return "must contain {path} (e.g. https://github.com/org/repo/blob/SHA/{path}#L{line})"
    if safe_href(template.replace("{path}", "x").replace("{line}", "1")) is None:
        return "must be an http:// or https:// URL"
    return None


@dataclass(frozen=True, slots=True)
class SourceLinks:
    """--source-url / --source-root: user-code locations as links into the user's repository."""

    url: str = ""  # a template with {path} and optionally {line}; empty: no links
    root: str = ""  # stripped from a log's file names to make {path}

    def href(self, filename: str, line: int) -> str | None:
        """The link to `filename:line`, or None (no --source-url, torch or library code, outside the root)."""
        if not self.url or line <= 0 or not filename or filename.startswith("<") or filename in ("(unknown)", "N/A"):
            return None
        probe = "/" + filename.lstrip("/")
        if any(part in probe for part in LIBRARY_PATHS):
            return None
        path = filename
        if self.root:
            root = self.root.rstrip("/") + "/"
            if path.startswith(root):
                path = path[len(root):]
            elif path.startswith("/"):
                return None  # an absolute path elsewhere: not in the repository
        path = path.lstrip("/")
        if not path:
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


def format_seconds(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "—"
    if value >= 100:
        return f"{value:.0f} s"
    if value >= 1:
        return f"{value:.2f} s"
    return f"{value * 1000:.1f} ms"


def script_json(value: Any) -> Markup:
    """JSON for a `<script type="application/json">` block: `<`, `>` and `&` become \\u escapes, so
    no text from a log can close the script element, and the JSON stays parseable as is."""
    text = json.dumps(value, indent=2, sort_keys=True)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def trusted_html(text: str) -> Markup:
    """The user's own --custom-header-html: inserted as HTML on purpose (it never comes from a log)."""
    return Markup(text)
