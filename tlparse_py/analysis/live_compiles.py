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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

from msgspec import structs

from ..model import CompileId
from . import questions
from .compiles import Analysis, _follow, compiles_read, follow_config, keep_compiles, mark_unusual
from .configs import UnusualSetting
from .summary import CompileSummary

Function = tuple[int, int | None, int | None]  # (process, compiled autograd id, frame id): the frames of one compiled function


class CompileChanges(NamedTuple):
    """What one `LiveCompiles.refresh` changed in the list of compiles: (position, the compile it
    replaced or None, the compile). Compiles never move: a compile read later comes later in log
    order, a compile of an id in a later generation too (`Generations.in_log_order`)."""

    changed: list[tuple[int, CompileSummary | None, CompileSummary]]


def function_of(frame: CompileId) -> Function:
    return (frame.process, frame.compiled_autograd_id, frame.frame_id)


class LiveCompiles:
    """The compiles of one analysis, kept up to date piece by piece (`refresh`)."""

    def __init__(self, analysis: Analysis):
        self.analysis = analysis
        self.keys_seen = 0  # directory keys taken into `frames`
        self.starts_seen = 0  # `later_starts` taken into `compiles`
        self.frames: dict[CompileId, list[CompileId]] = {}  # frame compile → its attempts, in directory order
        self.functions: dict[Function, list[CompileId]] = {}  # a function's frame compiles, in the same order
        self.by_frame: dict[CompileId, dict[int, CompileSummary]] = {}  # frame compile → generation → its compile
        self.compiles: list[CompileSummary] = []  # in log order: `Analysis.compiles()`
        self.at: dict[tuple[CompileId, int], int] = {}  # (frame, generation) → position in `compiles`
        self.index: dict[tuple[CompileId, int], CompileSummary] = {}  # (frame, generation) → compile (`compile_of`)
        self.spans: dict[tuple[CompileId, int], float] = {}  # `backward_spans` at the last refresh
        self.built = 0  # compiles built (`_compile` calls), all refreshes together: what tests count
        self.config_counts: Counter[int] = Counter()  # compiles per logged config (`compiles.config_counts`), kept as they change
        self.unusual: dict[int, list[UnusualSetting]] = {}  # `ConfigSnapshots.unusual` at the last refresh

    def refresh(self, touched: Iterable[CompileId | None]) -> CompileChanges:
        """Build again the compiles of the functions that logged something since the last refresh
        (`touched`: the directory keys of the records read), and hand them to the analysis as its
        `compiles()`; which positions changed."""
        analysis = self.analysis
        frames = {key.frame_key() for key in touched if key is not None and questions.is_compile(key)}
        new = self._take_new(frames)
        spans = analysis.backward_spans
        if spans != self.spans:  # chromium events, logged outside any compile id, add to a compile's backward time
            frames.update(key[0] for key, _ in spans.items() - self.spans.items() if key[0] in self.frames)
            self.spans = dict(spans)
        changed: list[tuple[int, CompileSummary | None, CompileSummary]] = []
        for function in {function_of(frame) for frame in frames}:
            latest: dict[int, CompileSummary] = {}  # generation → the function's compile before
            for frame in self.functions[function]:
                built = {}
                for generation in analysis.generations_of(frame):
                    compile_ = analysis._compile(frame, self.frames[frame], generation)
                    _follow(compile_, latest.get(generation))
                    follow_config(compile_, latest.get(generation), analysis.configs)
                    latest[generation] = built[generation] = self.index[(frame, generation)] = compile_
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
        changed += self._mark_unusual(changed)
        keep_compiles(analysis, self.compiles, self.index)
        return CompileChanges(changed)

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
            if compile_.config in moved and id(compile_) not in fresh:
                again = structs.replace(compile_, config_unusual=list(unusual.get(compile_.config, ())))
                self.compiles[position] = self.index[(again.key, again.generation)] = self.by_frame[again.key][again.generation] = again
                replaced.append((position, compile_, again))
        return replaced

    def _take_new(self, frames: set[CompileId]) -> list[tuple[CompileId, int]]:
        """The compiles read since the last refresh, (frame, generation) in log order, after every
        compile listed (`compiles_read`); their frames join `frames`, the frames to build again."""
        analysis = self.analysis
        if len(analysis.directory) == self.keys_seen and len(analysis.generations.later_starts) == self.starts_seen:
            return []  # (reading the directory up to where it was read last costs a step a compile id)
        new = compiles_read(analysis, self.frames, self.keys_seen, self.starts_seen)
        for frame in dict.fromkeys(frame for frame, _ in new if frame not in self.by_frame):  # never built: read first now
            self.functions.setdefault(function_of(frame), []).append(frame)
        frames.update(frame for frame, _ in new)
        self.keys_seen, self.starts_seen = len(analysis.directory), len(analysis.generations.later_starts)
        return new
