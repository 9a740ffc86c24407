"""vLLM's piecewise compiles, as its own records in the trace tell them.

vLLM splits the Dynamo graph at its attention ops ("piecewise") and compiles each piece with
Inductor: once for a general range of batch sizes, and again for each CUDA-graph capture size. It
logs, into the same TORCH_TRACE, records of its own:

- `artifact vllm_compile_event` (JSON `{"type": "aot_cache_hit" | ...}`), just before the call it is about;
- `artifact vllm_compilation_config` (JSON): starts a *compile call* (one `@support_torch_compile` model);
- `graph_dump vllm_piecewise_split_graph`: the graph split into `submod_N` pieces;
- `artifact vllm_piecewise_compile_start` (JSON: piecewise_index, submod_name, compile_range_start,
  compile_range_end, is_single_size, is_cudagraph_capture_size): opens a *piece*; every file written
  after it (its `vllm_submod_N` graph, Inductor's artifacts) belongs to it until the next one;
- `graph_dump vllm_patterns.<Pass>`: the pattern source of one of vLLM's post-grad passes;
- `graph_dump vllm_post_grad.<i>.<Pass>`: the graph after that pass, diffed against the graph before
  it (the previous pass, else Inductor's `before_post_grad_graph`; the baseline starts again at
  each compile call and at each `before_post_grad_graph`).

`VllmLog` is noted while the log is read (by the kinds and by every output written); `VllmRun` is
what it found, plain data for summary.json, the pages, summary.md, search and `diff`. What the log
does not tell stays None, and what is missing is said (`CompileCall.missing`).
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct, field, to_builtins
from msgspec.structs import replace

from ..patterns import lazy

CONFIG = "vllm_compilation_config"
COMPILE_START = "vllm_piecewise_compile_start"
COMPILE_EVENT = "vllm_compile_event"
SPLIT_GRAPH = "vllm_piecewise_split_graph"
PATTERNS = "vllm_patterns."
POST_GRAD = "vllm_post_grad."
PIECE_GRAPHS = ("vllm_submod_", "vllm_subgraph_")
PIECE_SPAN = "inductor_compile"  # the chromium span of Inductor compiling one piece: what a piece cost
BASELINE = "before_post_grad_graph"  # Inductor's graph before its post-grad passes: the first pass's "before"
AOT_CACHE_HIT = "aot_cache_hit"
USUAL_INDEX = "tlparse_index.html"  # the usual index, when index.html is the vLLM summary (upstream's name)
DIFF_CONTEXT = 3  # lines of context around each change in a pass diff, as upstream tlparse shows them
# the Dynamo files a call lists (those logged before its first piece)
DYNAMO_FILES = ("dynamo_side_effects", "dynamo_output_graph", "dynamo_cpp_guards_str", "compilation_metrics")
_NUMBER = lazy(r"_\d+(?=\.[^.]+$)")
_GRAPH_NUMBER = lazy(r"_(\d+)\.[^.]+$")  # a numbered file's number
DIFF_PAGE = ".diff.html"


class VllmFile(Struct, frozen=True):
    name: str  # the file's name, its number left out ("vllm_submod_0.txt")
    url: str  # from the report's root

    @classmethod
    def at(cls, url: str) -> VllmFile:
        return cls(_NUMBER.sub("", url.rpartition("/")[2]), url)


class PassChange(Struct):
    """What one of vLLM's post-grad passes did to the graph."""

    name: str  # "0.FusionPass": the pass's place in the pipeline, and its name
    graph: str  # the graph after it (url)
    compile_id: str | None
    line: int
    baseline: str | None = None  # what it is diffed against: "before_post_grad_graph" or the previous pass; None: nothing
    diff: str | None = None  # the side-by-side diff page (url); None without a baseline
    added: int | None = None  # lines the pass added and removed; None without a baseline
    removed: int | None = None

    @property
    def pass_name(self) -> str:
        """The pass, without its place: "FusionPass"."""
        return self.name.split(".", 1)[-1]

    @property
    def changed(self) -> bool | None:
        """Whether the pass changed the graph; None when there was nothing to compare with."""
        return None if self.added is None or self.removed is None else bool(self.added or self.removed)


