"""The few facts a short summary of a report shows (`summary.md`, `--markdown`), answered once.

A report's digest is its totals as a table shows them, its failed compiles (the exception and the
user code line relative to the run's root), its most frequent graph-break kinds (with their user code
line), the frames it recompiled, the compiles whose config differs (from their frame's previous
compile, or from most of the run's compiles) and its slowest compiles; a
multi-rank report's is each rank's totals and every total combined over the ranks. The Markdown
writer only words and links these: it asks nothing of the compiles itself.

User files are named relative to `source_root` (`--source-root`) when inside it, else to the
common folder of the run's user files, by the one rule of `roots.py`: a summary is published (a job
summary, a PR comment), and a runner's absolute paths mean nothing to its readers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from msgspec import Struct, field

from .program import ProgramExit
from .roots import relative_location, user_paths
from .stacks import split_location, user_folder
from .compile_groups import FrameRecompiles, GraphBreakGroup, failed_compiles, graph_break_groups, recompiled_frames, slowest
from .summary import CompileSummary, RankEntry, RanksSummary, Summary
from .totals import columns, over_ranks, totals_of
from .vllm import USUAL_INDEX as VLLM_USUAL_INDEX

ROWS = 5  # rows per section: a summary fits in about 45 lines whatever the log
FAILURE_ROWS = 3  # failed compiles named: each is a long line
CONFIG_NOTES = 2  # per graph-break kind: the changed settings its breaks name


class BreakRow(Struct):
    """One graph-break kind: how often, why, where it happened first, and the compiles it broke."""

    count: int
    registry_id: str
    reason: str
    where: str  # the user code line, relative to the run's root ("" when unknown)
    inside: str  # the library it broke inside ("" in user code)
    other_sites: int
    hint: str  # torch's first hint, as advice to the user ("" for torch's own break: `GraphBreak.advice`)
    compiles: list[CompileSummary]
    owner: str = ""  # `torch's own break (optimizer.py:79)` for torch's graph breaks, else ""
    config_notes: list[str] = field(default_factory=list)  # the changed settings its breaks name (`CompileSummary.config_notes`)


class RecompileRow(Struct):
    frame: str  # as compile ids write it: `0`, `!1/0`
    name: str
    compiles: list[CompileSummary]  # the times it compiled: not the compile over the recompile limit
    first_reason: str | None
    retry: tuple[str, str] | None  # (the retry's label, the failed compile's label)
    over_limit: CompileSummary | None = None  # its compile over the recompile limit, when it reached it
    inside: str = ""  # the library its library frame is in ("" for none: `FrameRecompiles.inside`)


class FailureRow(Struct):
    """A failed compile: its exception in one line, its frame and where in the user's code."""

    compile: CompileSummary
    type: str
    message: str  # the exception's first line (`Failure.message`)
    where: str  # the frame's user code line, relative to the run's root ("" when unknown)
    failed_at: str  # the user code line torch says it failed at, relative too ("" when it names none)
    suppressed: bool | None  # torch._dynamo.config.suppress_errors was on: logged, not raised


class ConfigRow(Struct):
    """A compile whose config differs: from its frame's previous compile, or from most of the run's compiles."""

    compile: CompileSummary
    texts: list[str]  # `CompileSummary.config_texts`, one line each


USUAL_INDEX = "index.html"


EXPORT_HEADINGS = {"failed": "Export failed", "issues": "Export issues", "ok": "Export succeeded", "unknown": "Export verdict unknown"}


class ExportRow(Struct):
    """An export's verdict (summary.json `export`, `questions.export_verdict`), user files relative."""

    status: str  # "failed", "issues", "ok" or "unknown"
    basis: str  # "logged" or "inferred"
    error: str  # the failure in one line ("" when none)
    issues: int  # what draft_export found
    suggested_fix: str
    cause: str  # what a failed export trace failed on: "data_dependent_guard", "data_dependent_branch", or "" when unknown
    where: str  # the user code line it failed at, relative to the run's root ("" when unknown)
    source: str  # that line's text
    symbol: str  # the unbacked symbol it could not guard on
    guard: str  # the guard on a data-dependent expression torch could not decide ("" when not logged)
    call_at: str  # the user's export call whose trace failed, relative ("" when none)
    partial_graph: str | None  # the graph traced until then
    failed_exports: int  # export traces that failed
    hint: str  # how to write what it failed on so that it exports ("" when unknown)

    @property
    def heading(self) -> str:
        return EXPORT_HEADINGS.get(self.status, "Export")

    @property
    def headline(self) -> str:
        """The verdict in one line, for a terminal or a notebook: `Export failed: a data-dependent branch
        at export2.py:20 (if h.mean() > 0:)`; the heading alone when there is no more to say."""
        source = f" ({self.source.strip()})" if self.source.strip() else ""
        if self.cause == "data_dependent_guard":
            what = f"a guard on a data-dependent value at {self.where}{source}"
        elif self.cause == "data_dependent_branch":
            what = f"a data-dependent branch at {self.where}{source}"
        elif self.status == "failed" and self.call_at:
            what = f"the export at {self.call_at} failed; torch logged the partial graph, not the exception"
        elif self.status == "failed":
            what = self.error.splitlines()[0] if self.error else ""
        elif self.status == "issues":
            what = f"{self.issues} issue{'s' if self.issues != 1 else ''} found during export"
        else:
            what = ""
        return f"{self.heading}: {what}" if what else self.heading


