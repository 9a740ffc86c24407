"""Two runs compared, as typed data: what `comparison.diff` answers and `diff.json` holds.

Every view of a diff (its page, its Markdown, the `Diff:` line, the gates) reads these fields; none
walks a dict by its keys. The field names are diff.json's keys, in its order (schema:
diff.schema.json), so that diff.json is these objects as JSON (`msgspec.to_builtins`). A value a
side does not tell is None (null), never guessed.

Nothing here computes: `comparison.py` pairs the runs and fills these in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from msgspec import Struct, field

from .program import ProgramExit

Number = int | float | None
DIFFERENT_PROGRAMS = ("No frame of BASE pairs with a frame of NEW: they look like different programs, so every frame "
                      "and graph break is listed as gone or new")
NO_CACHE_RESULTS = "a side's summary.json records no cache results (an older schema): compile times cannot be compared"
Rows = Sequence  # a list, or past `comparison.ROWS_IN_MEMORY` rows a scratch file (`spools.SpooledStructs`)


class Change(Struct, frozen=True, gc=False):
    """A count before and after; delta is None when either is unknown."""

    base: Number
    new: Number
    delta: Number


class Timed(Struct, frozen=True, gc=False):
    """A duration before and after; ratio is new / base where the two measure the same work (else None)."""

    base: Number
    new: Number
    delta: Number
    ratio: float | None = None


class CompileRef(Struct, frozen=True, gc=False):
    """A compile of one side, as a diff names it."""

    id: str
    generation: int
    status: str


class Moved(Struct, frozen=True, gc=False):
    """The line a frame or graph break moved from and to, when only its line changed."""

    from_: int = field(name="from")
    to: int


class PairRow(Struct, gc=False):
    """The i-th compile of a frame in BASE and in NEW (either may be missing)."""

    base: CompileRef | None
    new: CompileRef | None
    compile_time_s: Timed
    graph_op_count: Change
    time_comparable: bool  # counted in the compile time ratio
    # since 4.1: why its time is not in the ratio ("cache results differ: ...", "only in BASE", ...); None when it is
    time_apart: str | None = None


class FrameRow(Struct, gc=False):
    """One frame of either run: its compiles paired, and what changed in them."""

    frame: str | None
    user_location: str | None
    inside: str
    presence: str  # "both", "new" or "gone"
    pairing: str
    base_frame: str | None
    base_user_location: str | None
    moved: Moved | None
    regression: str | None
    compiles: Change
    recompiles: Change
    new_recompile_reasons: list[str]
    compile_time_s: Timed
    cache: dict[str, Change]
    pairs: list[PairRow]
    where: str | None = None  # since 4.1: user_location as every view names it (`roots.Roots.name`: relative to its run's root)


class BreakRow(Struct, gc=False):
    """A graph break (one kind at one place of the code) new, gone, logged more or less often, or moved."""

    reason: str
    user_location: str
    user_source: str | None
    registry_id: str | None
    explanation: str | None
    hints: list[str]
    doc_url: str | None
    torch_break: bool
    count: Change
    frames: list[str | None]
    compiles: list[str]
    moved: Moved | None
    where: str | None = None  # since 4.1: user_location as every view names it (relative to its run's root)


class GraphBreaks(Struct, gc=False):
    new: list[BreakRow] = field(default_factory=list)
    gone: list[BreakRow] = field(default_factory=list)
    changed: list[BreakRow] = field(default_factory=list)
    moved: list[BreakRow] = field(default_factory=list)

    @property
    def new_user_breaks(self) -> list[BreakRow]:
        """The graph breaks NEW has that BASE did not, but torch's own (`torch_graph_breaks` counts those)."""
        return [g for g in self.new if not g.torch_break]

    @property
    def changed_any(self) -> bool:
        return bool(self.new or self.gone or self.changed or self.moved)


class FailureRow(Struct, gc=False):
    """A compile failure new in NEW (NEW's), or fixed since BASE (BASE's)."""

    frame: str | None
    user_location: str | None
    inside: str
    base: CompileRef | None
    new: CompileRef | None
    type: str
    reason: str | None
    failed_at: str | None = None  # since 4.1: the line of user code torch says it failed at (summary.json's failure.user_location)
    # since 4.1: user_location and failed_at as every view names them (relative to their run's root), and
    # the exception's message in one line as the report says it (summary.py `Failure.message`)
    where: str | None = None
    failed_where: str | None = None
    message: str | None = None


class Failures(Struct, gc=False):
    new: list[FailureRow] = field(default_factory=list)
    fixed: list[FailureRow] = field(default_factory=list)


