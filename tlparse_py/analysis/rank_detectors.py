"""The detectors of what diverges across ranks (`ranks.compare` runs them): each compares one
thing the ranks did, from their typed facts (`RankFacts`), and returns the groups of ranks that
differ (`rank_answers`); none says why (`rank_causes`) nor words it (`rank_verdicts`)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import NamedTuple, TypeVar

from .facts import differing_lines, input_signature, sync_decision
from .rank_answers import (
    CompileSetDivergence, CompilerCollective, ContentDivergence, DecisionDivergence, DecisionGroup, Departure, DynamicDivergence,
    DynamicGroup, ExecutionOrderAnalysis, ExecutionStep, RankFacts, RuntimeAnalysis, RuntimeEstimation, RuntimeSpread,
    SequenceGroup, SideBySide, SpmdMismatch,
)
from .store import DistributedFacts

# what an artifact's cache mark (`model.cache_suffix`, noted in `DistributedFacts.cache`) says of its lookup
CACHE_RESULT_OF_MARK = {"✅": "hit", "❌": "miss", "❓": "bypass"}
CACHE_PRIORITY = {"miss": 3, "hit": 2, "bypass": 1}  # miss > hit > bypass: a compile id's cache result at one step
# what an artifact is to the comparison: its kind's `collective` role (kinds/builtin.py)
LOCAL_STATE = "local_state"  # each rank's own state BEFORE the exchange: differs by design
SYNC_DECISION = "sync_decision"
SPMD_MISMATCH = "spmd_mismatch"
# what a compile id produced, as compared: (fingerprint part, its name in words)
CONTENT_PARTS = (("dynamo", "Dynamo graph"), ("post_grad", "post-grad graph"), ("output_code", "output code"))

S = TypeVar("S", bound=Hashable)


# ------------------------------------------------------------------------------------------------
# grouping


def groups_of(signatures: Mapping[int, S]) -> list[tuple[S, list[int]]]:
    """Ranks grouped by equal signature; the biggest group (the majority) first."""
    grouped: dict[S, tuple[S, list[int]]] = {}
    for rank, signature in sorted(signatures.items()):
        grouped.setdefault(signature, (signature, []))[1].append(rank)
    return sorted(grouped.values(), key=lambda g: (-len(g[1]), g[1]))


def first_difference(a: Sequence[object], b: Sequence[object]) -> int | None:
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def frames_of(ranks: Iterable[RankFacts]) -> dict[str, str]:
    """Compile id as logged (attempt included) → its frame compile's id: through the compiles whose
    attempts logged under it, and the fingerprints noted for it."""
    frames: dict[str, str] = {}
    for r in ranks:
        for compile_ in r.compiles:
            for attempt in compile_.attempts:
                frames.setdefault(attempt, compile_.id)
        for label, fingerprint in r.distributed.fingerprints.items():
            frames.setdefault(label, fingerprint.frame)
    return frames


# ------------------------------------------------------------------------------------------------
# what each rank compiled


def compile_id_divergence(ranks: Sequence[RankFacts]) -> list[CompileSetDivergence]:
    """Ranks whose compiles differ from the majority's: what each is missing and has extra."""
    keys = {r.rank: r.compile_keys for r in ranks}
    groups = groups_of({rank: frozenset(mine) for rank, mine in keys.items()})
    if len(groups) <= 1:
        return []
    reference = groups[0][0]
    ordered = list(dict.fromkeys(key for r in ranks for key in keys[r.rank] if key in reference))
    rows = []
    for r in ranks:
        mine = set(keys[r.rank])
        if mine != reference:
            rows.append(CompileSetDivergence(r.rank, [k for k in ordered if k not in mine], [k for k in keys[r.rank] if k not in reference]))
    return rows


def log_order(ranks: Iterable[RankFacts]) -> list[str]:
    """Compile ids in log order: the first rank's order, then ids only later ranks have."""
    seen: dict[str, None] = {}
    for r in ranks:
        for label in [*r.compile_ids, *r.distributed.fingerprints]:
            seen.setdefault(label, None)
    return list(seen)


