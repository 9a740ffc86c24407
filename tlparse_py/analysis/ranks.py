"""What diverges across ranks: every cross-rank question of a multi-rank report, answered once.

Divergence between ranks (different graphs, cache paths, collective order, compiler decisions) is
the classic cause of hangs. The answers are typed plain data, computed from each rank's typed facts
(`RankFacts`: its `Summary`, as its `summary.json` holds it, and the `DistributedFacts` its reading
noted); the multi-rank report (`tlparse_py.multirank`) shows them and writes them, and asks nothing
itself.

Compile ids: the compiles a rank made are compared by their keys (`CompileSummary.key`); the
distributed facts name compile ids as they were logged (attempt included: `[0/0_1]`), and the frame
compile of such an id is found through the compiles whose attempts logged under it
(`CompileSummary.attempts`) or the fingerprint noted for it, never by parsing its text. Cache
lookups are their results (`hit`, `miss`, `bypass`, as `summary.CACHE_RESULTS`), not marks.

What a compile produced is compared like with like: on each rank, the attempt of the compile that
holds its graph (the last that logged a Dynamo graph), whichever attempt that is on each. A verdict
names its first cause when the compiles' own facts show one: a graph break, a recompile, a failed
compile or one that never finished that some ranks had and the others did not (`Cause`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from msgspec import Struct
from msgspec.structs import replace

from ..model import CompileId
from .pairing import function_name
from .roots import relative_location, user_root
from .facts import differing_lines, input_signature, normalise_collective, sync_decision
from .stacks import is_user_code, split_location
from .store import DistributedFacts
from .summary import CAUSE_FIRST, STATUS_MISSING, CompileSummary, GraphBreak, Summary, first_line, guard_failure
from .totals import BY_NAME, Value

PARITY_DESCRIPTION = "Difference of # of collectives in scheduler and inductor output code and missing wait collectives"
# what an artifact's cache mark (`model.cache_suffix`, noted in `DistributedFacts.cache`) says of its lookup
CACHE_RESULT_OF_MARK = {"✅": "hit", "❌": "miss", "❓": "bypass"}
CACHE_PRIORITY = {"miss": 3, "hit": 2, "bypass": 1}  # miss > hit > bypass: a compile id's cache result at one step
CACHE_WORDS = {"hit": "a hit", "miss": "a miss", "bypass": "a bypass"}
# torch.distributed's default collective timeouts: a rank waits this long for the others at a collective
NCCL_TIMEOUT_S = 600.0
OTHER_TIMEOUT_S = 1800.0
# what an artifact is to the comparison: its kind's `collective` role (kinds/builtin.py)
LOCAL_STATE = "local_state"  # each rank's own state BEFORE the exchange: differs by design
SYNC_DECISION = "sync_decision"
SPMD_MISMATCH = "spmd_mismatch"
# what a compile id produced, as compared: (fingerprint part, its name in words)
CONTENT_PARTS = (("dynamo", "Dynamo graph"), ("post_grad", "post-grad graph"), ("output_code", "output code"))

S = TypeVar("S", bound=Hashable)


# ------------------------------------------------------------------------------------------------
# what each rank brings


class RankFacts(Struct):
    """One rank, as compared: its number, its summary (None when it could not be read) and the
    distributed facts its reading noted."""

    rank: int
    summary: Summary | None
    distributed: DistributedFacts

    @property
    def compiles(self) -> Sequence[CompileSummary]:
        return self.summary.compiles if self.summary is not None else []

    @property
    def compile_keys(self) -> list[CompileId]:
        """The compiles' keys in first-appearance order (an id reused after a reset once)."""
        return list(dict.fromkeys(c.key for c in self.compiles))

    @property
    def compile_ids(self) -> list[str]:
        """The compiles' ids as summary.json writes them, in first-appearance order."""
        return list(dict.fromkeys(c.id for c in self.compiles))


