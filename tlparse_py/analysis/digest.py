"""The few facts a short summary of a report shows (`summary.md`, `--markdown`), answered once.

A report's digest is its totals as a table shows them, its failed compiles (the exception and the
user code line relative to the run's root), its most frequent graph-break kinds (with their user code
line), the frames it recompiled and its slowest compiles; a
multi-rank report's is each rank's totals and every total combined over the ranks. The Markdown
writer only words and links these: it asks nothing of the compiles itself.

User files are named relative to `source_root` (`--source-root`) when inside it, else to the
common folder of the run's user files (`stacks.user_folder`): a summary is published (a job
summary, a PR comment), and a runner's absolute paths mean nothing to its readers.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import Struct, field

from .stacks import inside_folder, is_user_code, split_location, user_folder
from .summary import (
    CompileSummary, FrameRecompiles, GraphBreakGroup, RankEntry, RanksSummary, Summary, failed_compiles, graph_break_groups,
    recompiled_frames, slowest,
)
from .totals import columns, over_ranks, totals_of
from .vllm import USUAL_INDEX as VLLM_USUAL_INDEX

ROWS = 5  # rows per section: a summary fits in about 45 lines whatever the log
FAILURE_ROWS = 3  # failed compiles named: each is a long line


class BreakRow(Struct):
    """One graph-break kind: how often, why, where it happened first, and the compiles it broke."""

    count: int
    registry_id: str
    reason: str
    where: str  # the user code line, relative to the run's root ("" when unknown)
    inside: str  # the library it broke inside ("" in user code)
    other_sites: int
    hint: str
    compiles: list[CompileSummary]


class RecompileRow(Struct):
    frame: str  # as compile ids write it: `0`, `!1/0`
    name: str
    compiles: list[CompileSummary]  # the times it compiled: not the compile over the recompile limit
    first_reason: str | None
    retry: tuple[str, str] | None  # (the retry's label, the failed compile's label)
    over_limit: CompileSummary | None = None  # its compile over the recompile limit, when it reached it


class FailureRow(Struct):
    """A failed compile: its exception in one line, its frame and where in the user's code."""

    compile: CompileSummary
    type: str
    message: str  # the exception's first line (`Failure.message`)
    where: str  # the frame's user code line, relative to the run's root ("" when unknown)
    failed_at: str  # the user code line torch says it failed at, relative too ("" when it names none)
    suppressed: bool | None  # torch._dynamo.config.suppress_errors was on: logged, not raised


USUAL_INDEX = "index.html"


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


class RankRow(Struct):
    entry: RankEntry
    totals: dict[str, str]


class RanksDigest(Struct):
    rows: list[RankRow]  # the first ranks read, each with its totals as shown
    combined: dict[str, str]  # every total over the ranks read, as its declaration combines it


def shown_totals(compiles: Sequence[CompileSummary]) -> dict[str, str]:
    values = totals_of(compiles)
    return {total.name: total.show(values.get(total.name)) for _, group in columns() for total in group}


def report_digest(summary: Summary, source_root: str = "") -> ReportDigest:
    compiles = summary.compiles
    roots = (source_root, user_folder(_user_paths(compiles)))
    groups = graph_break_groups(compiles)
    frames = recompiled_frames(compiles)
    failed = failed_compiles(compiles)
    return ReportDigest(
        totals=shown_totals(compiles),
        index=VLLM_USUAL_INDEX if summary.vllm is not None else USUAL_INDEX,
        breaks=[_break_row(group, roots) for group in groups[:ROWS]],
        break_kinds=len(groups),
        recompiles=[_recompile_row(frame) for frame in frames[:ROWS]],
        recompiled_frames=len(frames),
        failures=[_failure_row(c, roots) for c in failed[:FAILURE_ROWS]],
        failed=len(failed),
        slowest=slowest(compiles)[:ROWS],
        vllm=[(call.prefix or f"call {call.number}", [(group, len(pieces)) for group, pieces in call.groups()])
              for call in (summary.vllm.calls if summary.vllm is not None else [])],
    )


def ranks_digest(summary: RanksSummary, shown_ranks: int = ROWS * 2) -> RanksDigest:
    read = [entry for entry in summary.ranks if entry.summary is not None]
    rows = [RankRow(entry, shown_totals(entry.summary.compiles)) for entry in summary.ranks[:shown_ranks] if entry.summary is not None]
    combined = over_ranks([totals_of(entry.summary.compiles) for entry in read if entry.summary is not None])
    return RanksDigest(rows, {name: c.text for name, c in combined.items()})


def _break_row(group: GraphBreakGroup, roots: tuple[str, ...]) -> BreakRow:
    sites = group.sites
    site = sites[0]
    hints = group.first.hints
    return BreakRow(group.count, group.first.registry_id, group.reason,
                    relative_location(site.user_location, roots) if site.user_location else "", site.inside,
                    len(sites) - 1, hints[0] if hints else "", list({id(c): c for c in group.compiles}.values()))


def _recompile_row(frame: FrameRecompiles) -> RecompileRow:
    retry = (frame.retries[0][0].label, frame.retries[0][1].label) if frame.retries else None
    return RecompileRow(frame.frame, frame.name, frame.compiled, frame.first_reason, retry, frame.over_limit)


def _failure_row(compile_: CompileSummary, roots: tuple[str, ...]) -> FailureRow:
    failure = compile_.failure
    assert failure is not None  # a failed compile logged one
    where = relative_location(compile_.user_location, roots) if compile_.user_location else ""
    failed_at = relative_location(failure.user_location, roots) if failure.user_location else ""
    return FailureRow(compile_, failure.type, failure.message, where, failed_at, failure.suppressed)


def _user_paths(compiles: Sequence[CompileSummary]) -> list[str]:
    """Every file the run's frames, graph breaks and failures name (`user_folder` keeps the user's own)."""
    locations = [c.user_location for c in compiles] + [b.user_location for c in compiles for b in c.graph_breaks]
    locations += [c.failure.user_location for c in compiles if c.failure is not None]
    return [site[0] for location in locations if (site := split_location(location))]


def relative_location(location: str, roots: tuple[str, ...]) -> str:
    """A `file.py:23` of user code relative to the first of `roots` it is inside; as logged otherwise."""
    site = split_location(location)
    if site is None or not is_user_code(site[0]):
        return location
    relative = next((r for root in roots if (r := inside_folder(site[0], root)) is not None), None)
    return f"{relative}:{site[1]}" if relative is not None else location
