"""The analysis of one log: every view and command reads it (pages, `summary.json`, Markdown, gates,
multi-rank, diff).

`Analysis` is the store the reading pass filled (`store.Store`) plus the questions asked of it: one
typed `CompileSummary` per compile (generation included), gathered in a `Summary` with the totals
(`totals.py`), and `to_dict()`, which is exactly what `summary.json` holds (schema:
`summary.schema.json`, whose `version` it carries). Unknown values are `None`, never guessed.
"""

from __future__ import annotations

import functools
import sys
from operator import attrgetter
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from msgspec import structs

from .._version import __version__
from ..options import Options
from ..model import CompileId, Record, display_key
from . import questions
from .files import FileSizes
from .configs import ConfigChange, ConfigDiff, ConfigSnapshots, UnusualSetting, names_setting
from .store import BY_DESIGN, LoggedBreak, MetricsEntry, Store, as_list, compile_place, place_parts
from .compile_memo import CompilesMemo, spooled
from .spools import SpooledCompiles
from .compile_times import CompileTimes
from .compile_groups import distinct_breaks
from .summary import (
    CAUSE_FIRST, CAUSE_RECOMPILE, CAUSE_RETRY, STATUS_BREAK, STATUS_EMPTY, STATUS_ERROR, STATUS_LIMIT, STATUS_MISSING, STATUS_OK,
    STATUS_RESTART, STATUS_SEVERITY, STATUS_SKIPPED, CacheLookup, CompileSummary, CompileTime, Failure, GraphBreak,
    FrameIdentity, Summary, first_line, identity_key, over_recompile_limit,
)
from .timeline import CompileClock, Timeline, last_record_s, timeline, timeline_of, under_way
from .totals import Value, nested, totals_of
from .vllm import VllmFile, VllmRun, vllm_dict
from .wrapper import wrapper_frame

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "summary.schema.json"
html_view: Callable[[Analysis], str] | None = None  # set by tlparse_py.notebook


@functools.cache
def schema_version() -> str:
    """The schema_version summary.json carries: the `version` of the schema it is written against
    (bump its major part whenever a field changes meaning, the minor when fields are added)."""
    version = orjson.loads(SCHEMA_FILE.read_bytes())["version"]
    return str(version)


