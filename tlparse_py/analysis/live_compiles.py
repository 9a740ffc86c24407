"""`Analysis.compiles()` of a log still being read (a live report): between two updates only the
compiles whose records changed are built again.

A compile's summary (`Analysis._compile`) is read from the facts of its own frame compile: its
attempts' records, metrics, cache lookups, graph breaks, recompile reasons and generations. Two
facts come from elsewhere: the compiled function's name may come from its other compiles' metrics
(`questions._name_from_pool`), and why it happened, its name and location may follow its function's
compile before it (`compiles._follow`); and the backward compiled inside the forward is summed from
chromium events, logged outside any compile id. So an update builds again every compile of each
function (process, compiled-autograd id, frame id) that logged something, and of each frame whose
backward spans changed; the others are kept, the same objects, but when the run's usual config
values move (`configs.ConfigSnapshots.unusual`, asked of every compile's config): a kept compile
whose unusual settings changed is replaced by a copy that says so. What it builds is what
`Analysis.compiles()` builds from the same store, compile for compile (tests/test_live.py checks it
after every update); the final report builds them all again anyway (`compiles.forget_compiles`).

`LiveTimeline` keeps the index's pictures' data (`Analysis.timeline()`) the same way: each
compile's span, and each frame's compile time, built again only for the compiles that changed.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Iterable
from typing import Any, NamedTuple

from msgspec import structs

from ..model import CompileId
from . import questions
from .compiles import Analysis, _follow, compiles_read, follow_config, keep_compiles, keep_timeline, mark_unusual
from .configs import UnusualSetting
from .store import as_list, compile_place, place_parts
from .summary import CompileSummary
from .timeline import TOP_FRAMES, CompileSpan, FrameTime, Timeline, compile_span, frame_key, frame_time, last_record_s, run_origin, timeline_of, under_way

Function = tuple[int, int | None, int | None]  # (process, compiled autograd id, frame id): the frames of one compiled function


class CompileChanges(NamedTuple):
    """What one `LiveCompiles.refresh` changed in the list of compiles: (position, the compile it
    replaced or None, the compile). Compiles never move: a compile read later comes later in log
    order, a compile of an id in a later generation too (`Generations.in_log_order`)."""

    changed: list[tuple[int, CompileSummary | None, CompileSummary]]
    # the positions among them whose compile changed only its unusual settings (`LiveCompiles._mark_unusual`:
    # the run's usual values moved); what reads no setting stays: its span, and all the index shows
    # of it but its row (`LiveIndex.page`)
    settings_only: frozenset[int] = frozenset()


def function_of(frame: CompileId) -> Function:
    return (frame.process, frame.compiled_autograd_id, frame.frame_id)


class LiveCompiles:
    """The compiles of one analysis, kept up to date piece by piece (`refresh`)."""

    def __init__(self, analysis: Analysis):
        self.analysis = analysis
        analysis.live = True  # until `forget_compiles(finished=True)`: the final report
        self.keys_seen = 0  # directory keys taken into `frames`
        self.starts_seen = 0  # `later_starts` taken into `compiles`
        self.frames: dict[CompileId, CompileId | list[CompileId]] = {}  # frame compile → its attempts, in directory order (`compiles_read`)
        self.functions: dict[Function, list[CompileId]] = {}  # a function's frame compiles, in the same order
        self.by_frame: dict[CompileId, dict[int, CompileSummary]] = {}  # frame compile → generation → its compile
        self.compiles: list[CompileSummary] = []  # in log order: `Analysis.compiles()`
        self.at: dict[tuple[CompileId, int], int] = {}  # (frame, generation) → position in `compiles`
        # `compile_place` → compile: `compile_of`'s table, handed to the analysis as it is (a copy in
        # another form cost a pass over every compile at each update)
        self.index: dict[CompileId | tuple[CompileId, int], CompileSummary] = {}
        self.spans: dict[tuple[CompileId, int], float] = {}  # `backward_spans` at the last refresh
        self.built = 0  # compiles built (`_compile` calls), all refreshes together: what tests count
        self.config_counts: Counter[int] = Counter()  # compiles per logged config (`compiles.config_counts`), kept as they change
        self.unusual: dict[int, list[UnusualSetting]] = {}  # `ConfigSnapshots.unusual` at the last refresh
        self.timeline = LiveTimeline(analysis, self)  # `Analysis.timeline()` of these compiles, kept as they change

    def refresh(self, touched: Iterable[CompileId | None]) -> CompileChanges:
        """Build again the compiles of the functions that logged something since the last refresh
        (`touched`: the directory keys of the records read), and hand them to the analysis as its
        `compiles()`, with their `timeline()` (`LiveTimeline`); which positions changed."""
        analysis = self.analysis
        frames = {key.frame_key() for key in touched if key is not None and questions.is_compile(key)}
        new = self._take_new(frames)
        spans = analysis.backward_spans
        if spans != self.spans:  # chromium events, logged outside any compile id, add to a compile's backward time
            frames.update(key[0] for key, _ in spans.items() - self.spans.items() if key[0] in self.frames)
            self.spans = dict(spans)
        changed: list[tuple[int, CompileSummary | None, CompileSummary]] = []
        for function in {function_of(frame) for frame in frames}:
            listed = self.functions[function]
            # a compile is what its function's compile before makes it (`_follow`), never what a later one
            # does: those before the first that logged something stay, and say what came before it
            first = min((place for place, frame in enumerate(listed) if frame in frames), default=len(listed))
            latest: dict[int, CompileSummary] = {}  # generation → the function's compile before
            for frame in listed[:first]:
                latest.update(self.by_frame.get(frame, {}))
            for frame in listed[first:]:
                built = {}
                for generation in analysis.generations_of(frame):
                    compile_ = analysis._compile(frame, self.frames[frame], generation)
                    _follow(compile_, latest.get(generation))
                    follow_config(compile_, latest.get(generation), analysis.configs)
                    latest[generation] = built[generation] = self.index[compile_place(frame, generation)] = compile_
                self.built += len(built)
                self.by_frame[frame] = built
                for generation, compile_ in built.items():
                    position = self.at.get((frame, generation))
                    if position is not None:
                        changed.append((position, self.compiles[position], compile_))
                        self.compiles[position] = compile_
        for frame, generation in new:
            self.at[(frame, generation)] = len(self.compiles)
            changed.append((len(self.compiles), None, self.by_frame[frame][generation]))
            self.compiles.append(self.by_frame[frame][generation])
        replaced = self._mark_unusual(changed)
        changes = CompileChanges(changed + replaced, frozenset(position for position, _, _ in replaced))
        keep_compiles(analysis, self.compiles, self.index)
        self.timeline.update(changes)
        return changes

    def _mark_unusual(self, changed: list[tuple[int, CompileSummary | None, CompileSummary]]) -> list[tuple[int, CompileSummary | None, CompileSummary]]:
        """Set the unusual settings (`compiles.mark_unusual`) of the compiles just built; the run's usual
        values depend on every compile, so when they moved, the kept compiles whose answer changed are
        replaced too: those (position, the compile it replaced, the compile)."""
        for _, old, new in changed:
            if old is not None and old.config is not None:
                self.config_counts[old.config] -= 1
            if new.config is not None:
                self.config_counts[new.config] += 1
        unusual = self.analysis.configs.unusual(+self.config_counts)
        built = [new for _, _, new in changed]
        mark_unusual(built, unusual)
        moved = {n for n in unusual.keys() | self.unusual.keys() if unusual.get(n) != self.unusual.get(n)}
        self.unusual = unusual
        if not moved:
            return []
        fresh = {id(c) for c in built}
        replaced: list[tuple[int, CompileSummary | None, CompileSummary]] = []
        for position, compile_ in enumerate(self.compiles):
            settings = list(unusual.get(compile_.config, ())) if compile_.config in moved and id(compile_) not in fresh else None
            if settings is not None and settings != compile_.config_unusual:  # (a count that moved may not change its words)
                again = structs.replace(compile_, config_unusual=settings)
                self.compiles[position] = self.index[compile_place(again.key, again.generation)] = self.by_frame[again.key][again.generation] = again
                replaced.append((position, compile_, again))
        return replaced

    def attempts_of(self, frame: CompileId) -> list[CompileId]:
        """The attempts of a frame compile listed so far, in directory order."""
        return as_list(self.frames.get(frame))

    def _take_new(self, frames: set[CompileId]) -> list[tuple[CompileId, int]]:
        """The compiles read since the last refresh, (frame, generation) in log order, after every
        compile listed (`compiles_read`); their frames join `frames`, the frames to build again."""
        analysis = self.analysis
        if len(analysis.directory) == self.keys_seen and len(analysis.generations.later_starts) == self.starts_seen:
            return []  # (reading the directory up to where it was read last costs a step a compile id)
        new = [place_parts(place) for place in compiles_read(analysis, self.frames, self.keys_seen, self.starts_seen)]
        for frame in dict.fromkeys(frame for frame, _ in new if frame not in self.by_frame):  # never built: read first now
            self.functions.setdefault(function_of(frame), []).append(frame)
        frames.update(frame for frame, _ in new)
        self.keys_seen, self.starts_seen = len(analysis.directory), len(analysis.generations.later_starts)
        return new


class LiveTimeline:
    """`Analysis.timeline()` of a log still being read (`LiveCompiles.compiles` on the run's axis),
    kept from one update to the next: the span of each compile that changed is built again
    (`timeline.compile_span`: its clock, metrics and phases are its own records', which logged
    something, so it changed), and the compile time of each frame those compiles count to
    (`timeline.frame_time`); the axis, lanes, buckets and the top frames are taken again over what
    is kept (`timeline.timeline_of`). All of them are built again when the run's first record moves
    (threads may log a little out of order): every span is measured from it. What it keeps is what
    `Analysis.timeline()` builds from the same store (tests/test_live_pictures.py checks it), and the
    analysis answers `timeline()` with it (the index and its `summary()` ask) until its store moves on."""

    def __init__(self, analysis: Analysis, compiles: LiveCompiles):
        self.analysis = analysis
        self.live_compiles = compiles
        self.origin: float | None = None
        self.spans: list[CompileSpan] = []  # position → its compile's span
        self.members: dict[Any, list[int]] = {}  # frame key → the positions of its compiles, in log order
        self.frames: dict[Any, FrameTime] = {}  # frame key → its compile time (frames with a known one)
        # the frames of `frames` most first, as `frame_times` sorts them: (-total, first compile's position, key),
        # kept sorted as frames change (a sort of them all at each update cost 8 ms at 4,000 frames)
        self.ranked: list[tuple[float, int, Any]] = []
        self.rank_of: dict[Any, tuple[float, int, Any]] = {}
        self.built = 0  # spans built by the last update (tests count them)
        self.position_of: dict[tuple[str, int], int] = {}  # (id, generation) → its position

    def update(self, changes: CompileChanges) -> Timeline:
        """The timeline after `LiveCompiles.refresh` made `changes`, handed to the analysis as its `timeline()`."""
        analysis = self.analysis
        compiles = self.live_compiles.compiles
        origin = run_origin(analysis)
        positions = {position for position, _, _ in changes.changed if position not in changes.settings_only}
        if origin != self.origin:
            self.origin = origin
            positions = set(range(len(compiles)))
        dirty: set[Any] = set()
        for position in sorted(positions):  # new positions come in order, each right after the last kept
            compile_ = compiles[position]
            span, key = compile_span(analysis, analysis.clock, compile_, origin), frame_key(compile_)
            if position == len(self.spans):
                self.spans.append(span)
                self.position_of[(span.id, span.generation)] = position
                self.members.setdefault(key, []).append(position)  # the latest compile of its frame
            else:  # a compile built again: of the same frame (its id and generation, all `frame_key` reads, stay)
                self.spans[position] = span
            dirty.add(key)
        self.built = len(positions)
        for key in dirty:
            self._frame(key)
        self._rank(dirty)
        found = self._timeline()
        keep_timeline(analysis, found)
        return found

    def _frame(self, key: Any) -> None:
        """Sum a frame's compile time again, over its compiles in log order, as `frame_times` does."""
        found = frame_time([(self.live_compiles.compiles[p], self.spans[p]) for p in self.members[key]])
        if found is None:
            self.frames.pop(key, None)
        else:
            self.frames[key] = found

    def _rank(self, dirty: set[Any]) -> None:
        """Place the frames whose time was summed again (`dirty`) in `ranked`. No two entries tie
        before their keys: a position is one compile's, of one frame."""
        if 8 * len(dirty) > len(self.rank_of):  # many (the first update, a moved origin): all sorted again
            self.rank_of = {key: (-found.total, self.members[key][0], key) for key, found in self.frames.items()}
            self.ranked = sorted(self.rank_of.values())
            return
        for key in dirty:
            old = self.rank_of.pop(key, None)
            if old is not None:
                at = bisect_left(self.ranked, old)
                if at < len(self.ranked) and self.ranked[at] is old:
                    del self.ranked[at]
                else:  # a NaN total (a hostile log's metrics) sorts nowhere in particular
                    self.ranked.remove(old)
            found = self.frames.get(key)
            if found is not None:
                self.rank_of[key] = entry = (-found.total, self.members[key][0], key)
                insort(self.ranked, entry)

    def _timeline(self) -> Timeline:
        # `frame_times` sorts by time, most first, ties in the order of their first compiles: `ranked`
        top = [self.frames[key] for _, _, key in self.ranked[:TOP_FRAMES]]
        return timeline_of(self.analysis, self._drawn(), top, len(self.frames), len(self.analysis.processes.pids))

    def _drawn(self) -> list[CompileSpan]:
        """The spans as a live picture draws them: a compile started and not ended is under way, until
        the last record so far (a full run of the same bytes calls it one whose metrics are missing)."""
        spans = list(self.spans)
        last_s = last_record_s(self.analysis)
        for compile_, _ in self.analysis.open_compiles():
            position = self.position_of.get((compile_.id, compile_.generation))
            if position is not None:
                spans[position] = under_way(spans[position], last_s)
        return spans
