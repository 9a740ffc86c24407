"""What the reading pass notes about a log: the typed facts the analysis is built from.

It keeps metadata only (directory entries, stacks, small metric summaries, counters); payloads
and per-record summaries live in the payload store and the record spool, and the facts only a
compile's own pages show (specialisations, span times) in the fact spool: each read back one
compile id at a time, so memory does not grow with the log.
"""

from __future__ import annotations

import bisect
import itertools
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from typing import Any, NamedTuple, TypeVar, overload

import msgspec

from ..model import Artifact, CompileId, CompileIds, DiagnosticLog, Processes, Record, Stats, StringTable
from ..paths import compile_page_url
from ..reading.inputs import LeftOut
from .configs import ConfigSnapshots
from .metric_fields import MetricFields, Packed
from .metric_fields import pack as pack_fields
from .export_shapes import ExportShapes
from .export_trace import ExportTrace
from .program import ProgramExit
from .spools import FactSpool, SpanTotals
from .stacks import Frame, StackTrie
from .vllm import VllmLog
from .wrapper import WrappedModels

# Restarts torch logs as a bare exception class: what each means, in words. Compiler-collective
# restarts happen by design on every rank (Dynamo traces again with the decisions all ranks agreed
# on), so they are not graph breaks.
BY_DESIGN = "Compiler collectives:"
RESTART_CLASSES = {
    "CompileCollectiveRestartAnalysis": f"{BY_DESIGN} Dynamo traced the frame again with the dynamic-shape decisions all ranks agreed on (by design, not a graph break)",
    "SpeculationRestartAnalysis": "Speculation failed: Dynamo traced the frame again without the path it had speculated on",
    "TensorifyScalarRestartAnalysis": "Dynamo traced the frame again to turn a Python scalar into a tensor input",
}
_T = TypeVar("_T")
_CLASS_REPR = re.compile(r"^<class '(?:[\w.]+\.)?(\w+)'>$")


def readable_restart(reason: str) -> str:
    """A restart reason in words: torch logs some as `<class '...RestartAnalysis'>` only."""
    match = _CLASS_REPR.match(reason.strip())
    if match is None:
        return reason
    return RESTART_CLASSES.get(match.group(1), f"Dynamo restarted the analysis ({match.group(1)})")


# bwd_compilation_metrics fields kept for compile times (the record itself is on its own page)
BACKWARD_SUMMARY_FIELDS = ("inductor_compile_time_s",)


class Reuse(NamedTuple):
    """A stack-trie terminal for a compile after reset(): which generation (> 0) it started in."""

    compile_id: CompileId
    generation: int


class MetricsEntry(msgspec.Struct, gc=False):  # one a compile; no reference cycle can run through it: untracked, 16 bytes less
    compile_id: CompileId | None
    # the compilation_metrics page (`url`): its number alone when it lies in the compile id's folder
    # under the usual name (most do: a url string held 90 bytes a compile), else its url
    page: str | int
    # METRIC_SUMMARY_FIELDS, as `metric_fields.pack` packed them when read from a log (read through
    # `fields`: a view made when asked, where one kept per compile cost 40 bytes), or a mapping
    kept_fields: Mapping[str, Any] | Packed
    generation: int = 0  # > 0: compiled after torch._dynamo.reset() (`Generations`)
    config: int | None = None  # the number of the config it logged (`Store.configs`); None: none logged

    @property
    def fields(self) -> Mapping[str, Any]:
        kept = self.kept_fields
        return MetricFields.of(kept) if type(kept) is bytes or type(kept) is tuple else kept  # type: ignore[return-value]

    def get(self, name: str) -> Any:
        return self.fields.get(name)

    @property
    def url(self) -> str:
        """The compilation_metrics page ("" until it is written)."""
        page = self.page
        return page if type(page) is str else _metrics_url(self.compile_id, page)  # type: ignore[arg-type]

    def page_written(self, url: str) -> None:
        number = url[url.rfind("_") + 1 : -len(".html")]
        self.page = url
        if number.isdigit() and number[0] != "0" and _metrics_url(self.compile_id, int(number)) == url:
            self.page = int(number)


def as_list(kept: _T | list[_T] | None) -> list[_T]:
    """The items of a table value that keeps a lone item bare and a list only from the second
    (`MetricsByFrame`, `KeysByFunction`, `compiles_read`'s frames): 100,000s of one-item lists cost
    a list each. A new list for a lone item; None (absent) is none."""
    if kept is None:
        return []
    return kept if isinstance(kept, list) else [kept]


def compile_place(key: CompileId, generation: int) -> CompileId | tuple[CompileId, int]:
    """What a compile (frame compile, generation) is keyed by in tables of every compile: its frame
    compile alone in the first generation (most compiles: no tuple a compile), else the pair (a
    pair is never equal to a compile id: its length differs)."""
    return (key, generation) if generation else key


def place_parts(place: CompileId | tuple[CompileId, int]) -> tuple[CompileId, int]:
    """(frame compile, generation) of a `compile_place`."""
    if type(place) is tuple:  # (a CompileId is a tuple of another type)
        return place  # type: ignore[return-value]
    return place, 0  # type: ignore[return-value]


def _metrics_url(compile_id: CompileId | None, number: int) -> str:
    return f"{compile_id.dirname if compile_id is not None else ''}/compilation_metrics_{number}.html"


