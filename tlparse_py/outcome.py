"""What a report comes to: the one question a report command asks (`report_outcome`), answered as
one typed `Outcome` that the command prints and exits by.

The answer covers everything after the options are parsed: the log or logs chosen, the report
written (of one log, or a report per rank and their landing page), the lines that say what was
written (the stats, the totals, what to look at), --single-file, the `--fail-on` gates checked on the
analysis in memory, the --markdown summary, --strict and --strict-compile-id, whether to open a
browser, and how the command ends (`Ending`: its message and exit code; None when it exits 0).
What cannot be written at all (an input or output that cannot be used) is `Refused`, raised before
anything changed.

Lines said while the report is being written (the input chosen, each rank read, a rank detected,
skipped lines with -v) go to `Telling` as they happen; the rest are the outcome's `said`, in order.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from msgspec import Struct, field
from msgspec.structs import replace

from .analysis.compiles import Analysis
from .analysis.digest import digest_of, report_digest
from .analysis.program import ProgramExit
from .analysis.stacks import is_user_code, split_location
from .analysis.store import InputInfo
from .analysis.summary import RanksSummary, Summary
from .analysis.totals import check_report, totals_line
from .limits import SINGLE_FILE_MB
from .model import Diagnostic
from .options import Options
from .pipeline import write_report
from .reading.gunzip import GunzipRefused, is_gzip
from .reading.inputs import ChosenInput, InputError, SeveralRanks, choose_input, file_size, kept_path, skipped_symlinks
from .report.markdown import summary_markdown
from .report.output_file import append_output
from .report.targets import OutputError, ReportKeptElsewhere
from .terminal import sanitize

if TYPE_CHECKING:
    from .analysis.conditions import Condition
    from .multirank import RankResult

EXIT_WRITING_FAILED = 1  # also --strict, --strict-compile-id, --single-file and --markdown failing
EXIT_REFUSED = 2  # nothing written: the input or output cannot be used
EXIT_GATES = 3  # the report written, and a --fail-on condition held


class Asked(Protocol):
    """A report as asked for (`commands.request.ReportRequest` is one): what the outcome reads of it."""

    out: Path
    overwrite: bool
    options: Options
    conditions: list[Condition]
    markdown_file: Path | None
    single_file: Path | None
    latest: bool
    all_runs: bool
    strict: bool
    strict_compile_id: bool
    no_browser: bool
    verbose: bool  # each skipped or damaged line told as it is read (`Telling.diagnostic`), not counted after
    all_ranks_html: bool
    dask_scheduler: str | None

    def markdown_prefix(self) -> str: ...


class Said(NamedTuple):
    """A line for the user: on stderr, or on stdout (`out`: what the multi-rank report wrote)."""

    text: str
    out: bool = False


class Progress(Protocol):
    """How far the reading is, shown while it reads (`commands.report.ProgressBar` draws it)."""

    def __call__(self, done: int, records: int) -> None: ...

    def clear(self) -> None: ...


class Telling(NamedTuple):
    """Where what happens while the report is written is told, as it happens."""

    line: Callable[[Said], None]
    diagnostic: Callable[[Diagnostic], None]  # each skipped or damaged line, with -v
    progress: Callable[[int], Progress]  # a progress display for reading this many bytes


class Ending(NamedTuple):
    """How the command ends when it does not exit 0: one line, and the exit code."""

    message: str
    code: int


class Refused(Exception):
    """Nothing could be written (or nothing was changed): one line and the exit code."""

    def __init__(self, message: str, code: int = EXIT_REFUSED):
        super().__init__(message)
        self.message = message
        self.code = code


class Outcome(Struct):
    """What a report came to: the lines that say so, in order; whether to open the report in a browser;
    how the command ends (None: exit 0)."""

    out: Path
    said: list[Said]
    browse: bool = False
    ending: Ending | None = None
    failed: list[str] = field(default_factory=list)  # the --fail-on conditions that held, each with what is behind it


def report_outcome(path: Path, asked: Asked, telling: Telling, kept: tuple[Path, Path] | None = None,
                   program: ProgramExit | None = None) -> Outcome:
    """Write the report of PATH as asked (of every rank with --all-ranks-html, or when PATH holds
    several ranks' logs), then everything that follows it. `kept`: (where the trace is read, where
    it will be kept), for `run`, whose trace moves into the report once it is written: the report
    names that; `program`: how the program that wrote PATH ended (`run`), which the report shows.
    Raises Refused when nothing could be written."""
    if path.is_dir():
        for note in skipped_symlinks(path):
            telling.line(Said(note))
    started = time.perf_counter()
    if asked.all_ranks_html:
        return _ranks_outcome(path, asked, telling, asked.dask_scheduler, kept, program)
    try:
        chosen = choose(path, asked.latest, asked.options.export, asked.all_runs)
    except SeveralRanks as several:
        telling.line(Said(several.said_of(kept_path(path, kept))))
        return _ranks_outcome(path, asked, telling, kept=kept, program=program)
    if chosen.note:
        telling.line(Said(chosen.note))
    report = _write(chosen, asked, telling, kept, program)
    return concluded(report, chosen, started, asked)


def concluded(report: Analysis, chosen: ChosenInput, started: float, asked: Asked) -> Outcome:
    """Once the report of one log is written: its summary lines, --single-file, the gates, --markdown,
    --strict, the browser. `started`: when the work the summary line times began."""
    out = asked.out
    summary = report.summary(kept=True)  # read through: its compiles from their spool, not a list of them all
    said = _summarised(report, summary, out, chosen, started, asked.verbose) + _source_link_warnings(summary, asked.options)
    after = _after_report(summary, asked, said)
    if after.ending is not None:
        return after
    strict = _strict_ending(report, asked.strict, asked.strict_compile_id, out)
    if strict is not None:
        return replace(after, ending=strict)
    return replace(after, browse=not asked.no_browser, ending=_gates_ending(after.failed, out))


def choose(path: Path, latest: bool, export: bool, all_runs: bool = False) -> ChosenInput:
    """The logs of PATH to read (`reading.inputs.choose_input`), each readable; Refused when none can
    be (a file or folder with no record at all is refused here: nothing written); SeveralRanks when
    PATH holds several ranks' logs."""
    try:
        chosen = choose_input(path, latest, export, all_runs)
        for log in chosen.logs:
            with open(log, "rb") as handle:
                handle.read(1)
    except SeveralRanks:
        raise
    except InputError as exc:
        raise Refused(str(exc)) from None
    except OSError as exc:
        raise Refused(f"cannot read {exc.filename or path}: {exc.strerror or exc}") from None
    return chosen