class ContentSignature(NamedTuple):
    """What a compile id produced on a rank, as compared: graph and code digests, and input shapes."""

    dynamo: tuple[str, ...]
    post_grad: tuple[str, ...]
    output_code: tuple[str, ...]
    inputs: tuple[str, ...]

    def part(self, name: str) -> tuple[str, ...]:
        found: tuple[str, ...] = getattr(self, name)
        return found


def compared_attempts(rank: RankFacts, frames: Mapping[str, str]) -> dict[str, str]:
    """Frame compile → the attempt whose content is compared on this rank: the last that logged a
    Dynamo graph (one that restarted before producing a graph has nothing to compare, and a rank
    that broke the graph where the others did not holds its graph in a later attempt than theirs),
    else the last one noted."""
    chosen: dict[str, str] = {}
    with_graph: set[str] = set()
    for label, fingerprint in rank.distributed.fingerprints.items():
        frame = frames.get(label, fingerprint.frame)
        if fingerprint.graphs.get("dynamo"):
            chosen[frame] = label
            with_graph.add(frame)
        elif frame not in with_graph:
            chosen[frame] = label
    return chosen


def content_signature(facts: DistributedFacts, label: str) -> ContentSignature:
    """A compile id's content on a rank: its graph and code digests, its input shapes (dimensions the
    rank made dynamic masked: those may differ by design)."""
    fingerprint = facts.fingerprints[label]
    dynamic = facts.dynamic_sources.get(fingerprint.frame, set())
    graphs = [tuple(fingerprint.graphs.get(part, [])) for part, _ in CONTENT_PARTS]
    return ContentSignature(graphs[0], graphs[1], graphs[2], tuple(input_signature(fingerprint.inputs, dynamic)))


def content_divergence(ranks: Sequence[RankFacts], frames: Mapping[str, str]) -> list[ContentDivergence]:
    """Compiles whose graphs, output code or input shapes differ between the ranks that compiled
    them, in log order, each rank's compared on the attempt that holds its graph (`compared_attempts`):
    for each group of ranks departing from the reference (the biggest group; on a tie, the one with
    the lowest rank), what differs and the first differing lines side by side."""
    rows = []
    by_rank = {r.rank: r for r in ranks}
    attempts = {r.rank: compared_attempts(r, frames) for r in ranks}
    for compile_id in dict.fromkeys(frames.get(label, label) for label in log_order(ranks)):
        compared = {r.rank: attempts[r.rank][compile_id] for r in ranks if compile_id in attempts[r.rank]}
        signatures = {rank: content_signature(by_rank[rank].distributed, label) for rank, label in compared.items()}
        if len(signatures) < 2:
            continue
        groups = groups_of(signatures)
        if len(groups) <= 1:
            continue
        reference, reference_ranks = groups[0]
        left = by_rank[reference_ranks[0]]
        departures = []
        for signature, members in groups[1:]:
            right = by_rank[members[0]]
            differs = [name for part, name in CONTENT_PARTS if signature.part(part) != reference.part(part)]
            if signature.inputs != reference.inputs:
                differs.append("input shapes")
            view = side_by_side((left, compared[left.rank]), (right, compared[right.rank]), reference, signature)
            departures.append(Departure(members, differs, view))
        rows.append(ContentDivergence(compile_id, reference_ranks, departures, compared))
    return rows


