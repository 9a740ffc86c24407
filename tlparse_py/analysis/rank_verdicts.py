"""The cross-rank verdicts, in words: each divergence the detectors found as one line with its
first cause (`Divergence`), in log order of that cause, and the note on cache results that differ
(`CacheNote`), with what their compile-time spread means for a collective timeout."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from msgspec.structs import replace

from .rank_answers import (
    CacheNote, ContentDivergence, Departure, Divergence, RankComparison, RankFacts, SequenceGroup, SideBySide, rank_names, words,
)
from .rank_causes import Causes
from .rank_detectors import first_difference
from .totals import BY_NAME

CACHE_WORDS = {"hit": "a hit", "miss": "a miss", "bypass": "a bypass"}
# torch.distributed's default collective timeouts: a rank waits this long for the others at a collective
NCCL_TIMEOUT_S = 600.0
OTHER_TIMEOUT_S = 1800.0


def divergences(comparison: RankComparison, frames: Mapping[str, str], causes: Causes) -> list[Divergence]:
    """Every cross-rank verdict, each with its first cause when the compiles show one, in log order
    of that cause (else of its compile): the first is the root. Empty when the ranks agree."""
    rows: list[Divergence] = []
    for content in comparison.content:
        for departure in content.departures:
            rows.append(Divergence("compile_content", content.compile_id, departure.ranks,
                                   f"{_attempts_compared(content, departure)}{words(departure.differs)} differ from "
                                   f"rank {content.reference[0]}'s{_first_difference(departure.side_by_side)}", departure.cause))
    for spmd in comparison.spmd:
        rows.append(Divergence("spmd_graph_mismatch", spmd.compile_id, spmd.ranks, f"Inductor found the ranks' graphs differ: {spmd.line}"))
    for ids in comparison.compile_ids:
        for by_cause in ids.groups:
            detail = f"missing {', '.join(by_cause.missing) or 'nothing'}; extra {', '.join(by_cause.extra) or 'nothing'}"
            rows.append(Divergence("compile_ids", by_cause.compiles[0], [ids.rank], detail, by_cause.cause))
    schedules = comparison.schedules
    for group in schedules[1:]:  # the first group is the biggest
        where = f"collective {group.at + 1} is {group.item or 'missing'}" if group.at is not None else "the collectives differ"
        rows.append(Divergence("collective_schedule", group.compile_id, group.ranks,
                               f"{rank_names(group.ranks)} differ from {against(schedules)}: {where} "
                               f"where {rank_names(schedules[0].ranks)} issue {group.expected or 'nothing'}"))
    for members in comparison.tensor_meta[1:]:
        rows.append(Divergence("tensor_meta", None, members, "different tensor metadata"))
    for agreement in comparison.agreements:
        for decision in agreement.groups[1:]:
            rows.append(Divergence("shared_decision", agreement.compile_id, decision.ranks, f"{agreement.name} differs: {decision.line}"))
    for dynamic in comparison.dynamic:
        for sources in dynamic.groups[1:]:
            rows.append(Divergence("dynamic_shapes", dynamic.compile_id, sources.ranks, f"dynamic dimensions {', '.join(sources.sources) or 'none'}"))
    rows = [_with_cause(_as_compile(row, frames), causes) for row in rows]
    order = {label: index for index, label in enumerate(comparison.log_order)}
    return sorted(rows, key=lambda d: _position(d, order))


def _as_compile(row: Divergence, frames: Mapping[str, str]) -> Divergence:
    """Name a verdict by its compile, as summary.json's `compiles` do (`[1/0]`), the attempt in the detail."""
    label = row.compile_id
    frame = frames.get(label) if label is not None else None
    if label is not None and frame is not None and frame != label:
        return replace(row, compile_id=frame, detail=f"in attempt {label}: {row.detail}")
    return row


def _with_cause(row: Divergence, causes: Causes) -> Divergence:
    if row.cause is not None or row.compile_id is None:
        return row
    return replace(row, cause=causes.of(row.compile_id, row.ranks))


