"""`tlparse-py run [OPTIONS] [--] COMMAND...`: run a program under TORCH_TRACE, then write its report.

The first word that is not one of `run`'s own options starts COMMAND; every word after it is the
program's, with or without `--` (`run -o tl python train.py -o ckpt`: the second -o is the program's).

The trace goes to a fresh folder, kept in the report as `trace/`; every log in it is read (`run` made
it for this program, so they are all this run's: no log is left out as another run's). Once the program exits, `run` waits
for its trace to go quiet, as `watch` does: no process of the program's session still runs (a child
it started and did not wait for may outlive it, and trace only later: `_session_processes`), no
process whose pid the trace logs name still runs (one that left the session, a daemon, is known
only once it traced), and no log has grown for QUIET_S seconds. Ctrl-C stops the wait, and what is
there is reported. The report is written whether the
program succeeded or not (a failed compile is what people want to see); the exit status is the
program's own when it failed. How the program ended (its exit code, or the signal that killed it:
the program exit) is part of the report: its index, summary.json `program`, summary.md and
--markdown say it first, and so does the last line on stderr when it failed.

`run` owns its program: the program runs in its own process group, and SIGINT, SIGTERM and SIGHUP
sent to `run` are passed on to that whole group. After Ctrl-C (SIGINT) the program ends its own way
and what it traced is reported. After SIGTERM or SIGHUP the program gets GRACE_S seconds to exit,
then SIGKILL; `run` reaps it, keeps the trace beside `-o` (`OUT.trace`, its path printed) and exits
128 + the signal's number, writing no report.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from msgspec.structs import replace

from ..analysis.program import ProgramExit
from ..reading.inputs import trace_logs
from .common import CliError, echo_err
from .report import write_and_check
from .request import ReportRequest, ServeAt, report_options, serve_options

NO_TRACE = (
    "{command} wrote no TORCH_TRACE log: it did not run torch.compile (or torch.export), or it stopped "
    "before its first compile (an import error?); it {outcome}"
)


@click.command("run", context_settings={"help_option_names": ["-h", "--help"], "allow_interspersed_args": False})
@click.option("--live", is_flag=True,
              help="Keep the report up to date while COMMAND runs (as `tlparse-py watch` does); the browser opens at the first compile.")
@report_options
@serve_options
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def run(ctx: click.Context, command: tuple[str, ...], live: bool, **params: Any) -> None:
    """Run COMMAND with TORCH_TRACE set, then write the report of what it compiled.

    Options for run come first; the first word that is not one of them starts COMMAND, and every
    word after it is the program's: `tlparse-py run -o tl_out python train.py -o ckpt --steps 10`
    (a `--` before COMMAND is allowed, and needed when COMMAND itself starts with `-`). Takes
    every option of `tlparse-py PATH` (see `tlparse-py report --help`); they are all checked before
    COMMAND starts. The trace is kept in the report as trace/. With --live the report is written
    as the program runs and updated as it traces; once it exits, the report is the one `run`
    writes without --live.
    """
    request = ReportRequest.parse(params)  # a malformed gate or Markdown path: exit 2, COMMAND never runs
    request.check_output()  # so is an -o that cannot take the report
    # the trace folder is made here for this program: every log in it is this run's (its children
    # included, however long the program was quiet before they began), so none is left out
    request = replace(request, all_runs=not request.latest)
    serving = _serving(ServeAt.parse(params), request.out)  # a port in use: exit 2, COMMAND never runs
    if serving is not None:
        request = replace(request, no_browser=True)
    if live and request.all_ranks_html:
        raise CliError("--live writes the multi-rank report of rank logs by itself at the end: drop --all-ranks-html")
    out = request.out
    trace = Path(tempfile.mkdtemp(prefix=f".{out.name}.trace-", dir=out.absolute().parent if out.absolute().parent.exists() else None))
    request.check_not_an_input(trace)  # the one inputs-are-never-outputs check: run --live writes beside its trace too
    keep = False
    try:
        if live:
            _run_live(ctx, list(command), trace, request)
            _serve_until_stopped(serving)
            return
        returncode, stopped_by = _run_traced(list(command), trace)
        program, status = ProgramExit.of(command, returncode), _exit_status(returncode)
        if stopped_by is not None:  # SIGTERM / SIGHUP: no report, the trace kept
            keep = True
            kept = _keep_aside(trace, out)
            echo_err(f"{signal.Signals(stopped_by).name}: {command[0]} was stopped; the trace is kept in {kept}")
            ctx.exit(128 + stopped_by)
        if not trace_logs(trace):
            raise CliError(NO_TRACE.format(command=command[0], outcome=program.outcome), status or 2)
        held = _report(trace, request, program)
        if held is not None and held.exit_code != 3:  # the report could not be written: the trace is all there is
            keep = True
            kept = _keep_aside(trace, out)
            if status == 0:
                echo_err(f"the trace is kept in {kept}")
                raise held
            held.show()
            echo_err(f"the report could not be written; the trace is kept in {kept}")
            echo_err(f"{command[0]} {program.outcome}")
            ctx.exit(status)
        _keep_trace(trace, out)
        if status != 0:
            echo_err(f"{command[0]} {program.outcome}; its report is in {out}")
            ctx.exit(status)
        if held is not None:
            raise held
        if not request.no_browser:
            from .common import open_browser

            open_browser(out)
        _serve_until_stopped(serving)
    finally:
        if not keep:
            shutil.rmtree(trace, ignore_errors=True)


def _serving(at: ServeAt | None, out: Path) -> tuple[Any, Any] | None:
    """With --serve: the server of the report folder, bound before COMMAND starts and answering while
    it runs (a live report is followed through it); None without."""
    if at is None:
        return None
    from .serve import announce, open_server, start  # only with --serve: http.server costs ~17 ms at start-up

    server = open_server(at, out)
    thread = start(server)
    announce(server, "while the program runs, then its report ")
    return server, thread


def _serve_until_stopped(serving: tuple[Any, Any] | None) -> None:
    """The written report, served until Ctrl-C (exit 0) or SIGTERM (143), when --serve was given."""
    if serving is None:
        return
    from .serve import announce, serve_until_stopped

    announce(serving[0])
    serve_until_stopped(*serving)


def _run_live(ctx: click.Context, command: list[str], trace: Path, request: ReportRequest) -> None:
    """Run the program with the report following its trace (`watch`); the exit status is the
    program's when it failed, else the report's (gates, --strict)."""
    from .watch import Watching, watch_trace

    out = request.out
    process = _start(command, trace)
    held: CliError | None = None

    def program() -> ProgramExit | None:  # known once it has exited: the final report shows it
        returncode = process.poll()
        return ProgramExit.of(command, returncode) if returncode is not None else None

    # a signal once the program has exited (its workers may still write) ends the live loop: the
    # final report of what was read is written (forwarded to the program, it would go nowhere)
    with _forwarding(process.pid, stop_after_exit=lambda: process.poll() is not None) as received:
        program_running = _running(process, received)

        def running() -> bool:
            return program_running() or bool(_session_processes(process.pid)) or _writers_alive(trace)

        def first_compile() -> None:  # watch calls it once
            if not request.no_browser:
                from .common import open_browser

                open_browser(out)

        watching = Watching(interval=0.5, quiet_s=QUIET_S, writer_running=running, shown=(trace, out.absolute() / "trace"), program=program)
        try:
            watch_trace(trace, replace(request, no_browser=True), watching,
                        on_first_compile=first_compile, own_signals=False)  # SIGTERM goes on to the program (_forwarding)
        except CliError as exc:
            held = exc
        except KeyboardInterrupt:  # a signal while the watch was starting or ending
            held = CliError(f"stopped: {out} holds the last live update, if one was written", 130)
        while program_running():  # the report stopped early (its folder was deleted...): the program goes on to its end
            time.sleep(0.05)
    ended = ProgramExit.of(command, process.returncode)
    status = _exit_status(process.returncode)
    stopped_by = next((s for s in received if s in STOPPING), None)
    if not (out / "index.html").is_file():
        if not trace_logs(trace):
            raise CliError(NO_TRACE.format(command=command[0], outcome=ended.outcome), status or 2)
        kept = _keep_aside(trace, out)
        echo_err(f"the trace is kept in {kept}")
        if held is not None:
            raise held
        ctx.exit(status)
    _keep_trace(trace, out)
    if stopped_by is not None:
        echo_err(f"{signal.Signals(stopped_by).name}: {command[0]} was stopped; the report of what it traced is in {out}")
        ctx.exit(128 + stopped_by)
    if status != 0:
        if held is not None:
            held.show()
        echo_err(f"{command[0]} {ended.outcome}; its report is in {out}")
        ctx.exit(status)
    if held is not None:
        raise held


def _start(command: list[str], trace: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TORCH_TRACE": str(trace)}
    try:
        return subprocess.Popen(command, env=env, start_new_session=True)
    except OSError as exc:
        raise CliError(f"cannot run {command[0]}: {exc.strerror or exc}", 127 if isinstance(exc, FileNotFoundError) else 126) from None


def _running(process: subprocess.Popen[bytes], received: list[int]) -> Callable[[], bool]:
    """Whether the program still runs; after SIGTERM or SIGHUP, it is killed once GRACE_S is past."""
    deadline: list[float] = []

    def running() -> bool:
        if any(s in STOPPING for s in received):
            if not deadline:
                deadline.append(time.monotonic() + GRACE_S)
            elif time.monotonic() > deadline[0]:
                _signal_group(process.pid, signal.SIGKILL)
        return process.poll() is None

    return running


def _report(trace: Path, request: ReportRequest, program: ProgramExit) -> CliError | None:
    """Write the report of the trace; the error it ended with (exit 3: written, a gate held), if any."""
    try:
        write_and_check(trace, replace(request, no_browser=True), kept=(trace, request.out.absolute() / "trace"), program=program)
    except CliError as exc:
        return exc
    return None


def _keep_aside(trace: Path, out: Path) -> Path:
    """The trace of a run whose report failed, under a name that says what it is (`OUT.trace`)."""
    kept = out.absolute().parent / f"{out.name}.trace"
    if not kept.exists():
        try:
            _move(trace, kept)
            return kept
        except OSError:
            pass
    return trace


FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
QUIET_S = 0.5  # once the program exited: how long its trace must not grow before the report
STOPPING = (signal.SIGTERM, signal.SIGHUP)  # these end `run` too, without a report
GRACE_S = 10.0  # after SIGTERM or SIGHUP, how long the program has to exit before SIGKILL


def _exit_status(returncode: int) -> int:
    """A program's exit status as a shell says it (and `run` exits with): 128 + N when a signal N ended it."""
    return 128 - returncode if returncode < 0 else returncode