class ReportDigest(Struct):
    totals: dict[str, str]  # each total as shown ("unknown" when the log does not tell)
    index: str = USUAL_INDEX  # the page that lists every compile (its anchors: graph-breaks, recompiles, slowest)
    breaks: list[BreakRow] = field(default_factory=list)
    break_kinds: int = 0
    recompiles: list[RecompileRow] = field(default_factory=list)
    recompiled_frames: int = 0
    failures: list[FailureRow] = field(default_factory=list)
    failed: int = 0  # failed compiles, all of them
    slowest: list[CompileSummary] = field(default_factory=list)
    vllm: list[tuple[str, list[tuple[str, int]]]] = field(default_factory=list)  # (compile call, [(range or size, pieces)])
    export: ExportRow | None = None  # the export verdict, when the report has one
    program: str = "torch.compile"  # what the log is a report of: "torch.export" for an export's log (no compile)
    config: list[ConfigRow] = field(default_factory=list)  # the first compiles whose config differs
    config_compiles: int = 0  # how many compiles' configs differ, all of them
    run: RunLine = field(default_factory=lambda: RunLine())
    columns: list[tuple[str, list[str]]] = field(default_factory=lambda: shown_columns())


class RunLine(Struct):
    """What a summary says of the run before its totals: its log, how the program ended and its context."""

    log_name: str = ""
    program_exit: ProgramExit | None = None  # how the program `tlparse-py run` ran ended; None: unknown (no `run`)
    torch_version: str = "unknown"
    first_record: str | None = None
    last_record: str | None = None
    rank: Any = None  # as the summary holds it (an int; what summary.json held, loaded back)
    tool: str = ""  # what wrote the summary: `tlparse-py 0.9`


class RankRow(Struct):
    entry: RankEntry
    totals: dict[str, str]


class RanksDigest(Struct):
    rows: list[RankRow]  # the first ranks read, each with its totals as shown
    combined: dict[str, str]  # every total over the ranks read, as its declaration combines it
    ranks: int = 0  # the ranks of the report, read or not
    unread: list[str] = field(default_factory=list)  # the folders of the ranks that could not be read
    divergences: list[dict[str, Any]] = field(default_factory=list)  # `RanksSummary.divergences`
    notes: list[dict[str, Any]] = field(default_factory=list)  # `RanksSummary.notes`: cache results that differ
    program_exit: ProgramExit | None = None  # how the launcher ended, under `tlparse-py run`
    generator_version: str = ""
    columns: list[tuple[str, list[str]]] = field(default_factory=lambda: shown_columns())


def shown_columns() -> list[tuple[str, list[str]]]:
    """The totals' columns as a table shows them (`totals.columns`): each column's heading and the
    names of the totals it shows together (`a / b / c`)."""
    return [(column, [total.name for total in group]) for column, group in columns()]


def digest_of(summary: Summary | RanksSummary, source_root: str = "") -> ReportDigest | RanksDigest:
    """The digest of a report, or of a multi-rank report."""
    return ranks_digest(summary) if isinstance(summary, RanksSummary) else report_digest(summary, source_root)


def shown_totals(compiles: Sequence[CompileSummary]) -> dict[str, str]:
    values = totals_of(compiles)
    return {total.name: total.show(values.get(total.name)) for _, group in columns() for total in group}


