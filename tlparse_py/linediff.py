"""Line diffs that stay near-linear on graph dumps (vLLM's pass-by-pass diffs).

difflib.SequenceMatcher looks for the longest matching block by visiting, for every line of one
side, every place the other side holds the same line. A model's graph repeats the same lines in
every transformer layer (its source comments, `# File: ... code: x = self.norm(x)`), so each search
costs lines × repeats, and it searches once per matching block: a 4x longer graph took 34x as long.

`LineMatcher` finds its matching blocks as patience diff does: lines common to both sides are
matched at the ends, then the lines that occur exactly once on each side are taken as anchors (the
longest run of them in the same order on both sides), and the gaps between anchors are matched the
same way. What is left, a gap in which no line is unique (a few lines as a rule), goes to difflib;
a gap of more than FALLBACK_CELLS line pairs without one unique line is shown replaced whole
(docs/limits.md), which bounds the worst case. Everything else (opcodes, grouped hunks) is
difflib's, from these blocks.
"""

from __future__ import annotations

import difflib
from bisect import bisect_left
from collections.abc import Sequence

# A gap with no unique line is handed to difflib up to this many (before × after) line pairs; a
# larger one is shown as replaced whole
FALLBACK_CELLS = 1_000_000


class LineMatcher(difflib.SequenceMatcher[str]):
    """difflib.SequenceMatcher over two lists of lines, with anchored matching blocks (see above)."""

    def __init__(self, a: Sequence[str], b: Sequence[str]) -> None:
        self.before, self.after = a, b
        super().__init__(None, a, b, autojunk=False)

    def set_seq2(self, b: Sequence[str]) -> None:
        # difflib indexes b for its own search (b2j) here: the anchors need no index, and a gap left
        # to difflib gets its own matcher
        self.after = b

    def get_matching_blocks(self) -> list[difflib.Match]:
        """Computed once per matcher all the same: get_opcodes keeps what it makes of them."""
        blocks = _merged(_blocks(self.before, self.after))
        blocks.append((len(self.before), len(self.after), 0))
        return [difflib.Match(*block) for block in blocks]


def changed_lines(before: Sequence[str], after: Sequence[str]) -> tuple[int, int]:
    """(lines added, lines removed) from `before` to `after`."""
    added = removed = 0
    for tag, a0, a1, b0, b1 in LineMatcher(before, after).get_opcodes():
        if tag in ("replace", "delete"):
            removed += a1 - a0
        if tag in ("replace", "insert"):
            added += b1 - b0
    return added, removed


Block = tuple[int, int, int]  # (start in a, start in b, lines)


def _blocks(a: Sequence[str], b: Sequence[str]) -> list[Block]:
    """The matching blocks of a and b, in order (adjacent ones not yet merged). A stack of ranges
    still to match, not recursion: a hostile text cannot nest the gaps deep enough to overflow. An
    anchor, and the matching end of a range, go back on the stack as a range of their own, which
    then matches whole."""
    found: list[Block] = []
    work: list[tuple[int, int, int, int]] = [(0, len(a), 0, len(b))]
    while work:
        alo, ahi, blo, bhi = work.pop()
        start = 0  # the ends that already match
        while alo + start < ahi and blo + start < bhi and a[alo + start] == b[blo + start]:
            start += 1
        end = 0
        while alo + start < ahi - end and blo + start < bhi - end and a[ahi - end - 1] == b[bhi - end - 1]:
            end += 1
        if start:
            found.append((alo, blo, start))
        tail = (ahi - end, ahi, bhi - end, bhi)
        alo, blo, ahi, bhi = alo + start, blo + start, ahi - end, bhi - end
        if alo < ahi and blo < bhi:
            anchors = _unique_anchors(a, b, alo, ahi, blo, bhi)
            if anchors:
                todo = []
                i, j = alo, blo
                for ai, bj in anchors:
                    todo += [(i, ai, j, bj), (ai, ai + 1, bj, bj + 1)]
                    i, j = ai + 1, bj + 1
                todo.append((i, ahi, j, bhi))
                work += ([tail] if end else []) + todo[::-1]
                continue
            found += _fallback(a, b, alo, ahi, blo, bhi)
        if end:
            found.append((tail[0], tail[2], end))
    return found


def _unique_anchors(a: Sequence[str], b: Sequence[str], alo: int, ahi: int, blo: int, bhi: int) -> list[tuple[int, int]]:
    """The lines that occur once in a[alo:ahi] and once in b[blo:bhi], as (i, j), the longest run of
    them in the same order on both sides (patience sorting)."""
    in_a: dict[str, int] = {}  # line → its index, or -1 when it occurs again
    for i in range(alo, ahi):
        in_a[a[i]] = -1 if a[i] in in_a else i
    in_b: dict[str, int] = {}
    for j in range(blo, bhi):
        line = b[j]
        if in_a.get(line, -1) >= 0:
            in_b[line] = -1 if line in in_b else j
    pairs = sorted((in_a[line], j) for line, j in in_b.items() if j >= 0)
    if not pairs:
        return []
    # longest increasing run of j (in order of i): piles of patience sorting, each card remembering the top of the pile before
    tops: list[int] = []  # the smallest last j of an increasing run of each length
    top_at: list[int] = []  # the pair that ends it
    before: list[int] = []  # each pair's predecessor in its run (-1: none)
    for k, (_, j) in enumerate(pairs):
        pile = bisect_left(tops, j)
        if pile == len(tops):
            tops.append(j)
            top_at.append(k)
        else:
            tops[pile] = j
            top_at[pile] = k
        before.append(top_at[pile - 1] if pile else -1)
    run = []
    k = top_at[-1]
    while k >= 0:
        run.append(pairs[k])
        k = before[k]
    return run[::-1]


def _fallback(a: Sequence[str], b: Sequence[str], alo: int, ahi: int, blo: int, bhi: int) -> list[Block]:
    """A gap without a unique line: difflib's blocks when it is small enough, else none (replaced whole)."""
    if (ahi - alo) * (bhi - blo) > FALLBACK_CELLS:
        return []
    matcher = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=False)
    return [(alo + i, blo + j, size) for i, j, size in matcher.get_matching_blocks() if size]


def _merged(blocks: list[Block]) -> list[Block]:
    """Adjacent blocks as one (as difflib gives them: its hunks are cut at long equal runs)."""
    merged: list[Block] = []
    for i, j, size in blocks:
        if merged and merged[-1][0] + merged[-1][2] == i and merged[-1][1] + merged[-1][2] == j:
            last = merged[-1]
            merged[-1] = (last[0], last[1], last[2] + size)
        else:
            merged.append((i, j, size))
    return merged