@dataclass(repr=False, eq=False)  # one per log: never compared or printed
class Analysis(CompileTimes):
    """The typed analysis of one log (or of one process's logs read together).

    `settings` is how the log was read, not a fact of it: export mode (-e) numbers other files and
    asks for an export verdict."""

    settings: Options = field(default_factory=Options)
    report_dir: Path | None = None  # where its report was written (a notebook's summary links there)
    clock: CompileClock = field(default_factory=CompileClock)  # when each compile began and ended (`timeline`)
    memo: CompilesMemo = field(default_factory=CompilesMemo, compare=False, repr=False)  # `compiles()`, built once per state
    # a live report's, its log still being read: a compile started and not ended is under way, not one
    # whose metrics are missing (`timeline.UNDER_WAY`); set by `live_compiles.LiveCompiles`
    live: bool = False
    file_sizes: FileSizes = field(default_factory=FileSizes)  # each graph or code file's lines and bytes (noted by the pipeline)

    def note_start(self, compile_id: CompileId, line: int, timestamp: str = "") -> None:
        super().note_start(compile_id, line, timestamp)
        key = compile_id.frame_key()
        self.clock.start(key, self.generation_at(key, line), timestamp)

    def note_metrics(self, record: Record, meta: dict[str, Any]) -> None:
        super().note_metrics(record, meta)
        if record.compile_id is not None:
            key = record.compile_id.frame_key()
            self.clock.end(key, self.generation_at(key, record.lineno), record.timestamp)

    def timeline(self) -> Timeline:
        """The run on a time axis, for the index's pictures and summary.json's `timeline`
        (`timeline.timeline`); built once per state of the store, as `compiles()`."""
        stamp = compiles_stamp(self)
        memo = self.__dict__.get("_timeline_memo")
        if memo is None or memo[0] != stamp:
            built = timeline(self, self.clock, self.kept_compiles(), len(self.processes.pids))  # two passes, not a list of them all
            if self.live:  # its compiles started and not ended are under way (a finished log's: metrics missing)
                open_ = {(c.id, c.generation) for c, _ in self.open_compiles()}
                last = last_record_s(self)
                spans = [under_way(s, last) if (s.id, s.generation) in open_ else s for s in built.spans]
                built = timeline_of(self, spans, built.frames, built.frames_with_time, len(self.processes.pids))
            memo = self.__dict__["_timeline_memo"] = (stamp, built)
        found: Timeline = memo[1]
        return found

    def _repr_html_(self) -> str | None:
        """How a notebook shows it (tlparse_py.notebook registers the view: this layer renders nothing)."""
        return html_view(self) if html_view is not None else None

    def compiles(self) -> list[CompileSummary]:
        """One entry per compile, in log order (where each first logged): a frame compile with all
        its attempts (Dynamo restarts after a graph break log their graphs under `[x/y_1]`, `[x/y_2]`,
        ...), once per generation its id compiled in (after `torch._dynamo.reset()` an id names a new
        compile, after the compiles logged before the reset).

        Built once per state of the store, a new list each time, of equal summaries (`compile_memo`:
        past SPOOLED_FROM compiles they are kept packed in a scratch file)."""
        stamp = compiles_stamp(self)
        found = self.memo.found(stamp)
        if found is not None:
            return found
        frames: dict[CompileId, CompileId | list[CompileId]] = {}
        compiles = list(followed(self, compiles_read(self, frames), frames))
        mark_unusual(compiles, self.configs.unusual(config_counts(compiles)))
        return self.memo.keep(stamp, compiles)

    def kept_compiles(self) -> Sequence[CompileSummary]:
        """`compiles()` as they are kept (`compile_memo`): past SPOOLED_FROM, their scratch file, each
        read back at each pass over them, not a list of them all (at 40,000 compiles, 60 MB)."""
        stamp = compiles_stamp(self)
        kept = self.memo.kept_for(stamp)
        if kept is None and spool_compiles(self, stamp):
            kept = self.memo.kept_for(stamp)
        return kept if kept is not None else self.memo.kept_for(stamp, self.compiles())

    def compile_of(self, key: CompileId, generation: int = 0) -> CompileSummary | None:
        """The compile a compile id (any attempt) names in one generation; None when it names none."""
        return self.memo.compile_at(compiles_stamp(self), key.frame_key(), generation, self.compiles)

    def _compile(self, frame: CompileId, logged: CompileId | list[CompileId], generation: int) -> CompileSummary:
        logged_attempts = as_list(logged)  # (`compiles_read`'s frames: a lone attempt bare)
        # a reused id's attempts: those logged in this generation (the first, whatever it logged, names the compile)
        attempts = [k for k in logged_attempts if k == frame or self.generations.has_attempt(k, generation)] or logged_attempts
        metrics = [m for m in self.metrics.get(frame, []) if m.generation == generation]
        fields = metrics[-1].fields if metrics else {}
        logged = metrics[-1].compile_id.directory_key() if metrics and metrics[-1].compile_id else attempts[-1]
        compiled = questions.compiled_frame(self, frame, fields, generation)
        mine = self.in_generation(frame, generation)
        cache = [e for key in attempts for e in self.cache_events_of(key) if mine(e.line)]
        # strings shared where equal: a log may hold 100,000s of compiles
        labels = [display_key(key) for key in attempts]
        pages: dict[CompileId | None, str | None] = {key: self.page_of(key, generation) for key in attempts}
        logged_breaks = [b for key in attempts for b in self.graph_breaks_of(key) if mine(b.line)]
        breaks = [_graph_break(b, pages) for b in logged_breaks]
        restart_reasons = [first_line(r) for m in metrics for r in m.get("restart_reasons") or () if not str(r).startswith(BY_DESIGN)]
        status = _status(metrics, logged_breaks, restart_reasons)
        return CompileSummary(
            key=frame,
            id=labels[0] if attempts[0] == frame else display_key(frame),
            url=pages[logged] if logged in pages else self.page_of(logged, generation),  # the attempt's own string, once
            generation=generation,
            attempts=labels,
            frame=compiled.name,
            user_location=sys.intern(compiled.location) if compiled.location else compiled.location,
            status=status,
            compile_time_s=self.compile_time(attempts, metrics, generation),
            graph_breaks=distinct_breaks(breaks),
            recompile_reasons=[r for key in attempts for r in self.recompile_reasons_of(key, generation)],
            cache=[CacheLookup(e.cache, e.state, e.reason) for e in sorted(cache, key=lambda e: e.line)],
            graph_op_count=fields.get("graph_op_count") if type(fields.get("graph_op_count")) is int else None,
            failure=_failure(fields),
            headline=questions.headline(self, frame, fields, generation, skipped=status == STATUS_SKIPPED),
            pages=[(name, pages[key]) for name, key in zip(labels, attempts)],
            cause=CAUSE_RECOMPILE if frame.frame_compile_id else CAUSE_FIRST,
            restart_reasons=list(dict.fromkeys(restart_reasons)),
            library_frame=compiled.library_frame,
            config=metrics[-1].config if metrics else None,
        )

    def open_compiles(self) -> list[tuple[CompileSummary, str]]:
        """Compiles started (`dynamo_start`) and not ended (no compilation_metrics yet), in start
        order, with the start's timestamp: while the log is still being written, the compiles under
        way; in a finished log, compiles whose end was never logged (the process died)."""
        found = []
        for (frame, generation), started in self.open_starts.items():
            compile_ = self.compile_of(frame, generation)
            if compile_ is not None:
                found.append((compile_, started))
        return found

    def status_of(self, key: CompileId | None, generation: int | None = None) -> str:
        """The status of the compile a compile id names (its compile summary's); every generation's,
        the most severe first, when no generation is given (the files-by-compile-id listing)."""
        if key is None:
            return STATUS_MISSING
        generations = self.generations_of(key) if generation is None else [generation]
        found = [c.status for g in generations if (c := self.compile_of(key, g)) is not None]
        return min(found, key=STATUS_SEVERITY.index) if found else STATUS_MISSING

    def graph_breaks_under(self, key: CompileId | None, generation: int = 0) -> list[GraphBreak]:
        """The graph breaks of the compile a compile id names (every attempt's, each once); for an id
        outside any compile, those logged under it."""
        compile_ = self.compile_of(key, generation) if key is not None else None
        if compile_ is not None:
            return compile_.graph_breaks
        mine = self.in_generation(key, generation)
        return [_graph_break(b, {}) for b in self.graph_breaks_of(key) if mine(b.line)]

    def guard_count(self, key: CompileId | None, generation: int = 0) -> int | None:
        """The guards of the compile logged under exactly this id, in this generation (None: not logged)."""
        counts = (m.get("guard_count") for m in self.own_metrics(key) if m.generation == generation)
        return next((n for n in counts if isinstance(n, int) and not isinstance(n, bool)), None)

    def totals(self) -> dict[str, Value]:
        """Every total (`totals.TOTALS`), by name."""
        return totals_of(self.compiles())

    def run_context(self) -> dict[str, Any]:
        """Where the report comes from: torch (its version and commit), the time span of the records
        read, the rank, this tool.

        The span is the earliest and latest glog time of the records read (other ranks' records left
        out). glog writes no year: it is the log file's modification year, as in raw.jsonl.
        """
        return {
            "torch_version": self.torch_version,
            "torch_commit": self.torch_commit,
            "first_record": self.first_timestamp,
            "last_record": self.last_timestamp,
            "rank": self.rank,
            "tool": f"tlparse-py {__version__}",
        }

    def summary(self, kept: bool = False) -> Summary:
        """What summary.json holds, as typed objects (the same that `summary_load.load_summary` reads back).

        `kept`: its compiles and timeline as kept (`kept_compiles`, `Timeline.items`), read back or
        made at each pass, for our writers; else lists (a caller may `msgspec.to_builtins` it)."""
        compiles, timeline = self.kept_compiles() if kept else self.compiles(), self.timeline()
        return Summary(
            compiles,
            [{"path": path, "bytes": size, "rank": self.rank} for path, size in self.source.files()],
            self.torch_version,
            dict(self.stats.counts),
            self.run_context(),
            questions.export_verdict(self) if self.settings.export or questions.export_error(self) is not None or questions.export_inferred(self) else None,
            __version__,
            vllm=vllm_run(self),
            processes=process_list(self, compiles), program=self.source.program,  # program: under `run`, how the program ended
            timeline=timeline.items() if kept else timeline.to_list(),
        )

    def to_dict(self) -> dict[str, Any]:
        """What `summary.json` holds (see summary.schema.json)."""
        return summary_dict(self.summary())


