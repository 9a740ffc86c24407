"""The multi-rank report: rank reports in parallel, then the landing page, its JSON files and summary.json."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from msgspec.structs import replace
import orjson

from .._version import __version__
from ..analysis.compiles import schema_version, summary_dict
from ..report.chromium import EVENTS_SCRIPT, EVENTS_SCRIPT_LIMIT, events_script
from ..analysis.digest import ranks_digest
from ..report.markdown import summary_markdown
from ..options import Options
from ..pipeline import write_static
from ..report.render import render_page, trusted_html
from ..report.views.common import Page
from ..analysis.rank_answers import RankComparison, words
from ..analysis.store import InputInfo
from ..analysis.program import ProgramExit
from ..analysis.summary import RankEntry, RanksSummary
from ..report.folder_writer import FolderWriter
from ..report.staging import ReportWriter
from ..report.targets import check_target
from ..reading.inputs import file_size, kept_path
from .cluster import close, connect
from .compare import Landing, RankRow, analyse, as_json, collective_schedules, primary, rank_rows, runtime_trace
from .run import RankJob, RankResult, build_all, discover, kept_as


def merge_chromium(writer: FolderWriter, results: list[RankResult], out: Any) -> int:
    """Concatenate every rank's chromium events with pid = rank (one rank file in memory at a time)."""
    count = 0
    out.write(b"[")
    for r in primary(results):
        try:
            events = orjson.loads(writer.sub(r.folder).read("chromium_events.json") or b"")
        except orjson.JSONDecodeError:
            continue
        for event in events if isinstance(events, list) else []:
            if isinstance(event, dict):
                event["pid"] = r.rank
                out.write(b"\n" if not count else b",\n")
                out.write(orjson.dumps(event, option=orjson.OPT_SORT_KEYS))
                count += 1
    out.write(b"\n]" if count else b"]")
    return count


def write_outputs(writer: FolderWriter, landing: Landing) -> list[str]:
    """The landing's JSON files and every rank's collectives_parity.json; returns notes for stdout."""
    notes = []
    for folder, parity in landing.parity.items():
        writer.write(f"{folder}/collectives_parity.json", json.dumps(as_json(parity), indent=2))
    with writer.open("chromium_events.json") as out:
        landing.chromium_events = merge_chromium(writer, landing.results, out)
        merged = out.tell()
    if merged <= EVENTS_SCRIPT_LIMIT:  # the "Open in Perfetto" button's copy (see chromium.py)
        writer.write(EVENTS_SCRIPT, events_script(writer.read("chromium_events.json") or b"[]"))
    estimations = landing.comparison.estimations
    if estimations:
        writer.write("runtime_estimations.json", json.dumps(as_json(estimations), indent=2))
        writer.write("chromium_trace_with_runtime.json", json.dumps(runtime_trace(estimations), indent=2, sort_keys=True))
        notes.append("Runtime estimations: runtime_estimations.json")
    schedules = collective_schedules(landing.ranks)
    if schedules:
        writer.write("collective_schedules.json", json.dumps(schedules, indent=2))
        notes.append("Collective schedules: collective_schedules.json")
    return notes


class LandingPage(Page, kw_only=True):
    """The multi-rank landing page: whether the ranks agree, and each rank's report."""

    template: ClassVar[str] = "landing.html.j2"
    custom_header: Any  # the user's --custom-header-html, trusted
    landing: Landing
    found: RankComparison  # landing.comparison: what the ranks' comparison found
    rows: list[RankRow]
    words: Callable[[list[str]], str]
    program: ProgramExit | None = None  # how the program (the launcher) ended, under `tlparse-py run`


def landing_page(landing: Landing, source: InputInfo, custom_header_html: str) -> LandingPage:
    return LandingPage(
        title="Multi-rank report",
        source=source,
        failures_link=False,
        custom_header=trusted_html(custom_header_html),
        landing=landing,
        found=landing.comparison,
        rows=rank_rows(landing),
        words=words,
        program=source.program,
    )


class RankFailedPage(Page, kw_only=True):
    """In place of a rank's report: its log, and why it could not be built."""

    template: ClassVar[str] = "rank_failed.html.j2"
    log: str
    error: str