def side_by_side(left_side: tuple[RankFacts, str], right_side: tuple[RankFacts, str], a: ContentSignature, b: ContentSignature) -> SideBySide | None:
    """The first differing lines of the first part that differs and whose text was kept
    (the Dynamo graph, else the post-grad graph), else of the input shapes; each side is (a rank,
    the attempt compared on it)."""
    (left, mine_label), (right, their_label) = left_side, right_side
    mine, theirs = left.distributed.fingerprints[mine_label], right.distributed.fingerprints[their_label]
    mine_lines, their_lines = mine.lines, theirs.lines
    for part, name in CONTENT_PARTS:
        if a.part(part) != b.part(part) and (mine_lines.get(part) or their_lines.get(part)):
            rows = differing_lines(mine_lines.get(part, []), their_lines.get(part, []))
            if rows:
                return SideBySide(name, left.rank, right.rank, rows)
    if a.inputs != b.inputs:
        rows = differing_lines([f"input {i}: {s}" for i, s in enumerate(a.inputs, 1)], [f"input {i}: {s}" for i, s in enumerate(b.inputs, 1)])
        return SideBySide("input shapes", left.rank, right.rank, rows)
    return None


# ------------------------------------------------------------------------------------------------
# sequences: cache results, collectives


def sequence_divergence(sequences: Mapping[int, list[tuple[str, str]]]) -> list[SequenceGroup]:
    """Ranks grouped by equal sequences of (item, compile id), majority first; for each group, where
    it first departs from the majority: the position, its item and compile id there, and the majority's."""
    groups = groups_of({rank: tuple(sequence) for rank, sequence in sequences.items()})
    if len(groups) <= 1:
        return []
    reference = groups[0][0]
    rows = []
    for sequence, members in groups:
        index = first_difference([item for item, _ in reference], [item for item, _ in sequence])
        here: tuple[str | None, str | None] = sequence[index] if index is not None and index < len(sequence) else (None, None)
        there: tuple[str | None, str | None] = reference[index] if index is not None and index < len(reference) else (None, None)
        rows.append(SequenceGroup(members, list(sequence), index, here[0], here[1], there[0]))
    return rows


def cache_results(facts: DistributedFacts) -> list[tuple[str, str]]:
    """A rank's cache lookups in log order: (hit / miss / bypass, compile id)."""
    return [(CACHE_RESULT_OF_MARK.get(c.mark, c.mark), c.compile_id) for c in facts.cache]


def cache_divergence(ranks: Iterable[RankFacts]) -> list[SequenceGroup]:
    """Groups of ranks with the same sequence of cache hits/misses/bypasses, and where each group departs."""
    return sequence_divergence({r.rank: cache_results(r.distributed) for r in ranks})


def schedule_divergence(ranks: Sequence[RankFacts]) -> list[SequenceGroup]:
    """Groups of ranks issuing the same collectives in the same order (a mismatch hangs the job)."""
    if not any(r.distributed.schedules for r in ranks):
        return []
    return sequence_divergence({r.rank: [(op, s.compile_id) for s in r.distributed.schedules for op in s.ops] for r in ranks})


def tensor_meta_groups(ranks: Iterable[RankFacts]) -> list[list[int]]:
    signatures = {r.rank: tuple(sorted((e.graph, e.fingerprint) for e in r.distributed.runtime)) for r in ranks if r.distributed.runtime}
    groups = groups_of(signatures)
    return [] if len(groups) <= 1 else [members for _, members in groups]


# ------------------------------------------------------------------------------------------------
# runtime estimates and execution order


def runtime_estimations(ranks: Iterable[RankFacts]) -> list[RuntimeEstimation]:
    """The first estimate of each graph (compile dir), per rank."""
    rows = []
    for r in ranks:
        seen: set[str] = set()
        for estimate in r.distributed.runtime:
            if estimate.ops and estimate.graph not in seen:
                seen.add(estimate.graph)
                rows.append(RuntimeEstimation(r.rank, estimate.graph, estimate.ops))
    return rows


