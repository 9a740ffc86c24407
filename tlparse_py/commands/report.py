"""`tlparse-py [report] PATH`: the report command. Flags and meanings follow tlparse 0.4.3.

Exit codes: 0 report written; 1 report written but `--strict`/`--strict-compile-id` found problems
(or writing failed); 2 the input or output cannot be used, or `--fail-on` is malformed (nothing is
written); 3 report written and a `--fail-on` condition held (1 wins when `--strict` also failed).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from msgspec.structs import replace

from .. import shutdown
from ..analysis.compiles import Analysis
from ..analysis.digest import ranks_digest, report_digest
from ..analysis.kinds import load_plugins
from ..analysis.program import ProgramExit
from ..analysis.stacks import is_user_code, split_location
from ..analysis.store import InputInfo
from ..analysis.summary import RanksSummary, Summary
from ..analysis.totals import check_report, columns, totals_of
from ..options import Options
from ..pipeline import write_report
from ..reading.gunzip import GunzipRefused, is_gzip
from ..reading.inputs import ChosenInput, InputError, SeveralRanks, choose_input, kept_path, skipped_symlinks
from ..report.markdown import summary_markdown
from ..report.writer import COMMITTED, OutputError, ReportKeptElsewhere, abort_all, append_output
from ..terminal import sanitize
from .common import CliError, echo_diagnostic, echo_err, echo_out, open_browser, size
from .gates import raise_if_gates_fail
from .request import ReportRequest, ServeAt, report_options, serve_options

if TYPE_CHECKING:
    from ..multirank import RankResult


@click.command("report", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("path", required=False, type=click.Path(path_type=Path))
@report_options
@serve_options
def report(path: Path | None, **params: Any) -> None:
    """Write an HTML report of what torch.compile did, from the logs TORCH_TRACE wrote.

    PATH is a log file (optionally .gz) or the TORCH_TRACE folder; it defaults to $TORCH_TRACE.
    From a folder, the logs of its newest run are read: a program, the child processes it started
    (known by their stacks) and any whose logs overlap theirs in time. The others are named, with
    why, at the top of the index; --all-runs reads every log.
    With --serve the report's folder is then served over HTTP until Ctrl-C (when the report's
    checks pass: --strict or --fail-on failing exits as without it).
    """
    request = ReportRequest.parse(params)  # before any work: a malformed option writes nothing
    serve_at = ServeAt.parse(params)
    server = None
    if serve_at is not None:  # imported only here: http.server costs ~17 ms at start-up
        from .serve import open_server

        server = open_server(serve_at, request.out)  # a port in use: exit 2, before any work
        request = replace(request, no_browser=True)
    previous = shutdown.install()
    try:
        write_and_check(path, request)
    except shutdown.Terminated:
        # the writer already removed its staging folder while unwinding; workers may still be
        # writing into it, so stop them first and remove it again
        shutdown.stop_children()
        abort_all()
        if request.out.absolute() in COMMITTED:  # it came while the report was put in place: that was finished first
            shutdown.exit_now(f"Terminated (SIGTERM): the report was written to {sanitize(request.out)}; its checks were not run")
        shutdown.exit_now(f"Terminated (SIGTERM): nothing was changed in {sanitize(request.out)}")
    finally:
        shutdown.restore(previous)
    if server is not None:
        from .serve import serve_until_stopped

        serve_until_stopped(server)


def write_and_check(path: Path | None, request: ReportRequest, kept: tuple[Path, Path] | None = None,
                    program: ProgramExit | None = None) -> None:
    """Write the report of PATH as requested, then --single-file, the gates and --markdown (exit codes
    by CliError: see the module's docstring). `kept`: (where the trace is read, where it will be
    kept), for `run`, whose trace moves into the report once it is written: the report names that;
    `program`: how the program that wrote PATH ended (`run`), which the report shows."""
    path = path_or_env(path)
    request.check_not_an_input(path)
    load_plugins(warn=echo_err)
    out, options = request.out, request.options
    if path.is_dir():
        for note in skipped_symlinks(path):
            echo_err(note)
    started = time.perf_counter()
    if request.all_ranks_html:
        ranks = _write_multi_rank(path, request, request.dask_scheduler, kept, program)
        raise_if_gates_fail(_after_report(ranks, request), str(out))
        return
    try:
        chosen = choose(path, request.latest, options.export, request.all_runs)
    except SeveralRanks as several:
        echo_err(several.said_of(kept_path(path, kept)))
        ranks = _write_multi_rank(path, request, kept=kept, program=program)
        raise_if_gates_fail(_after_report(ranks, request), str(out))
        return
    report = _write(chosen, out, request.overwrite, request.verbose, options, kept, program)
    conclude(report, chosen, started, request)


def conclude(report: Analysis, chosen: ChosenInput, started: float, request: ReportRequest, browser: bool = True) -> None:
    """Once a report is written: its summary lines, --single-file, the gates, --markdown, --strict,
    the browser (exit codes by CliError)."""
    out = request.out
    summary = report.summary()
    _summarise(report, summary, out, chosen, started, request.verbose)
    _warn_about_source_links(summary, request.options)
    failed = _after_report(summary, request)
    _check_strict(report, request.strict, request.strict_compile_id, out)
    if browser and not request.no_browser:
        open_browser(out)
    raise_if_gates_fail(failed, str(out))


def path_or_env(path: Path | None) -> Path:
    if path is not None:
        return path
    env = os.environ.get("TORCH_TRACE")
    if env:
        return Path(env)
    raise click.UsageError("missing PATH (a trace log or the TORCH_TRACE folder); $TORCH_TRACE is not set either")


def choose(path: Path, latest: bool, export: bool, all_runs: bool = False) -> ChosenInput:
    try:
        # a file or folder with no record at all is refused here: exit 2, nothing written
        chosen = choose_input(path, latest, export, all_runs)
        for log in chosen.logs:
            with open(log, "rb") as handle:
                handle.read(1)
    except SeveralRanks:
        raise
    except InputError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot read {exc.filename or path}: {exc.strerror or exc}") from None
    if chosen.note:
        echo_err(chosen.note)
    return chosen


class ProgressBar:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal (never in CI logs)."""

    def __init__(self, total: int):
        self.total = total
        self.started = time.perf_counter()
        self.enabled = sys.stderr.isatty()
        self.drawn = False

    def __call__(self, done: int, records: int) -> None:
        if not self.enabled:
            return
        seconds = max(time.perf_counter() - self.started, 1e-6)
        rate = done / 1e6 / seconds
        if self.total and done <= self.total:
            filled = int(30 * done / self.total)
            bar = f"[{'#' * filled}{'.' * (30 - filled)}] {100 * done / self.total:3.0f}% "
        else:
            bar = ""
        sys.stderr.write(f"\r{bar}{done / 1e6:,.0f} MB, {records:,} records, {rate:.0f} MB/s ")
        sys.stderr.flush()
        self.drawn = True

    def clear(self) -> None:
        if self.drawn:
            sys.stderr.write("\r" + " " * 79 + "\r")
            sys.stderr.flush()


