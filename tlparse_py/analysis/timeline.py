"""The run on a time axis: when each compile ran, in which process, what became of it and where its
time went, and which frames took the most compile time. The data the index's pictures are drawn
from, and summary.json's `timeline` (so that other tools can draw their own).

When a compile ran is read from glog times, the only clock every record has: a compile begins at
its first record (its `dynamo_start`) and ends at its last (its `compilation_metrics`, the last
attempt's), both noted as the log is read (`CompileClock`). glog writes milliseconds, while the
metrics time a compile to the microsecond: a compile lasts at least its forward time
(`entire_frame_compile_time_s`), so a bar is never shorter than the phases drawn inside it. A
compile that logged no `dynamo_start` (the one over the recompile limit) begins its forward time
before its metrics; one that logged neither record has unknown times (None, never 0).

Its phases are `phases.compile_time_split` of the metrics entry its forward time is read from,
laid end to end from its start: Dynamo, then the backend (AOTAutograd), Inductor and code
generation, as the nested totals of the metrics say. A phase whose time the log does not give has
no start, and neither has any phase after it.
"""

from __future__ import annotations

import heapq
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from msgspec import Struct, field
from msgspec.structs import replace

from ..model import CompileId
from . import questions
from .phases import compile_time_split
from .spools import Reading, typed_spool
from .store import MetricsEntry, Store, compile_place
from .summary import CACHE_RESULTS, CAUSE_RECOMPILE, CompileSummary, identity_key

# Past this many compiles with known times, the timeline draws buckets of compiles (per process,
# BUCKETS of them across the axis, with their counts by outcome), not one bar each: a bar costs
# about 200 bytes of the index, and a few thousand are more than a page's width can tell apart.
MAX_BARS = 2000
BUCKETS = 250
TOP_FRAMES = 10  # the frames with the most compile time, in the chart
# A stretch of the run with no compile is compressed when longer than this share of the run (and
# GAP_MIN_S): a program that compiles at start-up and again an hour later shows both, not a line.
GAP_SHARE = 0.08
GAP_MIN_S = 1.0
GAP_DRAWN = 0.03  # the share of the axis a compressed stretch is drawn as
# The parts of a frame's compile time the chart stacks: the forward phases (`phases.Phase.key`), the
# forward time the log does not split, then the lazy backward compiles
PART_NAMES = {"dynamo": "Dynamo", "aot": "AOTAutograd", "backend": "Backend", "inductor": "Inductor",
              "codegen": "Code generation", "unsplit": "Forward, not split by the log", "backward": "Backward compile"}


# The outcome of a compile a live report shows started and not ended (no compilation_metrics yet):
# drawn to the log's last record, not as a compile whose metrics are missing (it may yet log them)
UNDER_WAY = "compiling"


def under_way(span: CompileSpan, last_record_s: float | None) -> CompileSpan:
    """A compile still under way, as a live picture draws it: compiling, until at least the last record."""
    end = max(x for x in (span.end_s, last_record_s, span.start_s, 0.0) if x is not None)
    return replace(span, outcome=UNDER_WAY, end_s=end)


def last_record_s(store: Store) -> float | None:
    """The log's last record so far, on the run's axis (None: no record had a time)."""
    origin, last = run_origin(store), glog_seconds(store.last_timestamp or "")
    return last - origin if last is not None and origin is not None else None


def glog_seconds(timestamp: str) -> float | None:
    """A record's glog time (`Record.timestamp`, ISO, the log's assumed year, no zone) as seconds on
    one clock: only the difference of two is meant. None when it is no time."""
    try:
        return datetime.fromisoformat(timestamp).timestamp()
    except (TypeError, ValueError):
        return None