def source_info(chosen: ChosenInput, kept: tuple[Path, Path] | None = None, program: ProgramExit | None = None) -> InputInfo:
    """What the report says it was written from: the log, the logs read with it, the others and why
    they were not read (sizes now); with `kept` (read in, kept in), the log where it is kept, not the
    folder it was read in; with `program`, how the program that wrote them ended (`run`)."""
    also = [p.name for p in chosen.also]
    info = InputInfo(str(chosen.log), file_size(chosen.log), [p.name for p in chosen.others], also,
                     {p.name: file_size(p) for p in chosen.also}, chosen.left_out, chosen.every_log, program)
    return kept_as(info, kept)


def kept_as(info: InputInfo, kept: tuple[Path, Path] | None) -> InputInfo:
    """The source as the kept trace's path (`run`'s trace moves into OUT/trace once the report is written)."""
    return info if kept is None else replace(info, path=str(kept_path(Path(info.path), kept)))


# -- writing ---------------------------------------------------------------------------------------


def _write(chosen: ChosenInput, asked: Asked, telling: Telling, kept: tuple[Path, Path] | None = None,
           program: ProgramExit | None = None) -> Analysis:
    out = asked.out
    progress = telling.progress(sum(file_size(p) for p in chosen.logs if not is_gzip(p)))
    try:
        return write_report(
            chosen.logs,
            out,
            overwrite=asked.overwrite,
            options=asked.options,
            source=source_info(chosen, kept, program),
            echo=telling.diagnostic if asked.verbose else None,
            on_rank=lambda rank: telling.line(Said(f"Detected rank: {rank}")),
            progress=progress,
        )
    except ReportKeptElsewhere as exc:
        raise Refused(str(exc), EXIT_WRITING_FAILED) from None
    except (OutputError, GunzipRefused) as exc:
        raise Refused(str(exc)) from None
    except OSError as exc:
        target = exc.filename or out
        raise Refused(f"could not write the report ({target}: {exc.strerror or exc}); nothing was changed in {out}", EXIT_WRITING_FAILED) from None
    finally:
        progress.clear()