class EagerRow(Struct, gc=False):
    """A compile of BASE that no longer happens in NEW: the frame runs eagerly there (skipped, or over the
    recompile limit), from that compile on."""

    frame: str | None
    user_location: str | None
    inside: str
    base: CompileRef | None
    new: CompileRef | None  # None: NEW never reached this compile (its frame ran eagerly from an earlier one)
    outcome: str  # "skipped" or "recompile limit"
    reason: str | None
    lost_compile_time_s: float | None
    where: str | None = None  # since 4.1: user_location as every view names it (relative to its run's root)


class OpCountRow(Struct, gc=False):
    frame: str | None
    user_location: str | None
    inside: str
    index: int
    base: CompileRef | None
    new: CompileRef | None
    graph_op_count: Change
    where: str | None = None  # since 4.1: user_location as every view names it (relative to its run's root)


class Work(Struct, gc=False):
    """Compile work only one run did: how many compiles, and their time (None: none of them logged one)."""

    compiles: int = 0
    seconds: float = 0.0  # of those that logged one
    unknown: int = 0  # of them, how many logged no time

    @property
    def known_seconds(self) -> float | None:
        """Its time; None (unknown, never a part passed off as the whole) when any of them logged none."""
        return None if self.unknown else self.seconds


class ApartPair(Struct, frozen=True, gc=False):
    """A paired compile left out of the ratio, and why (the first `comparison.APART_NAMED` a comparison names)."""

    base: str
    new: str
    why: str


class CompileTimes(Struct, gc=False):
    """Compile time compared like with like: the one ratio of a comparison, over its comparable pairs
    (paired compiles with the same cache results and known times); every other compile apart."""

    base: float | None = None  # over the comparable pairs
    new: float | None = None
    delta: float | None = None
    ratio: float | None = None  # the one ratio: `compile_time_ratio`; None when not comparable
    comparable: bool = False
    why_not: str | None = None
    compared: int = 0  # comparable pairs
    cache_differs: int = 0  # paired compiles whose cache results differ
    no_longer_compiled: int = 0  # compiles of BASE that NEW no longer compiles
    # since 4.1
    paired: int = 0  # compiles both runs have
    comparable_share: float | None = None  # of the paired compile time (both runs), the comparable pairs' part
    apart: list[ApartPair] = field(default_factory=list)  # the first paired compiles left out, and why
    apart_count: int = 0
    base_only: Work = field(default_factory=Work)  # compiles only BASE has: gone, lost to the limit, no longer compiled
    new_only: Work = field(default_factory=Work)  # compiles only NEW has


class PieceRow(Struct, frozen=True, gc=False):
    call: str
    submod: str
    group: str


class PassRow(Struct, frozen=True, gc=False):
    call: str
    pass_: str = field(name="pass")
    base: str | None = None
    new: str | None = None


class VllmChange(Struct, gc=False):
    new_pieces: list[PieceRow]
    gone_pieces: list[PieceRow]
    pieces: Change
    passes: list[PassRow]

    @property
    def changed(self) -> bool:
        return bool(self.new_pieces or self.gone_pieces or self.passes)


# how a paired compile's time counts (`comparison.CompilePair.verdict`), as the diff's picture colours it
COMPARED = "compared"  # in the ratio: both runs have it, with the same cache results and known times
NOT_COMPARED = "not compared"  # both runs have it, left out of the ratio (its cache results differ, a time is unknown)
ONE_RUN = "one run only"  # base-only or new-only compile work: gone, new, or no longer compiled


class PairTime(Struct, frozen=True, gc=False):
    """The i-th compile of a frame in BASE and in NEW, as the picture draws it: its times and how they count."""

    base: float | None  # None: BASE has no such compile, or it logged no time
    new: float | None
    verdict: str  # COMPARED, NOT_COMPARED or ONE_RUN
    why: str | None  # why it is not in the ratio (`PairRow.time_apart`); None when it is


class SideTime(Struct, gc=False):
    """One run's compile time of a frame, by part: the parts of the index's chart (`timeline.PART_NAMES`:
    the forward phases the log times, the forward time it does not split, the backward compiles)."""

    seconds: float | None  # the frame's compile time in this run (`FrameRow.compile_time_s`); None: no compile, or no time
    parts: dict[str, float] = field(default_factory=dict)  # part → seconds, in PART_NAMES order; they add up to `seconds`


class FrameTime(Struct, gc=False):
    """A frame with the most compile time in either run, BASE against NEW, with what changed in it."""

    index: int  # its row in `Comparison.frames`
    frame: str | None
    where: str | None  # as every view names its place (`FrameRow.where`)
    inside: str
    presence: str  # "both", "new" or "gone"
    regression: str | None  # `FrameRow.regression`
    base: SideTime
    new: SideTime
    compile_time_s: Timed  # `FrameRow.compile_time_s`: a ratio only where every pair of it is compared
    pairs: list[PairTime]
    recompiles: Change
    new_recompile_reasons: int  # how many recompile reasons NEW logged for it that BASE did not
    new_graph_breaks: list[int]  # the graph breaks new in NEW logged in its NEW compiles: places in `graph_breaks.new`
    gone_graph_breaks: list[int]  # those gone since BASE logged in its BASE compiles: places in `graph_breaks.gone`


