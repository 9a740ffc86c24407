"""Highlighted code with addressable lines (the compile page's sections, the code pages)."""

from __future__ import annotations

from ..highlight import LANGUAGES, Lines
from .escaping import Markup

PAGE_COLOUR_LINES = 50_000  # static/colour.js colours a text up to this line (MAX_LINES there)


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