class RankFigures(Struct):
    """What the landing's table says of one rank (any log, ranked or not)."""

    compile_ids: int  # distinct compile ids
    failed: int  # failed compiles (`totals.TOTALS` "failed")
    statuses: list[tuple[str, int]]  # (status, how many compiles ended so), in first-appearance order


def figures(summary: Summary | None) -> RankFigures:
    """A rank's figures; a rank that could not be read has none (zeros)."""
    compiles = summary.compiles if summary is not None else []
    failed = BY_NAME["failed"].compute(compiles)
    statuses = Counter(c.status for c in compiles)
    return RankFigures(len({c.key for c in compiles}), int(failed or 0), list(statuses.items()))


# ------------------------------------------------------------------------------------------------
# the answers


class CompileSetDivergence(Struct):
    """A rank whose compiles differ from the majority's: what it lacks and what it has extra, and
    those compiles grouped by their cause (`CauseGroup`)."""

    rank: int
    missing: list[CompileId]
    extra: list[CompileId]
    groups: list[CauseGroup] = []


class CauseGroup(Struct):
    """Missing or extra compiles of a rank with one cause: a graph break only it had (or only the
    others), the recompiles only it made (their guards together), or no cause known (None)."""

    missing: list[str]
    extra: list[str]
    cause: Cause | None

    @property
    def compiles(self) -> list[str]:
        return [*self.missing, *self.extra]


class SequenceGroup(Struct):
    """Ranks with the same sequence of (item, compile id), and where it first departs from the
    majority's (the first group's): its position, its item and compile id there, and the majority's."""

    ranks: list[int]
    sequence: list[tuple[str, str]]
    at: int | None
    item: str | None
    compile_id: str | None
    expected: str | None

    @property
    def items(self) -> list[str]:
        return [item for item, _ in self.sequence]

    @property
    def count(self) -> int:
        return len(self.sequence)


class RuntimeEstimation(Struct):
    """The first runtime estimate of a graph (compile directory) on a rank."""

    rank: int
    graph: str
    ops: list[dict[str, Any]]  # [{name, estimated_runtime_ns}]


class RuntimeSpread(Struct):
    graph: str
    delta_ms: float
    fastest: tuple[int, float]  # (rank, ms)
    slowest: tuple[int, float]


class RuntimeAnalysis(Struct):
    graphs: list[RuntimeSpread]  # graphs every rank has, biggest spread first
    uneven: list[str]  # graphs only some ranks have
    mismatched_graph_counts: bool


class ExecutionStep(Struct):
    index: int
    by_rank: dict[int, str]  # rank → the compile id it ran at this step
    issues: list[str]  # "schedule", "cache"


class ExecutionOrderAnalysis(Struct):
    rows: list[ExecutionStep]  # the steps with an issue or a different compile id per rank
    order_differs: bool
    schedule_ranks: list[int]
    cache_ranks: list[int]


class DecisionGroup(Struct):
    ranks: list[int]
    line: str  # the decision's first line, as the first of these ranks logged it
    url: str  # that artifact, within the first rank's report


class DecisionDivergence(Struct):
    """A decision ranks must share (a compiler-collective artifact) that differs between ranks."""

    compile_id: str
    name: str
    groups: list[DecisionGroup]


class DynamicGroup(Struct):
    ranks: list[int]
    sources: list[str]


class DynamicDivergence(Struct):
    compile_id: str
    groups: list[DynamicGroup]


class SpmdMismatch(Struct):
    """`inductor_spmd_graph_mismatch`: Inductor itself found the ranks' graphs differ."""

    compile_id: str
    ranks: list[int]  # the ranks that logged it, the first one's artifact in `url`
    line: str
    url: str  # within the first rank's report


class SideBySide(Struct):
    what: str  # the part shown ("Dynamo graph", "input shapes")
    left: int  # ranks
    right: int
    rows: list[tuple[int | None, str, int | None, str]]  # facts.differing_lines