def runtime_analysis(estimations: list[RuntimeEstimation]) -> RuntimeAnalysis | None:
    """Per graph present on every rank: the estimated total and the spread between ranks.

    Graphs are paired by name (tlparse pairs them by position, which compares unrelated graphs
    as soon as one rank compiled one more).
    """
    if not estimations:
        return None
    totals: dict[int, dict[str, float]] = {}
    for row in estimations:
        totals.setdefault(row.rank, {})[row.graph] = sum(op["estimated_runtime_ns"] for op in row.ops)
    graph_sets = {rank: set(graphs) for rank, graphs in totals.items()}
    common = set.intersection(*graph_sets.values())
    uneven = sorted(set.union(*graph_sets.values()) - common)
    graphs: list[RuntimeSpread] = []
    for graph in sorted(common):
        per_rank = {rank: totals[rank][graph] for rank in totals}
        fastest = min(per_rank, key=lambda r: (per_rank[r], -r))  # ties go to the later rank, as in tlparse
        slowest = max(per_rank, key=lambda r: (per_rank[r], r))
        graphs.append(RuntimeSpread(
            graph,
            round((per_rank[slowest] - per_rank[fastest]) / 1e6, 3),
            (fastest, round(per_rank[fastest] / 1e6, 3)),
            (slowest, round(per_rank[slowest] / 1e6, 3)),
        ))
    graphs.sort(key=lambda g: -g.delta_ms)
    return RuntimeAnalysis(graphs, uneven, len({len(s) for s in graph_sets.values()}) > 1)


def execution_order_analysis(ranks: Sequence[RankFacts]) -> ExecutionOrderAnalysis | None:
    """Line up the graphs each rank ran, in order; flag steps where ranks ran different collectives or cache paths."""
    orders = {r.rank: r.distributed.execution_orders[-1].order for r in ranks if r.distributed.execution_orders}
    if len(orders) < 2:
        return None
    schedules = {(r.rank, s.compile_id): s.ops for r in ranks for s in r.distributed.schedules}
    cache: dict[tuple[int, str], str] = {}
    for r in ranks:
        for result, label in cache_results(r.distributed):
            if CACHE_PRIORITY.get(result, 0) > CACHE_PRIORITY.get(cache.get((r.rank, label), ""), 0):
                cache[(r.rank, label)] = result
    rows = analyze_execution_order(orders, schedules, cache)
    schedule_ranks = sorted({rank for row in rows if "schedule" in row.issues for rank in row.by_rank})
    cache_ranks = sorted({rank for row in rows if "cache" in row.issues for rank in row.by_rank})
    return ExecutionOrderAnalysis(
        rows=[row for row in rows if row.issues or len(set(row.by_rank.values())) > 1],
        order_differs=any(len(set(row.by_rank.values())) > 1 for row in rows),
        schedule_ranks=schedule_ranks,
        cache_ranks=cache_ranks,
    )


def analyze_execution_order(
    orders: Mapping[int, list[str]], schedules: Mapping[tuple[int, str], list[str]], cache: Mapping[tuple[int, str], str]
) -> list[ExecutionStep]:
    """Per step of the run: which compile id each rank ran, and whether collectives or cache results
    (hit / miss / bypass per (rank, compile id)) differ."""
    rows = []
    for index in range(max((len(o) for o in orders.values()), default=0)):
        by_rank = {rank: order[index] for rank, order in sorted(orders.items()) if index < len(order)}
        if not by_rank:
            continue
        issues = []
        known = [schedules[(r, c)] for r, c in by_rank.items() if (r, c) in schedules]
        if len(known) >= 2 and any(k != known[0] for k in known):
            issues.append("schedule")
        statuses = [cache[(r, c)] for r, c in by_rank.items() if cache.get((r, c))]
        if len(statuses) >= 2 and len(set(statuses)) > 1:
            issues.append("cache")
        rows.append(ExecutionStep(index, by_rank, issues))
    return rows


# ------------------------------------------------------------------------------------------------
# collectives: shared decisions, compiler collectives