class MetricsByFrame(Mapping["CompileId | None", "list[MetricsEntry]"]):
    """Frame compile → its metrics entries, in the order they came (a list read back for each ask).
    Most frame compiles log one, kept as it is, not in a list: a log may hold 100,000s."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[CompileId | None, MetricsEntry | list[MetricsEntry]] = {}

    def add(self, key: CompileId | None, entry: MetricsEntry) -> tuple[int, int]:
        """Note `entry`; returns (the place of `key` among the keys, the entry's place under it)."""
        entries = self._entries
        known = entries.get(key)
        if known is None:
            entries[key] = entry
            return len(entries) - 1, 0
        if isinstance(known, list):
            known.append(entry)
            return -1, len(known) - 1
        entries[key] = [known, entry]
        return -1, 1

    def place_of(self, key: CompileId | None) -> int:
        """The place of `key` among the keys (a pass over them: asked only for a frame compile's failed later entry)."""
        return next(at for at, known in enumerate(self._entries) if known == key)

    def last(self, key: CompileId | None) -> MetricsEntry:
        known = self._entries[key]
        return known[-1] if isinstance(known, list) else known

    def __getitem__(self, key: CompileId | None) -> list[MetricsEntry]:
        return as_list(self._entries[key])

    @overload
    def get(self, key: CompileId | None, /) -> list[MetricsEntry] | None: ...
    @overload
    def get(self, key: CompileId | None, default: list[MetricsEntry] | _T, /) -> list[MetricsEntry] | _T: ...

    def get(self, key: CompileId | None, default: Any = None) -> Any:
        known = self._entries.get(key)
        return default if known is None else as_list(known)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[CompileId | None]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


class LoggedBreak(msgspec.Struct):
    """One `dynamo_graph_break_reason` artifact, reduced to what groups graph breaks."""

    compile_id: CompileId | None
    reason: str  # the headline, e.g. "Failed to trace builtin operator"
    explanation: str
    location: str  # the user code line, "file.py:23"
    url: str  # the artifact with the full text
    line: int = 0  # its line in the log (which generation of a reused compile id logged it)
    source: str = ""  # the text of the user code line
    function: str = ""  # the function it is in
    registry_id: str = ""  # torch's graph-break registry id ("GB0123"), when torch wrote it
    hints: tuple[str, ...] = ()
    doc_url: str = ""
    library_location: str = ""  # where it broke, when that is inside torch or another library
    skips_frame: bool = False  # torch gave up on the frame, which then ran eagerly


class CacheEvent(msgspec.Struct):
    """One cache lookup (FX graph cache, AOTAutograd cache) and its outcome."""

    compile_id: CompileId | None
    cache: str  # "fx_graph" / "aotautograd" / ...
    state: str  # hit / miss / bypass
    key: str
    reason: str  # why it was bypassed, when it was
    time_saved_ns: int | None
    url: str
    line: int = 0


class ExportFailure(msgspec.Struct):
    """An issue torch.export / draft_export ran into (tlparse's export report rows)."""

    failure_type: str
    meta: dict[str, Any]
    compile_id: CompileId | None
    lineno: int
    url: str = ""  # its symbolic_guard_information page, in export mode


class RuntimeEstimate(msgspec.Struct):
    """An `inductor_runtime_and_tensor_meta` artifact: estimated runtime per op, and a tensor-metadata fingerprint."""

    number: int  # the artifact's global number (its place in log order)
    compile_id: str
    graph: str  # the compile directory (graphs are paired across ranks by it)
    ops: list[dict[str, Any]]  # [{name, estimated_runtime_ns}]
    fingerprint: str


class CollectiveSchedule(msgspec.Struct):
    """An `inductor_collective_schedule` artifact: the collective ops Inductor scheduled, in order."""

    number: int
    compile_id: str
    graph: str
    ops: list[str]


class ExecutionOrder(msgspec.Struct):
    number: int
    order: list[str]  # compile ids in the order their graphs ran


class Agreement(msgspec.Struct):
    """A compiler-collective artifact: state ranks exchange to agree on compile decisions."""

    compile_id: str
    name: str
    digest: str
    line: str  # its first line
    url: str
    role: str = ""  # its kind's `collective`: "local_state", "sync_decision", "spmd_mismatch"


class CacheMark(msgspec.Struct):
    number: int
    mark: str  # tlparse's ✅❌❓ suffix
    compile_id: str
    file: str


class CompileFingerprint(msgspec.Struct):
    """What one compile id produced on one rank, normalised (`facts.normalise_graph`/`normalise_code`)
    so run-to-run noise does not count: what cross-rank comparison judges divergence on."""

    compile_id: str  # display label, attempt included: `[1/0]`, `[0/0_1]`
    frame: str  # its frame compile (`[0/0]`), whose dynamic sources mask its input sizes
    graphs: dict[str, list[str]] = msgspec.field(default_factory=dict)  # "dynamo"/"post_grad"/"output_code" → digests, in log order
    # kind → the first such graph's first normalised lines, joined and compressed: every compile of a
    # big log keeps some, and only a side-by-side view of the few that differ across ranks reads them
    packed_lines: dict[str, bytes] = msgspec.field(default_factory=dict)
    inputs: list[dict[str, Any]] = msgspec.field(default_factory=list)  # describe_tensor: {key, dtype, size, source}, in order

    def add(self, kind: str, digest: str, lines: list[str]) -> None:
        self.graphs.setdefault(kind, []).append(digest)
        if kind not in self.packed_lines:
            self.packed_lines[kind] = zlib.compress("\n".join(lines).encode("utf-8", "surrogatepass"), 1)

    @property
    def lines(self) -> dict[str, list[str]]:
        """kind → the first such graph's first normalised lines."""
        return {kind: zlib.decompress(data).decode("utf-8", "surrogatepass").split("\n") for kind, data in self.packed_lines.items()}


class DistributedFacts(msgspec.Struct):
    """What multi-rank reports compare across ranks, noted while each rank is read.

    Compile ids are display labels (`[0/1]`), so the facts travel between processes as they are.
    """

    runtime: list[RuntimeEstimate] = msgspec.field(default_factory=list)
    schedules: list[CollectiveSchedule] = msgspec.field(default_factory=list)
    execution_orders: list[ExecutionOrder] = msgspec.field(default_factory=list)
    # compile id → (collective call counts in its first output code, wait_tensor calls)
    code_collectives: dict[str, tuple[dict[str, int], int]] = msgspec.field(default_factory=dict)
    agreements: list[Agreement] = msgspec.field(default_factory=list)
    dynamic_sources: dict[str, set[str]] = msgspec.field(default_factory=dict)  # frame compile → dynamic dims
    cache: list[CacheMark] = msgspec.field(default_factory=list)  # filled once reading is done
    fingerprints: dict[str, CompileFingerprint] = msgspec.field(default_factory=dict)  # compile id → content, in log order

    def fingerprint(self, compile_id: CompileId | None) -> CompileFingerprint:
        """The fingerprint of a compile id, created at its first noted record."""
        label = label_of(compile_id)
        found = self.fingerprints.get(label)
        if found is None:
            frame = str(compile_id.frame_key()) if compile_id is not None else label
            found = self.fingerprints[label] = CompileFingerprint(label, frame)
        return found


def label_of(compile_id: CompileId | None) -> str:
    """A compile id as shown, attempt included: `[0/1]`, `[0/1_1]`, `(unknown)`."""
    return "(unknown)" if compile_id is None else str(compile_id.directory_key())


def subgraph_of(record: Record) -> str | None:
    """The subgraph a record's files belong to: its envelope's `subgraph_name` (None when absent or
    empty). Kept on each directory entry (`Artifact.subgraph`); the index's list of a compile's
    files opens a group at each change of it, as upstream tlparse does after 0.4.3."""
    value = record.envelope.get("subgraph_name")
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else str(value)


def graph_of(compile_id: CompileId | None) -> str:
    """The compile directory a graph's files live in (how tlparse names graphs across ranks)."""
    return "unknown" if compile_id is None else compile_id.dirname


# Stages that run before AOTAutograd splits forward from backward: their graphs have no lineage.
WHOLE_GRAPH_STAGES = ("dynamo", "ddp", "pre_grad", "recompile_pre_grad", "joint", "compiled_autograd")


# What a compile has logged so far that tells forward from backward, packed in an int (a log may hold
# 100,000s of compiles): whether it trains (logged a backward or joint graph), whether it is inference,
# and how many output codes it logged. AOTAutograd logs the forward and backward graphs when it
# partitions; Inductor then compiles the forward, and the backward (lazily, at the first backward call,
# after `compilation_metrics`, or right after the forward when lowering is not lazy). So in a training
# compile the first Inductor pipeline, up to its output code, is the forward, and the next one the backward.
_TRAINING, _INFERENCE, _CODE = 1, 2, 4


def lineage_step(state: int, stage: str, declared: str) -> tuple[int, str]:
    """A compile's lineage state after it logged a graph (`stage`; "" for generated code), and the graph's lineage."""
    if declared in ("backward", "joint"):
        state |= _TRAINING
    elif declared == "inference":
        state |= _INFERENCE
    return state + _CODE if not stage else state, graph_lineage(state, stage, declared)  # generated code ends an Inductor pipeline


def graph_lineage(state: int, stage: str, declared: str) -> str:
    """The lineage of a graph (`stage`; "" for generated code) of a compile whose lineage state is `state`."""
    if declared:
        return declared
    if stage in WHOLE_GRAPH_STAGES:
        return ""
    if state & _INFERENCE:
        return "inference"
    if state & _TRAINING:
        return "forward" if state < _CODE else "backward"
    return ""


class FailureRow(msgspec.Struct):
    compile_id: CompileId | None
    url: str
    failure_type: str  # "RestartAnalysis" for restarts, else the exception type
    description: str
    source: str  # "file:line" of the user frame, for failures
    generation: int = 0  # its compile's (`MetricsEntry.generation`)


class InputInfo(msgspec.Struct, eq=False):  # one per log: never compared or printed
    path: str
    size: int
    others: list[str] = msgspec.field(default_factory=list)  # other logs in the folder we did not read
    also: list[str] = msgspec.field(default_factory=list)  # further logs read into this report
    sizes: dict[str, int] = msgspec.field(default_factory=dict)  # bytes of each further log
    left_out: list[LeftOut] = msgspec.field(default_factory=list)  # logs of the folder not read, and why (the index's top)
    every_log: bool = False  # every log of the folder was read (--all-runs, or a folder made for one run)
    # how the program that wrote the logs ended, when `tlparse-py run` ran it (a fact of the run, not of
    # its logs); None for logs read without it, or while the program still runs (a live report)
    program: ProgramExit | None = None

    def files(self) -> list[tuple[str, int | None]]:
        """(path, bytes) of every log read into the report."""
        return [(self.path, self.size)] + [(name, self.sizes.get(name)) for name in self.also]


class FrameCompiles:
    """A set of frame compiles of one process (`Generations.current`). Most are `[f/c]` with a frame
    id torch numbered from 0 and a frame compile id below 8: each is a bit of its frame id's byte
    (a set of 100,000s of ids cost 52 bytes an id); the others are in a set. The bytes grow with
    the frame ids kept there, by at most 8 a frame compile added (a frame id far past those is
    kept in the set): a log naming frame id 4,000,000,000 costs no 4 GB."""

    __slots__ = ("_bits", "_others", "_added")

    def __init__(self) -> None:
        self._bits = bytearray()
        self._others: set[CompileId] = set()
        self._added = 0  # frame compiles kept as bits

    @staticmethod
    def _frame(key: CompileId) -> int:
        """The frame id whose byte keeps `key`'s bit; -1: it is kept in the set."""
        frame, compile_ = key.frame_id, key.frame_compile_id
        if key.compiled_autograd_id is None and key.attempt == 0 and type(frame) is int and type(compile_) is int and 0 <= compile_ < 8:
            return frame
        return -1

    def add(self, key: CompileId) -> None:
        frame = self._frame(key)
        if frame < 0 or frame >= 8 * self._added + 4096:
            self._others.add(key)
            return
        bits = self._bits
        if frame >= len(bits):
            bits.extend(bytes(frame + 1 - len(bits)))
        bits[frame] |= 1 << key.frame_compile_id  # type: ignore[operator]
        self._added += 1

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, CompileId):
            return False
        frame = self._frame(key)
        if 0 <= frame < len(self._bits) and self._bits[frame] >> key.frame_compile_id & 1:  # type: ignore[operator]
            return True
        return key in self._others