def followed(analysis: Analysis, read: list[CompileId | tuple[CompileId, int]], frames: dict[CompileId, CompileId | list[CompileId]],
             spool: SpooledCompiles | None = None) -> Iterator[CompileSummary]:
    """The compiles `compiles_read` listed, each after its frame's previous one (`_follow`,
    `follow_config`). `spool`: where the caller appends each compile yielded, in turn; the frame's
    previous compile is then read back from there, where it is needed (a frame that compiles again),
    not kept a frame (its strings cost 330 bytes a frame at the peak of `ready_for_pages`)."""
    previous: dict[int | FrameIdentity, CompileSummary | int] = {}  # the frame's latest compile, or its place in `spool`
    for at, place in enumerate(read):
        frame, generation = place_parts(place)
        compile_ = analysis._compile(frame, frames[frame], generation)
        identity = compile_.frame_identity
        if identity is not None:
            known = identity_key(identity)
            before = previous.get(known)
            if isinstance(before, int):
                assert spool is not None  # a place is kept only where the compiles go to a spool
                before = spool[before]
            _follow(compile_, before)
            follow_config(compile_, before, analysis.configs)
            previous[known] = at if spool is not None else compile_
        yield compile_


def spool_compiles(analysis: Analysis, stamp: tuple[int, ...]) -> bool:
    """Past SPOOLED_FROM, build the compiles straight into their scratch file, noting where each
    is, and keep them for `stamp` (the analysis' `kept_compiles`): never a list of them all (at
    100,000 compiles, 119 MB while it lasted). False where they are to be built as a list: fewer,
    or one that does not pack (a lone surrogate in a name)."""
    frames: dict[CompileId, CompileId | list[CompileId]] = {}
    read = compiles_read(analysis, frames)
    if not spooled(len(read)):
        return False
    spool, counts = SpooledCompiles(), Counter[int]()
    places: dict[CompileId | tuple[CompileId, int], CompileSummary | int] = {}
    try:
        for compile_ in followed(analysis, read, frames, spool):
            places[compile_place(compile_.key, compile_.generation)] = len(spool)
            spool.append(compile_)
            counts.update(config_counts((compile_,)))
    except (UnicodeEncodeError, TypeError, OverflowError):
        spool.close()
        return False
    unusual = analysis.configs.unusual(counts)  # the run's usual settings: known once every compile is
    spool.marked = lambda compiles: mark_unusual(compiles, unusual)
    spool.settle()
    analysis.memo.keep_spooled(stamp, spool, places)
    return True