class CompileClock:
    """When each compile (frame compile, generation) began and ended: the glog seconds of its
    `dynamo_start` and of its last `compilation_metrics`, noted as the log is read. A compile has a
    row: two floats in arrays (NaN where the log gave no time), one dict entry to find it (a compile
    of the first generation, most of them, is keyed by its frame compile alone, not a tuple)."""

    __slots__ = ("rows", "began", "ended")

    def __init__(self) -> None:
        self.rows: dict[CompileId | tuple[CompileId, int], int] = {}
        self.began = array("d")
        self.ended = array("d")

    def _row(self, key: CompileId, generation: int) -> int:
        place = compile_place(key, generation)
        row = self.rows.get(place)
        if row is None:
            row = self.rows[place] = len(self.began)
            self.began.append(_NO_TIME)
            self.ended.append(_NO_TIME)
        return row

    def start(self, key: CompileId, generation: int, timestamp: str) -> None:
        at = glog_seconds(timestamp)
        if at is not None:
            row = self._row(key, generation)
            if self.began[row] != self.began[row]:  # NaN: a later attempt's start is the same compile's
                self.began[row] = at

    def end(self, key: CompileId, generation: int, timestamp: str) -> None:
        at = glog_seconds(timestamp)
        if at is not None:
            row = self._row(key, generation)
            known = self.ended[row]
            self.ended[row] = at if known != known else max(at, known)  # the last attempt's metrics end it

    def times(self, key: CompileId, generation: int) -> tuple[float | None, float | None]:
        """When the compile began and ended, where the log says."""
        row = self.rows.get(compile_place(key, generation))
        if row is None:
            return None, None
        began, ended = self.began[row], self.ended[row]
        return (began if began == began else None), (ended if ended == ended else None)


_NO_TIME = float("nan")


class PhaseSpan(Struct, frozen=True, gc=False):
    """One phase of a compile's forward time on the run's axis (seconds from the run's first record)."""

    name: str  # "Dynamo", "AOTAutograd", ... (`phases.Phase.name`)
    key: str  # "dynamo", "aot", "backend", "inductor", "codegen"
    start_s: float | None  # None: a phase before it has no known time
    seconds: float | None  # None: it ran, the log does not say how long


class CompileSpan(Struct, frozen=True, gc=False):
    """One compile on the run's axis."""

    id: str
    generation: int
    process: int
    start_s: float | None  # seconds from the run's first record; None: unknown
    end_s: float | None
    outcome: str  # its status (`summary.STATUS_LABELS`)
    cause: str  # first / recompile / retry
    cache_hit: bool  # a cache lookup of it hit
    phases: tuple[PhaseSpan, ...]
    label: str = ""  # for the pictures (not in summary.json): `[0/1]`, its page, its frame, its time
    url: str | None = None
    frame: str = ""
    seconds: float | None = None

    @property
    def recompile(self) -> bool:
        return self.cause == CAUSE_RECOMPILE and self.outcome != "limit"

    def to_dict(self) -> dict[str, Any]:
        """summary.json's `timeline[]` item."""
        return {"id": self.id, "generation": self.generation, "process": self.process, "start_s": self.start_s,
                "end_s": self.end_s, "outcome": self.outcome, "cause": self.cause,
                "phases": [{"name": p.name, "start_s": p.start_s, "seconds": p.seconds} for p in self.phases]}


class Bucket(Struct, gc=False):
    """Compiles of one process whose start falls in one stretch of the axis (past MAX_BARS)."""

    process: int
    start_s: float
    end_s: float
    outcomes: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0  # their known compile time

    @property
    def count(self) -> int:
        return sum(self.outcomes.values())


class Gap(Struct, frozen=True, gc=False):
    """A stretch of the run with no compile, drawn compressed."""

    start_s: float
    end_s: float