def report_digest(summary: Summary, source_root: str = "") -> ReportDigest:
    compiles = summary.compiles
    roots = (source_root, user_folder([*user_paths(compiles), *_export_paths(summary.export)]))
    groups = graph_break_groups(compiles)
    frames = recompiled_frames(compiles)
    failed = failed_compiles(compiles)
    differing = [c for c in compiles if c.config_texts]
    return ReportDigest(
        totals=shown_totals(compiles),
        index=VLLM_USUAL_INDEX if summary.vllm is not None else USUAL_INDEX,
        breaks=[_break_row(group, roots) for group in groups[:ROWS]],
        break_kinds=len(groups),
        recompiles=[_recompile_row(frame) for frame in frames[:ROWS]],
        recompiled_frames=len(frames),
        failures=[_failure_row(c, roots) for c in failed[:FAILURE_ROWS]],
        failed=len(failed),
        slowest=slowest(compiles, ROWS),
        vllm=[(call.prefix or f"call {call.number}", [(group, len(pieces)) for group, pieces in call.groups()])
              for call in (summary.vllm.calls if summary.vllm is not None else [])],
        export=_export_row(summary.export, roots) if summary.export is not None else None,
        program="torch.export" if summary.export is not None and not compiles else "torch.compile",
        config=[ConfigRow(c, c.config_texts) for c in differing[:ROWS]],
        config_compiles=len(differing),
        run=_run_line(summary),
    )


def _run_line(summary: Summary) -> RunLine:
    run = summary.run
    return RunLine(summary.log_name, summary.program, str(run.get("torch_version") or summary.torch_version or "unknown"),
                   run.get("first_record"), run.get("last_record"), run.get("rank"),
                   str(run.get("tool") or f"tlparse-py {summary.generator_version}".strip()))


def ranks_digest(summary: RanksSummary, shown_ranks: int = ROWS * 2) -> RanksDigest:
    read = [entry for entry in summary.ranks if entry.summary is not None]
    rows = [RankRow(entry, shown_totals(entry.summary.compiles)) for entry in summary.ranks[:shown_ranks] if entry.summary is not None]
    combined = over_ranks([totals_of(entry.summary.compiles) for entry in read if entry.summary is not None])
    return RanksDigest(rows, {name: c.text for name, c in combined.items()}, len(summary.ranks),
                       [entry.folder for entry in summary.ranks if entry.error], summary.divergences, summary.notes,
                       summary.program, summary.generator_version)


def _break_row(group: GraphBreakGroup, roots: tuple[str, ...]) -> BreakRow:
    sites = group.sites
    site = sites[0]
    hints = group.first.advice
    return BreakRow(group.count, group.first.registry_id, group.reason,
                    relative_location(site.user_location, roots) if site.user_location else "", site.inside,
                    len(sites) - 1, hints[0] if hints else "", list({id(c): c for c in group.compiles}.values()), group.first.owner,
                    list(dict.fromkeys(note for c, brk in group.breaks for note in c.config_notes(brk)))[:CONFIG_NOTES])


def _recompile_row(frame: FrameRecompiles) -> RecompileRow:
    retry = (frame.retries[0][0].label, frame.retries[0][1].label) if frame.retries else None
    return RecompileRow(frame.frame, frame.name, frame.compiled, frame.first_reason, retry, frame.over_limit, frame.inside)


def _failure_row(compile_: CompileSummary, roots: tuple[str, ...]) -> FailureRow:
    failure = compile_.failure
    assert failure is not None  # a failed compile logged one
    where = relative_location(compile_.user_location, roots) if compile_.user_location else ""
    failed_at = relative_location(failure.user_location, roots) if failure.user_location else ""
    return FailureRow(compile_, failure.type, failure.message, where, failed_at, failure.suppressed)


def _export_row(export: dict[str, Any], roots: tuple[str, ...]) -> ExportRow:
    traced = export.get("trace_failure") or {}
    where, call_at = traced.get("user_location") or "", traced.get("call_location") or ""
    return ExportRow(
        str(export.get("status") or "unknown"), str(export.get("basis") or "logged"), str(export.get("error") or ""),
        len(export.get("issues") or []), str(export.get("suggested_fix") or ""), str(traced.get("cause") or ""),
        relative_location(where, roots) if where else "", str(traced.get("user_source") or ""), str(traced.get("symbol") or ""),
        str(traced.get("guard") or ""),
        relative_location(call_at, roots) if call_at else "", traced.get("partial_graph"), int(traced.get("failed_exports") or 0),
        str(traced.get("hint") or ""),
    )


def _export_paths(export: dict[str, Any] | None) -> list[str]:
    """The user files a failed export trace names: its call, and the line it failed at."""
    traced = (export or {}).get("trace_failure") or {}
    locations = [traced.get("call_location"), traced.get("user_location")]
    return [site[0] for location in locations if isinstance(location, str) and (site := split_location(location))]