def source_info(chosen: ChosenInput, kept: tuple[Path, Path] | None = None, program: ProgramExit | None = None) -> InputInfo:
    """What the report says it was written from: the log, the logs read with it, the others and why
    they were not read (sizes now); with `kept` (read in, kept in), the log where it is kept, not the
    folder it was read in; with `program`, how the program that wrote them ended (`run`)."""
    also = [p.name for p in chosen.also]
    info = InputInfo(str(chosen.log), size(chosen.log), [p.name for p in chosen.others], also, {p.name: size(p) for p in chosen.also},
                     chosen.left_out, chosen.every_log, program)
    return kept_as(info, kept)


def kept_as(info: InputInfo, kept: tuple[Path, Path] | None) -> InputInfo:
    """The source as the kept trace's path (`run`'s trace moves into OUT/trace once the report is written)."""
    return info if kept is None else replace(info, path=str(kept_path(Path(info.path), kept)))


def _write(chosen: ChosenInput, out: Path, overwrite: bool, verbose: bool, options: Options, kept: tuple[Path, Path] | None = None,
           program: ProgramExit | None = None) -> Analysis:
    source = source_info(chosen, kept, program)
    total = sum(size(p) for p in chosen.logs if not is_gzip(p))
    progress = ProgressBar(total)
    try:
        return write_report(
            chosen.logs,
            out,
            overwrite=overwrite,
            options=options,
            source=source,
            echo=echo_diagnostic if verbose else None,
            on_rank=rank_detected,
            progress=progress,
        )
    except ReportKeptElsewhere as exc:
        raise CliError(str(exc), 1) from None
    except (OutputError, GunzipRefused) as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        target = exc.filename or out
        raise CliError(f"could not write the report ({target}: {exc.strerror or exc}); nothing was changed in {out}", 1) from None
    finally:
        progress.clear()


def _write_multi_rank(path: Path, request: ReportRequest, scheduler: str | None = None, kept: tuple[Path, Path] | None = None,
                      program: ProgramExit | None = None) -> RanksSummary:
    """--all-ranks-html: a report per rank, in parallel (locally, or on the Dask cluster at
    `scheduler`), and a landing page comparing them; `kept` and `program`: as for `write_and_check`."""

    def done(result: RankResult) -> None:
        if result.error:
            echo_err(f"{result.folder}: could not be read: {result.error}")
        echo_err(f"{result.folder} ({Path(result.log).name}): {result.stats_line}")

    from ..multirank import ClusterError, write_all_ranks  # only for rank folders: most reports are one log

    started = time.perf_counter()
    try:
        out = request.out
        landing, notes = write_all_ranks(path, out, request.overwrite, request.options, on_done=done, scheduler=scheduler, kept=kept,
                                         program=program)
    except InputError as exc:
        raise CliError(str(exc)) from None
    except ClusterError as exc:
        raise CliError(str(exc), exc.exit_code) from None
    except ReportKeptElsewhere as exc:
        raise CliError(str(exc), 1) from None
    except (OutputError, GunzipRefused) as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"could not write the report ({exc.filename or out}: {exc.strerror or exc}); nothing was changed in {out}", 1) from None
    for note in notes:
        echo_out(note)
    echo_out(f"Multi-rank report generated under {out}")
    echo_out("Individual pages: rank_*/index.html")
    assert landing.summary is not None  # set once its summary.json is written
    first = landing.comparison.first
    if landing.diverges and first is not None:
        more = len(landing.comparison.divergences) - 1
        echo_err(f"Ranks diverge, first at {sanitize(first.line)} ({'and ' + str(more) + ' more: ' if more else ''}"
                 f"{sanitize(out / 'index.html')}#divergence)")
    records = sum(r.records for r in landing.results)
    echo_err(f"Report: {sanitize(out / 'index.html')}: {ranks_totals_line(landing.summary)} "
             f"({len(landing.ranks)} ranks, {records} records, {time.perf_counter() - started:.2f} s)")
    if not request.no_browser:
        open_browser(out)
    return landing.summary