class Axis(Struct, frozen=True, gc=False):
    """The run's time (0 to `end_s`) on the drawn axis (0 to `length`), long gaps compressed."""

    end_s: float
    gaps: tuple[Gap, ...] = ()
    gap_length: float = 0.0  # the axis length each gap is drawn as

    @property
    def length(self) -> float:
        return self.end_s - sum(g.end_s - g.start_s for g in self.gaps) + self.gap_length * len(self.gaps)

    def at(self, seconds: float) -> float:
        """Where a time of the run is on the axis."""
        shift = 0.0
        for gap in self.gaps:
            if seconds <= gap.start_s:
                break
            if seconds < gap.end_s:  # inside a gap: spread over its drawn length
                return seconds - shift - (seconds - gap.start_s) + self.gap_length * (seconds - gap.start_s) / (gap.end_s - gap.start_s)
            shift += gap.end_s - gap.start_s - self.gap_length
        return seconds - shift


class FrameTime(Struct, gc=False):
    """A frame's compile time over all its compiles, by part (PART_NAMES)."""

    frame: str  # as compile ids write it: `0`, `p1:3`
    name: str
    url: str | None  # its first compile's page
    compiles: int
    recompiles: int
    parts: dict[str, float] = field(default_factory=dict)  # PART_NAMES key → seconds, in PART_NAMES order

    @property
    def total(self) -> float:
        return sum(self.parts.values())


class Timeline(Struct, gc=False):
    """The index's pictures' data: every compile on the run's axis, and the frames by compile time."""

    spans: Sequence[CompileSpan]  # every compile, in log order (`spooled_spans`: in a scratch file, from 20,000 on)
    processes: list[int]  # the lanes: every process that compiled, and the first
    axis: Axis
    buckets: list[Bucket] | None  # None: one bar per compile (no more than MAX_BARS with known times)
    frames: list[FrameTime]  # the TOP_FRAMES frames with the most compile time, most first
    frames_with_time: int  # how many frames had any
    drawn_count: int  # the spans with a known start and end

    def drawn_spans(self) -> Iterator[CompileSpan]:
        """The spans with a known start and end, as they are read (past MAX_BARS, with the spans
        in a scratch file (`spooled_spans`), a list of them would hold them all again)."""
        return placed(self.spans)

    @property
    def unknown(self) -> int:
        """Compiles the log gives no time of: listed, not drawn."""
        return len(self.spans) - self.drawn_count

    def to_list(self) -> list[dict[str, Any]]:
        """summary.json's `timeline`."""
        return [s.to_dict() for s in self.spans]

    def items(self) -> SpanItems:
        """summary.json's `timeline` as a sequence that makes each item when it is read (`to_list`
        whole: at 40,000 compiles, 30 MB of dicts beside the spans they copy)."""
        return SpanItems(self.spans)


class SpanItems(Sequence[dict[str, Any]]):
    """`Timeline.items()`: each span's summary.json item, made when read."""

    def __init__(self, spans: Sequence[CompileSpan]):
        self.spans = spans

    def __len__(self) -> int:
        return len(self.spans)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [s.to_dict() for s in self.spans[index]]
        return self.spans[index].to_dict()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (s.to_dict() for s in self.spans)


def timeline(store: Store, clock: CompileClock, compiles: Sequence[CompileSummary], processes: int = 1) -> Timeline:
    """The pictures' data of a run: its compiles (`Analysis.compiles()`) on the axis of its records'
    glog times, which `clock` noted as the log was read."""
    origin = run_origin(store)
    made = (compile_span(store, clock, c, origin) for c in compiles)
    spans = spooled_spans(made) if isinstance(compiles, Reading) else list(made)
    sums = frame_sums(compiles, spans)
    return timeline_of(store, spans, sums.top(compiles, TOP_FRAMES), sums.timed_frames(), processes)


def run_origin(store: Store) -> float | None:
    """Where the run's axis begins: its first record's glog time (None: no record had one)."""
    return glog_seconds(store.first_timestamp or "")


def spooled_spans(spans: Iterable[CompileSpan]) -> Sequence[CompileSpan]:
    """The spans of compiles read through their scratch file (`Analysis.kept_compiles`, from
    20,000 compiles), kept in one too: a list of them held 29 MB at 40,000 compiles, each pass
    over them (about 10 a report) decodes them again."""
    return typed_spool(CompileSpan, spans)