class Generations:
    """torch._dynamo.reset() makes a process number its compiles from [0/0] again, in its next
    generation (0 before the first reset, then 1, 2, ...), and every later compile of the process is
    in that generation, whether its id was used before or not. A log shows a reset only as a start
    (`dynamo_start`) of a compile id the process already started or finished in its present
    generation: torch starts an id once otherwise (a restart is a new attempt of it, not a start).

    Noted in log order as the log is read, at once or in pieces alike (`start`, `finished`,
    `first_read`), asked once it is read (`at`, `of`, `first`, `in_log_order`). Holds nothing per
    compile id in a log without a reset but the ids of its present generation.
    """

    def __init__(self) -> None:
        self.resets: dict[int, list[int]] = {}  # process → the log lines where its generations 1, 2, ... begin
        self.current: dict[int, FrameCompiles] = {}  # process → the frame compiles started or finished in its present generation
        self.of_key: dict[CompileId, list[int]] = {}  # frame compile → the generations it compiled in; absent: only 0
        # (directory size when it started, frame compile, generation) of each compile of an id in a later
        # generation than the id's first, in log order: where it goes among the compiles (`in_log_order`)
        self.later_starts: list[tuple[int, CompileId, int]] = []
        # after a process's first reset: attempt (`[0/0_1]`) → the generations it logged records in; absent:
        # generation 0 only (a reused id's restart belongs to the compile it restarted, not to each generation)
        self.attempts_in: dict[CompileId, set[int]] = {}
        # process → frame compiles of its present generation known by their reasons, not yet started
        self.announced: dict[int, set[CompileId]] = {}

    def _current(self, process: int) -> FrameCompiles:
        """The process's frame compiles of its present generation (made once: `setdefault` would
        make an empty one at every start and end of a compile)."""
        current = self.current.get(process)
        if current is None:
            current = self.current[process] = FrameCompiles()
        return current

    def now(self, process: int) -> int:
        """The generation a process is in, as far as the log was read."""
        resets = self.resets.get(process)
        return len(resets) if resets else 0

    def start(self, key: CompileId, line: int, listed: int) -> tuple[int, bool]:
        """A start of frame compile `key` at `line`, with `listed` compile ids in the directory: its
        generation, and whether it began it (a reset). An id whose compile never logged its end and
        that starts again begins the next generation too: the compile that did not end stays in its own."""
        current = self._current(key.process)
        announced = self.announced.get(key.process)
        reset = key in current and not (announced and key in announced)
        if announced:
            announced.discard(key)
        if reset:
            self.resets.setdefault(key.process, []).append(line)
            current = self.current[key.process] = FrameCompiles()
        current.add(key)
        generation = self.now(key.process)
        if generation:
            generations = self.of_key.setdefault(key, [0])  # absent: first read in generation 0 (see `first_read`)
            if generations[-1] != generation:  # the id compiled in an earlier generation: a compile of its own
                self.later_starts.append((listed, key, generation))
                generations.append(generation)
        return generation, reset

    def logged(self, key: CompileId, line: int, listed: int) -> None:
        """A frame compile's recompile reasons or end (compilation_metrics) at `line`. One logged with no
        start in the present generation of its process, after a reset, is a compile of its own there: the
        compile over the recompile limit logs no `dynamo_start` (and a kill may leave only its reasons)."""
        if self.now(key.process) and key not in self._current(key.process):
            self.start(key, line, listed)
            self.announced.setdefault(key.process, set()).add(key)  # its own start may follow: no reset then

    def finished(self, key: CompileId) -> None:
        """A frame compile logged its end (compilation_metrics): its id was used in the present generation."""
        self._current(key.process).add(key)
        announced = self.announced.get(key.process)
        if announced:
            announced.discard(key)

    def first_read(self, key: CompileId | None, listed: Container[CompileId | None]) -> None:
        """The first record of a compile id (`listed`: the ids read before it): a frame compile (or a
        compiled-autograd capture) first read after a reset() is in its process's generation then, not
        in generation 0. Records of no frame (`[-/-]`) belong to no compile: they stay in generation 0."""
        if key is None or not self.resets or (key.frame_id is None and key.compiled_autograd_id is None):
            return
        generation = self.now(key.process)
        frame = key.frame_key()
        if generation and frame not in listed and frame not in self.of_key:
            self.of_key[frame] = [generation]

    def attempt_read(self, key: CompileId | None, listed: bool) -> None:
        """A record of attempt `key` (`listed`: records of it were read before): once its process was
        reset, which generations the attempt logged in (`has_attempt`)."""
        if key is None or not self.resets.get(key.process) or (key.frame_id is None and key.compiled_autograd_id is None):
            return
        generations = self.attempts_in.get(key)
        if generations is None:  # read before the first reset of its process: in generation 0 then
            generations = self.attempts_in[key] = {0} if listed else set()
        generations.add(self.at(key, self.resets[key.process][-1]))

    def has_attempt(self, key: CompileId, generation: int) -> bool:
        """Whether attempt `key` logged records in `generation` (an attempt of a compile in it)."""
        generations = self.attempts_in.get(key)
        return generation == 0 if generations is None else generation in generations

    def at(self, key: CompileId | None, line: int) -> int:
        """Which generation of a compile id a record at `line` belongs to: its process's then, or,
        where the id compiled in none then, the id's latest before it (a late record of its compile,
        such as a lazy backward compile after the reset), else its first."""
        generations = self.of_key.get(key.frame_key()) if key is not None else None
        if generations is None:  # no reset in its process, or it compiled in generation 0 only
            return 0
        assert key is not None
        place = bisect.bisect_right(generations, bisect.bisect_right(self.resets.get(key.process, []), line))
        return generations[place - 1] if place else generations[0]

    def of(self, key: CompileId | None) -> list[int]:
        """The generations a compile id compiled in, in order; a restart's attempt (`[0/0_1]`), those
        it was logged in."""
        if key is None:
            return [0]
        found = list(self.of_key.get(key.frame_key(), (0,)))
        return [g for g in found if self.has_attempt(key, g)] or found[:1] if key.attempt else found

    def first(self, key: CompileId | None) -> int:
        """The generation a compile id was first read in (a restart's attempt: the first it was logged in)."""
        return self.of(key)[0]

    def in_log_order(self, directory: Iterable[CompileId | None], keys_from: int = 0, starts_from: int = 0) -> Iterator[tuple[CompileId | None, int | None]]:
        """The `directory`'s keys from place `keys_from` on, each as (key, None), among the compiles of
        ids in a later generation than their first, from `later_starts[starts_from]` on, each as
        (frame compile, generation): in the order the log holds them (an id's first compile where it
        was first read, a later one where it started again)."""
        starts = itertools.islice(self.later_starts, starts_from, None)
        start = next(starts, None)
        for place, key in enumerate(itertools.islice(directory, keys_from, None), keys_from):
            while start is not None and start[0] <= place:  # it started once the directory held `place` keys
                yield start[1], start[2]
                start = next(starts, None)
            yield key, None
        while start is not None:
            yield start[1], start[2]
            start = next(starts, None)