def rank_detected(rank: int) -> None:
    echo_err(f"Detected rank: {rank}")


def _summarise(report: Analysis, summary: Summary, out: Path, chosen: ChosenInput, started: float, verbose: bool) -> None:
    stats, diagnostics = report.stats, report.diagnostics
    echo_err(stats.format())
    if report.unknown_kinds:
        names = ", ".join(f"{sanitize(k)} ({n})" for k, n in sorted(report.unknown_kinds.items()))
        echo_err(f"Unknown record kinds, shown generically in the report: {names}")
    if diagnostics.total and not verbose:
        echo_err(f"{diagnostics.total} line(s) skipped or damaged; they are listed in the report (index.html#diagnostics), or run with -v")
    export = report_digest(summary).export
    if export is not None and export.status in ("failed", "issues"):
        echo_err(f"{sanitize(export.headline)} ({sanitize(out / 'index.html')}#export)")
    seconds = time.perf_counter() - started
    megabytes = size(chosen.log) / 1e6
    echo_err(f"Report: {out / 'index.html'}: {totals_line(summary)} "
             f"({stats['ok']} records, {seconds:.2f} s, {megabytes / max(seconds, 1e-6):.1f} MB/s)")


def totals_line(summary: Summary) -> str:
    """`compiles 5, frames 5, graph breaks 3, ..., compile time 17.08 s` (every declared total)."""
    values = totals_of(summary.compiles)
    return ", ".join(f"{column} {' / '.join(total.show(values[total.name]) for total in group)}" for column, group in columns())


def ranks_totals_line(summary: RanksSummary) -> str:
    """`compiles 5–9 per rank, ..., compile time max 11.19 s, median 8.53 s per rank, ...`: every
    declared total over the ranks read, combined as its declaration says."""
    combined = ranks_digest(summary).combined
    return ", ".join(f"{column} {' / '.join(combined[total.name] for total in group)}" for column, group in columns())


def _warn_about_source_links(summary: Summary, options: Options) -> None:
    """One line when links to the user's code cannot be what the user meant (README, --source-url)."""
    paths = [site[0] for c in summary.compiles if (site := split_location(c.user_location)) and is_user_code(site[0])]
    if not paths:
        return
    if options.source_root:
        root = options.source_root.rstrip("/") + "/"
        if not any(p.startswith(root) for p in paths):
            echo_err(f"warning: --source-root {options.source_root} is not a prefix of any user file the log names "
                     f"(e.g. {paths[0]}): no user code is linked")
    elif options.source_url and any(p.startswith("/") for p in paths):
        echo_err(f"warning: user code is linked with the absolute paths of the machine that ran the program (e.g. {paths[0]}); "
                 "give --source-root to make them relative to your repository")


def _check_strict(report, strict: bool, strict_compile_id: bool, out: Path) -> None:
    if strict and (report.stats.strict_failures() or report.stats["fail_line_too_long"]):
        raise CliError(f"--strict: the log had problems ({report.stats.format()}); the report is in {out}", 1)
    if strict_compile_id and None in report.directory:
        raise CliError(f"--strict-compile-id: some records have a malformed compile id (see '(unknown)' in {out / 'index.html'})", 1)


def _after_report(summary: Summary | RanksSummary, request: ReportRequest) -> list[str]:
    """Once the report is written: write --single-file, check the gates on the analysis in memory
    (printing a line per violated or unknown condition), write --markdown; the violated lines."""
    out = request.out
    if request.single_file is not None:
        from .pack import write_single_file

        write_single_file(out, request.single_file)
    failed, unchecked = check_report(request.conditions, summary) if request.conditions else ([], [])
    for line in failed + unchecked:
        echo_err(f"--fail-on {sanitize(line)}")
    if request.markdown_file is not None:
        text = summary_markdown(summary, request.markdown_prefix(), failed, request.options.source_root)
        try:
            append_output(request.markdown_file, text)  # as `>>`: a job summary keeps what earlier steps wrote
        except OSError as exc:
            raise CliError(f"--markdown: could not write {request.markdown_file}: {exc.strerror or exc}; the report is in {out}", 1) from None
        echo_err(f"Markdown summary: {request.markdown_file}")
    return failed