def _position(row: Divergence, order: Mapping[str, int]) -> int:
    """Where a verdict falls in log order: its cause's compile, else its own; one with neither last."""
    label = row.cause.compile_id if row.cause is not None else row.compile_id
    return order.get(label, len(order)) if label is not None else len(order) + 1


def _attempts_compared(content: ContentDivergence, departure: Departure) -> str:
    """Which attempts were compared, when not the compile's first: `in attempt [1/0_1]: `, or each rank's when they differ."""
    reference, rank = content.reference[0], departure.ranks[0]
    mine, theirs = content.attempts[reference], content.attempts[rank]
    if mine == theirs:
        return f"in attempt {mine}: " if mine != content.compile_id else ""
    return f"rank {rank}'s graph is in its attempt {theirs}, rank {reference}'s in {mine}: "




def cache_note(cache: list[SequenceGroup], ranks: Iterable[RankFacts]) -> CacheNote | None:
    """Ranks that differ only in cache results (their graphs, shapes and collectives agree): a note,
    not a divergence. A cache difference cannot make ranks compute differently; it costs the slower
    rank compile time, which the others spend waiting at their next collective. That wait is a hang
    only when it nears the collective timeout, so the note gives the compile-time spread beside it."""
    if not cache:
        return None
    compile_time = BY_NAME["compile_time_s"]
    times = {r.rank: compile_time.compute(r.summary.compiles) if r.summary is not None else None for r in ranks}
    known = {rank: t for rank, t in times.items() if t is not None}
    spread = round(max(known.values()) - min(known.values()), 6) if len(known) == len(times) and known else None
    first, reference = cache[1], cache[0]
    detail = (f"{rank_names(first.ranks)} took different cache results from {against(cache)}: lookup {first.at + 1}"
              f"{' in ' + first.compile_id if first.compile_id else ''} was {CACHE_WORDS.get(first.item or '', 'missing')} "
              f"where {rank_names(reference.ranks)} had {CACHE_WORDS.get(first.expected or '', 'none')}") if first.at is not None else ""
    return CacheNote("cache", first.compile_id, first.ranks, detail, {str(rank): times[rank] for rank in sorted(times)}, spread, timeout_risk(spread))


def timeout_risk(spread: float | None) -> str:
    """What a compile-time spread between ranks means for a collective timeout, in words."""
    if spread is None:
        return "unknown: a rank's compile time was not logged"
    if spread >= NCCL_TIMEOUT_S:
        return "at least NCCL's default collective timeout (10 min): a rank waiting at a collective can time out"
    if spread >= 60:
        return "under the default collective timeouts (10 min with NCCL, 30 min with other backends), but a job with a shorter timeout could hit it"
    return "far under the default collective timeouts (10 min with NCCL, 30 min with other backends)"


def against(groups: list[SequenceGroup]) -> str:
    """Who a departing group is compared with: "the majority (ranks 0, 2 and 3)" when the first group
    holds more than half of the ranks, else just "rank 0" (two ranks have no majority)."""
    reference = groups[0].ranks
    total = sum(len(g.ranks) for g in groups)
    who = rank_names(reference)
    return f"the majority ({who})" if len(reference) * 2 > total else who


DIFFERENCE_CHARS = 160  # of each side's line, in a verdict
DIFFERENCE_CONTEXT = 40  # characters shown before the first that differs, when the lines are longer


def _first_difference(view: SideBySide | None) -> str:
    """`: first difference in the Dynamo graph, line 3: "a" vs "b"` (one line of each side, from a
    little before where they part when they are long: two long signatures differ past their start)."""
    if view is None or not view.rows:
        return ""
    left_no, left, right_no, right = view.rows[0]
    left, right = left.strip(), right.strip()
    start = first_difference(left, right) or 0
    start = start - DIFFERENCE_CONTEXT if max(len(left), len(right)) > DIFFERENCE_CHARS and start > DIFFERENCE_CONTEXT else 0
    return (f"; first difference in the {view.what}, line {left_no or right_no}: "
            f"rank {view.left} {_excerpt(left, start)!r} vs rank {view.right} {_excerpt(right, start)!r}")


def _excerpt(line: str, start: int) -> str:
    return ("…" if start else "") + line[start:start + DIFFERENCE_CHARS]
