"""Where compile time went: the phases of a compile, from its metrics and from chromium events.

Two sources say it. A compile's `compilation_metrics` split its time into nested totals (the whole
frame, the backend, Inductor, code generation), which `time_split` turns into consecutive phases,
each named by what the metrics and the compile's spans say ran (a backend of the program's own runs
neither AOTAutograd nor Inductor: its phases are Dynamo and the backend, the rest "not run").
Chromium B/E events time every span of the compiler; `PhaseTimer` pairs them as the log is read and
notes each finished span on the store (`Store.note_span`), and `pass_timings` picks out the FX
passes (`pass.<stage>.<name>` spans) among a compile's span totals.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from msgspec import Struct

from ..model import CompileId, Record
from . import questions
from .facts import parse_compile_id
from .store import MetricsEntry, Store

# `pass.<stage>.<name>` spans: the pipeline stage each stage name of the span is
PASS_STAGES = {"pre_grad_passes": "pre_grad", "joint_graph_passes": "joint", "post_grad_passes": "post_grad"}
# Chromium spans that say which part of the compiler ran inside the backend. Only what a log's
# spans or metrics say ran is named: a backend of the program's own (one returning gm.forward)
# runs neither AOTAutograd nor Inductor, and its time is the backend's, not AOTAutograd's.
BACKEND_SPAN = "backend_compile"
AOT_SPAN = "create_aot_dispatcher_function"  # AOTAutograd traced the graph
AOT_CACHE_SPAN_PREFIX = "AOTAutogradCache."  # AOTAutograd loaded the compiled graph from its cache instead
INDUCTOR_SPANS = frozenset({"inductor_compile", "compile_fx_inner", "fx_codegen_and_compile"})
CODEGEN_SPAN = "code_gen"


class Phase(Struct, frozen=True):
    """One phase of a compile's forward time."""

    name: str  # "Dynamo", "AOTAutograd", "AOTAutograd cache load", "Backend", "Inductor", "Code generation"
    key: str  # css-friendly: "dynamo", "aot", "backend", "inductor", "codegen"
    seconds: float | None  # None: it ran, but the log's times do not tell how long


class TimeSplit(Struct, frozen=True):
    """A compile's forward time (`entire_frame_compile_time_s`), split into the phases that ran."""

    total: float
    phases: tuple[Phase, ...]
    not_run: tuple[str, ...] = ()  # the usual phases the log says did not run: no time and no span of theirs


def time_split(entry: MetricsEntry, spans: Collection[str] = frozenset()) -> TimeSplit | None:
    """The forward time of one compilation_metrics entry split into the phases that ran: Dynamo, the
    backend (AOTAutograd, or the backend's own work when AOTAutograd did not run), Inductor and code
    generation. Each logged total includes the next (the backend's includes Inductor's, which
    includes code generation), so a phase is its total less the next one's. A phase is named only
    when the metrics time it or one of the compile's chromium `spans` (names) shows it ran; the
    others are `not_run`, never 0. None when the forward time is unknown or zero."""
    entire = questions.seconds(entry.get("entire_frame_compile_time_s"))
    if entire is None or entire <= 0:
        return None
    levels: list[tuple[str, str, float | None]] = [("Dynamo", "dynamo", entire)]
    backend = questions.seconds(entry.get("backend_compile_time_s"))
    if backend is None and BACKEND_SPAN not in spans:
        return _split(entire, levels, ("Backend", "Inductor", "Code generation"))
    name, key = _backend_phase(entry, spans)
    levels.append((name, key, backend))
    # with spans logged, a backend phase that is not AOTAutograd's says AOTAutograd did not run
    not_aot = ("AOTAutograd",) if key == "backend" and spans else ()
    inductor = questions.seconds(entry.get("inductor_compile_time_s"))
    if inductor is None and not INDUCTOR_SPANS.intersection(spans):
        return _split(entire, levels, (*not_aot, "Inductor", "Code generation"))
    levels.append(("Inductor", "inductor", inductor))
    codegen = questions.seconds(entry.get("code_gen_time_s"))
    if codegen is None and CODEGEN_SPAN not in spans:
        return _split(entire, levels, (*not_aot, "Code generation"))
    levels.append(("Code generation", "codegen", codegen))
    return _split(entire, levels, not_aot)


def _backend_phase(entry: MetricsEntry, spans: Collection[str]) -> tuple[str, str]:
    """What the backend's own time (less Inductor's) was spent on, as far as the log says."""
    if AOT_SPAN in spans or (not spans and questions.seconds(entry.get("inductor_compile_time_s")) is not None):
        return "AOTAutograd", "aot"  # without spans: Inductor's time is logged, and torch.compile reaches Inductor through AOTAutograd
    if any(name.startswith(AOT_CACHE_SPAN_PREFIX) for name in spans):
        return "AOTAutograd cache load", "aot"
    return "Backend", "backend"


def _split(entire: float, levels: list[tuple[str, str, float | None]], not_run: tuple[str, ...]) -> TimeSplit:
    """Nested totals (each within the one before; None: unknown) as consecutive phases: each its
    total less the next one's, unknown when either is; a total past the one it is within is capped."""
    totals: list[float | None] = []
    for _, _, total in levels:
        within = next((t for t in reversed(totals) if t is not None), entire)
        totals.append(min(total, within) if total is not None else None)
    phases = []
    for index, (name, key, _) in enumerate(levels):
        own, inner = totals[index], totals[index + 1] if index + 1 < len(totals) else 0.0
        phases.append(Phase(name, key, own - inner if own is not None and inner is not None else None))
    return TimeSplit(entire, tuple(phases), not_run)


def compile_time_split(store: Store, entry: MetricsEntry) -> TimeSplit | None:
    """`time_split` of a metrics entry, with the chromium spans its compile logged (in its generation)."""
    return time_split(entry, span_names(store, entry.compile_id, entry.generation))


def span_names(store: Store, key: CompileId | None, generation: int = 0) -> frozenset[str]:
    """The names of the chromium spans a frame compile logged, in one generation of its id."""
    if key is None:
        return frozenset()
    tree: dict[tuple[str, ...], float] = store.phase_trees.get((key.frame_key(), generation), {})
    return frozenset(name for path in tree for name in path)


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