class Cause(Struct):
    """Why ranks diverge, in the user's words: a graph break, a recompile, a failed compile or one that
    never finished that some ranks had and the others did not (the compiles' own facts, `CompileSummary`)."""

    kind: str  # CAUSE_KINDS: "graph_break", "recompile", "failure" or "unfinished" (no metrics: crashed, killed)
    compile_id: str  # the compile it happened in (`[4/0]`; the first one, for several recompiles)
    ranks: list[int]  # the ranks it happened on
    others: list[int]  # the ranks compared on which it did not
    user_location: str | None  # as logged: the break's or the failure's user code line, the recompiled frame's
    reason: str  # torch's words, one line: the break's reason, the guard that failed, the exception
    text: str  # all of it in one line: "rank 1 broke the graph in [4/0] at ddp_debug.py:17 (...) where rank 0 did not"


class Departure(Struct):
    ranks: list[int]
    differs: list[str]  # the parts that differ, in words
    side_by_side: SideBySide | None
    cause: Cause | None = None  # the graph break, recompile or failure of this compile only these ranks (or only the others) had


class ContentDivergence(Struct):
    """A compile whose graphs, output code or input shapes differ between the ranks that compiled it."""

    compile_id: str  # the frame compile (`[4/0]`)
    reference: list[int]  # the biggest group of ranks (on a tie, the one with the lowest rank)
    departures: list[Departure]
    attempts: dict[int, str]  # rank → the attempt compared (`compared_attempts`): `[4/0]` on one rank, `[4/0_1]` on another


class CompilerCollective(Struct):
    """Information, not a verdict: a frame compile whose ranks exchanged state through compiler collectives."""

    compile_id: str
    ranks: list[int]
    exchanges: int
    local_states_differ: bool
    dynamic_sources: list[str] | None  # the dynamic dimensions every rank ended with; None when they differ
    dynamic_by_rank: dict[str, list[str]]
    agreed: bool  # False when a desync remains after the exchange


class Divergence(Struct):
    """One cross-rank verdict (summary.json `divergences`), named by its compile (`[1/0]`)."""

    kind: str
    compile_id: str | None
    ranks: list[int]
    detail: str
    cause: Cause | None = None  # its first cause, when the compiles show one (since summary.json 4.0)

    @property
    def line(self) -> str:
        """The verdict in one line, its cause first: `[4/0]: rank 1 broke the graph ... where rank 0 did not`."""
        where = f"{self.compile_id}: " if self.compile_id else ""
        return f"{where}{self.cause.text}" if self.cause is not None else f"{where}{rank_names(self.ranks)}: {self.detail}"


class CacheNote(Struct):
    """Ranks differ in cache results: a note (summary.json `notes`), not a divergence."""

    kind: str
    compile_id: str | None
    ranks: list[int]
    detail: str
    compile_time_s: dict[str, Value]  # rank → its compile time
    spread_s: float | None
    timeout: str  # what the spread means for a collective timeout, in words


class ParityGraph(Struct):
    graph: str
    compile_id: str
    offset: int  # collectives whose count differs between the schedule and the code
    missing_waits: int


class CollectivesParity(Struct):
    description: str
    graphs: list[ParityGraph]


class RankComparison(Struct):
    """Everything the ranks' comparison found, once."""

    ranks: list[int]
    compile_ids: list[CompileSetDivergence]
    cache: list[SequenceGroup]
    schedules: list[SequenceGroup]
    tensor_meta: list[list[int]]  # groups of ranks with the same tensor metadata, when there are several
    runtime: RuntimeAnalysis | None
    execution: ExecutionOrderAnalysis | None
    agreements: list[DecisionDivergence]
    dynamic: list[DynamicDivergence]
    estimations: list[RuntimeEstimation]
    content: list[ContentDivergence]
    spmd: list[SpmdMismatch]
    collectives: list[CompilerCollective]  # information
    divergences: list[Divergence]
    notes: list[CacheNote]
    log_order: list[str]  # compile ids in log order

    @property
    def diverges(self) -> bool:
        """The ranks compiled or communicate differently: a job can hang or time out on that. Cache
        results alone are no divergence (`notes`)."""
        return bool(
            self.compile_ids or self.schedules or self.tensor_meta or self.agreements or self.dynamic
            or self.content or self.spmd
        )

    @property
    def first(self) -> Divergence | None:
        """The root divergence: the first in log order of its cause, else of its compile (`divergences` are in that order)."""
        return self.divergences[0] if self.divergences else None


