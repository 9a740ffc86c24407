"""What the comparison of ranks answers (`ranks.compare`), as typed plain data: what each rank
brings (`RankFacts`), each kind of divergence, its cause, and the whole comparison (`RankComparison`).
The detectors that find them are in `rank_detectors`, their causes in `rank_causes`, and the
verdicts in words in `rank_verdicts`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from msgspec import Struct

from ..model import CompileId
from .store import DistributedFacts
from .summary import CompileSummary, Summary
from .totals import BY_NAME, Value


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


# ------------------------------------------------------------------------------------------------
# ranks named in words: a verdict's `line`, its causes and notes


def rank_names(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {words([str(r) for r in ranks])}"


def words(items: list[str]) -> str:
    """["a", "b", "c"] → "a, b and c"."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}" if items else ""