def _run_traced(command: list[str], trace: Path) -> tuple[int, int | None]:
    """The program's return code (-N when a signal N ended it, as `subprocess` says), and the
    stopping signal `run` received while it ran (None: it ended by itself or after Ctrl-C)."""
    process = _start(command, trace)
    with _forwarding(process.pid) as received:
        running = _running(process, received)
        while running():
            time.sleep(0.05)
        if not any(s in STOPPING for s in received):  # stopped: no report to wait for (the trace is kept as it is)
            _wait_until_quiet(command[0], trace, received, session=process.pid)
    stopped_by = next((s for s in received if s in STOPPING), None)
    return process.returncode, (int(stopped_by) if stopped_by is not None else None)


def _trace_pids(trace: Path) -> set[int]:
    """The pids the trace's logs name (each log's first record: one process writes each log)."""
    from ..reading.inputs import InputError, first_record

    pids: set[int] = set()
    for log in trace_logs(trace):
        try:
            head = first_record(log)
        except InputError:
            continue
        if head is not None and head.pid is not None and head.pid.isdigit() and len(head.pid) <= 19:
            pids.add(int(head.pid))
    return pids


def _writers_alive(trace: Path) -> bool:
    """Whether a process that writes the trace still runs (a worker that outlived the program)."""
    from .watch import any_alive

    return any_alive(_trace_pids(trace))