def ready_for_pages(analysis: Analysis) -> None:
    """The compiles built, and where each is found (`compile_of`): once, before the page builder
    forks. A process that found them itself would read them all back from their spool for its
    first page (at 40,000 compiles, 66 MB each) only to note where each is."""
    stamp = compiles_stamp(analysis)
    if not analysis.memo.holds(stamp):  # past SPOOLED_FROM, built into their spool with where each is: never listed whole
        spool_compiles(analysis, stamp)
    analysis.memo.placed(stamp, analysis.compiles)


def _graph_break(logged: LoggedBreak, pages: dict[CompileId | None, str | None]) -> GraphBreak:
    attempt = logged.compile_id.directory_key() if logged.compile_id is not None else None
    return GraphBreak(logged.reason, logged.location, logged.explanation, logged.source, logged.function, logged.registry_id,
                      logged.hints, logged.doc_url, logged.library_location, display_key(attempt), pages.get(attempt), logged.url)


_PROCESS = attrgetter("key.process")  # `CompileSummary.process`, read in C


def process_list(analysis: Analysis, compiles_: Iterable[CompileSummary]) -> list[dict[str, Any]]:
    """The run's processes as summary.json lists them: number, glog pid, the logs it wrote to, its compiles."""
    compiles = Counter(map(_PROCESS, compiles_))  # counted in C: a live index asks at each update
    processes = analysis.processes
    return [{"process": i, "pid": pid, "logs": logs, "compiles": compiles[i]} for i, (pid, logs) in enumerate(zip(processes.pids, processes.logs))]


def compiles_read(store: Store, frames: dict[CompileId, CompileId | list[CompileId]], keys_from: int = 0,
                  starts_from: int = 0) -> list[CompileId | tuple[CompileId, int]]:
    """The compiles of the directory's keys from place `keys_from` on and of the ids that started
    again in a later generation from `later_starts[starts_from]` on (`Generations.in_log_order`), as
    `compile_place`s (`place_parts`: (frame compile, generation)), in log order; `frames` (frame
    compile → its attempts, in directory order; a lone one bare, not in a list) takes in the keys.
    At 100,000 compiles a pair and a list a compile cost 16 MB while the compiles were built."""
    found: list[CompileId | tuple[CompileId, int]] = []
    for key, generation in store.generations.in_log_order(store.directory, keys_from, starts_from):
        if key is None or not questions.is_compile(key):
            continue
        if generation is not None:  # an id that compiled in an earlier generation, where it started again
            if key in frames:
                found.append(compile_place(key, generation))
            continue
        frame = key.frame_key()
        attempts = frames.get(frame)
        if attempts is None:
            frames[frame] = key
            found.append(compile_place(frame, store.first_generation(frame)))
        elif isinstance(attempts, list):
            attempts.append(key)
        else:
            frames[frame] = [attempts, key]
    return found