class FrameTimes(Struct, gc=False):
    """The frames the diff's picture draws: the `cap` with the most compile time in either run, most first."""

    frames: list[FrameTime] = field(default_factory=list)
    cap: int = 0  # at most this many (`comparison.TOP_FRAMES`)
    with_time: int = 0  # how many frames have a known compile time in either run


class Comparison(Struct, gc=False):
    """Two runs (or one rank of each) compared."""

    totals: dict[str, Any]  # every total (totals.py), nested as summary.json's: a `Change`, or `Timed` for a duration
    time: CompileTimes
    graph_breaks: GraphBreaks
    frames: Rows[FrameRow]
    failures: Failures
    no_longer_compiled: list[EagerRow]
    graph_op_counts: list[OpCountRow]
    vllm: VllmChange | None
    frame_times: FrameTimes = field(default_factory=FrameTimes)  # since 4.2: the frames the diff page draws

    @property
    def notes(self) -> list[str]:
        """What a reader must know before any figure: the runs look like different programs; the compile
        times cannot be compared because of the cache."""
        presence = {f.presence for f in self.frames}
        notes = [DIFFERENT_PROGRAMS] if presence == {"gone", "new"} else []
        why = self.time.why_not
        if why and (self.time.cache_differs or why == NO_CACHE_RESULTS):
            notes.append(why[0].upper() + why[1:])
        return notes

    def total(self, name: str) -> Change | Timed:
        """A total's row by its declared name (`cache.miss`)."""
        found: Any = self.totals
        for part in name.split("."):
            found = found[part]
        assert isinstance(found, (Change, Timed))
        return found

    @property
    def nothing_changed(self) -> bool:
        """No graph break, recompile, failure, op count, frame or count changed (times always move)."""
        if self.graph_breaks.changed_any or self.failures.new or self.failures.fixed or self.graph_op_counts or self.no_longer_compiled:
            return False
        if self.vllm is not None and self.vllm.changed:
            return False
        if any(isinstance(row, Change) and row.delta for row in _leaves(self.totals)):
            return False
        return not any(f.new_recompile_reasons or f.presence != "both" for f in self.frames)


def _leaves(totals: dict[str, Any]) -> list[Any]:
    return [leaf for value in totals.values() for leaf in (_leaves(value) if isinstance(value, dict) else [value])]


class DiffSide(Struct, gc=False):
    path: str
    torch_version: str | None
    ranks: int | None
    # since 4.1: how the program ended, under `tlparse-py run` (summary.json's `program`; a multi-rank run's
    # launcher's); None: not known (a side read from a log, or written without `run`)
    program: ProgramExit | None = None


class RankRow(Struct, gc=False):
    rank: int | None
    folder: str
    note: str | None
    comparison: Comparison | None


class Shown(Struct, frozen=True, gc=False):
    """A total over every comparison (ranks combined as its declaration says), with each side as shown."""

    base: Number
    new: Number
    delta: Number
    base_shown: str
    new_shown: str
    ratio: None = None  # since 4.1 always null: raw totals are times, never a second ratio (the ratio is `time.ratio`)


class Generator(Struct, frozen=True):
    name: str
    version: str


class Diff(Struct, gc=False):
    """The whole diff: two runs' comparison, or one per rank; what diff.json holds."""

    schema_version: str
    generator: Generator
    base: DiffSide
    new: DiffSide
    torch_versions_differ: bool
    notes: list[str]
    comparison: Comparison | None
    ranks: list[RankRow]
    totals: dict[str, Any] = field(default_factory=dict)  # `Shown` by total, nested
    metrics: dict[str, Number] = field(default_factory=dict)  # every diff gate's value (totals.DIFF_GATES)
    unchecked: dict[str, str] = field(default_factory=dict)  # why a gate's value is None

    def sections(self) -> list[tuple[str, Comparison]]:
        """(rank folder, or "" for two single runs; its comparison): every comparison of the diff."""
        if self.comparison is not None:
            return [("", self.comparison)]
        return [(r.folder, r.comparison) for r in self.ranks if r.comparison is not None]

    def comparisons(self) -> list[Comparison]:
        return [c for _, c in self.sections()]

    def total(self, name: str) -> Shown:
        found: Any = self.totals
        for part in name.split("."):
            found = found[part]
        assert isinstance(found, Shown)
        return found

    @property
    def nothing_changed(self) -> bool:
        """Nothing to report in any comparison, and no rank left uncompared."""
        return all(c.nothing_changed for c in self.comparisons()) and not any(r.comparison is None for r in self.ranks)