def _trace_size(trace: Path) -> int:
    total = 0
    for log in trace_logs(trace):
        try:
            total += log.lstat().st_size
        except OSError:
            continue
    return total


def _wait_until_quiet(name: str, trace: Path, received: list[int], session: int) -> None:
    """Once the program exited: wait while a process of its session, or one that writes its trace,
    runs, and until no log has grown for QUIET_S seconds (as `watch` does); a signal (Ctrl-C) stops
    the wait, and what is there is reported."""
    from .watch import any_alive

    signals = len(received)
    size, quiet_since, told = _trace_size(trace), time.monotonic(), False
    while len(received) == signals:
        writers = sorted(set(_session_processes(session)) | {p for p in _trace_pids(trace) if any_alive([p])})
        now = time.monotonic()
        size_now = _trace_size(trace)
        if size_now != size:
            size, quiet_since = size_now, now
        if not writers and now - quiet_since >= QUIET_S:
            return
        if writers and not told:
            told = True
            shown = ", ".join(map(str, writers[:5])) + (", …" if len(writers) > 5 else "")
            echo_err(f"{name} exited; waiting for the processes still writing its trace, or started by it and still running "
                     f"(pid {shown}), to finish (Ctrl-C to stop waiting and report what is there)")
        time.sleep(0.1)