class KeysByFunction(dict["int | tuple[int, int | None, int | None]", "CompileId | list[CompileId]"]):
    """A function's (process, compiled autograd id, frame id) frame compiles, in the order they came:
    most functions compile once, and their one key is kept as it is, not in a list (a log may hold 100,000s)."""

    def add(self, key: CompileId) -> None:
        function = _function_of(key)
        known = self.get(function)
        if known is None:
            self[function] = key
        elif isinstance(known, list):
            known.append(key)
        else:
            self[function] = [known, key]

    def of(self, key: CompileId) -> list[CompileId]:
        """The frame compiles of the function of `key`."""
        return as_list(self.get(_function_of(key)))


def _function_of(key: CompileId) -> int | tuple[int, int | None, int | None]:
    """`KeysByFunction`'s key of a frame compile's function: its frame id alone in the first process
    without compiled autograd (most: an int costs half the tuple), else (process, compiled autograd id, frame id)."""
    if key.process == 0 and key.compiled_autograd_id is None and key.frame_id is not None:
        return key.frame_id
    return (key.process, key.compiled_autograd_id, key.frame_id)


class Questions:
    """What views, the summary and multi-rank ask of the store once reading is done.

    Kept apart from `Store`, whose methods note facts while reading; `Store` inherits these.
    """

    directory: dict[CompileId | None, list[Artifact]]
    metrics: MetricsByFrame
    cache_events: list[CacheEvent]
    graph_breaks: list[LoggedBreak]
    recompile_reasons: dict[CompileId | None, list[tuple[int, str]]]
    generations: Generations
    generation_stacks: dict[tuple[CompileId, int], list[Frame]]
    start_stacks: dict[CompileId, list[Frame]]
    lineages: dict[CompileId | None, dict[int, str]]
    facts: FactSpool
    strings: StringTable
    pageless: set[CompileId | None]
    _by_key: dict[str, dict[Any, list[Any]]]

    def generation_at(self, key: CompileId | None, line: int) -> int:
        """Which generation of a compile id a record at `line` belongs to (`Generations.at`)."""
        return self.generations.at(key, line)

    def generations_of(self, key: CompileId | None) -> list[int]:
        """The generations a compile id compiled in (each names a compile of its own), in order."""
        return self.generations.of(key)

    def first_generation(self, key: CompileId | None) -> int:
        """The generation a compile id was first read in: its page there is its folder's `index.html`."""
        return self.generations.first(key)

    def recompile_reasons_of(self, key: CompileId | None, generation: int | None = None) -> list[str]:
        return [text for line, text in self.recompile_reasons.get(key, []) if generation is None or self.generation_at(key, line) == generation]

    def start_stack(self, key: CompileId, generation: int = 0) -> list[Frame] | None:
        if generation:
            return self.generation_stacks.get((key.frame_key(), generation))
        return self.start_stacks.get(key.frame_key())

    def index_by(self, name: str, items: Iterable[Any], key_of: Callable[[Any], Any]) -> dict[Any, list[Any]]:
        """`items` grouped by `key_of(item)`, built once (asked after reading has finished, or
        between the pieces of a log read as it grows: `forget_indexes` first)."""
        index = self._by_key.get(name)
        if index is None:
            index = self._by_key[name] = {}
            for item in items:
                index.setdefault(key_of(item), []).append(item)
        return index

    def forget_indexes(self) -> None:
        """Reading goes on after the indexes were asked for (a live report): build them again."""
        self._by_key.clear()

    def cache_events_of(self, key: CompileId | None) -> list[CacheEvent]:
        """Cache lookups logged under exactly this compile id."""
        return self.index_by("cache", self.cache_events, lambda e: _directory_key(e.compile_id)).get(key, [])

    def graph_breaks_of(self, key: CompileId | None) -> list[LoggedBreak]:
        """Graph breaks logged by exactly this compile id."""
        return self.index_by("own_breaks", self.graph_breaks, lambda b: _directory_key(b.compile_id)).get(key, [])

    def own_metrics(self, key: CompileId | None) -> list[MetricsEntry]:
        """Metrics logged under exactly this compile id (attempt included)."""
        frame = key.frame_key() if key is not None else None
        return [m for m in self.metrics.get(frame, []) if _directory_key(m.compile_id) == key]

    def lineages_of(self, key: CompileId | None) -> dict[int, str]:
        """Log line → lineage of each graph and output code of a compile that has one."""
        return self.lineages.get(key, {})

    def dynamo_names_of(self, key: CompileId | None, generation: int = 0) -> list[str]:
        """The names Dynamo made up that a compile's installed guards mention, in this generation of its id."""
        if key is None:
            return []
        found = self.facts.get(("dynamo_names", key.frame_key()))
        return list(dict.fromkeys(name for line, names in found if self.generation_at(key, line) == generation for name in names))

    def shape_facts_for(self, role: str, compile_id: CompileId | None) -> list[dict[str, Any]]:
        if compile_id is None:
            return []
        return self.facts.get(("shape", role, compile_id.frame_key()))

    def page_of(self, key: CompileId | None, generation: int = 0) -> str | None:
        """The page of a compile id; None for one listed without a page (`pageless`)."""
        return None if key in self.pageless else self.page_url(key, generation)

    def page_url(self, key: CompileId | None, generation: int = 0) -> str:
        """Where the page of a compile id in one generation is (or would be): its folder's
        `index.html` in the generation it was first read in (what links that know no generation
        reach), `generation_N.html` beside it in a later one."""
        return compile_page_url(key, 0 if generation == self.first_generation(key) else generation)

    def resolve_filename(self, filename: int | tuple[int, int] | str | None) -> str:
        name = self.strings.lookup(filename)
        return name if name is not None else "(unknown)"


