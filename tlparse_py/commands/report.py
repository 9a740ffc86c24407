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

from .. import shutdown
from ..analysis.compiles import Analysis
from ..reading.inputs import ChosenInput, InputError, SeveralRanks, choose_input, skipped_symlinks
from ..analysis.kinds import load_plugins
from ..limits import GUNZIP_GRACE_MB, SINGLE_FILE_MB, Limits
from ..report.markdown import summary_markdown
from ..analysis.summary import RanksSummary, Summary
from ..model import DiagnosticLog, Stats
from ..pipeline import Options, write_report
from ..reading.gunzip import GunzipRefused, is_gzip
from ..report.render import check_source_url
from ..analysis.store import InputInfo
from ..terminal import sanitize
from ..report.writer import OutputError, ReportKeptElsewhere, abort_all
from .common import CliError, echo_diagnostic, echo_err, echo_out, open_browser, size
from .gates import HELP as GATES_HELP
from .gates import evaluate_gates, parse_gates, raise_if_gates_fail

if TYPE_CHECKING:
    from ..diff.gates import Condition
    from ..multirank import RankResult


@click.command("report", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("-o", "--out", default="tl_out", show_default=True, type=click.Path(path_type=Path), help="Output folder.")
@click.option("--overwrite", is_flag=True, help="Replace the output folder if it exists (only once the new report is complete).")
@click.option("--latest", is_flag=True, help="PATH is a folder: read its most recently modified log.")
@click.option("--strict", is_flag=True, help="Exit 1 if any line or payload could not be read (the report is still written).")
@click.option("--strict-compile-id", is_flag=True, help="Exit 1 if some record has a malformed compile id.")
@click.option("--no-browser", is_flag=True, help="Do not open the report in a web browser.")
@click.option("--custom-header-html", default="", metavar="HTML", help="HTML inserted at the top of the index page.")
@click.option("-v", "--verbose", is_flag=True, help="Name every skipped or damaged line on stderr.")
@click.option("-p", "--plain-text", is_flag=True, help="Write inductor output code as plain .txt instead of highlighted HTML.")
@click.option("-e", "--export", is_flag=True, help="Export report: what torch.export/draft_export ran into, a page per guard.")
@click.option("-i", "--inductor-provenance", is_flag=True, help="Provenance-tracking pages: pre-grad ↔ post-grad graph ↔ generated code.")
@click.option("--all-ranks-html", is_flag=True, help="PATH is a folder of rank logs: a report per rank and a landing page of what diverges.")
@click.option("--dask-scheduler", default=None, metavar="ADDRESS",
              help="With --all-ranks-html: build the rank reports on this Dask cluster (e.g. tcp://host:8786), which must see the same "
                   "filesystem; needs pip install 'tlparse-py[dask]'.")
@click.option("--highlight-mb", type=click.FloatRange(min=0), default=0.0, show_default=True, metavar="MB",
              help="Text highlighted with Pygments when the report is written (cached across runs); "
                   "the rest, by default all, is coloured by the page's script when shown.")
@click.option("--inline-mb", type=click.FloatRange(min=0), default=8.0, show_default=True, metavar="MB",
              help="Text shown inline on compile-id pages per report; beyond it sections link to their files.")
@click.option("--max-line-mb", type=click.FloatRange(min=0, min_open=True), default=Limits.max_line_mb, show_default=True, metavar="MB",
              help="A longer line is skipped and counted (fail_line_too_long) instead of being held in memory.")
@click.option("--max-gunzip-ratio", type=click.FloatRange(min=0), default=Limits.max_gunzip_ratio, show_default=True, metavar="N",
              help=f"Refuse a .gz that expands more than N times over (past {GUNZIP_GRACE_MB} MB): a decompression bomb.")
@click.option("--no-gunzip-limit", is_flag=True, help="Un-gzip whatever the ratio (same as --max-gunzip-ratio 0).")
@click.option("--max-raw-log-mb", type=click.FloatRange(min=0), default=Limits.max_raw_log_mb, show_default=True, metavar="MB",
              help="raw.log copies the log up to this size; beyond it raw.log is a note naming the log.")
@click.option("--fail-on", "fail_on", multiple=True, metavar="CONDITIONS", help=GATES_HELP)
@click.option("--markdown", "markdown_file", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="Also write a compact Markdown summary (GitHub-flavoured, links into the report) to FILE.")
@click.option("--source-url", default="", metavar="TEMPLATE", callback=lambda ctx, param, value: _check_source_url(value),
              help="Link user-code locations to your repository, e.g. 'https://github.com/org/repo/blob/SHA/{path}#L{line}'.")
@click.option("--source-root", default="", metavar="DIR", help="Stripped from logged file names to make {path} for --source-url.")
@click.option("--single-file", "single_file", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE.html", callback=lambda ctx, param, value: _check_single_file(value),
              help=f"Also write the report as one self-contained HTML file (pages, then linked files up to {SINGLE_FILE_MB:g} MB; see `tlparse-py pack`).")
def report(**params: Any) -> None:
    """Write an HTML report of what torch.compile did, from the logs TORCH_TRACE wrote.

    PATH is a log file (optionally .gz) or the TORCH_TRACE folder; it defaults to $TORCH_TRACE.
    """
    previous = shutdown.install()
    try:
        _main(**params)  # every option, by name: a new option is one decorator and one _main parameter
    except shutdown.Terminated:
        # the writer already removed its staging folder while unwinding; workers may still be
        # writing into it, so stop them first and remove it again
        shutdown.stop_children()
        abort_all()
        shutdown.exit_now(f"Terminated (SIGTERM): nothing was changed in {sanitize(params['out'])}")
    finally:
        shutdown.restore(previous)


def _main(
    path: Path | None,
    out: Path,
    overwrite: bool,
    latest: bool,
    strict: bool,
    strict_compile_id: bool,
    no_browser: bool,
    custom_header_html: str,
    verbose: bool,
    plain_text: bool,
    export: bool,
    inductor_provenance: bool,
    all_ranks_html: bool,
    highlight_mb: float,
    inline_mb: float,
    max_line_mb: float,
    max_gunzip_ratio: float,
    no_gunzip_limit: bool,
    max_raw_log_mb: float,
    fail_on: tuple[str, ...] = (),
    markdown_file: Path | None = None,
    source_url: str = "",
    source_root: str = "",
    single_file: Path | None = None,
    dask_scheduler: str | None = None,
) -> None:
    conditions = parse_gates(fail_on)  # before any work: a malformed gate writes nothing
    _check_markdown_target(markdown_file)
    if latest and all_ranks_html:
        raise CliError("--latest cannot be used with --all-ranks-html")
    if dask_scheduler is not None and not all_ranks_html:
        raise CliError("--dask-scheduler builds the rank reports of --all-ranks-html: use it with --all-ranks-html")
    path = _path_or_env(path)
    load_plugins(warn=echo_err)
    limits = Limits(max_line_mb, 0 if no_gunzip_limit else max_gunzip_ratio, max_raw_log_mb)
    options = Options(plain_text, custom_header_html, export, inductor_provenance, highlight_mb=highlight_mb, inline_mb=inline_mb, limits=limits,
                      source_url=source_url, source_root=source_root)
    if path.is_dir():
        for note in skipped_symlinks(path):
            echo_err(note)
    started = time.perf_counter()
    if all_ranks_html:
        ranks = _write_multi_rank(path, out, overwrite, options, no_browser, dask_scheduler)
        raise_if_gates_fail(_after_report(ranks, out, conditions, markdown_file, single_file), str(out))
        return
    try:
        chosen = _choose(path, latest, export)
    except SeveralRanks as several:
        echo_err(str(several))
        ranks = _write_multi_rank(path, out, overwrite, options, no_browser)
        raise_if_gates_fail(_after_report(ranks, out, conditions, markdown_file, single_file), str(out))
        return
    report = _write(chosen, out, overwrite, verbose, options)
    _summarise(report.stats, report.diagnostics, report.unknown_kinds, out, chosen, started, verbose)
    failed = _after_report(report.summary(), out, conditions, markdown_file, single_file)
    _check_strict(report, strict, strict_compile_id, out)
    if not no_browser:
        open_browser(out)
    raise_if_gates_fail(failed, str(out))


def _path_or_env(path: Path | None) -> Path:
    if path is not None:
        return path
    env = os.environ.get("TORCH_TRACE")
    if env:
        return Path(env)
    raise click.UsageError("missing PATH (a trace log or the TORCH_TRACE folder); $TORCH_TRACE is not set either")


def _choose(path: Path, latest: bool, export: bool) -> ChosenInput:
    try:
        # a file or folder with no record at all is refused here: exit 2, nothing written
        chosen = choose_input(path, latest, export)
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


def _write(chosen: ChosenInput, out: Path, overwrite: bool, verbose: bool, options: Options) -> Analysis:
    also = [p.name for p in chosen.also]
    source = InputInfo(str(chosen.log), size(chosen.log), [p.name for p in chosen.others], also, {p.name: size(p) for p in chosen.also})
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
            on_rank=_rank_detected,
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


def _write_multi_rank(path: Path, out: Path, overwrite: bool, options: Options, no_browser: bool, scheduler: str | None = None) -> RanksSummary:
    """--all-ranks-html: a report per rank, in parallel (locally, or on the Dask cluster at
    `scheduler`), and a landing page comparing them."""

    def done(result: RankResult) -> None:
        if result.error:
            echo_err(f"{result.folder}: could not be read: {result.error}")
        echo_err(f"{result.folder} ({Path(result.log).name}): {result.stats_line}")

    from ..multirank import ClusterError, write_all_ranks  # only for rank folders: most reports are one log

    try:
        landing, notes = write_all_ranks(path, out, overwrite, options, on_done=done, scheduler=scheduler)
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
    echo_out(f"Multi-rank report generated under {out}\nIndividual pages: rank_*/index.html")
    if landing.diverges:
        echo_err("Ranks diverge: see the landing page for where")
    if not no_browser:
        open_browser(out)
    assert landing.summary is not None  # set once its summary.json is written
    return landing.summary


def _rank_detected(rank: int) -> None:
    echo_err(f"Detected rank: {rank}")


def _summarise(stats: Stats, diagnostics: DiagnosticLog, unknown_kinds, out: Path, chosen: ChosenInput, started: float, verbose: bool) -> None:
    echo_err(stats.format())
    if unknown_kinds:
        names = ", ".join(f"{sanitize(k)} ({n})" for k, n in sorted(unknown_kinds.items()))
        echo_err(f"Unknown record kinds, shown generically in the report: {names}")
    if diagnostics.total and not verbose:
        echo_err(f"{diagnostics.total} line(s) skipped or damaged; they are listed in the report (index.html#diagnostics), or run with -v")
    seconds = time.perf_counter() - started
    megabytes = size(chosen.log) / 1e6
    echo_err(f"Report: {out / 'index.html'} ({stats['ok']} records, {seconds:.2f} s, {megabytes / max(seconds, 1e-6):.1f} MB/s)")


def _check_strict(report, strict: bool, strict_compile_id: bool, out: Path) -> None:
    if strict and (report.stats.strict_failures() or report.stats["fail_line_too_long"]):
        raise CliError(f"--strict: the log had problems ({report.stats.format()}); the report is in {out}", 1)
    if strict_compile_id and None in report.directory:
        raise CliError(f"--strict-compile-id: some records have a malformed compile id (see '(unknown)' in {out / 'index.html'})", 1)


# -- option checks, --single-file and --markdown -----------------------------------------


def _check_source_url(value: str) -> str:
    """--source-url must be an http(s) template with {path}: a usage error (exit 2) otherwise."""
    problem = check_source_url(value) if value else None
    if problem:
        raise click.BadParameter(problem, param_hint="'--source-url'")
    return value


def _check_single_file(value: Path | None) -> Path | None:
    from .pack import check_single_file_target

    problem = check_single_file_target(value) if value is not None else None
    if problem:
        raise click.BadParameter(problem, param_hint="'--single-file'")
    return value


def _check_markdown_target(markdown_file: Path | None) -> None:
    if markdown_file is None:
        return
    folder = markdown_file.parent
    if markdown_file.is_dir():
        raise CliError(f"--markdown: {markdown_file} is a folder; give a file name")
    if not folder.is_dir():
        raise CliError(f"--markdown: the folder {folder} does not exist")


def _after_report(summary: Summary | RanksSummary, out: Path, conditions: list[Condition], markdown_file: Path | None,
                  single_file: Path | None = None) -> list[str]:
    """Once the report is written: write --single-file, check the gates on the analysis in memory
    (printing a line per violated or unknown condition), write --markdown; the violated lines."""
    if single_file is not None:
        from .pack import write_single_file

        write_single_file(out, single_file)
    failed, unchecked = evaluate_gates(conditions, summary) if conditions else ([], [])
    for line in failed + unchecked:
        echo_err(f"--fail-on {sanitize(line)}")
    if markdown_file is not None:
        prefix = Path(os.path.relpath(os.path.abspath(out), os.path.abspath(markdown_file.parent))).as_posix()
        text = summary_markdown(summary, "" if prefix == "." else prefix + "/", failed)
        try:
            markdown_file.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise CliError(f"--markdown: could not write {markdown_file}: {exc.strerror or exc}; the report is in {out}", 1) from None
        echo_err(f"Markdown summary: {markdown_file}")
    return failed