def _ranks_outcome(path: Path, asked: Asked, telling: Telling, scheduler: str | None = None, kept: tuple[Path, Path] | None = None,
                   program: ProgramExit | None = None) -> Outcome:
    """A report per rank, in parallel (locally, or on the Dask cluster at `scheduler`), and a landing
    page comparing them; then what follows a report. `kept` and `program`: as for `report_outcome`."""

    def done(result: RankResult) -> None:
        if result.error:
            telling.line(Said(f"{result.folder}: could not be read: {result.error}"))
        telling.line(Said(f"{result.folder} ({Path(result.log).name}): {result.stats_line}"))

    from .multirank import ClusterError, write_all_ranks  # only for rank folders: most reports are one log

    started = time.perf_counter()
    out = asked.out
    try:
        landing, notes = write_all_ranks(path, out, asked.overwrite, asked.options, on_done=done, scheduler=scheduler, kept=kept,
                                         program=program)
    except InputError as exc:
        raise Refused(str(exc)) from None
    except ClusterError as exc:
        raise Refused(str(exc), exc.exit_code) from None
    except ReportKeptElsewhere as exc:
        raise Refused(str(exc), EXIT_WRITING_FAILED) from None
    except (OutputError, GunzipRefused) as exc:
        raise Refused(str(exc)) from None
    except OSError as exc:
        raise Refused(f"could not write the report ({exc.filename or out}: {exc.strerror or exc}); nothing was changed in {out}",
                      EXIT_WRITING_FAILED) from None
    said = [Said(note, out=True) for note in notes]
    said += [Said(f"Multi-rank report generated under {out}", out=True), Said("Individual pages: rank_*/index.html", out=True)]
    assert landing.summary is not None  # set once its summary.json is written
    first = landing.comparison.first
    if landing.diverges and first is not None:
        more = len(landing.comparison.divergences) - 1
        said.append(Said(f"Ranks diverge, first at {sanitize(first.line)} ({'and ' + str(more) + ' more: ' if more else ''}"
                         f"{sanitize(out / 'index.html')}#divergence)"))
    records = sum(r.records for r in landing.results)
    said.append(Said(f"Report: {sanitize(out / 'index.html')}: {totals_line(landing.summary)} "
                     f"({len(landing.ranks)} ranks, {records} records, {time.perf_counter() - started:.2f} s)"))
    # the landing page is shown as soon as it is written, whatever follows
    after = _after_report(landing.summary, asked, said)
    return replace(after, browse=not asked.no_browser, ending=after.ending or _gates_ending(after.failed, out))


# -- what a written report comes to -----------------------------------------------------------------


def _summarised(report: Analysis, summary: Summary, out: Path, chosen: ChosenInput, started: float, verbose: bool) -> list[Said]:
    """The lines that say what was read and written: the stats, unknown kinds, skipped lines, the export's
    verdict, and the totals with how long it took."""
    stats, diagnostics = report.stats, report.diagnostics
    said = [Said(stats.format())]
    if report.unknown_kinds:
        names = ", ".join(f"{sanitize(k)} ({n})" for k, n in sorted(report.unknown_kinds.items()))
        said.append(Said(f"Unknown record kinds, shown generically in the report: {names}"))
    if diagnostics.total and not verbose:
        said.append(Said(f"{diagnostics.total} line(s) skipped or damaged; they are listed in the report (index.html#diagnostics), or run with -v"))
    export = report_digest(summary).export if summary.export is not None else None
    if export is not None and export.status in ("failed", "issues"):
        said.append(Said(f"{sanitize(export.headline)} ({sanitize(out / 'index.html')}#export)"))
    seconds = time.perf_counter() - started
    megabytes = file_size(chosen.log) / 1e6
    said.append(Said(f"Report: {out / 'index.html'}: {totals_line(summary)} "
                     f"({stats['ok']} records, {seconds:.2f} s, {megabytes / max(seconds, 1e-6):.1f} MB/s)"))
    return said


