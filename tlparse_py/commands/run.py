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
from pathlib import Path

import click

from ..reading.inputs import trace_logs
from .common import CliError, echo_err
from .report import report

NO_TRACE = (
    "{command} wrote no TORCH_TRACE log: it did not run torch.compile (or torch.export), or it stopped "
    "before its first compile (an import error?); its exit status was {status}"
)


@click.command("run", context_settings={"help_option_names": ["-h", "--help"], "ignore_unknown_options": True})
@click.option("-o", "--out", default="tl_out", show_default=True, type=click.Path(path_type=Path), help="Output folder (the trace is kept in it as trace/).")
@click.option("--overwrite", is_flag=True, help="Replace the output folder if it holds a report.")
@click.option("--no-browser", is_flag=True, help="Do not open the report in a web browser.")
@click.option("--fail-on", "fail_on", default=None, metavar="CONDITIONS", help="Exit 3 when a condition on the report holds (see `tlparse-py report --help`).")
@click.option("--markdown", default=None, type=click.Path(path_type=Path), metavar="FILE", help="Also write a Markdown summary (e.g. $GITHUB_STEP_SUMMARY).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def run(ctx: click.Context, out: Path, overwrite: bool, no_browser: bool, fail_on: str | None, markdown: Path | None, command: tuple[str, ...]) -> None:
    """Run COMMAND with TORCH_TRACE set, then write the report of what it compiled.

    Put `--` before the command: `tlparse-py run -o tl_out -- python train.py --steps 10`.
    """
    trace = Path(tempfile.mkdtemp(prefix=f".{out.name}.trace-", dir=out.absolute().parent if out.absolute().parent.exists() else None))
    try:
        status = _run_traced(list(command), trace)
        if not trace_logs(trace):
            raise CliError(NO_TRACE.format(command=command[0], status=status), status or 2)
        extra = {name: value for name, value in (("fail_on", fail_on), ("markdown", markdown)) if value is not None}
        try:
            ctx.invoke(report, path=trace, out=out, overwrite=overwrite, no_browser=True, **extra)
        except click.ClickException as exc:
            if status == 0:
                raise
            exc.show()  # the report's own problem, then the program's status, which matters more
        _keep_trace(trace, out)
        if status != 0:
            echo_err(f"{command[0]} exited with status {status}; its report is in {out}")
            ctx.exit(status)
        if not no_browser:
            from .common import open_browser

            open_browser(out)
    finally:
        shutil.rmtree(trace, ignore_errors=True)


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