def compiles_stamp(store: Store) -> tuple[int, ...]:
    """The state of the store `Analysis.compiles()` was built from: when it moves on, they are built again."""
    return (store.records, len(store.directory), len(store.metrics), len(store.pageless))


def keep_compiles(analysis: Analysis, compiles: list[CompileSummary], index: dict[CompileId | tuple[CompileId, int], CompileSummary]) -> None:
    """Take `compiles` (and `index`, by `compile_place`) as `analysis.compiles()` in its store's
    present state: what `live_compiles.LiveCompiles` built by building again only what changed."""
    analysis.memo.take(compiles_stamp(analysis), compiles, index)


def keep_timeline(analysis: Analysis, found: Timeline) -> None:
    """Take `found` as `analysis.timeline()` in its store's present state: what
    `live_compiles.LiveTimeline` kept, building again only the spans of the compiles that changed."""
    analysis.__dict__["_timeline_memo"] = (compiles_stamp(analysis), found)


def forget_compiles(analysis: Analysis, finished: bool = False) -> None:
    """Build `analysis.compiles()` and `analysis.timeline()` from its store again when next asked;
    `finished`: the log of a live one was read to its end (the final report: nothing is under way)."""
    analysis.live = analysis.live and not finished
    analysis.memo.forget()
    analysis.__dict__.pop("_timeline_memo", None)


def vllm_run(analysis: Store) -> VllmRun | None:
    """vLLM's piecewise compiles, so far (None for a log without vLLM's records); each call lists the
    Dynamo files of the compile ids its pieces were logged under."""
    if not analysis.vllm.active:
        return None
    files = {display_key(key): [VllmFile.at(a.url) for a in entries if not a.is_link] for key, entries in analysis.directory.items()}
    return analysis.vllm.run(files)


def summary_dict(summary: Summary, lists: bool = True) -> dict[str, Any]:
    """A report's summary.json, from its typed summary; `lists=False`: its lists of one entry per
    compile (`compiles`, `timeline`) left empty, for a writer that writes them a batch at a time."""
    data: dict[str, Any] = {
        "schema_version": schema_version(),
        "generator": {"name": "tlparse-py", "version": __version__},
        "inputs": summary.inputs,
        "torch_version": summary.torch_version,
        "stats": summary.stats,
        "totals": nested(totals_of(summary.compiles)),
        "compiles": [c.to_dict() for c in summary.compiles] if lists else [],
        "run": summary.run,
        "processes": summary.processes,
        "program": summary.program.to_dict() if summary.program is not None else None,
    }
    if summary.timeline is not None:  # since 4.2: a summary read back from an older summary.json has none
        data["timeline"] = summary.timeline if lists else []
    if summary.export is not None:
        data["export"] = summary.export
    if summary.vllm is not None:
        data["vllm"] = vllm_dict(summary.vllm)
    return data


def _status(metrics: list[MetricsEntry], breaks: list[LoggedBreak], restart_reasons: list[str]) -> str:
    """What happened to a compile, from its metrics (all attempts) and the graph breaks it logged.

    A failed compile that logged torch's "Skipping the function and falling back to eager" wrapper
    (or whose failure says so) was skipped on purpose: the frame ran eagerly. One whose failure is
    torch's recompile limit compiled nothing: the frame runs eagerly from then on. A graph break comes
    before an empty graph (a frame that breaks at once compiles nothing before the break); a restart
    counts only when no graph break explains it (e.g. TensorifyScalarRestartAnalysis).
    """
    if not metrics:
        return STATUS_MISSING
    if any(m.get("fail_type") for m in metrics):
        reasons = " ".join(str(m.get("fail_reason") or "") for m in metrics)
        skipped = any(b.skips_frame for b in breaks) or "Skipping the frame and falling back to eager" in reasons
        if skipped:
            return STATUS_SKIPPED
        last = metrics[-1]
        limit = over_recompile_limit(str(last.get("fail_type") or ""), str(last.get("fail_reason") or ""))
        return STATUS_LIMIT if limit else STATUS_ERROR
    if breaks:
        return STATUS_BREAK
    if any(not m.get("graph_op_count") for m in metrics):
        return STATUS_EMPTY
    if restart_reasons:
        return STATUS_RESTART
    return STATUS_OK