def placed(spans: Iterable[CompileSpan]) -> Iterator[CompileSpan]:
    """The spans with a known start and end: those the pictures draw."""
    return (s for s in spans if s.start_s is not None and s.end_s is not None)


def timeline_of(store: Store, spans: Sequence[CompileSpan], frames: list[FrameTime], frames_with_time: int, processes: int) -> Timeline:
    """The pictures' data from what costs as much as the compiles, computed already: every compile's
    span (`compile_span`, from `run_origin`), in log order, and the top frames (`frame_times`'s
    first TOP_FRAMES of its `frames_with_time`). The axis, the lanes and the buckets are cheap over
    the spans: a live report (`live_compiles.LiveTimeline`) keeps the rest and asks this at each update."""
    origin, last = run_origin(store), glog_seconds(store.last_timestamp or "")
    end = max((s.end_s for s in spans if s.end_s is not None), default=0.0)
    end = max(end, last - origin if last is not None and origin is not None else 0.0)
    axis = compressed_axis(spans, end)
    lanes = sorted({0, *range(processes), *(s.process for s in spans)})
    drawn = sum(1 for _ in placed(spans))
    buckets = bucketed(spans, axis) if drawn > MAX_BARS else None
    return Timeline(spans, lanes, axis, buckets, frames, frames_with_time, drawn)


def compile_span(store: Store, clock: CompileClock, compile_: CompileSummary, origin: float | None) -> CompileSpan:
    """One compile on the axis (see the module's docstring for what its times are read from)."""
    entry = forward_entry(store, compile_)
    split = compile_time_split(store, entry) if entry is not None else None
    forward = compile_.compile_time_s.forward or 0.0
    began, ended = clock.times(compile_.key, compile_.generation)
    start = end = None
    if origin is not None and (began is not None or ended is not None):
        start = (began if began is not None else ended - forward) - origin  # type: ignore[operator]
        end = max(ended - origin if ended is not None else start, start + forward)
        start, end = round(max(start, 0.0), 6), round(max(end, 0.0), 6)
    phases: list[PhaseSpan] = []
    at: float | None = start
    for phase in split.phases if split is not None else ():
        phases.append(PhaseSpan(phase.name, phase.key, round(at, 6) if at is not None else None,
                             round(phase.seconds, 6) if phase.seconds is not None else None))
        at = at + phase.seconds if at is not None and phase.seconds is not None else None
    return CompileSpan(
        compile_.id, compile_.generation, compile_.process, start, end, compile_.status, compile_.cause,
        cache_hit(compile_), tuple(phases),
        compile_.label, compile_.url, compile_.frame or "", compile_.compile_time_s.total,
    )


def cache_hit(compile_: CompileSummary) -> bool:
    """A cache lookup of the compile hit (its bar is drawn lighter)."""
    return any(lookup.result == CACHE_RESULTS[0] for lookup in compile_.cache)


def forward_entry(store: Store, compile_: CompileSummary) -> MetricsEntry | None:
    """The metrics entry a compile's forward time is read from: its generation's first that logged
    one, as `Analysis.compile_time` reads it."""
    for entry in store.metrics.get(compile_.key, ()):
        if entry.generation == compile_.generation and questions.seconds(entry.get("entire_frame_compile_time_s")) is not None:
            return entry
    return None


def compressed_axis(spans: Iterable[CompileSpan], end: float) -> Axis:
    """The run's axis, each stretch with no compile longer than GAP_SHARE of the run (and GAP_MIN_S)
    compressed to GAP_DRAWN of the axis: from the start to the first compile, between two, and
    from the last compile to the last record."""
    threshold = max(GAP_MIN_S, GAP_SHARE * end)
    if iter(spans) is spans:  # read once only (a generator): kept for a second walk
        spans = list(spans)
    gaps = _gaps(_timed(spans), end, threshold)
    if gaps is None:  # the spans do not start in log order (processes, threads): walked in order of their starts
        gaps = _gaps(iter(sorted(_timed(spans))), end, threshold)
    assert gaps is not None
    if not gaps:
        return Axis(end)
    kept = end - sum(g.end_s - g.start_s for g in gaps)
    # each gap drawn as GAP_DRAWN of the whole axis: kept + n·g = length, g = GAP_DRAWN · length
    share = min(GAP_DRAWN * len(gaps), 0.5)
    gap_length = (kept * share / (1 - share)) / len(gaps) if kept > 0 else 1.0
    return Axis(end, tuple(gaps), gap_length)


