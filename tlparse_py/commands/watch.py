"""`tlparse-py watch [PATH]`: a report that updates while the program writes its trace.

The report in `-o` is written at once and kept up to date (`live.LiveReport`): the index says
"live" and what is compiling, and every open page reloads itself when it changes. Watching stops
when the process that wrote the trace has exited (its pid is in the log) and the log has not grown
for `--quiet-s` seconds, or on Ctrl-C; then the final report is written, the one a one-shot
`tlparse-py PATH` writes from the same logs, and the report's checks run (--fail-on, --markdown,
--strict), with the same exit codes. Ctrl-C: the final report of what was read, exit 130.

A record the writer never finished (its line cut, its payload short of its md5) does not hold the
watch: once the log stops growing it is read as the one-shot read reads it, and counted as damaged.
A pid that cannot be a process (0, or above the system's pid maximum) means the writer is unknown:
the quiet rule alone decides.

A folder of several ranks' logs is followed rank by rank (`multirank.live.LiveRanks`: each rank's
live report and the landing page); a folder whose second rank starts logging after the watch began
becomes one then. Its final report is the one-shot multi-rank report, written over the live one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import click
from msgspec import Struct
from msgspec.structs import replace

from .. import shutdown
from ..analysis.kinds import load_plugins
from ..analysis.program import ProgramExit
from ..live import LiveReport, LogReset
from ..reading.tail import NotRegular
from ..reading.gunzip import is_gzip
from ..reading.inputs import ChosenInput, InputError, SeveralRanks, candidate_logs, choose_input, kept_path, rank_of, ranks_in, trace_logs
from ..report.targets import OutputError
from ..terminal import sanitize
from .common import Amount, CliError, echo_diagnostic, echo_err, open_browser
from .report import conclude, kept_as, path_or_env, rank_detected, source_info, write_and_check
from .request import ReportRequest, ServeAt, report_options, serve_options

if TYPE_CHECKING:
    from ..multirank.live import LiveRanks

EXIT_INTERRUPTED = 130
Live = Union[LiveReport, "LiveRanks"]  # a log followed, or a folder of rank logs (every rank, and its landing)


class Watching(Struct):
    """How to watch: how often to look, how long a log must be quiet once its writer is gone, and
    (for `run --live`) whether the writer is still running."""

    interval: float = 1.0
    quiet_s: float = 3.0
    writer_running: Callable[[], bool] | None = None  # None: the log's own pids decide (else they decide too)
    shown: tuple[Path, Path] | None = None  # (where the trace is read, where it is kept): the report names the kept one
    # `run --live`: how its program ended, once it has (None while it runs); the final report shows it
    program: Callable[[], ProgramExit | None] | None = None

    def program_exit(self) -> ProgramExit | None:
        return self.program() if self.program is not None else None


@click.command("watch", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--interval", type=Amount(min=0.05), default=1.0, show_default=True, metavar="S",
              help="Seconds between looks at the log.")
@click.option("--quiet-s", type=Amount(min=0), default=3.0, show_default=True, metavar="S",
              help="Stop once the program that writes the log has exited and the log has not grown for this long.")
@report_options
@serve_options
def watch(path: Path | None, interval: float, quiet_s: float, **params: Any) -> None:
    """Write a report that updates while the program writes its trace.

    PATH is a log file or the TORCH_TRACE folder (it defaults to $TORCH_TRACE); it may not exist
    yet. Run it on the machine that runs the program: the program's pid decides when it is done.
    The report is written in place as it goes, so --overwrite replaces an earlier report at the
    start, not once the new one is complete. With --serve the folder is served over HTTP while it
    is watched, and the final report after, until Ctrl-C.
    """
    request = ReportRequest.parse(params)
    if request.all_ranks_html:
        raise CliError("watch writes the multi-rank report of a folder of rank logs by itself at the end: drop --all-ranks-html")
    request.check_output()
    path = path_or_env(path)
    request.check_not_an_input(path)
    serve_at = ServeAt.parse(params)
    if serve_at is None:
        watch_trace(path, request, Watching(interval, quiet_s))
        return
    from .serve import announce, open_server, serve_until_stopped, start  # only with --serve: http.server costs ~17 ms

    server = open_server(serve_at, request.out)  # a port in use: exit 2, before anything is written
    thread = start(server)
    announce(server, "while watching, then the final report ")
    watch_trace(path, replace(request, no_browser=True), Watching(interval, quiet_s))
    announce(server)
    serve_until_stopped(server, thread)  # the final report, until Ctrl-C


def watch_trace(path: Path, request: ReportRequest, watching: Watching, on_first_compile: Callable[[], None] | None = None,
                own_signals: bool = True) -> None:
    """Watch PATH into `request.out` until its writer is done, then write the final report and run
    the report's checks (exit codes by CliError; Ctrl-C: exit 130). With `own_signals`, SIGTERM
    stops the watch (exit 143; `run --live` keeps its own handlers, which pass signals on to its
    program)."""
    load_plugins(warn=echo_err)
    previous = shutdown.install() if own_signals else None
    try:
        chosen = _wait_for_log(path, request, watching)
        if chosen is None:
            return
        _watch_log(path, chosen, request, watching, on_first_compile)
    except shutdown.Terminated:
        shutdown.stop_children()
        shutdown.exit_now(f"Terminated (SIGTERM): stopped watching; {sanitize(str(request.out))} holds the last update "
                          "(every page in it whole), if one was written")
    finally:
        shutdown.restore(previous)


def _wait_for_log(path: Path, request: ReportRequest, watching: Watching) -> ChosenInput | None:
    """The log to follow, once there is one with a record; None when the writer ended without one."""
    told = False
    try:
        while True:
            chosen = _log_now(path, request)
            if chosen is not None:
                return chosen
            if watching.writer_running is not None and not watching.writer_running():
                return None
            if not told and watching.writer_running is None:  # run --live: the program just started
                what = "a trace log with a record in" if path.is_dir() else "a trace log at"
                echo_err(f"waiting for {what} {path} (Ctrl-C to stop)")
                told = True
            time.sleep(watching.interval)
    except KeyboardInterrupt:
        raise CliError(f"stopped (Ctrl-C) while waiting for {path}; nothing was written", EXIT_INTERRUPTED) from None


def _log_now(path: Path, request: ReportRequest) -> ChosenInput | None:
    """The log PATH names now (a folder of ranks: the lowest rank's, followed live); None: none yet."""
    return _choose_now(path, request)[0]


def _choose_now(path: Path, request: ReportRequest) -> tuple[ChosenInput | None, bool]:
    """The log to follow in PATH now, and whether PATH is a folder of several ranks' logs."""
    several = False
    try:
        chosen = choose_input(path, request.latest, request.options.export, request.all_runs)
    except SeveralRanks:
        logs = sorted((p for p in trace_logs(path) if p.parent == path), key=lambda p: (rank_of(p) is None, rank_of(p) or 0, p.name))
        chosen, several = ChosenInput(logs[0], logs[1:]), True
    except (InputError, OSError):
        return None, False
    if is_gzip(chosen.log):
        raise CliError(f"{chosen.log} is gzipped, so it is finished: write its report with `tlparse-py {chosen.log}`")
    return chosen, several


def _watch_log(path: Path, chosen: ChosenInput, request: ReportRequest, watching: Watching,
               on_first_compile: Callable[[], None] | None) -> None:
    out = request.out
    opened: list[bool] = []

    def first_compile() -> None:  # once, even when the live report becomes a multi-rank one
        if opened:
            return
        opened.append(True)
        if on_first_compile is not None:
            on_first_compile()
        elif not request.no_browser:
            open_browser(out)

    live = _open(path, chosen, request, watching, _several_ranks(path, request), request.overwrite)
    try:
        interrupted = False
        try:
            while True:
                try:
                    _follow(live, request, watching, first_compile, path if isinstance(live, LiveReport) and path.is_dir() else None)
                    break
                except RanksAppeared:  # the live report becomes the multi-rank one, from the logs' start
                    live.close()
                    live = _open(path, chosen, request, watching, True, True)
        except KeyboardInterrupt:
            interrupted = True
        _finish(path, chosen, live, request, interrupted, watching)
    finally:
        live.close()


class RanksAppeared(Exception):
    """The folder followed now holds the logs of several ranks (one appeared after the first)."""


def _several_ranks(path: Path, request: ReportRequest) -> bool:
    """Whether PATH is now a folder of several ranks' logs: read as a multi-rank report (as
    `reading.inputs.choose_input` decides)."""
    try:
        return path.is_dir() and not request.latest and len(ranks_in(path)) > 1
    except InputError:
        return False


def _open(path: Path, chosen: ChosenInput, request: ReportRequest, watching: Watching, several: bool, overwrite: bool) -> Live:
    """The live report in `request.out`: of the log chosen, or of every rank's log of the folder."""
    out = request.out
    echo = echo_diagnostic if request.verbose else None
    try:
        if several:
            from ..multirank.live import LiveRanks  # only for rank folders

            ranks = LiveRanks(path, out, request.options, overwrite=overwrite, kept=watching.shown, echo=echo, tell=echo_err)
            logs = [f"{kept_path(r.job.log, watching.shown).name} ({r.job.folder})" for r in ranks.ranks.values()]
            named = ", ".join(logs[:4]) + (f" and {len(logs) - 4} more" if len(logs) > 4 else "")
            echo_err(f"watching every rank's log in {kept_path(path, watching.shown)}: {named}; live report in {out / 'index.html'} "
                     "(a rank that starts logging later joins; Ctrl-C to stop)")
            return ranks
        live = LiveReport(chosen.log, out, request.options, overwrite=overwrite,
                          source=lambda: kept_as(source_info(chosen, program=watching.program_exit()), watching.shown),
                          echo=echo, on_rank=rank_detected)
    except OutputError as exc:
        raise CliError(str(exc)) from None
    echo_err(f"watching {kept_path(chosen.log, watching.shown)}: live report in {out / 'index.html'} (Ctrl-C to stop)")
    return live


def _follow(live: Live, request: ReportRequest, watching: Watching, first_compile: Callable[[], None], folder: Path | None) -> None:
    """Update the live report until the log's writer is done: no writer known to run, and the log
    has not grown for `quiet_s` (a record it never finished does not hold the watch). `folder`: the
    folder a single log is followed in; RanksAppeared when the logs of several ranks appear in it."""
    last_growth = time.monotonic()
    size = live.size_now()
    note = ""
    first = True
    gone = False  # the log was removed (rotated?): said once, then waited for
    opened = False
    listed: list[Path] = []  # the folder's logs at the last look
    while True:
        _check_folder(live, request.out)
        if folder is not None and _ranks_appeared(folder, request, listed):
            echo_err(f"{kept_path(folder, watching.shown)} now holds the logs of several ranks: the live report follows every rank")
            raise RanksAppeared
        before = live.bytes_read
        try:
            touched = live.read()
            gone = False
        except LogReset as reset:
            assert isinstance(live, LiveReport)  # LiveRanks starts a rank's log over itself
            echo_err(f"{str(reset).replace(str(live.log), str(kept_path(live.log, watching.shown)), 1)}: reading it again from the start")
            live.restart()
            first = True
            continue
        except (FileNotFoundError, NotRegular) as exc:
            assert isinstance(live, LiveReport)  # LiveRanks says so of a rank's log itself
            if not gone:
                why = "was removed" if isinstance(exc, FileNotFoundError) else sanitize(exc.strerror or "is not a regular file")
                echo_err(f"{kept_path(live.log, watching.shown)} {why}; waiting for it to come back (Ctrl-C to stop)")
            gone, touched = True, set()
        except OSError as exc:
            unread = live.log if isinstance(live, LiveReport) else Path(exc.filename or live.folder)
            raise CliError(f"cannot read {kept_path(unread, watching.shown)}: {exc.strerror or exc}", 1) from None
        running = _writer_running(live, watching)
        now = time.monotonic()
        size_now = live.size_now()
        if live.bytes_read != before or size_now != size:
            last_growth, size = now, size_now
        new_note = _note(live, running)
        if touched or first or new_note != note:
            note = new_note
            _update(live, note, touched, request.out, running)
            first = False
        if not opened and live.compiled():
            opened = True
            first_compile()
        if not running and now - last_growth >= watching.quiet_s:
            return
        time.sleep(watching.interval)


def _ranks_appeared(folder: Path, request: ReportRequest, listed: list[Path]) -> bool:
    """Whether the folder holds the logs of several ranks now (asked again only when its logs changed)."""
    try:
        logs = candidate_logs(folder)
    except InputError:
        return False
    if logs == listed:
        return False
    listed[:] = logs
    return _several_ranks(folder, request)


def _writer_running(live: Live, watching: Watching) -> bool:
    """Whether the log's writer may still write: the program `run` started runs, or a process whose
    pid the log names does (pids that cannot be a process are no writer: the quiet rule decides)."""
    if watching.writer_running is not None and watching.writer_running():
        return True
    return any_alive(live.pids)


def _update(live: Live, note: str, touched: set[Any], out: Path, running: bool) -> None:
    try:
        if isinstance(live, LiveReport):
            live.update(note, touched)
        else:  # each rank's pages say how much of its own log was read
            live.update(note, touched, note_of=lambda rank: _note(rank, running))
    except OSError as exc:
        _check_folder(live, out)
        raise CliError(f"could not write the live report ({exc.filename or out}: {exc.strerror or exc})", 1) from None


def _check_folder(live: Live, out: Path) -> None:
    if not live.writer.still_there():
        raise CliError(f"the report folder {out} was deleted or replaced while watching; stopping (nothing was written there since)", 1)


def _note(live: Live, running: bool) -> str:
    pids = ", ".join(map(str, sorted(p for p in live.pids if valid_pid(p)))) or "not known"
    if running:
        return f"Read {live.bytes_read / 1e6:,.1f} MB so far; the program (pid {pids}) is running."
    return f"Read {live.bytes_read / 1e6:,.1f} MB; the program (pid {pids}) has exited: the final report comes next."


_PID_MAX: list[int] = []


def pid_max() -> int:
    """The system's largest pid (/proc/sys/kernel/pid_max; 2**22, Linux's own bound, when unreadable)."""
    if not _PID_MAX:
        try:
            with open("/proc/sys/kernel/pid_max") as handle:
                _PID_MAX.append(max(1, int(handle.read().strip()[:12])))
        except (OSError, ValueError):
            _PID_MAX.append(1 << 22)
    return _PID_MAX[0]


def valid_pid(pid: int) -> bool:
    """Whether `pid` can name a process here: 1 ≤ pid ≤ the pid maximum (0 would signal our own group)."""
    return 1 <= pid <= pid_max()


def any_alive(pids: set[int] | list[int]) -> bool:
    """Whether any of these processes runs on this machine (a pid we may not signal is alive; a pid
    that cannot be a process is none)."""
    return any(_alive(pid) for pid in pids if valid_pid(pid))


def _alive(pid: int) -> bool:
    if not valid_pid(pid):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    # a process that has exited but whose parent has not reaped it (a zombie) is gone: in
    # `prog & tlparse-py watch` the shell may exec into watch, which then inherits the program
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def _finish(path: Path, chosen: ChosenInput, live: Live, request: ReportRequest, interrupted: bool, watching: Watching) -> None:
    """Write the final report: the live one finished when the logs are the ones followed, else a
    one-shot report of PATH over it (rank logs, a second log of the process that appeared)."""
    if interrupted:
        echo_err("stopped (Ctrl-C): writing the report of what was read (Ctrl-C again to leave the live report as it is)")
    started = time.perf_counter()  # what the summary line times: the final report, not the watch
    _check_folder(live, request.out)
    final, ranks = _choose_now(path, request) if path.is_dir() else (chosen, False)
    try:
        if isinstance(live, LiveReport) and final is not None and final.logs == chosen.logs and final.others == chosen.others and not ranks:
            report = live.finish()
            conclude(report, final, started, replace(request, no_browser=True))
        else:
            live.close()
            write_and_check(path, replace(request, overwrite=True, no_browser=True), kept=watching.shown, program=watching.program_exit())
    except KeyboardInterrupt:
        raise CliError(f"stopped (Ctrl-C) again: {request.out} holds the last live update", EXIT_INTERRUPTED) from None
    except (FileNotFoundError, NotRegular) as exc:
        if not isinstance(live, LiveReport) or exc.filename != str(live.log):
            raise CliError(f"could not write the final report ({exc.filename or request.out}: {exc.strerror or exc}); "
                           f"{request.out} holds the last live update", 1) from None
        raise CliError(f"cannot read {kept_path(live.log, watching.shown)} for the final report: {exc.strerror or exc}; "
                       f"{request.out} holds the last live update", 1) from None
    except OSError as exc:  # the disk filled, the folder was replaced...
        _check_folder(live, request.out)
        raise CliError(f"could not write the final report ({exc.filename or request.out}: {exc.strerror or exc}); "
                       f"{request.out} holds the last live update", 1) from None
    except CliError as exc:
        if interrupted:
            exc.show()
            raise CliError(f"stopped (Ctrl-C): the report in {request.out} is final for what was read", EXIT_INTERRUPTED) from None
        raise
    if interrupted:
        raise CliError(f"stopped (Ctrl-C): the report in {request.out} is final for what was read", EXIT_INTERRUPTED)
    echo_err(f"the program has exited: {sanitize(str(request.out / 'index.html'))} is final")
