"""Highlighted code with addressable lines (the compile page's sections, the code pages), and two
texts side by side (the pass diff pages)."""

from __future__ import annotations

from ...patterns import lazy
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


def side_by_side_html(before: Lines, after: Lines, context: int = 3) -> str:
    """A side-by-side diff table of two texts (their highlighted lines): hunks with `context` lines
    around each change, removed lines beside the lines that replaced them, as a code review shows them."""
    from ...linediff import LineMatcher  # only for the pass diff pages (it imports difflib)

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
        return '<p class="no-changes">(no changes)</p>'
    head = '<colgroup><col class="line-num-col"><col class="code-col"><col class="line-num-col"><col class="code-col"></colgroup>'
    return f'<div class="diff-wrapper"><table class="diff-table">{head}{"".join(rows)}</table></div>'


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