def _session_processes(session: int) -> list[int]:
    """The processes of the program's session that still run (zombies are gone): the program runs in a
    session of its own (`_start`), so these are what it started, a child it never waited for
    included, whether it traced yet or not. A process that left the session (setsid: a daemon) is
    not one. Without /proc, the program's process group stands for its session."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        try:
            os.killpg(session, 0)
        except ProcessLookupError:
            return []
        except OSError:
            pass
        return [session]
    found = []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()  # the name, in (), may hold anything
        except (OSError, IndexError):
            continue  # gone since listed
        if len(fields) > 3 and fields[0] not in (b"Z", b"X") and fields[3] == b"%d" % session:
            found.append(int(entry))
    return found


@contextmanager
def _forwarding(group: int, stop_after_exit: Callable[[], bool] | None = None) -> Iterator[list[int]]:
    """While the program runs, SIGINT, SIGTERM and SIGHUP sent to us are sent to its process group;
    the list holds the signals received. With `stop_after_exit`: once it says the program has
    exited, a signal also raises KeyboardInterrupt here (it ends `run --live`'s watch)."""
    received: list[int] = []

    def forward(number: int, frame: object) -> None:
        received.append(number)
        _signal_group(group, number)
        if stop_after_exit is not None and stop_after_exit():
            raise KeyboardInterrupt

    previous = {s: signal.signal(s, forward) for s in FORWARDED}
    try:
        yield received
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _signal_group(group: int, number: int) -> None:
    try:
        os.killpg(group, number)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already


def _keep_trace(trace: Path, out: Path) -> None:
    """Move the trace into the finished report as trace/ (the report is complete, so this is safe)."""
    if (out / "index.html").is_file() and not (out / "trace").exists():
        _move(trace, out / "trace")


def _move(source: Path, target: Path) -> None:
    """Rename, or copy then remove when the two lie on different filesystems (EXDEV)."""
    try:
        os.replace(source, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        shutil.copytree(source, target)
        shutil.rmtree(source, ignore_errors=True)
