"""Every rank's compiles on one time axis: the data of the multi-rank landing page's picture, where a
rank that compiles slower than the others, later, or on its own, shows.

Each rank's report has its run timeline (`timeline.Timeline`, its summary.json's `timeline`), on the
axis of its own first record. glog times are wall-clock times, so the ranks' axes become one through
where each rank's first record lies (its `run.first_record`): 0 s is the earliest compile start of
all ranks, and a rank's compiles are its timeline shifted by its `offset_s` (its first record on the
common axis, negative when it logged before that compile started). Ranks on several hosts agree only
as well as their clocks do (NTP keeps them within milliseconds).

Ranks whose first compiles start more than FAR_APART_S apart were not compiling one program together
(logs of different runs in one folder, or clocks set apart): one axis would show them as far-apart
slivers, so each is then placed by its own first compile start (`by_clock` False), and the spread is
said (`apart_s`).

Built from the ranks' typed summaries (what travels back from the processes that read them), once,
for every view: the landing's picture and its table. Long stretches without a compile on any rank are
compressed as on the index (`timeline.compressed_axis`); past `timeline.MAX_BARS` compiles with known
times every lane is bucketed (`timeline.bucketed`), fewer buckets per lane as there are more ranks
(`lane_buckets`), so that a page of many ranks stays small. A rank's phases are on its own index,
not here (summary.json's timeline names them, not their keys).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from msgspec import Struct

from .summary import CompileSummary, Summary
from .timeline import BUCKETS, MAX_BARS, Axis, Bucket, CompileSpan, bucketed, cache_hit, compressed_axis, glog_seconds, under_way
from .totals import BY_NAME

MIN_LANE_BUCKETS = 8  # the fewest buckets a lane is drawn in, however many ranks (1,000 ranks: 8,000 buckets)
FAR_APART_S = 3600.0  # ranks whose first compiles start further apart are placed each by its own (see the module's docstring)
# Compile times, or ends of the last compile, this close are even: the clocks of two hosts, and two
# runs of one compile on one, differ by as much
EVEN_S = 1.0
EVEN_SHARE = 0.05  # ... or within this share of the median rank's compile time


class RankLane(Struct, gc=False):
    """One rank on the common axis."""

    rank: int
    folder: str  # its report's folder under the landing page
    spans: list[CompileSpan]  # its compiles with known times, in log order, on the common axis; `url` from the landing page
    compiles: int  # every compile it logged, drawn or not
    compile_time_s: float | None  # its compile time (the total `compile_time_s`); None: unknown
    offset_s: float | None = None  # its first record on the common axis; None: its times cannot be placed
    last_record_s: float | None = None  # its last record on the common axis
    first_compile_at: str | None = None  # the glog time its first compile started, `2026-12-06 02:06:12.676`
    buckets: list[Bucket] | None = None  # its compiles in buckets (`RankTimeline.bucketed`)
    error: str | None = None  # why it has no report

    @property
    def first_start_s(self) -> float | None:
        return min((s.start_s for s in self.spans if s.start_s is not None), default=None)

    @property
    def last_end_s(self) -> float | None:
        return max((s.end_s for s in self.spans if s.end_s is not None), default=None)

    @property
    def unknown(self) -> int:
        """Its compiles the picture cannot place (no time logged, or no record time of the rank)."""
        return self.compiles - len(self.spans)


class RankTimeline(Struct, gc=False):
    """The ranks' lanes on one axis (seconds from `origin`), long gaps compressed."""

    lanes: list[RankLane]  # one per rank, in rank order
    axis: Axis
    by_clock: bool  # placed by their glog times (0 s: `origin`); False: each rank from its own first compile start
    origin: str | None  # by clock, the glog time 0 s is: the earliest compile start of all ranks (`2026-12-06 02:06:12.676`)
    origin_rank: int | None  # the rank that started it
    apart_s: float  # how far apart the ranks' first compile starts are, by their clocks
    bucketed: bool  # the lanes are drawn as buckets: more than MAX_BARS compiles with known times

    @property
    def drawn(self) -> int:
        return sum(len(lane.spans) for lane in self.lanes)

    @property
    def slowest(self) -> RankLane | None:
        """The rank with the most compile time; None with fewer than two ranks of known compile time."""
        timed = self._by_compile_time()
        return timed[-1] if len(timed) > 1 else None

    @property
    def fastest(self) -> RankLane | None:
        timed = self._by_compile_time()
        return timed[0] if len(timed) > 1 else None

    @property
    def median(self) -> RankLane | None:
        """The rank of the median compile time (the lower median: with two ranks, the fastest); None
        with fewer than two ranks of known compile time. The slowest rank is measured from it, not
        from the fastest, which may have compiled less (stopped early, killed, failed)."""
        timed = self._by_compile_time()
        return timed[(len(timed) - 1) // 2] if len(timed) > 1 else None

    def _by_compile_time(self) -> list[RankLane]:
        return sorted((lane for lane in self.lanes if lane.compile_time_s is not None), key=lambda lane: (lane.compile_time_s or 0.0, lane.rank))

    @property
    def spread_s(self) -> float | None:
        """How much more compile time the slowest rank had than the median rank."""
        slow = self.slowest
        return self.over_median_s(slow) if slow is not None else None

    def over_median_s(self, lane: RankLane) -> float | None:
        """How much more compile time a rank had than the median rank (negative: less; None: unknown)."""
        median = self.median
        if median is None or median.compile_time_s is None or lane.compile_time_s is None:
            return None
        return round(lane.compile_time_s - median.compile_time_s, 6)

    @property
    def uneven(self) -> bool:
        """The slowest rank's compile time is more than noise over the median's (EVEN_S, EVEN_SHARE)."""
        spread, median = self.spread_s, self.median
        return spread is not None and median is not None and spread >= max(EVEN_S, EVEN_SHARE * (median.compile_time_s or 0.0))

    @property
    def last_to_finish(self) -> RankLane | None:
        """The rank whose last compile ended last; None with fewer than two placed ranks."""
        placed = self._by_end()
        return placed[-1] if len(placed) > 1 else None

    @property
    def median_finish(self) -> RankLane | None:
        """The rank that finished compiling when half the ranks had (the lower median: with two
        ranks, the first); None with fewer than two placed ranks. A straggler is measured from it,
        not from the first to finish, which may have stopped early (killed, failed)."""
        placed = self._by_end()
        return placed[(len(placed) - 1) // 2] if len(placed) > 1 else None

    def _by_end(self) -> list[RankLane]:
        """The ranks with a placed compile, by when their last compile ended (then by rank)."""
        return sorted((lane for lane in self.lanes if lane.last_end_s is not None), key=lambda lane: (lane.last_end_s or 0.0, lane.rank))

    @property
    def late_s(self) -> float | None:
        """How long after `median_finish` the last rank finished compiling (by clock only)."""
        last, middle = self.last_to_finish, self.median_finish
        if not self.by_clock or last is None or middle is None or last.last_end_s is None or middle.last_end_s is None:
            return None
        return round(last.last_end_s - middle.last_end_s, 6)

    @property
    def straggler(self) -> RankLane | None:
        """The last rank to finish compiling, when it finished more than EVEN_S after the median
        rank: the ranks done before it wait for it at their next collective."""
        late = self.late_s
        return self.last_to_finish if late is not None and late >= EVEN_S else None


class RankRun(Struct, gc=False):
    """What the picture reads of a rank: its number, its report's folder, its summary (None: unread)."""

    rank: int
    folder: str
    summary: Summary | None
    error: str | None = None
    under_way: frozenset[tuple[str, int]] = frozenset()  # a live report's compiles started, not ended: (id, generation)


class _Start(Struct, frozen=True, gc=False):
    """A rank's first record and first compile start, as glog seconds."""

    first_record: float
    first_compile: float
    at: str  # the first compile's start as a reader is told it


def rank_timeline(ranks: Sequence[RankRun]) -> RankTimeline:
    """The ranks (one main log each, in rank order) on one axis."""
    starts = {r.rank: _start(r.summary) for r in ranks}
    known = {rank: start for rank, start in starts.items() if start is not None}
    origin_rank = min(known, key=lambda rank: (known[rank].first_compile, rank)) if known else None
    apart = max(s.first_compile for s in known.values()) - min(s.first_compile for s in known.values()) if known else 0.0
    by_clock = apart <= FAR_APART_S
    lanes = []
    for run in ranks:
        start = starts[run.rank]
        # by clock, every rank from the first compile start of all; else each from its own
        origin = known[origin_rank].first_compile if by_clock and origin_rank is not None else start.first_compile if start else None
        lanes.append(_lane(run, start, origin))
    end = max([0.0] + [at for lane in lanes for at in (lane.last_record_s, lane.last_end_s) if at is not None])
    axis = compressed_axis((s for lane in lanes for s in lane.spans), end)
    many = sum(len(lane.spans) for lane in lanes) > MAX_BARS
    if many:
        count = lane_buckets(len(lanes))
        for lane in lanes:
            lane.buckets = bucketed(lane.spans, axis, count)
    text = known[origin_rank].at if by_clock and origin_rank is not None else None
    return RankTimeline(lanes, axis, by_clock, text, origin_rank if by_clock else None, round(apart, 6), many)


def lane_buckets(lanes: int) -> int:
    """Buckets per lane: BUCKETS for a few ranks, fewer for many (about 2·MAX_BARS in all)."""
    return max(MIN_LANE_BUCKETS, min(BUCKETS, 2 * MAX_BARS // max(lanes, 1)))


def _start(summary: Summary | None) -> _Start | None:
    """A rank's first record and earliest compile start; None when either is unknown."""
    text = summary.run.get("first_record") if summary is not None else None
    first = glog_seconds(text) if isinstance(text, str) else None
    if first is None or summary is None or not summary.timeline or not isinstance(text, str):
        return None
    starts = [item["start_s"] for item in summary.timeline if isinstance(item.get("start_s"), (int, float))]
    if not starts:
        return None
    start = min(starts)
    at = (datetime.fromisoformat(text) + timedelta(seconds=start)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    return _Start(first, first + start, at)


def _lane(run: RankRun, start: _Start | None, origin: float | None) -> RankLane:
    summary = run.summary
    if summary is None:
        return RankLane(run.rank, run.folder, [], 0, None, error=run.error)
    compiles = list(summary.compiles)
    seconds = BY_NAME["compile_time_s"].compute(compiles)
    lane = RankLane(run.rank, run.folder, [], len(compiles), float(seconds) if seconds is not None else None)
    if origin is None or start is None or summary.timeline is None:
        return lane
    lane.offset_s = round(start.first_record - origin, 6)
    lane.first_compile_at = start.at
    last = glog_seconds(str(summary.run.get("last_record") or ""))
    lane.last_record_s = round(last - origin, 6) if last is not None else None
    by_id: dict[tuple[Any, Any], CompileSummary] = {(c.id, c.generation): c for c in compiles}
    for item in summary.timeline:
        span = _shifted(item, by_id.get((item.get("id"), item.get("generation"))), run.folder, lane.offset_s)
        if span is not None and (span.id, span.generation) in run.under_way:  # compiling until at least its rank's last record
            span = under_way(span, lane.last_record_s)
        if span is not None:
            lane.spans.append(span)
    return lane


def _shifted(item: dict[str, Any], compile_: CompileSummary | None, folder: str, offset: float) -> CompileSpan | None:
    """A rank's summary.json timeline item on the common axis (None: it has no known time), with what
    its compile says for the picture: its label, page (from the landing page), frame, compile time."""
    start, end = item.get("start_s"), item.get("end_s")
    if not isinstance(start, (int, float)) or not isinstance(end, (int, float)):
        return None
    ident = str(item.get("id", ""))
    return CompileSpan(
        ident, int(item.get("generation") or 0), int(item.get("process") or 0),
        round(start + offset, 6), round(end + offset, 6), str(item.get("outcome", "")), str(item.get("cause", "")),
        cache_hit(compile_) if compile_ is not None else False, (),
        compile_.label if compile_ is not None else ident,
        f"{folder}/{compile_.url}" if compile_ is not None and compile_.url else None,
        (compile_.frame or "") if compile_ is not None else "",
        compile_.compile_time_s.total if compile_ is not None else None,
    )
