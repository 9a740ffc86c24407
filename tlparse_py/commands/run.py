"""`tlparse-py run [OPTIONS] -- COMMAND...`: run a program under TORCH_TRACE, then write its report.

The trace goes to a fresh folder, kept in the report as `trace/`. The report is written whether the
program succeeded or not (a failed compile is what people want to see); the exit status is the
program's own when it failed. Ctrl-C reaches the program (it is in our process group), and what it
traced up to then is still reported.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from ..reading.inputs import trace_logs
from .common import CliError, echo_err
from .report import write_and_check
from .request import ReportRequest, report_options

NO_TRACE = (
    "{command} wrote no TORCH_TRACE log: it did not run torch.compile (or torch.export), or it stopped "
    "before its first compile (an import error?); its exit status was {status}"
)


@click.command("run", context_settings={"help_option_names": ["-h", "--help"], "ignore_unknown_options": True})
@report_options
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def run(ctx: click.Context, command: tuple[str, ...], **params: Any) -> None:
    """Run COMMAND with TORCH_TRACE set, then write the report of what it compiled.

    Put `--` before the command: `tlparse-py run -o tl_out -- python train.py --steps 10`. Takes
    every option of `tlparse-py PATH` (see `tlparse-py report --help`); they are all checked before
    COMMAND starts. The trace is kept in the report as trace/.
    """
    request = ReportRequest.parse(params)  # a malformed gate or Markdown path: exit 2, COMMAND never runs
    request.check_output()  # so is an -o that cannot take the report
    out = request.out
    trace = Path(tempfile.mkdtemp(prefix=f".{out.name}.trace-", dir=out.absolute().parent if out.absolute().parent.exists() else None))
    keep = False
    try:
        status = _run_traced(list(command), trace)
        if not trace_logs(trace):
            raise CliError(NO_TRACE.format(command=command[0], status=status), status or 2)
        held = _report(trace, request)
        if held is not None and held.exit_code != 3:  # the report could not be written: the trace is all there is
            keep = True
            kept = _keep_aside(trace, out)
            if status == 0:
                echo_err(f"the trace is kept in {kept}")
                raise held
            held.show()
            echo_err(f"the report could not be written; the trace is kept in {kept}")
            echo_err(f"{command[0]} exited with status {status}")
            ctx.exit(status)
        _keep_trace(trace, out)
        if status != 0:
            echo_err(f"{command[0]} exited with status {status}; its report is in {out}")
            ctx.exit(status)
        if held is not None:
            raise held
        if not request.no_browser:
            from .common import open_browser

            open_browser(out)
    finally:
        if not keep:
            shutil.rmtree(trace, ignore_errors=True)


def _report(trace: Path, request: ReportRequest) -> CliError | None:
    """Write the report of the trace; the error it ended with (exit 3: written, a gate held), if any."""
    try:
        write_and_check(trace, replace(request, no_browser=True))
    except CliError as exc:
        return exc
    return None


def _keep_aside(trace: Path, out: Path) -> Path:
    """The trace of a run whose report failed, under a name that says what it is (`OUT.trace`)."""
    kept = out.absolute().parent / f"{out.name}.trace"
    if not kept.exists():
        try:
            os.replace(trace, kept)
            return kept
        except OSError:
            pass
    return trace


def _run_traced(command: list[str], trace: Path) -> int:
    """The program's exit status (128 + N when a signal N ended it, as a shell says)."""
    env = {**os.environ, "TORCH_TRACE": str(trace)}
    try:
        process = subprocess.Popen(command, env=env)
    except OSError as exc:
        raise CliError(f"cannot run {command[0]}: {exc.strerror or exc}", 127 if isinstance(exc, FileNotFoundError) else 126) from None
    try:
        status = process.wait()
    except KeyboardInterrupt:  # the terminal sent SIGINT to the program too; let it finish its own way
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        status = process.wait()
    return 128 - status if status < 0 else status


def _keep_trace(trace: Path, out: Path) -> None:
    """Move the trace into the finished report as trace/ (the report is complete, so this is safe)."""
    if (out / "index.html").is_file() and not (out / "trace").exists():
        os.replace(trace, out / "trace")
