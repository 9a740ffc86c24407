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
from typing import Any

import click
from msgspec.structs import replace

from .. import shutdown
from ..analysis.compiles import Analysis
from ..analysis.kinds import load_plugins
from ..analysis.program import ProgramExit
from ..outcome import Outcome, Refused, Said, Telling, concluded, report_outcome
from ..outcome import kept_as as kept_as, source_info as source_info  # what `watch` names its live report's source by
from ..reading.inputs import ChosenInput
from ..report.staging import COMMITTED, abort_all
from ..heap import few_full_collections
from ..terminal import sanitize
from .common import CliError, echo_diagnostic, echo_err, echo_out, open_browser
from .request import ReportRequest, ServeAt, report_options, serve_options


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
    """Write the report of PATH as requested, and say what it came to (`outcome.report_outcome`: the
    report, --single-file, the gates, --markdown, --strict), exiting by CliError as the module's
    docstring says. `kept` and `program`: for `run` (see `report_outcome`)."""
    path = path_or_env(path)
    request.check_not_an_input(path)
    load_plugins(warn=echo_err)
    telling = Telling(_say, echo_diagnostic, ProgressBar)
    try:
        with few_full_collections():  # the report and what it came to keep what they read (see heap)
            outcome = report_outcome(path, request, telling, kept, program)
    except Refused as refused:
        raise CliError(refused.message, refused.code) from None
    show(outcome)


def conclude(report: Analysis, chosen: ChosenInput, started: float, request: ReportRequest) -> None:
    """Once a report is written (`watch`'s final report): say what it came to, as `write_and_check`."""
    show(concluded(report, chosen, started, request))


def show(outcome: Outcome) -> None:
    """Print what the report came to, open it in a browser when asked, and end as it says."""
    for said in outcome.said:
        _say(said)
    if outcome.browse:
        open_browser(outcome.out)
    if outcome.ending is not None:
        raise CliError(outcome.ending.message, outcome.ending.code)


def _say(said: Said) -> None:
    (echo_out if said.out else echo_err)(said.text)


def rank_detected(rank: int) -> None:
    echo_err(f"Detected rank: {rank}")


def path_or_env(path: Path | None) -> Path:
    if path is not None:
        return path
    env = os.environ.get("TORCH_TRACE")
    if env:
        return Path(env)
    raise click.UsageError("missing PATH (a trace log or the TORCH_TRACE folder); $TORCH_TRACE is not set either")


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