def _source_link_warnings(summary: Summary, options: Options) -> list[Said]:
    """One line when links to the user's code cannot be what the user meant (README, --source-url)."""
    paths = [site[0] for c in summary.compiles if (site := split_location(c.user_location)) and is_user_code(site[0])]
    if not paths:
        return []
    if options.source_root:
        root = options.source_root.rstrip("/") + "/"
        if not any(p.startswith(root) for p in paths):
            return [Said(f"warning: --source-root {options.source_root} is not a prefix of any user file the log names "
                         f"(e.g. {paths[0]}): no user code is linked")]
    elif options.source_url and any(p.startswith("/") for p in paths):
        return [Said(f"warning: user code is linked with the absolute paths of the machine that ran the program (e.g. {paths[0]}); "
                     "give --source-root to make them relative to your repository")]
    return []


def _after_report(summary: Summary | RanksSummary, asked: Asked, said: list[Said]) -> Outcome:
    """Once the report is written: --single-file, the gates checked on the analysis in memory (a line
    per violated or unknown condition), --markdown; the lines after `said`, the conditions that held,
    and the ending when --single-file or --markdown could not be written."""
    out, said = asked.out, list(said)
    if asked.single_file is not None:
        packed = _single_file(out, asked.single_file)
        if isinstance(packed, Ending):
            return Outcome(out, said, ending=packed)
        said.append(Said(packed))
    failed, unchecked = check_report(asked.conditions, summary) if asked.conditions else ([], [])
    said += [Said(f"--fail-on {sanitize(line)}") for line in failed + unchecked]
    if asked.markdown_file is not None:
        digest = digest_of(summary, asked.options.source_root)
        text = summary_markdown(digest, asked.markdown_prefix(), failed)
        try:
            append_output(asked.markdown_file, text)  # as `>>`: a job summary keeps what earlier steps wrote
        except OSError as exc:
            return Outcome(out, said, failed=failed, ending=Ending(f"--markdown: could not write {asked.markdown_file}: "
                                                                  f"{exc.strerror or exc}; the report is in {out}", EXIT_WRITING_FAILED))
        said.append(Said(f"Markdown summary: {asked.markdown_file}"))
    return Outcome(out, said, failed=failed)


def _single_file(out: Path, target: Path, budget_mb: float = SINGLE_FILE_MB) -> str | Ending:
    """Pack the report in `out` into `target` (what `tlparse-py pack` writes): the line that says so,
    or the ending when it could not be written."""
    from .report.pack import PackError, pack_report  # only when packing: most reports are not

    try:
        packed = pack_report(out, target, budget_mb)
    except PackError as exc:
        return Ending(f"--single-file: {exc}", EXIT_WRITING_FAILED)
    except OSError as exc:
        return Ending(f"--single-file: could not write {target}: {exc.strerror or exc}; the report is in {out}", EXIT_WRITING_FAILED)
    return packed.line()


def _strict_ending(report: Analysis, strict: bool, strict_compile_id: bool, out: Path) -> Ending | None:
    if strict and (report.stats.strict_failures() or report.stats["fail_line_too_long"]):
        return Ending(f"--strict: the log had problems ({report.stats.format()}); the report is in {out}", EXIT_WRITING_FAILED)
    if strict_compile_id and None in report.directory:
        return Ending(f"--strict-compile-id: some records have a malformed compile id (see '(unknown)' in {out / 'index.html'})",
                      EXIT_WRITING_FAILED)
    return None


def _gates_ending(failed: list[str], out: Path) -> Ending | None:
    if not failed:
        return None
    return Ending(f"--fail-on: {len(failed)} condition(s) held; the report is in {out}", EXIT_GATES)