def _timed(spans: Iterable[CompileSpan]) -> Iterator[tuple[float, float]]:
    return ((s.start_s, s.end_s) for s in spans if s.start_s is not None and s.end_s is not None)


def _gaps(busy: Iterator[tuple[float, float]], end: float, threshold: float) -> list[Gap] | None:
    """The stretches longer than `threshold` that no compile covers, walking `busy` (start, end) in
    order of their starts; None at the first that starts before the one walked before it (the
    order among equal starts changes nothing: the later ones start where the first already
    reached). Walked as they come, the spans of a long run are never listed (100,000s of pairs)."""
    gaps = []
    reached, last_start = 0.0, float("-inf")
    for start, stop in busy:
        if start < last_start:
            return None
        last_start = start
        if start - reached > threshold:
            gaps.append(Gap(round(reached, 6), round(start, 6)))
        reached = max(reached, stop)
    if end - reached > threshold:  # from the last compile to the last record
        gaps.append(Gap(round(reached, 6), round(end, 6)))
    return gaps


def bucketed(spans: Iterable[CompileSpan], axis: Axis, count: int = BUCKETS) -> list[Bucket]:
    """Compiles gathered by process into `count` equal stretches of the axis, by where they start;
    every compile with a known start and end is in one, its count kept by outcome."""
    length = axis.length or 1.0
    at, last = axis.at, count - 1
    # each bucket as a list while they are gathered, its outcomes counted at the end: a live index
    # asks at each update, and a struct and a Counter updated a compile cost twice as much
    found: dict[tuple[int, int], list[Any]] = {}  # place → [start, end, outcomes, seconds]
    for span in spans:
        start, end = span.start_s, span.end_s
        if start is None or end is None:
            continue
        place = (span.process, min(int(at(start) / length * count), last))
        gathered = found.get(place)
        if gathered is None:
            found[place] = [start, end, [span.outcome], span.seconds or 0.0]
            continue
        if start < gathered[0]:  # (as min and max: the first kept on a tie or a NaN)
            gathered[0] = start
        if end > gathered[1]:
            gathered[1] = end
        gathered[2].append(span.outcome)
        gathered[3] += span.seconds or 0.0
    return [Bucket(place[0], start, end, Counter(outcomes), seconds) for place, (start, end, outcomes, seconds) in sorted(found.items())]


def frame_sums(compiles: Sequence[CompileSummary], spans: Iterable[CompileSpan]) -> FrameSums:
    """Every frame's compile time, summed over its compiles (`spans` theirs, in the same order)."""
    sums = FrameSums()
    for position, (compile_, span) in enumerate(zip(compiles, spans)):
        sums.add(position, compile_, span)
    return sums


def frame_times(compiles: Sequence[CompileSummary], spans: Iterable[CompileSpan]) -> list[FrameTime]:
    """Every frame with a known compile time, most first: its compiles' time by part (`parts`)."""
    sums = frame_sums(compiles, spans)
    return sums.top(compiles, sums.timed_frames())


