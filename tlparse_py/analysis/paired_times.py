"""The frames a diff page draws (`compared.FrameTimes`): the TOP_FRAMES frames with the most compile
time in either run, each with BASE's and NEW's time by part, its paired compiles' verdicts and the
graph breaks that came or went in it.

Computed once, while `comparison.compare` makes the frame rows: a frame is weighed as its row is
made (max(BASE, NEW) of its row's compile time) and kept only while it is among the TOP_FRAMES
heaviest, so a diff of 10^6 frames holds TOP_FRAMES of these. Every figure is the comparison's: a
side's time is its frame row's, the pairs' verdicts are `comparison.CompilePair.verdict` (the
pairs the ratio takes, leaves apart, or counts as one run's work), and the graph breaks are the rows
of `Comparison.graph_breaks`, placed on the frame whose compiles logged them. The parts are the
index's chart's (`timeline.parts`, `timeline.PART_NAMES`), from each side's summary.json `timeline`.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

from .compared import FrameRow, FrameTime, FrameTimes, PairTime, SideTime
from .pairing import BreakSite, Frame
from .summary import CompileSummary, Summary
from .timeline import PART_NAMES, CompileSpan, PhaseSpan, parts

TOP_FRAMES = 10  # the frames the diff page draws; the table under the picture and diff.json's `frames` have them all
# summary.json's `timeline` names each forward phase as `phases.Phase.name`; the part of the index's chart it is
PHASE_PARTS = {"Dynamo": "dynamo", "AOTAutograd": "aot", "AOTAutograd cache load": "aot", "Backend": "backend",
               "Inductor": "inductor", "Code generation": "codegen"}


class Phases:
    """A run's compiles' forward phases, as its summary's `timeline` lists them (one item a compile, in the
    order of its compiles). A summary without one (an older summary.json) splits no time: a compile's
    forward time is then one part, the forward time the log does not split."""

    def __init__(self, summary: Summary) -> None:
        timeline = summary.timeline
        self.items: Sequence[dict[str, Any]] = timeline if timeline is not None and len(timeline) == len(summary.compiles) else ()

    def span(self, position: int, compile_: CompileSummary) -> CompileSpan:
        """The compile at `position` of its run, with its phases (none when the timeline's item there is another compile's)."""
        item = self.items[position] if position < len(self.items) else None
        phases: tuple[PhaseSpan, ...] = ()
        if item is not None and item.get("id") == compile_.id and item.get("generation") == compile_.generation:
            phases = tuple(_phase(p) for p in item.get("phases") or () if isinstance(p, dict))
        return CompileSpan(compile_.id, compile_.generation, compile_.process, None, None, compile_.status, compile_.cause, False, phases)

    def side(self, frame: Frame | None, compiles: list[CompileSummary], seconds: float | None) -> SideTime:
        """One run's compile time of a frame (`seconds`, its row's), by part, summed over its compiles in log order."""
        found: dict[str, float] = {}
        positions = array("I", frame.positions) if frame is not None else array("I")
        for position, compile_ in zip(positions, compiles):
            for key, part in parts(compile_, self.span(position, compile_)):
                found[key] = found.get(key, 0.0) + part
        rest = (seconds or 0.0) - sum(found.values())
        if rest > 1e-6:  # a compile whose total is known and its forward time not: time the log does not split
            found["unsplit"] = found.get("unsplit", 0.0) + rest
        return SideTime(seconds, {key: round(found[key], 6) for key in PART_NAMES if found.get(key)})


def _phase(item: dict[str, Any]) -> PhaseSpan:
    name = str(item.get("name", ""))
    seconds = item.get("seconds")
    return PhaseSpan(name, PHASE_PARTS.get(name, "backend"), None, seconds if isinstance(seconds, (int, float)) else None)


class BreakMarks:
    """Which graph break rows (places in a list of `GraphBreaks.new` or `.gone`) each compile logged:
    (compile id, generation) → places. Only the rows' own compiles are held: a few, however big the runs."""

    def __init__(self, sites: Iterable[BreakSite]) -> None:
        self.at: dict[tuple[str, int], list[int]] = {}
        for place, site in enumerate(sites):
            for brk in site.breaks:
                found = self.at.setdefault((brk.id, brk.generation), [])
                if not found or found[-1] != place:
                    found.append(place)

    def of(self, compiles: Iterable[CompileSummary]) -> list[int]:
        """The rows any of these compiles logged, in the list's order."""
        if not self.at:
            return []
        return sorted({place for c in compiles for place in self.at.get((c.id, c.generation), ())})


class TopFrames:
    """The TOP_FRAMES frames with the most compile time in either run, gathered as the frame rows are made."""

    def __init__(self, base: Summary, new: Summary, new_breaks: Iterable[BreakSite], gone_breaks: Iterable[BreakSite],
                 cap: int | None = None) -> None:
        self.phases = Phases(base), Phases(new)
        self.new_breaks, self.gone_breaks = BreakMarks(new_breaks), BreakMarks(gone_breaks)
        self.cap = TOP_FRAMES if cap is None else cap
        self.with_time = 0
        self.heap: list[tuple[float, int, FrameTime]] = []  # (weight, -index, frame): the lightest, then the latest, first

    def wants(self, index: int, row: FrameRow) -> bool:
        """Whether the frame at `index` (its row made) is among the heaviest so far (and counts it when it has a time)."""
        time = row.compile_time_s
        if time.base is None and time.new is None:
            return False
        self.with_time += 1
        if self.cap <= 0:
            return False
        return len(self.heap) < self.cap or (_weight(row), -index) > self.heap[0][:2]

    def add(self, index: int, row: FrameRow, frames: tuple[Frame | None, Frame | None],
            compiles: tuple[list[CompileSummary], list[CompileSummary]], pairs: list[PairTime]) -> None:
        """The frame at `index`, which `wants` took: its row, its frame and compiles in each run, its pairs' times and verdicts."""
        time = row.compile_time_s
        frame = FrameTime(
            index=index, frame=row.frame, where=row.where, inside=row.inside, presence=row.presence, regression=row.regression,
            base=self.phases[0].side(frames[0], compiles[0], time.base), new=self.phases[1].side(frames[1], compiles[1], time.new),
            compile_time_s=time, pairs=pairs, recompiles=row.recompiles, new_recompile_reasons=len(row.new_recompile_reasons),
            new_graph_breaks=self.new_breaks.of(compiles[1]), gone_graph_breaks=self.gone_breaks.of(compiles[0]),
        )
        item = (_weight(row), -index, frame)
        if len(self.heap) < self.cap:
            heapq.heappush(self.heap, item)
        else:
            heapq.heapreplace(self.heap, item)

    def done(self) -> FrameTimes:
        ordered = sorted(self.heap, key=lambda item: (-item[0], -item[1]))
        return FrameTimes([frame for _, _, frame in ordered], self.cap, self.with_time)


def _weight(row: FrameRow) -> float:
    """How heavy a frame is in the picture: its compile time in the run where it took longer."""
    time = row.compile_time_s
    return max(time.base or 0.0, time.new or 0.0)