class Piece(Struct):
    """One piece of the split graph compiled for one compile range or size."""

    index: int | None  # piecewise_index
    submod: str  # "submod_3" (or "subgraph_<index>" when the record names none)
    range_start: int | None
    range_end: int | None
    single_size: bool
    cudagraph: bool  # compiled for a CUDA-graph capture size
    compile_id: str | None  # the compile id it was logged under
    line: int
    files: list[VllmFile] = field(default_factory=list)
    passes: list[PassChange] = field(default_factory=list)
    cache: list[tuple[str, str]] = field(default_factory=list)  # (cache, hit/miss/bypass) looked up while it compiled
    # seconds of Inductor compiling it: its `inductor_compile` spans (None: the log times none, e.g. a cache hit)
    compile_time_s: float | None = None

    @property
    def group(self) -> str:
        """`size 8` or `range [1, 16384]`, as vLLM's logs and upstream tlparse name it."""
        if self.single_size:
            return f"size {self.range_start if self.range_start is not None else 'unknown'}"
        low = "unknown" if self.range_start is None else self.range_start
        high = "unknown" if self.range_end is None else self.range_end
        return f"range [{low}, {high}]"


class CompileCall(Struct):
    """One compile call of the log: a `vllm_compilation_config` and what was compiled under it."""

    number: int  # 1, 2, ...
    config: dict[str, Any] | None = None
    config_url: str | None = None
    event: str | None = None  # the vllm_compile_event before it ("aot_cache_hit", "fresh_compile", ...)
    split_graph: str | None = None  # url
    dynamo_files: list[VllmFile] = field(default_factory=list)
    patterns: list[VllmFile] = field(default_factory=list)
    passes: list[PassChange] = field(default_factory=list)  # logged before any piece
    pieces: list[Piece] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # what the log does not say, in words

    @property
    def prefix(self) -> str | None:
        value = (self.config or {}).get("prefix")
        return value if isinstance(value, str) else None

    @property
    def aot_cache_hit(self) -> bool:
        return self.event == AOT_CACHE_HIT

    def groups(self) -> list[tuple[str, list[Piece]]]:
        """Its pieces by compile range or size, in the order each first appears."""
        grouped: dict[str, list[Piece]] = {}
        for piece in self.pieces:
            grouped.setdefault(piece.group, []).append(piece)
        return list(grouped.items())

    def all_passes(self) -> list[PassChange]:
        return self.passes + [change for piece in self.pieces for change in piece.passes]


class VllmRun(Struct):
    """What a log says of vLLM's compiles: summary.json's `vllm`."""

    calls: list[CompileCall]
    damaged: int = 0  # vLLM records whose JSON could not be read (counted as fail_vllm_json too)

    def pieces(self) -> list[Piece]:
        return [piece for call in self.calls for piece in call.pieces]

    def slowest(self, count: int = 5) -> list[tuple[CompileCall, Piece]]:
        """The pieces that cost the most Inductor time, slowest first (pieces the log times only)."""
        timed = [(call, piece) for call in self.calls for piece in call.pieces if piece.compile_time_s is not None]
        return sorted(timed, key=lambda pair: -(pair[1].compile_time_s or 0.0))[:count]

    def shared_config(self) -> dict[str, Any] | None:
        """The config every call logged, when there are several and all logged the same one."""
        configs = [call.config for call in self.calls]
        if len(configs) > 1 and all(c is not None and c == configs[0] for c in configs):
            return configs[0]
        return None