def compare(ranks: Sequence[RankFacts]) -> RankComparison:
    """The comparison of the ranks (one main log each, in rank order)."""
    frames = _frames(ranks)
    estimations = runtime_estimations(ranks)
    content = content_divergence(ranks, frames)
    causes = Causes(ranks)
    for row in content:
        for departure in row.departures:
            departure.cause = causes.of(row.compile_id, departure.ranks)
    compile_ids = compile_id_divergence(ranks)
    for ids in compile_ids:
        ids.groups = causes.grouped(ids)
    cache = cache_divergence(ranks)
    comparison = RankComparison(
        ranks=[r.rank for r in ranks],
        compile_ids=compile_ids,
        cache=cache,
        schedules=schedule_divergence(ranks),
        tensor_meta=tensor_meta_groups(ranks),
        runtime=runtime_analysis(estimations),
        execution=execution_order_analysis(ranks),
        agreements=agreement_divergence(ranks),
        dynamic=dynamic_divergence(ranks),
        estimations=estimations,
        content=content,
        spmd=spmd_mismatches(ranks),
        collectives=compiler_collectives(ranks, content, frames),
        divergences=[],
        notes=[],
        log_order=log_order(ranks),
    )
    comparison.divergences = divergences(comparison, frames, causes)
    note = cache_note(cache, ranks)
    comparison.notes = [note] if note is not None else []
    return comparison


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


def _frames(ranks: Iterable[RankFacts]) -> dict[str, str]:
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
# collectives: parity, shared decisions, compiler collectives


def collectives_parity(facts: DistributedFacts) -> CollectivesParity:
    """Scheduler vs generated code, per compile: collectives that differ in count, and waits missing."""
    last_schedule: dict[str, tuple[str, list[str]]] = {}
    for schedule in facts.schedules:
        last_schedule[schedule.compile_id] = (schedule.graph, schedule.ops)
    graphs = []
    for label, (graph, ops) in last_schedule.items():
        if label not in facts.code_collectives:
            continue
        code_counts, waits = facts.code_collectives[label]
        scheduled = Counter(n for n in (normalise_collective(op) for op in ops) if n is not None)
        offset = sum(abs(scheduled.get(op, 0) - code_counts.get(op, 0)) for op in set(scheduled) | set(code_counts))
        missing_waits = max(0, sum(code_counts.values()) - waits)
        if offset or missing_waits:
            graphs.append(ParityGraph(graph, label, offset, missing_waits))
    return CollectivesParity(PARITY_DESCRIPTION, graphs)


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


# ------------------------------------------------------------------------------------------------
# causes: what some ranks did and the others did not

GRAPH_BREAK, RECOMPILE, FAILURE, UNFINISHED = "graph_break", "recompile", "failure", "unfinished"
CAUSE_KINDS = (RECOMPILE, GRAPH_BREAK, FAILURE, UNFINISHED)  # in the order they happen within a compile
CAUSE_TEXT_CHARS = 160  # torch's reason or the user's source line, in a cause's text
RECOMPILES_NAMED = 3  # recompiles named, with their guard, in one cause


class Event(NamedTuple):
    """Something a compile did on one rank that can set ranks apart."""

    kind: str  # CAUSE_KINDS
    compile: CompileSummary
    graph_break: GraphBreak | None  # the break, for a graph break


EventKey = tuple[str, ...]  # what makes an event the same on two ranks


