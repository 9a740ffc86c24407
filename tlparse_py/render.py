"""Templates and highlighting: model data in, HTML text out. No file I/O except reading templates.

Autoescape is on for every template. The only trusted HTML comes from `highlight_lines` (Pygments
output) and from the user's own `--custom-header-html`, both wrapped in `Markup` here and nowhere else.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import jinja2
from markupsafe import Markup, escape
from pygments import highlight as pygments_highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import CppLexer, DiffLexer, JsonLexer, PythonLexer, TextLexer

from . import __version__

HERE = Path(__file__).resolve().parent
# Installed wheels carry the templates inside the package; a source checkout (and `pip install -e`)
# keeps them at the repository root, which wins so template edits show up without reinstalling.
TEMPLATE_DIR = next(p for p in (HERE.parent / "templates", HERE / "templates") if (p / "base.html.j2").is_file())
STATIC_DIR = TEMPLATE_DIR / "static"

# Above this size a payload is shown as escaped text with line anchors, not highlighted.
HIGHLIGHT_LIMIT = 2_000_000
PYGMENTS_STYLE = "default"
PYGMENTS_DARK_STYLE = "monokai"

_LEXERS = {"python": PythonLexer, "json": JsonLexer, "cpp": CppLexer, "diff": DiffLexer, "text": TextLexer}


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
    return env


def render(template: str, context: dict[str, Any]) -> str:
    return environment().get_template(template).render(**context)


def template_names() -> list[str]:
    return environment().list_templates(extensions=["j2"])


@functools.lru_cache(maxsize=8)
def _formatter() -> HtmlFormatter:
    return HtmlFormatter(nowrap=True)


def highlight_lines(text: str, lang: str) -> tuple[list[Markup], bool]:
    """The text as one HTML fragment per source line, and whether it was highlighted.

    Pygments closes its spans at every line end, so each fragment stands alone and can carry its
    own `#L<n>` anchor. Huge payloads skip highlighting (escaped text keeps pages fast to open).
    """
    if len(text) > HIGHLIGHT_LIMIT or lang not in _LEXERS:
        return [escape(line) for line in text.split("\n")], False
    lexer = _LEXERS[lang](stripnl=False, ensurenl=True)
    html = pygments_highlight(text, lexer, _formatter())
    lines = html.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    expected = text.count("\n") + 1
    if len(lines) == expected - 1 and text.endswith("\n"):
        lines.append(Markup(""))  # the empty last line of a text ending in a newline
    if len(lines) != expected:  # never let a lexer quirk shift the line anchors
        return [escape(line) for line in text.split("\n")], False
    return [Markup(line) for line in lines], True


class HighlightCache:
    """Highlighted lines kept on disk by (text md5, language), so a payload shown twice (its own
    page and its compile-id page) is highlighted once, without holding the HTML in memory."""

    def __init__(self, spool: IO[bytes]):
        self.spool = spool
        self.index: dict[tuple[bytes, str], tuple[int, int, bool]] = {}

    def lines(self, text: str, lang: str) -> tuple[list[Markup], bool]:
        key = (hashlib.md5(text.encode("utf-8", "surrogatepass")).digest(), lang)
        hit = self.index.get(key)
        if hit is not None:
            offset, size, highlighted = hit
            self.spool.seek(offset)
            html = self.spool.read(size).decode("utf-8", "surrogatepass")
            self.spool.seek(0, 2)
            return [Markup(line) for line in html.split("\n")], highlighted
        lines, highlighted = highlight_lines(text, lang)
        data = "\n".join(lines).encode("utf-8", "surrogatepass")
        self.spool.seek(0, 2)
        self.index[key] = (self.spool.tell(), len(data), highlighted)
        self.spool.write(data)
        return lines, highlighted


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
