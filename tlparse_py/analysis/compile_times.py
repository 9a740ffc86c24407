"""What each compile took: its forward and lazy backward compile times, from its metrics.

A layer of the analysis between the store (what was read) and the compiles (`compiles.Analysis`):
the times every compile summary, page and total asks for, answered here once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..model import CompileId
from . import questions
from .store import MetricsEntry, Store
from .summary import UNKNOWN_TIME, CompileTime


class CompileTimes(Store):
    """The store, with what each compile took."""

    def in_generation(self, key: CompileId | None, generation: int) -> Callable[[int], bool]:
        """Whether a fact logged at a line belongs to this generation of the compile id."""
        return lambda line: self.generation_at(key, line) == generation

    def compile_time(self, attempts: list[CompileId], metrics: list[MetricsEntry], generation: int = 0) -> CompileTime:
        forward = next((s for m in metrics if (s := questions.seconds(m.get("entire_frame_compile_time_s"))) is not None), None)
        mine = self.in_generation(attempts[0], generation)
        backward_times = [
            questions.seconds(b.get("inductor_compile_time_s")) for key in attempts for line, b in self.backward_metrics_of(key) if mine(line)
        ]
        known = [t for t in backward_times if t is not None]
        backward = sum(known) if known else None
        total = None if forward is None else forward + (backward or 0.0)
        inside = self.backward_inside_forward(attempts[0].frame_key(), generation) if forward is not None else None
        if forward is None and backward is None:
            return UNKNOWN_TIME  # shared: most compiles of a log with 100,000s of them logged no time
        return CompileTime(forward, backward, total, inside)

    def backward_inside_forward(self, frame: CompileId, generation: int) -> float | None:
        """Seconds the forward compile spent compiling the backward graph: AOTAutograd compiles it
        at once, not lazily, when it cannot defer it (dynamic shapes); no bwd_compilation_metrics
        is logged then, only the chromium `bw_compiler` span inside `entire_frame_compile`."""
        microseconds = self.backward_spans.get((frame, generation))
        return round(microseconds / 1e6, 6) if microseconds is not None else None

    def backward_metrics_of(self, key: CompileId) -> list[tuple[int, dict[str, Any]]]:
        """(log line, bwd_compilation_metrics) logged under exactly this compile id."""
        return [(line, meta) for compile_id, line, meta in self.backward_metrics.get(key.frame_key(), []) if compile_id == key]

    def logged_time(self, key: CompileId) -> CompileTime:
        """The compile time logged under exactly this id (the attempt whose metrics hold it), in the
        first generation that logged one: its forward, plus the lazy backward compiles logged under it."""
        entries = self.own_metrics(key)
        first = next((m for m in entries if questions.seconds(m.get("entire_frame_compile_time_s")) is not None), None)
        mine = [m for m in entries if first is not None and m.generation == first.generation]
        return self.compile_time([key], mine, first.generation) if first is not None else UNKNOWN_TIME