def agreement_divergence(ranks: Iterable[RankFacts]) -> list[DecisionDivergence]:
    """Decisions ranks must share that differ between ranks.

    A `compiler_collective` artifact is not one: it is the rank's local state before the exchange
    (see `compiler_collectives`). An AOT sync decision is compared on the rank it picked
    (`picked_rank_idx`; the saved nodes listed after it are the rank's own), or whole when it
    does not say.
    """
    by_key: dict[tuple[str, str], dict[int, tuple[str, str, str]]] = {}
    for r in ranks:
        for a in r.distributed.agreements:
            if a.role in (LOCAL_STATE, SPMD_MISMATCH):
                continue
            decision = (sync_decision(a.line) if a.role == SYNC_DECISION else None) or a.digest
            by_key.setdefault((a.compile_id, a.name), {})[r.rank] = (decision, a.line, a.url)
    rows = []
    for (label, name), per_rank in by_key.items():
        groups = groups_of({rank: decision for rank, (decision, _, _) in per_rank.items()})
        if len(groups) > 1:
            rows.append(DecisionDivergence(
                label, name, [DecisionGroup(members, per_rank[members[0]][1], per_rank[members[0]][2]) for _, members in groups]
            ))
    return rows


def dynamic_divergence(ranks: Sequence[RankFacts]) -> list[DynamicDivergence]:
    """Frame compiles where ranks made different dynamic/static decisions (different dynamic dimensions)."""
    labels = sorted({c for r in ranks for c in r.distributed.dynamic_sources})
    ids = {r.rank: set(r.compile_ids) for r in ranks}
    rows = []
    for label in labels:
        per_rank = {
            r.rank: tuple(sorted(r.distributed.dynamic_sources.get(label, ())))
            for r in ranks if label in ids[r.rank] or label in r.distributed.dynamic_sources
        }
        groups = groups_of(per_rank)
        if len(groups) > 1:
            rows.append(DynamicDivergence(label, [DynamicGroup(members, list(sources)) for sources, members in groups]))
    return rows


def spmd_mismatches(ranks: Iterable[RankFacts]) -> list[SpmdMismatch]:
    """`inductor_spmd_graph_mismatch`: Inductor itself found the ranks' graphs differ (its presence is the verdict)."""
    rows: dict[str, SpmdMismatch] = {}
    for r in ranks:
        for a in r.distributed.agreements:
            if a.role == SPMD_MISMATCH:
                row = rows.setdefault(a.compile_id, SpmdMismatch(a.compile_id, [], a.line, a.url))
                if r.rank not in row.ranks:
                    row.ranks.append(r.rank)
    return list(rows.values())


def compiler_collectives(ranks: Sequence[RankFacts], content: list[ContentDivergence], frames: Mapping[str, str]) -> list[CompilerCollective]:
    """Information, not a verdict: each frame compile whose ranks exchanged state through compiler
    collectives, whether their local states (before the exchange) differed, and what they decided
    together: the dynamic dimensions each rank ended with. `agreed` is False only when a desync
    remains after the exchange (different dynamic dimensions, or different graphs in that frame)."""
    exchanged: dict[str, dict[int, list[str]]] = {}
    for r in ranks:
        for a in r.distributed.agreements:
            if a.role == LOCAL_STATE:
                exchanged.setdefault(frames.get(a.compile_id, a.compile_id), {}).setdefault(r.rank, []).append(a.digest)
    diverging = {frames.get(row.compile_id, row.compile_id) for row in content}
    rows = []
    for frame, states in exchanged.items():
        dynamic = {
            r.rank: tuple(sorted(r.distributed.dynamic_sources.get(frame, ())))
            for r in ranks if frame in r.distributed.dynamic_sources or r.rank in states
        }
        decisions = groups_of(dynamic)
        shared = list(decisions[0][0]) if len(decisions) == 1 else None
        rows.append(CompilerCollective(
            compile_id=frame,
            ranks=sorted(states),
            exchanges=max(len(v) for v in states.values()),
            local_states_differ=len(groups_of({rank: tuple(digests) for rank, digests in states.items()})) > 1,
            dynamic_sources=shared,
            dynamic_by_rank={str(rank): list(sources) for rank, sources in dynamic.items()},
            agreed=shared is not None and frame not in diverging,
        ))
    return rows