def events_of(compiles: Iterable[CompileSummary]) -> dict[EventKey, Event]:
    """A rank's recompiles, graph breaks, failed compiles and compiles that never finished (status
    `missing`: no metrics, as when the process crashed or was killed), in log order (within a
    compile: why it happened, then what broke its graph, then how it ended)."""
    found: dict[EventKey, Event] = {}
    for c in compiles:
        if c.is_recompile:
            found[(RECOMPILE, c.label)] = Event(RECOMPILE, c, None)
        for brk in c.graph_breaks:
            found[(GRAPH_BREAK, c.label, *brk.identity)] = Event(GRAPH_BREAK, c, brk)
        if c.failed and c.failure is not None:
            found[(FAILURE, c.label, c.failure.type)] = Event(FAILURE, c, None)
        if c.status == STATUS_MISSING:
            found[(UNFINISHED, c.label)] = Event(UNFINISHED, c, None)
    return found


def _cause_group(cause: Cause | None) -> tuple[object, ...]:
    """Which group a missing or extra compile goes to: recompiles on the same ranks together, any
    other cause its own, the compiles without one together."""
    if cause is None:
        return ("unknown",)
    if cause.kind == RECOMPILE:
        return (RECOMPILE, tuple(cause.ranks), tuple(cause.others))
    return (cause.kind, cause.compile_id, cause.text)