def write_all_ranks(
    folder: Path, out: Path, overwrite: bool, options: Options, on_done: Callable[[RankResult], None] | None = None,
    scheduler: str | None = None, kept: tuple[Path, Path] | None = None, program: ProgramExit | None = None,
) -> tuple[Landing, list[str]]:
    """The whole multi-rank report, all or nothing: rank reports, comparisons, landing page.

    With `scheduler` (a Dask scheduler's address) the ranks are built on that cluster, which must
    see this filesystem; it is reached before anything is written (cluster.ClusterError if not).
    `kept`: (where the logs are read, where they will be kept): every path the report shows names
    where they are kept (`run` moves its trace into the report once it is written). `program`: how
    the program that wrote the logs ended (`run`'s launcher, torchrun), for the landing."""
    # ranks already run in parallel: no highlighting workers inside each rank's process
    jobs = kept_as(discover(folder, replace(options, workers=0)), kept)
    check_target(out, overwrite)  # a refused -o is said at once, not after the cluster's connect timeout
    client = connect(scheduler) if scheduler else None
    try:
        return _write(kept_path(folder, kept), out, overwrite, options, jobs, on_done, client, program)
    finally:
        if client is not None:
            close(client)


def _write(
    folder: Path, out: Path, overwrite: bool, options: Options, jobs: list[RankJob], on_done: Callable[[RankResult], None] | None, client: Any,
    program: ProgramExit | None = None,
) -> tuple[Landing, list[str]]:
    writer = ReportWriter(out, overwrite)
    try:
        results = build_all(jobs, writer.root, on_done=on_done, cluster=client)
        write_failed_pages(writer, results)
        landing = analyse(results)
        notes = write_outputs(writer, landing)
        write_static(writer)
        source = landing_source(folder, jobs, program)
        summary = landing_summary(landing, jobs, program)
        writer.write("summary.json", orjson.dumps(summary, option=orjson.OPT_INDENT_2))
        landing.summary = ranks_summary(landing, summary, program)
        writer.write("summary.md", summary_markdown(ranks_digest(landing.summary)))
        writer.write("index.html", render_page(landing_page(landing, source, options.custom_header_html)))
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    return landing, notes


def landing_source(folder: Path, jobs: list[RankJob], program: ProgramExit | None = None) -> InputInfo:
    """What the landing page says it was written from: the folder (as named), its logs' bytes now,
    and how the program that wrote them ended (under `run`)."""
    return InputInfo(str(folder), sum(file_size(job.log) for job in jobs), [], program=program)


def write_failed_pages(writer: FolderWriter, results: list[RankResult]) -> None:
    """A rank that could not be built (unreadable, or its worker died on each try) gets an index
    page saying so, so that the landing page's links to it lead somewhere."""
    for r in results:
        if r.error and writer.read(f"{r.folder}/index.html") is None:
            name = f"Rank {r.rank}" if r.rank is not None else r.folder
            page = RankFailedPage(title=f"{name}: no report", root="../", source=InputInfo(r.log, 0), failures_link=False,
                                  log=r.log.rpartition("/")[2], error=r.error)
            writer.write(f"{r.folder}/index.html", render_page(page))


def landing_summary(landing: Landing, jobs: list[RankJob], program: ProgramExit | None = None) -> dict[str, Any]:
    """The multi-rank summary.json: every rank's summary, the divergences between ranks, and how the
    program (the launcher) ended under `run`."""
    return {
        "schema_version": schema_version(),
        "generator": {"name": "tlparse-py", "version": __version__},
        "inputs": [{"path": job.named, "bytes": file_size(job.log), "rank": job.rank} for job in jobs],
        "ranks": [
            {"rank": r.rank, "folder": r.folder, "error": r.error or None, "summary": summary_dict(r.summary) if r.summary is not None else None}
            for r in landing.results
        ],
        "divergences": as_json(landing.comparison.divergences),
        "notes": as_json(landing.comparison.notes),
        "compiler_collectives": as_json(landing.comparison.collectives),
        "program": program.to_dict() if program is not None else None,
    }


def ranks_summary(landing: Landing, written: dict[str, Any], program: ProgramExit | None = None) -> RanksSummary:
    """The multi-rank summary.json just written, typed (as `analysis.summary_load.load_ranks` reads it back)."""
    return RanksSummary(
        [RankEntry(r.rank, r.folder, r.error or None, r.summary) for r in landing.results],
        written["divergences"], written["inputs"], __version__, written["notes"], program,
    )