# A dataclass, where the module's records are msgspec Structs: one per log (its build cost does not
# matter), with fields set after __init__ (init=False) and a __dict__ for the memos of compiles.py.
@dataclass(repr=False, eq=False)  # never compared or printed
class Store(Questions):
    source: InputInfo
    stats: Stats
    diagnostics: DiagnosticLog
    strings: StringTable
    rank: int | None = None
    processes: Processes = field(default_factory=Processes)  # the run's processes, in the order first read
    compile_ids: CompileIds = field(default_factory=CompileIds)  # one object per compile id, for every table (reading shares it)
    # compile id → numbered artifacts, in first-appearance order; None = malformed compile id
    directory: dict[CompileId | None, list[Artifact]] = field(default_factory=dict)
    kinds: dict[CompileId | None, Counter[str]] = field(default_factory=dict)
    kinds_seen: set[str] = field(default_factory=set)  # every kind `kinds` counts, of any compile id (a live index asks at each update)
    start_stacks: dict[CompileId, list[Frame]] = field(default_factory=dict)
    trie: StackTrie = field(default_factory=StackTrie)
    unknown_stacks: StackTrie = field(default_factory=StackTrie)
    metrics: MetricsByFrame = field(default_factory=MetricsByFrame)
    # frame (process, compiled autograd id, frame id) → its keys in `metrics`, in the order they came:
    # a frame's metrics entries across its compiles, kept as they are read (a live report asks after
    # every update; an index of all the metrics built again each time grew with the run)
    metric_keys_by_frame: KeysByFunction = field(default_factory=KeysByFunction)
    # the metrics entries that logged a `fail_type`, as (their key's place among `metrics`' keys, their
    # place under it, the entry): in `metrics`' order without a pass over every compile's metrics
    failed_metrics: list[tuple[int, int, MetricsEntry]] = field(default_factory=list)
    # frame compile → (compile id, log line, bwd_compilation_metrics' BACKWARD_SUMMARY_FIELDS) in log order
    backward_metrics: dict[CompileId | None, list[tuple[CompileId | None, int, dict[str, Any]]]] = field(default_factory=dict)
    failures: list[FailureRow] = field(default_factory=list)
    # what only a compile's own pages show: specialisations and fast guards (`shape_facts_for`), span times
    facts: FactSpool = field(default_factory=FactSpool)
    unknown_kinds: Counter[str] = field(default_factory=Counter)
    graph_breaks: list[LoggedBreak] = field(default_factory=list)
    export_failures: list[ExportFailure] = field(default_factory=list)
    exported_programs: list[str] = field(default_factory=list)  # urls (empty outside export mode)
    expressions: dict[int, dict[str, Any]] = field(default_factory=dict)  # export provenance graph nodes
    distributed: DistributedFacts = field(default_factory=DistributedFacts)
    vllm: VllmLog = field(default_factory=VllmLog)  # vLLM's piecewise compiles, when the log holds them
    export_shapes: ExportShapes = field(default_factory=ExportShapes)  # a non-strict export's symbols and guards
    wrapped: WrappedModels = field(default_factory=WrappedModels)  # the model class each compile's guards name (torch's wrapper)
    export_trace: ExportTrace = field(default_factory=ExportTrace)  # a non-strict export's unbacked symbols, failed traces
    recompile_reasons: dict[CompileId | None, list[tuple[int, str]]] = field(default_factory=dict)  # (log line, reason)
    cache_events: list[CacheEvent] = field(default_factory=list)
    # frame compile → chromium event name → total microseconds (B/E pairs, e.g. "pass.post_grad_passes.x")
    phase_times: SpanTotals = field(init=False)
    # (frame compile, generation) → span path (outermost first) → total microseconds: the nesting of B/E spans
    phase_trees: SpanTotals = field(init=False)
    # every distinct config the compiles logged (kept in `facts`): a metrics entry holds the number of its own
    configs: ConfigSnapshots = field(init=False)
    chromium_events: int = 0
    # (frame compile, generation) → microseconds of backward compiles inside its forward compile
    backward_spans: dict[tuple[CompileId, int], float] = field(default_factory=dict)
    records: int = 0
    # compile ids listed without a page: nothing but a dynamo_start, beyond limits.PAGED_START_ONLY of them
    pageless: set[CompileId | None] = field(default_factory=set)
    generations: Generations = field(default_factory=Generations)  # after each torch._dynamo.reset()
    generation_stacks: dict[tuple[CompileId, int], list[Frame]] = field(default_factory=dict)
    lineages: dict[CompileId | None, dict[int, str]] = field(default_factory=dict)  # per compile id: log line → lineage, where it has one
    lineage_states: dict[CompileId | None, int] = field(default_factory=dict)  # per compile id (`graph_lineage`)
    torch_version: str | None = None
    torch_commit: str | None = None  # the commit of the torch that wrote the log: its `torch_version` record's
    # the earliest and latest glog time of this report's records (ISO, `Record.timestamp`; None before any)
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    _by_key: dict[str, dict[Any, list[Any]]] = field(default_factory=dict)  # indexes built on first use
    # compiles started and not ended (no compilation_metrics yet): (frame, generation) → start time
    open_starts: dict[tuple[CompileId, int], str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.phase_times = SpanTotals(self.facts, by_path=False)
        self.phase_trees = SpanTotals(self.facts, by_path=True)
        self.configs = ConfigSnapshots(self.facts)

    # -- facts noted by parsers -------------------------------------------------------------

    def note_start(self, compile_id: CompileId, line: int, timestamp: str = "") -> None:
        """A `dynamo_start`: the compile is open until its compilation_metrics."""
        key = compile_id.frame_key()  # every attempt of a frame compile shares its generations
        if compile_id.attempt and key in self.generations.current.get(key.process, ()):
            return  # a start logged for a later attempt (torch logs one for attempt 0 only): the same compile, no reset
        generation, reset = self.generations.start(key, line, len(self.directory))
        if reset:  # reset() waits for a compile under way: one of the process still open never logged its end
            for open_ in [item for item in self.open_starts if item[0].process == key.process]:
                del self.open_starts[open_]
        self.open_starts.setdefault((key, generation), timestamp)

    def note_first_read(self, key: CompileId | None) -> None:
        """The first record of a compile id, before it is listed in the directory (`Generations.first_read`)."""
        self.generations.first_read(key, self.directory)

    def note_compile_logged(self, key: CompileId, line: int) -> None:
        """Recompile reasons or metrics of frame compile `key`: after a reset, one with no start in its
        process's present generation is a compile there (`Generations.logged`)."""
        self.generations.logged(key, line, len(self.directory))

    def note_attempt_read(self, key: CompileId | None, listed: bool) -> None:
        """A record of a compile id (`listed`: one was read before): which generations its attempt is in."""
        self.generations.attempt_read(key, listed)

    def note_start_stack(self, compile_id: CompileId, frames: list[Frame]) -> None:
        generation = self.generations.now(compile_id.process)
        # the trie hands back the first equal stack: compiles that start at the same place share it
        frames = self.trie.insert(frames, Reuse(compile_id, generation) if generation else compile_id)
        self.start_stacks.setdefault(compile_id.frame_key(), frames)
        if generation:  # a reused id: its own stack, so nothing shown mixes the two compiles
            self.generation_stacks.setdefault((compile_id.frame_key(), generation), frames)

    def note_torch_version(self, version: Any, commit: Any = None) -> None:
        """The torch that wrote the log (and its commit), as the first record to name it says."""
        for name, value in (("torch_version", version), ("torch_commit", commit)):
            if getattr(self, name) is None and isinstance(value, str) and value:
                setattr(self, name, value)

    def note_metrics(self, record: Record, meta: dict[str, Any]) -> None:
        """Remember a compilation_metrics record for statuses and the failures page.

        The page url is filled in by the builder once the page is numbered (`metrics_page_written`).
        """
        logged = meta.get("restart_reasons")
        reasons = logged if isinstance(logged, list) else []
        fields = pack_fields(meta, restart_reasons=[readable_restart(str(reason)) for reason in reasons])
        key = record.compile_id.frame_key() if record.compile_id is not None else None
        generation = 0
        if key is not None:
            self.note_compile_logged(key, record.lineno)
            generation = self.generation_at(key, record.lineno)
            self.generations.finished(key)
            self.open_starts.pop((key, generation), None)
        self.note_torch_version(meta.get("pytorch_version"))
        entry = MetricsEntry(record.compile_id, "", fields, generation, self.configs.note(meta))
        key_place, place = self.metrics.add(key, entry)
        if place == 0 and key is not None:
            self.metric_keys_by_frame.add(key)
        if entry.get("fail_type"):
            self.failed_metrics.append((key_place if key_place >= 0 else self.metrics.place_of(key), place, entry))

    def note_backward_metrics(self, compile_id: CompileId | None, line: int, meta: dict[str, Any]) -> None:
        key = compile_id.frame_key() if compile_id is not None else None
        own = compile_id.directory_key() if compile_id is not None else None
        fields = {name: meta.get(name) for name in BACKWARD_SUMMARY_FIELDS}  # not the whole record: pages show these
        self.backward_metrics.setdefault(key, []).append((own, line, fields))

    def note_shape_fact(self, role: str, compile_id: CompileId, meta: dict[str, Any]) -> None:
        self.facts.add(("shape", role, compile_id.frame_key()), meta)

    def note_guarded_names(self, compile_id: CompileId, line: int, names: list[str]) -> None:
        """Names Dynamo made up (`___stack0`) that a compile's installed guards mention (`dynamo_names_of`)."""
        self.facts.add(("dynamo_names", compile_id.frame_key()), (line, names))

    def note_span(self, frame: CompileId, generation: int, name: str, path: tuple[str, ...], duration: float) -> None:
        """A finished chromium B/E span of a frame compile (`phase_times`, `phase_trees`)."""
        self.facts.add(("span", frame), (generation, name, path, duration))
        if name.endswith("bw_compiler") and "entire_frame_compile" in path[:-1]:
            self.backward_spans[(frame, generation)] = self.backward_spans.get((frame, generation), 0.0) + duration

    def note_expression(self, kind: str, meta: dict[str, Any]) -> None:
        """A node of the symbolic-expression graph that guard pages walk (export mode only)."""
        if kind == "expression_created" and isinstance(meta.get("result_id"), int):
            self.expressions[meta["result_id"]] = meta
        elif kind == "create_unbacked_symbol" and isinstance(meta.get("node_id"), int):
            self.expressions[meta["node_id"]] = {**meta, "result": meta.get("symbol"), "method": "create_unbacked_symbol"}

    def metrics_page_written(self, record: Record, url: str) -> None:
        """Attach the page url to the newest metrics entry and derive its failures-page rows."""
        key = record.compile_id.frame_key() if record.compile_id is not None else None
        entry = self.metrics.last(key)
        entry.page_written(url)
        for reason in entry.get("restart_reasons"):
            self.failures.append(FailureRow(record.compile_id, url, "RestartAnalysis", str(reason), "", entry.generation))
        fail_type = entry.get("fail_type")
        if fail_type:
            filename = entry.get("fail_user_frame_filename") or "N/A"
            lineno = entry.get("fail_user_frame_lineno") or 0
            reason = entry.get("fail_reason")
            self.failures.append(
                FailureRow(record.compile_id, url, str(fail_type), str(reason) if reason else "(no reason logged)", f"{filename}:{lineno}",
                           entry.generation)
            )

    def note_graph(self, key: CompileId | None, stage: str, declared_lineage: str, line: int) -> str:
        """A graph or output code of a compile; its lineage, read from what the compile logged before it."""
        state, lineage = lineage_step(self.lineage_states.get(key, 0), stage, declared_lineage)
        if state:
            self.lineage_states[key] = state
        if lineage:  # (a graph with none, most of them, costs nothing)
            self.lineages.setdefault(key, {})[line] = lineage
        return lineage

    def note_cache_marks(self) -> None:
        """Every cache-marked output in log order, for cross-rank comparison (once reading is done)."""
        marks = [
            CacheMark(a.number, a.suffix, label_of(key), a.name)
            for key, artifacts in self.directory.items() if key is not None
            for a in artifacts if a.suffix
        ]
        self.distributed.cache = sorted(marks, key=lambda m: m.number)

def _directory_key(compile_id: CompileId | None) -> CompileId | None:
    return compile_id.directory_key() if compile_id is not None else None