def _follow(compile_: CompileSummary, before: CompileSummary | None) -> None:
    """What a compile is, after its frame's previous compile in the same generation (`before`): why
    it happened, and its frame's name and user location where it logged none (one frame in one
    generation is one code object: the compile over the recompile limit logs neither). A library
    frame's code is called from many places, and torch's wrapper serves every model compiled through
    it: after one, such a compile keeps the library frame's name and place, never another compile's
    model or user line."""
    compile_.cause = _cause(compile_, before)
    if before is None:
        return
    library = before.library_frame
    if compile_.frame is None and library is not None and library.is_torch_wrapper:
        compile_.frame, compile_.library_frame = library.frame, wrapper_frame(library.frame, library.location)
    if compile_.library_frame is None:
        compile_.frame = compile_.frame or before.frame
        compile_.user_location = compile_.user_location or (library.location if library is not None else before.user_location)
    if compile_.is_retry:
        compile_.headline = "; ".join(filter(None, [f"retry after {before.label} failed", compile_.headline]))


def follow_config(compile_: CompileSummary, before: CompileSummary | None, configs: ConfigSnapshots) -> None:
    """The settings a compile ran with that differ from its frame's previous compile's (`before`, in
    the same generation), when both logged their config; the graph breaks that name one of them say
    so, and so does its headline: a compile under `torch._dynamo.config.patch(...)` and its recompile
    outside it break differently, and nothing else in the log says why."""
    changes = configs.changes_between(before.config, compile_.config) if before is not None else None
    if before is None or changes is None:
        return
    compile_.config_changes = diff = ConfigDiff(before.label, changes)
    compile_.config_since_page = before.url
    if changes:
        compile_.graph_breaks = [_naming(brk, changes) for brk in compile_.graph_breaks]
        compile_.headline = "; ".join(filter(None, [compile_.headline, diff.headline]))


def _naming(brk: GraphBreak, changes: list[ConfigChange]) -> GraphBreak:
    """A graph break with the changed settings its text names (`configs.names_setting`)."""
    named = tuple(change for change in changes if names_setting((brk.reason, brk.explanation, *brk.hints), change))
    return structs.replace(brk, config_changes=named) if named else brk


def config_counts(compiles: Iterable[CompileSummary]) -> Counter[int]:
    """How many compiles logged each config (`CompileSummary.config`)."""
    return Counter(c.config for c in compiles if c.config is not None)


def mark_unusual(compiles: Iterable[CompileSummary], unusual: dict[int, list[UnusualSetting]]) -> None:
    """Set each compile's settings whose value differs from the one most of the run's compiles had:
    `unusual`, per config, is `ConfigSnapshots.unusual` of the run's `config_counts`."""
    for compile_ in compiles:
        compile_.config_unusual = list(unusual.get(compile_.config, ())) if compile_.config is not None else []


def _cause(compile_: CompileSummary, previous: CompileSummary | None) -> str:
    """Why a compile happened: its frame's first, a recompile after a guard failed, or a retry
    right after the frame's previous compile failed with no guard failure logged."""
    if previous is None:
        return CAUSE_FIRST if not compile_.key.frame_compile_id else CAUSE_RECOMPILE
    if previous.failure is not None and not compile_.recompile_reasons:
        return CAUSE_RETRY
    return CAUSE_RECOMPILE


def _failure(fields: Mapping[str, Any]) -> Failure | None:
    """The exception a compile's metrics logged: its type and reason, the user line torch says it
    failed at, and whether suppress_errors was on; None when it logged none."""
    if not fields.get("fail_type"):
        return None
    reason = fields.get("fail_reason")
    filename, lineno = fields.get("fail_user_frame_filename"), fields.get("fail_user_frame_lineno")
    where = f"{filename}:{lineno}" if isinstance(filename, str) and filename and type(lineno) is int else None
    suppressed = fields.get("config_suppress_errors")
    return Failure(str(fields["fail_type"]), str(reason) if reason is not None else None, sys.intern(where) if where else None,
                   suppressed if isinstance(suppressed, bool) else None)


__all__ = ["Analysis", "CompileSummary", "CompileTime", "schema_version", "summary_dict", "vllm_run"]