class FrameSums:
    """Every frame's compile time by part (`parts`), summed as its compiles come (a report's compiles
    may be read back from a scratch file), for the frames with the most (`top`).

    A run may have 100,000s of frames: each is a place in arrays of numbers, found by its `frame_key`,
    and its first compile and the one that names it are kept as positions among the compiles, read
    back for the frames shown only (a `FrameTime` a frame, its texts and its dict of parts, held 10 MB
    at 25,000 compiles). Each frame's parts are added in log order, so a live report summing one
    frame again (`frame_time`, by this same class) gets the same floats."""

    def __init__(self) -> None:
        self.place: dict[Any, int] = {}
        self.first, self.named = array("q"), array("q")  # a frame's first compile, the first with a name (-1: none)
        self.compiles, self.recompiles = array("q"), array("q")
        self.timed = bytearray()  # whether a compile of the frame had a known time
        self.parts = {key: array("d") for key in PART_NAMES}

    def add(self, position: int, compile_: CompileSummary, span: CompileSpan) -> None:
        key = frame_key(compile_)
        at = self.place.get(key)
        if at is None:
            at = self.place[key] = len(self.first)
            self.first.append(position)
            self.named.append(-1)
            self.compiles.append(0)
            self.recompiles.append(0)
            self.timed.append(0)
            for column in self.parts.values():
                column.append(0.0)
        self.compiles[at] += 1
        self.recompiles[at] += compile_.is_recompile
        if self.named[at] < 0 and compile_.frame:
            self.named[at] = position
        for part, seconds in parts(compile_, span):
            self.timed[at] = 1
            summed = self.parts.get(part)
            if summed is not None:
                summed[at] += seconds

    def timed_frames(self) -> int:
        """How many frames have a known compile time."""
        return sum(self.timed)

    def top(self, compiles: Sequence[CompileSummary], count: int) -> list[FrameTime]:
        """The `count` frames with the most compile time, most first (ties: the first compiled first)."""
        totals = ((-sum(self._rounded(at).values()), at) for at in range(len(self.first)) if self.timed[at])
        return [self._frame(compiles, at) for _, at in heapq.nsmallest(count, totals)]

    def _rounded(self, at: int) -> dict[str, float]:
        return {part: round(sums[at], 6) for part, sums in self.parts.items() if sums[at]}

    def _frame(self, compiles: Sequence[CompileSummary], at: int) -> FrameTime:
        first = compiles[self.first[at]]
        name = compiles[self.named[at]].frame or "" if self.named[at] >= 0 else ""
        return FrameTime(first.frame_label, name, first.url, self.compiles[at], self.recompiles[at], self._rounded(at))


def frame_key(compile_: CompileSummary) -> Any:
    """The frame a compile's time counts to in the chart: its compiled frame's identity, else its own.
    A frame of the first process and generation without compiled autograd (most) is its frame id
    alone (`identity_key`), not a tuple a frame (100,000s of them while the summary is made)."""
    identity = compile_.frame_identity
    return (compile_.key, compile_.generation) if identity is None else identity_key(identity)


def frame_time(compiles: Sequence[tuple[CompileSummary, CompileSpan]]) -> FrameTime | None:
    """One frame's compile time from its compiles (one `frame_key`, in log order, each with its span);
    None when none of them has a known time. Each frame is summed on its own, in log order: a live
    report sums again only the frames whose compiles changed, to the same floats."""
    listed = [compile_ for compile_, _ in compiles]
    frames = frame_sums(listed, [span for _, span in compiles]).top(listed, 1)
    return frames[0] if frames else None


def parts(compile_: CompileSummary, span: CompileSpan) -> list[tuple[str, float]]:
    """A compile's time by part: its forward phases the log times, the rest of its forward time
    (`unsplit`: a phase of unknown time, or no split at all), and its lazy backward compiles. They
    add up to its `compile_time_s.total`; none when that is unknown."""
    times = compile_.compile_time_s
    if times.total is None or times.forward is None:
        return []
    found = [(phase.key, phase.seconds) for phase in span.phases if phase.seconds]
    unsplit = times.forward - sum(seconds for _, seconds in found)
    if unsplit > 1e-9:
        found.append(("unsplit", unsplit))
    if times.backward:
        found.append(("backward", times.backward))
    return found
