"""Where compile time went: the phases of a compile, from its metrics and from chromium events.

Two sources say it. A compile's `compilation_metrics` split its time into nested totals (the whole
frame, the backend, Inductor, code generation), which `time_split` turns into consecutive phases.
Chromium B/E events time every span of the compiler; `PhaseTimer` pairs them as the log is read and
notes each finished span on the store (`Store.note_span`), and `pass_timings` picks out the FX
passes (`pass.<stage>.<name>` spans) among a compile's span totals.
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct

from ..model import CompileId, Record
from . import questions
from .facts import parse_compile_id
from .store import MetricsEntry, Store

# The consecutive phases of a compile's time, as its metrics nest them: (name, css-friendly key)
PHASES = (("Dynamo", "dynamo"), ("AOTAutograd", "aot"), ("Inductor", "inductor"), ("Code generation", "codegen"))
# `pass.<stage>.<name>` spans: the pipeline stage each stage name of the span is
PASS_STAGES = {"pre_grad_passes": "pre_grad", "joint_graph_passes": "joint", "post_grad_passes": "post_grad"}


class Phase(Struct, frozen=True):
    """One phase of a compile's forward time."""

    name: str  # "Dynamo", "AOTAutograd", "Inductor", "Code generation"
    key: str  # "dynamo", "aot", "inductor", "codegen"
    seconds: float


class TimeSplit(Struct, frozen=True):
    """A compile's forward time (`entire_frame_compile_time_s`), split into its phases."""

    total: float
    phases: tuple[Phase, ...]


def time_split(entry: MetricsEntry) -> TimeSplit | None:
    """The forward time of one compilation_metrics entry split into Dynamo / AOTAutograd / Inductor /
    code generation: each logged total includes the next (the backend's includes Inductor's, which
    includes code generation), so a phase is its total less the next one's. None when the forward
    time is unknown or zero."""
    entire = questions.seconds(entry.get("entire_frame_compile_time_s"))
    if entire is None or entire <= 0:
        return None
    backend = min(questions.seconds(entry.get("backend_compile_time_s")) or 0.0, entire)
    inductor = min(questions.seconds(entry.get("inductor_compile_time_s")) or 0.0, backend)
    codegen = min(questions.seconds(entry.get("code_gen_time_s")) or 0.0, inductor)
    values = (entire - backend, backend - inductor, inductor - codegen, codegen)
    return TimeSplit(entire, tuple(Phase(name, key, seconds) for (name, key), seconds in zip(PHASES, values, strict=True)))


def pass_timings(store: Store, key: CompileId | None) -> dict[str, list[tuple[str, float]]]:
    """The FX pass timings of a compile id's frame compile: its chromium `pass.<stage>.<name>` spans
    by pipeline stage, as (pass name, seconds), slowest first."""
    if key is None:
        return {}
    span_totals: dict[str, float] = store.phase_times.get(key.frame_key(), {})
    stages: dict[str, list[tuple[str, float]]] = {}
    for name, micros in span_totals.items():
        parts = name.split(".", 2)
        if len(parts) == 3 and parts[0] == "pass":
            stages.setdefault(PASS_STAGES.get(parts[1], parts[1]), []).append((parts[2], micros / 1e6))
    return {stage: sorted(rows, key=lambda r: -r[1]) for stage, rows in stages.items()}


def backward_times(store: Store, key: CompileId, generation: int = 0) -> list[float]:
    """Seconds of each lazy backward compile (bwd_compilation_metrics) logged under exactly this
    compile id, in this generation, in log order; unknown times are left out."""
    times = (
        questions.seconds(meta.get("inductor_compile_time_s"))
        for compile_id, line, meta in store.backward_metrics.get(key.frame_key(), [])
        if compile_id == key and store.generation_at(key, line) == generation
    )
    return [t for t in times if t is not None]


class PhaseTimer:
    """Pairs chromium B/E events into spans, as the log is read, and notes each finished one on the
    store with its nesting (the names of the spans open around it on its thread).

    Only open spans are kept: a big log holds 100,000s of events.
    """

    def __init__(self, store: Store):
        self.store = store
        self.open_events: dict[tuple[Any, ...], list[float]] = {}  # B events awaiting their E (none kept once closed)
        self.open_names: dict[tuple[Any, ...], list[str]] = {}  # (compile, tid) → names of the open spans, outermost first
        self._last_compile: tuple[Any, CompileId | None, int] = (None, None, 0)  # (args.compile_id text, its parse): see _compile_id

    def add(self, event: dict[str, Any], record: Record) -> None:
        """Add a B/E event's span to its frame compile's phase times (only small totals are kept)."""
        phase, name, ts = event.get("ph"), event.get("name"), event.get("ts")
        if phase not in ("B", "E") or not isinstance(name, str) or not isinstance(ts, (int, float)):
            return
        args = event.get("args")
        compile_id = self._compile_id(args.get("compile_id"), record.process) if isinstance(args, dict) else None
        if compile_id is None and record.compile_id is not None:
            compile_id = record.compile_id.frame_key()
        if compile_id is None:
            return
        tid = event.get("tid")
        key = (compile_id, name, tid)
        thread = (compile_id, tid)
        nesting = self.open_names.setdefault(thread, [])
        if phase == "B":
            self.open_events.setdefault(key, []).append(ts)
            nesting.append(name)
        elif self.open_events.get(key):
            opened = self.open_events[key]
            started = opened.pop()
            if not opened:  # closed spans leave nothing behind: a big log has 100,000s of them
                del self.open_events[key]
            duration = max(0.0, ts - started)
            depth = _last_index(nesting, name)
            path = tuple(nesting[: depth + 1]) if depth is not None else (name,)
            if depth is not None:
                del nesting[depth:]
            generation = self.store.generation_at(compile_id, record.lineno)
            self.store.note_span(compile_id, generation, name, path, duration)
        if not nesting:
            del self.open_names[thread]

    def _compile_id(self, text: Any, process: int) -> CompileId | None:
        """parse_compile_id(text) in the record's process, parsed once per run of events naming the
        same compile (a compile's events come together, and there are 100,000s of them in a big log)."""
        if type(text) is not str or text != self._last_compile[0] or process != self._last_compile[2]:
            self._last_compile = (text, parse_compile_id(text, process), process)
        return self._last_compile[1]


def _last_index(names: list[str], name: str) -> int | None:
    for index in range(len(names) - 1, -1, -1):
        if names[index] == name:
            return index
    return None