class Causes:
    """The first cause of a divergence at a compile, from the compiles of every rank that could be read."""

    def __init__(self, ranks: Sequence[RankFacts]):
        read = [r for r in ranks if r.summary is not None]
        self.events = {r.rank: events_of(r.compiles) for r in read}
        self.compiles = {r.rank: {c.id: c for c in reversed(r.compiles)} for r in read}  # the first compile of an id
        self.at: dict[str, dict[EventKey, None]] = {}  # compile id → its events on any rank, in order
        for events in self.events.values():
            for key, event in events.items():
                self.at.setdefault(event.compile.id, {})[key] = None
        self.root = user_root([c for r in read for c in r.compiles])

    def of(self, compile_id: str, ranks: Sequence[int]) -> Cause | None:
        """Why `ranks` diverge from the others at a compile: its recompile, graph break, failure or no end that
        sets them apart (they all had it and none of the others, or the reverse); else, for the first
        compile of a frame only one side has, the graph break at its line that made it (Dynamo's
        resume function after a break starts at the break's line). None when the compiles show none."""
        departing = set(ranks) & set(self.events)
        others = set(self.events) - departing
        if not departing or not others:
            return None
        for key in sorted(self.at.get(compile_id, {}), key=lambda k: CAUSE_KINDS.index(k[0])):
            if (cause := self._setting_apart(key, departing, others)) is not None:
                return cause
        return self._resumed_after(compile_id, departing, others)

    def grouped(self, ids: CompileSetDivergence) -> list[CauseGroup]:
        """A rank's missing and extra compiles by cause (one verdict each), in the order first met."""
        groups: dict[tuple[object, ...], tuple[CauseGroup, list[Cause]]] = {}
        for missing, keys in ((True, ids.missing), (False, ids.extra)):
            for key in keys:
                cause = self.of(str(key), [ids.rank])
                group, found = groups.setdefault(_cause_group(cause), (CauseGroup([], [], None), []))
                (group.missing if missing else group.extra).append(str(key))
                if cause is not None:
                    found.append(cause)
        for group, found in groups.values():
            group.cause = (self.recompiled(found) if found[0].kind == RECOMPILE else found[0]) if found else None
        return [group for group, _ in groups.values()]

    def recompiled(self, causes: Sequence[Cause]) -> Cause:
        """Several recompiles the same ranks made as one cause: the first, and the guards of the first few."""
        first = causes[0]
        named = [self._recompile_phrase(first.ranks[0], c.compile_id) for c in causes[:RECOMPILES_NAMED]]
        more = len(causes) - RECOMPILES_NAMED
        deed = f"recompiled {words(named + ([f'{more} more'] if more > 0 else []))}"
        return replace(first, text=f"{rank_names(first.ranks)} {deed} where {rank_names(first.others)} did not")

    def _setting_apart(self, key: EventKey, departing: set[int], others: set[int]) -> Cause | None:
        having = {rank for rank, events in self.events.items() if key in events}
        if not ((departing <= having and not others & having) or (not departing & having and others <= having)):
            return None
        rank = min(having)
        return self._cause(self.events[rank][key], sorted(having), sorted(set(self.events) - having))

    def _resumed_after(self, compile_id: str, departing: set[int], others: set[int]) -> Cause | None:
        side = next((s for s in (departing, others) if all(compile_id in self.compiles[r] for r in s)), None)
        if side is None:
            return None
        rank = min(side)
        compile_ = self.compiles[rank][compile_id]
        if compile_.cause != CAUSE_FIRST or not compile_.user_location:
            return None
        for key, event in self.events[rank].items():
            if event.graph_break is not None and event.compile.id != compile_id and event.graph_break.user_location == compile_.user_location:
                if (cause := self._setting_apart(key, departing, others)) is not None:
                    return cause
        return None

    def _cause(self, event: Event, having: list[int], lacking: list[int]) -> Cause:
        c = event.compile
        if event.graph_break is not None:
            brk = event.graph_break
            where = self._where(brk.user_location)
            inside = f", inside {brk.inside}" if brk.inside else ""
            source = f"{first_line(brk.user_source, CAUSE_TEXT_CHARS)}: " if brk.user_source else ""
            deed = f"broke the graph in {c.id} at {where}{inside} ({source}{first_line(brk.reason, CAUSE_TEXT_CHARS)})"
            location, reason = brk.user_location or None, first_line(brk.reason)
        elif event.kind == RECOMPILE:
            deed = f"recompiled {self._recompile_phrase(having[0], c.id)}"
            location, reason = c.user_location, guard_failure(c.recompile_reasons[0]) if c.recompile_reasons else ""
        elif event.kind == UNFINISHED:
            reason = "no compilation metrics were logged: the process crashed, was killed or was still compiling"
            text = f"{rank_names(having)} never finished compiling {c.id} ({reason}) where {rank_names(lacking)} did"
            return Cause(event.kind, c.id, having, lacking, c.user_location, reason, text)
        else:
            assert c.failure is not None  # a failed compile's event
            location = c.failure.user_location or c.user_location
            at = f" at {self._where(location)}" if location else ""
            deed = f"failed to compile {c.id}{at} ({first_line(c.failure.headline, CAUSE_TEXT_CHARS)})"
            reason = c.failure.headline
        text = f"{rank_names(having)} {deed} where {rank_names(lacking)} did not"
        return Cause(event.kind, c.id, having, lacking, location, reason, text)

    def _recompile_phrase(self, rank: int, compile_id: str) -> str:
        """`[4/1] (forward at model.py:14; guard: x.shape[0] changed 8→5)`: the frame when it is the user's code."""
        c = self.compiles[rank][compile_id]
        site = split_location(c.user_location)
        user_code = c.frame and site is not None and is_user_code(site[0])
        parts = [f"{function_name(c.frame)} at {self._where(c.user_location)}"] if user_code else []
        if c.recompile_reasons:
            parts.append(f"guard: {first_line(guard_failure(c.recompile_reasons[0]), CAUSE_TEXT_CHARS)}")
        return f"{compile_id} ({'; '.join(parts)})" if parts else compile_id

    def _where(self, location: str | None) -> str:
        """A user code line relative to the run's common folder of user files (`ddp_debug.py:17`)."""
        return relative_location(location, ("", self.root)) if location else "unknown"


# ------------------------------------------------------------------------------------------------
# the verdicts, in words


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


def rank_names(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {words([str(r) for r in ranks])}"


def words(items: list[str]) -> str:
    """["a", "b", "c"] → "a, b and c"."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}" if items else ""


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
