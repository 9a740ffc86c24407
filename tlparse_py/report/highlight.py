"""Code as HTML lines: escaped text the page's script colours (the default), or Pygments output.

By default a report colours nothing itself: code is written escaped, one anchored line per source
line, with `data-colour="<language>"`, and `static/colour.js` colours a block when it is first seen,
with Pygments' class names. That keeps reports quick to write (Pygments costs about a second per MB
of text). `--highlight-mb N` asks for Pygments on the first N MB of text instead; its results are
cached by (text md5, language) within a run and across runs (cache.py).

Pygments is imported only when it is used.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from markupsafe import escape
from msgspec import Struct

from ..patterns import lazy
from .._version import __version__
from .cache import HighlightCache

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

# What a worker pool raises when a worker died or the pool is gone (an import away: most runs have no pool).
POOL_ERRORS = (RuntimeError, OSError)

# Above this size a payload is never highlighted by Pygments (the page's script still colours it).
HIGHLIGHT_LIMIT = 1_000_000
SMALL_TEXT = 200_000  # with Pygments on, diffs up to this size are highlighted outside the budget
PYGMENTS_STYLE = "default"
PYGMENTS_DARK_STYLE = "monokai"
LANGUAGES = ("python", "json", "cpp", "diff")  # what Pygments and the page's script both colour


class Lines(Struct):
    """A text as one HTML fragment per line (escaped, or Pygments spans closed at each line end).

    `html` holds trusted HTML; it only becomes Markup through `render.code_html`.
    """

    html: list[str]
    highlighted: bool
    lang: str = "text"  # the language the page's script colours it as, when not highlighted here


def plain_lines(text: str, lang: str = "text") -> Lines:
    """Escaped lines: the whole text escaped at once (fast), then split."""
    return Lines(str(escape(text)).split("\n"), False, lang)


@functools.cache
def _formatter() -> Any:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(nowrap=True)


def _lexer(lang: str) -> Any:
    if lang == "python":
        from .lexers import GeneratedPythonLexer

        return GeneratedPythonLexer(stripnl=False, ensurenl=True)
    from pygments.lexers import CppLexer, DiffLexer, JsonLexer

    return {"json": JsonLexer, "cpp": CppLexer, "diff": DiffLexer}[lang](stripnl=False, ensurenl=True)


def highlight_lines(text: str, lang: str) -> Lines:
    """The text highlighted by Pygments, one self-contained fragment per source line.

    Pygments closes its spans at every line end, so each fragment can carry its own `#L<n>`
    anchor. A lexer result with a different line count falls back to plain text, so anchors
    never shift.
    """
    if lang not in LANGUAGES:
        return plain_lines(text)
    from pygments import highlight

    kernels = cpp_kernels(text) if lang == "python" else []
    if kernels:
        lines = _python_with_cpp(text, kernels).split("\n")
    else:
        lines = highlight(text, _lexer(lang), _formatter()).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    expected = text.count("\n") + 1
    if len(lines) == expected - 1 and text.endswith("\n"):
        lines.append("")  # the empty last line of a text ending in a newline
    if len(lines) != expected:
        return plain_lines(text, lang)
    return Lines(lines, True, lang)


# Inductor's CPU output code: C++ kernels inside Python string literals, e.g.
# `cpp_fused_add_0 = async_compile.cpp_pybinding(['float*'], r'''<C++>''')` (or `async_compile.cpp(...)`).
_CPP_KERNEL_OPEN = lazy(r"async_compile\.cpp(?:_pybinding)?\((?:(?!''')[^)]){0,2000}?([rR]?''')")


def cpp_kernels(text: str) -> list[tuple[int, int, int]]:
    """(opening quote, start, end) of every CPU kernel literal in Python output code.

    `text[start:end]` is the C++ (the literal's contents); a literal that never closes is not a kernel.
    """
    if "async_compile.cpp" not in text:  # the fast path: most texts hold no C++
        return []
    spans: list[tuple[int, int, int]] = []
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
    from pygments import format as pygments_format
    from pygments.lexers import CppLexer
    from pygments.token import String

    from .lexers import GeneratedPythonLexer

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


def pygments_css() -> str:
    """Light and dark token colours (templates/static/pygments.css is this, for the pinned Pygments)."""
    from pygments.formatters import HtmlFormatter

    light = HtmlFormatter(style=PYGMENTS_STYLE).get_style_defs(".code")
    dark = HtmlFormatter(style=PYGMENTS_DARK_STYLE).get_style_defs(".code")
    return f"{light}\n@media (prefers-color-scheme: dark) {{\n{dark}\n}}\n"


Key = tuple[bytes, str]


class Highlighter:
    """Pygments highlighting within a budget, in worker processes, cached by (text md5, language).

    With a zero budget (the default) it only escapes: the page's script colours. Otherwise a report
    highlights at most `budget` bytes of text (and no single text above `limit`), in the order they
    are asked for; the rest is left to the page's script. Texts are handed to worker processes as
    soon as they are read (`request`), so highlighting runs alongside reading; a text shown twice
    (its own page and its compile-id page) is highlighted once, its HTML kept in `spool`, and across
    runs in the user's cache folder.
    """

    def __init__(self, spool: IO[bytes], budget: float = 0, limit: int = HIGHLIGHT_LIMIT, workers: int = 0):
        self.spool = spool
        self.budget = budget
        self.limit = limit
        self.used = 0
        self.index: dict[Key, tuple[int, int]] = {}
        self.pending: dict[Key, Future[Lines]] = {}
        self.store = True  # False in a forked page-building process: the cache file is the parent's
        self.approved: set[Key] = set()  # within the budget, to highlight when asked
        self.denied: set[Key] = set()  # over the budget: left to the page's script
        self._disk: HighlightCache | None | bool = False  # opened on first use (False: not yet)
        self.pool = _pool(workers) if workers > 0 and budget > 0 else None

    @property
    def on(self) -> bool:
        """Whether Pygments highlights anything in this report."""
        return self.budget > 0

    @staticmethod
    def _key(text: str, lang: str) -> Key:
        return hashlib.md5(text.encode("utf-8", "surrogatepass")).digest(), lang

    def _take_budget(self, text: str) -> bool:
        """Reserve the text's share of the budget; False when it does not fit."""
        if len(text) > self.limit or self.used + len(text) > self.budget:
            return False
        self.used += len(text)
        return True

    def request(self, text: str | Callable[[], str], lang: str) -> None:
        """Decide now, in log order, whether the text gets highlighted; start it in the background
        when there are workers. Deciding early keeps the outcome the same whatever order the pages
        are later built in (and whether or not the cross-run cache holds it). `text` may be what
        makes it (a record's `payload_text`): a payload is decoded only where it may be highlighted,
        and by default nothing is (on a 200 MB log, 92 MB decoded for nothing)."""
        if not self.on or lang not in LANGUAGES:
            return
        if callable(text):
            text = text()
        key = self._key(text, lang)
        if key in self.index or key in self.pending or key in self.approved or key in self.denied:
            return
        if not self._take_budget(text):
            self.denied.add(key)
            return
        html = self._from_disk(key) if self.store else None
        if html is not None:
            self._spool(key, html)
            return
        if self.pool is None:
            self.approved.add(key)
            return
        try:
            self.pending[key] = self.pool.submit(highlight_lines, text, lang)
        except POOL_ERRORS:  # BrokenProcessPool is a RuntimeError
            self.approved.add(key)  # highlighted here, in the main process, when asked for
            self._give_up_pool()

    def lines(self, text: str, lang: str, budgeted: bool = True) -> Lines:
        """The text's lines: highlighted if cached, requested, or it fits the budget; else escaped,
        for the page's script to colour.

        `budgeted=False` (small diffs) highlights without touching the budget, so what a page shows
        never depends on the order in which pages are built.
        """
        if not self.on or lang not in LANGUAGES:
            return plain_lines(text, lang)
        key = self._key(text, lang)
        hit = self.index.get(key)
        if hit is not None:
            return self._from_spool(hit, lang)
        if key in self.denied:
            return plain_lines(text, lang)
        result = None
        future = self.pending.pop(key, None)
        if future is not None:
            try:
                result = future.result()
            except (*POOL_ERRORS, _cancelled()):
                self._give_up_pool()
        if result is None:
            if key not in self.approved:
                fits = self._take_budget(text) if budgeted else len(text) <= SMALL_TEXT
                if not fits:
                    return plain_lines(text, lang)
            html = self._from_disk(key)
            if html is not None:
                if self.store:
                    self._spool(key, html)
                return Lines(html.split("\n"), True, lang)
            result = highlight_lines(text, lang)
        self._keep(key, result)
        return result

    def _from_spool(self, hit: tuple[int, int], lang: str) -> Lines:
        offset, size = hit
        self.spool.seek(offset)
        html = self.spool.read(size).decode("utf-8", "surrogatepass")
        self.spool.seek(0, 2)
        return Lines(html.split("\n"), True, lang)

    def _keep(self, key: Key, result: Lines) -> None:
        """A highlighted result into this run's spool and the cross-run cache."""
        if not result.highlighted or not self.store:
            return
        html = "\n".join(result.html)
        self._spool(key, html)
        disk = self._disk_cache()
        if disk is not None:
            disk.put(_disk_key(key), html)

    def _spool(self, key: Key, html: str) -> None:
        data = html.encode("utf-8", "surrogatepass")
        self.spool.seek(0, 2)
        self.index[key] = (self.spool.tell(), len(data))
        self.spool.write(data)

    def _disk_cache(self) -> HighlightCache | None:
        if self._disk is False:
            import pygments

            self._disk = HighlightCache.open(f"{pygments.__version__}-{__version__}")
        return self._disk if isinstance(self._disk, HighlightCache) else None

    def _from_disk(self, key: Key) -> str | None:
        """A result highlighted by an earlier run (only ever asked for a text within the budget)."""
        disk = self._disk_cache()
        return disk.get(_disk_key(key)) if disk is not None else None

    def drain(self) -> None:
        """Collect every background result into the cache and stop the workers (before a fork:
        a forked child cannot wait on its parent's futures)."""
        for key, future in list(self.pending.items()):
            try:
                self._keep(key, future.result())
            except (*POOL_ERRORS, _cancelled()):
                continue
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
        if isinstance(self._disk, HighlightCache):
            self._disk.trim()


def _pool(workers: int) -> ProcessPoolExecutor:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # forkserver, not fork: see highlight_workers
    from ..shutdown import die_with_starter

    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("forkserver"), initializer=die_with_starter)


def _cancelled() -> type[BaseException]:
    from concurrent.futures import CancelledError

    return CancelledError


def _disk_key(key: Key) -> str:
    return f"{key[0].hex()}-{key[1]}"


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
    return isinstance(path, str) and os.path.isfile(path)