class VllmLog:
    """The vLLM facts of one log, noted while it is read."""

    def __init__(self) -> None:
        self.calls: list[CompileCall] = []
        self.damaged = 0
        self._event: str | None = None  # a vllm_compile_event waiting for its call
        self._baseline: tuple[str, str, str] | None = None  # (name, url, text) the next pass is diffed against
        self._span_start: tuple[int, float] | None = None  # (the piece, microseconds) of an open inductor_compile
        self._diff_pages: set[str] = set()  # the pass diff pages named as upstream names them ("folder/name")

    @property
    def active(self) -> bool:
        return bool(self.calls)

    def _call(self) -> CompileCall:
        """The current compile call; one without a config when records come before any."""
        if not self.calls:
            self.calls.append(CompileCall(1, missing=["No vllm_compilation_config was logged before it: its configuration is unknown."]))
        return self.calls[-1]

    # -- the records -------------------------------------------------------------------------

    def event(self, data: Any) -> None:
        kind = data.get("type") if isinstance(data, dict) else None
        self._event = kind if isinstance(kind, str) else None

    def config(self, data: Any, url: str) -> None:
        """A `vllm_compilation_config`: a new compile call (or the config of one opened by earlier records)."""
        config = data if isinstance(data, dict) else None
        current = self.calls[-1] if self.calls else None
        if current is not None and current.config is None and not current.pieces and not current.split_graph:
            current.config, current.config_url = config, url or None
            current.missing = [m for m in current.missing if "vllm_compilation_config" not in m]
        else:
            self.calls.append(CompileCall(len(self.calls) + 1, config, url or None))
        self.calls[-1].event = self._event or self.calls[-1].event
        self._event = None
        self._baseline = None  # each call's passes are diffed within the call

    def compile_start(self, data: dict[str, Any], compile_id: str | None, line: int) -> None:
        call = self._call()
        submod = data.get("submod_name")
        index = _int(data.get("piecewise_index"))
        call.pieces.append(Piece(
            index, submod if isinstance(submod, str) and submod else f"subgraph_{index if index is not None else len(call.pieces)}",
            _int(data.get("compile_range_start")), _int(data.get("compile_range_end")), data.get("is_single_size") is True,
            data.get("is_cudagraph_capture_size") is True, compile_id, line,
        ))

    def split_graph(self, url: str) -> None:
        call = self._call()
        call.split_graph = call.split_graph or url or None

    def baseline(self, url: str, text: str) -> None:
        """Inductor's `before_post_grad_graph`: the graph the next pass is diffed against (kept from
        before any vLLM record: a log may start with the pass dumps, as upstream's test input does)."""
        self._baseline = (BASELINE, url, text)

    def start(self) -> None:
        """Any vLLM record: the log is vLLM's (its first call opens without a config if need be)."""
        self._call()

    def post_grad(self, name: str, url: str, text: str, compile_id: str | None, line: int) -> PassChange:
        """`vllm_post_grad.<i>.<Pass>`: diffed against the graph before it, which it then becomes."""
        change = PassChange(name[len(POST_GRAD):], url, compile_id, line)
        if self._baseline is not None:
            from ..linediff import changed_lines  # only in vLLM logs (it imports difflib)

            before_name, _, before_text = self._baseline
            change.baseline = before_name
            change.added, change.removed = changed_lines(before_text.splitlines(), text.splitlines())
        call = self._call()
        (call.pieces[-1].passes if call.pieces else call.passes).append(change)
        self._baseline = (f"{POST_GRAD}{change.name}", url, text)
        return change

    def diff_page_name(self, graph_url: str, name: str) -> str:
        """The file name of the diff page of the pass dump written at `graph_url` (written right after
        it, in the same folder). Upstream's name (`vllm_post_grad.0.FusionPass.diff.html`) names one
        page per folder, and every piece of a compile id runs the same passes in the same folder: the
        first page there keeps that name, each later one gets its own number before `.diff.html`
        (the number the page spends, one after its graph's), so no piece's page replaces another's."""
        folder, _, graph = graph_url.rpartition("/")
        if not graph_url or f"{folder}/{name}" not in self._diff_pages:
            self._diff_pages.add(f"{folder}/{name}")
            return name
        number = _GRAPH_NUMBER.search(graph)
        return f"{name.removesuffix(DIFF_PAGE)}_{int(number.group(1)) + 1 if number else len(self._diff_pages)}{DIFF_PAGE}"

    def baseline_url(self) -> str | None:
        return self._baseline[1] if self._baseline is not None else None

    def output(self, url: str, kind: str) -> None:
        """A file the report wrote: it belongs to the current piece (or, before any, to the call)."""
        if not self.calls or not url:
            return
        call = self.calls[-1]
        file = VllmFile.at(url)
        if file.name.startswith((COMPILE_START, COMPILE_EVENT, CONFIG, POST_GRAD)):  # shown as facts (passes: their diffs), not as files
            return
        if file.name.startswith(PATTERNS):
            call.patterns.append(file)
            return
        if call.pieces:
            piece = call.pieces[-1]
            piece.files.append(file)
        elif file.name.startswith(DYNAMO_FILES) or kind.startswith(DYNAMO_FILES):
            call.dynamo_files.append(file)

    def cache_lookup(self, cache: str, result: str) -> None:
        """A cache lookup (the analysis' own cache events) while a piece compiles: the piece's."""
        if self.calls and self.calls[-1].pieces:
            self.calls[-1].pieces[-1].cache.append((cache, result))

    def span(self, phase: str, microseconds: float) -> None:
        """An `inductor_compile` chromium event (B or E) while a piece compiles: what the piece cost."""
        piece = self.calls[-1].pieces[-1] if self.calls and self.calls[-1].pieces else None
        if piece is None:
            return
        if phase == "B":
            self._span_start = (id(piece), microseconds)
        elif phase == "E" and self._span_start is not None and self._span_start[0] == id(piece):
            piece.compile_time_s = round((piece.compile_time_s or 0.0) + (microseconds - self._span_start[1]) / 1e6, 6)
            self._span_start = None

    def damaged_record(self) -> None:
        self.damaged += 1

    # -- the end -----------------------------------------------------------------------------

    def run(self, files_of: dict[str, list[VllmFile]] | None = None) -> VllmRun | None:
        """What the log said so far, with what is missing said; None for a log without vLLM records.
        `files_of`: each compile id's files, by label: a call's Dynamo files are those of the compile
        ids its pieces were logged under (Dynamo logs them before vLLM's first record). Noted facts
        are left as they are: a live report asks again after each update."""
        if not self.calls:
            return None
        return VllmRun([self._finished(call, files_of or {}) for call in self.calls], self.damaged)

    @staticmethod
    def _finished(call: CompileCall, files_of: dict[str, list[VllmFile]]) -> CompileCall:
        ids = dict.fromkeys(p.compile_id for p in call.pieces if p.compile_id)
        dynamo = list(call.dynamo_files)
        dynamo += [f for i in ids for f in files_of.get(i or "", []) if f.name.startswith(DYNAMO_FILES) and f not in dynamo]
        missing = list(call.missing)
        if call.config is None and not any("vllm_compilation_config" in m for m in missing):
            missing.append("Its vllm_compilation_config could not be read.")
        for piece in call.pieces:
            if not piece.files:
                missing.append(f"{piece.submod} ({piece.group}) logged its compile start and no file after it.")
        for change in call.all_passes():
            if change.baseline is None:
                missing.append(f"Pass {change.name} has no graph before it (no before_post_grad_graph): not diffed.")
        for group, pieces in call.groups():
            order = [p.index for p in pieces if p.index is not None]
            if any(b < a for a, b in zip(order, order[1:])):
                missing.append(f"The pieces of {group} were logged out of order: shown as logged.")
        return replace(call, dynamo_files=dynamo, missing=missing)


def vllm_dict(run: VllmRun) -> dict[str, Any]:
    """summary.json's `vllm`: the run as plain data, with what its readers would otherwise derive
    (each piece's group, each call's cache verdict, whether each pass changed the graph)."""
    data: dict[str, Any] = to_builtins(run)
    for call, call_data in zip(run.calls, data["calls"], strict=True):
        call_data["prefix"] = call.prefix
        call_data["aot_cache_hit"] = call.aot_cache_hit
        for piece, piece_data in zip(call.pieces, call_data["pieces"], strict=True):
            piece_data["group"] = piece.group
            for change, change_data in zip(piece.passes, piece_data["passes"], strict=True):
                change_data["changed"] = change.changed
        for change, change_data in zip(call.passes, call_data["passes"], strict=True):
            change_data["changed"] = change.changed
    return data


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
