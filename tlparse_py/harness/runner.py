"""Run one scenario program in its own subprocess and collect the trace files it wrote.

Stdlib only: torch is imported by the scenario programs, never here.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from msgspec import Struct, field

from .registry import Scenario

TAIL_LINES = 20
# Files a previous run of the same scenario may have left in its trace directory.
LOG_PATTERNS = ("*.log", "*.log.gz")
# Variables that would redirect or reshape the trace, or switch the caches off behind the
# cache scenario's back; the harness sets its own values.
SCRUBBED_ENV = (
    "TORCH_TRACE",
    "TORCH_DTRACE",
    "TORCH_COMPILE_DEBUG",
    "TORCHINDUCTOR_FORCE_DISABLE_CACHES",
    "TORCHDYNAMO_SUPPRESS_ERRORS",
)


class ScenarioResult(Struct):
    """What happened when a scenario ran."""

    scenario: Scenario
    trace_dir: Path
    temp_root: Path
    device: str
    status: str = "ok"  # "ok", "FAILED" or "skipped"
    seconds: float = 0.0
    returncode: int | None = None
    timed_out: bool = False
    problem: str = ""  # why it failed, in one line
    tail: list[str] = field(default_factory=list)
    # log file -> 1-based number of the process that created it (for `cache`).
    log_process: dict[Path, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True if the scenario ran and produced what it should."""
        return self.status == "ok"

    @property
    def logs(self) -> list[Path]:
        """The trace files, in creation order."""
        return list(self.log_process)

    @property
    def total_bytes(self) -> int:
        """Combined size of the trace files."""
        return sum(p.stat().st_size for p in self.logs if p.exists())


def find_logs(trace_dir: Path) -> list[Path]:
    """Trace files in `trace_dir`, oldest first (draft_export's capture file comes last)."""
    found = [p for pattern in LOG_PATTERNS for p in trace_dir.glob(pattern)]
    return sorted(found, key=lambda p: (p.stat().st_mtime_ns, p.name))


def clear_old_logs(trace_dir: Path) -> None:
    """Remove logs of an earlier run: file names are random, so they would pile up."""
    for path in find_logs(trace_dir):
        path.unlink()


def scenario_env(scenario: Scenario, trace_dir: Path, temp_root: Path, device: str) -> dict:
    """The child's environment: trace dir, private caches and temp dir, one thread."""
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env["TORCH_DTRACE" if scenario.dtrace else "TORCH_TRACE"] = str(trace_dir)
    env.update(
        # The machine may have 2 cores; more threads only add contention and noise.
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        # No compile worker pool: forked workers that log open extra trace files.
        TORCHINDUCTOR_COMPILE_THREADS="1",
        TORCHINDUCTOR_CACHE_DIR=str(temp_root / "inductor_cache"),
        TRITON_CACHE_DIR=str(temp_root / "triton_cache"),
        # Everything torch puts in tempfile.gettempdir() lands in one known place, so the
        # fixture normaliser can replace it (and it is cleaned up afterwards).
        TMPDIR=str(temp_root / "tmp"),
        PYTHONUNBUFFERED="1",
        PYTHONHASHSEED="0",
        PYTHONDONTWRITEBYTECODE="1",
        TLPARSE_HARNESS_DEVICE=device,
    )
    return env


def make_temp_root(scenario: Scenario) -> Path:
    """A fresh directory for the scenario's caches, temp files and working directory."""
    root = Path(tempfile.mkdtemp(prefix=f"tlparse_harness_{scenario.name}_"))
    for sub in ("inductor_cache", "triton_cache", "tmp", "cwd"):
        (root / sub).mkdir()
    return root


def stop_process_group(proc: subprocess.Popen) -> None:
    """Stop the child and everything it spawned (ranks, compile workers).

    The child was started in its own session, so its process group id is its pid and
    contains only processes this harness started.
    """
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def run_process(cmd: list[str], env: dict, cwd: Path, output: Path, timeout: float) -> tuple[int | None, bool]:
    """Run `cmd`, appending its stdout+stderr to `output`; return (exit code, timed out)."""
    with open(output, "ab") as out:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            return proc.wait(timeout=timeout), False
        except subprocess.TimeoutExpired:
            stop_process_group(proc)
            return proc.returncode, True
        except BaseException:  # Ctrl-C: do not leave ranks or workers behind
            stop_process_group(proc)
            raise


def read_tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    """The last `lines` lines of a text file (decoded leniently)."""
    try:
        text = path.read_bytes()[-64 * 1024 :].decode("utf-8", errors="replace")
    except OSError:
        return []
    return text.splitlines()[-lines:]


def missing_markers(scenario: Scenario, logs: list[Path]) -> list[str]:
    """The scenario's expected markers that appear in none of its logs."""
    wanted = {m: m.encode() for m in scenario.expect}
    for path in logs:
        data = path.read_bytes()
        wanted = {m: b for m, b in wanted.items() if b not in data}
    return list(wanted)


def check_outputs(result: ScenarioResult) -> None:
    """Turn a clean exit into a failure if the logs lack what the scenario is for."""
    logs = result.logs
    if len(logs) < result.scenario.min_logs:
        result.status = "FAILED"
        result.problem = f"expected at least {result.scenario.min_logs} log files, found {len(logs)}"
        return
    missing = missing_markers(result.scenario, logs)
    if missing:
        result.status = "FAILED"
        result.problem = "ran, but the logs lack: " + ", ".join(missing)


def run_scenario(scenario: Scenario, out_dir: Path, device: str, timeout: float) -> ScenarioResult:
    """Run every process of `scenario`; its logs go to `out_dir/<name>/`.

    The combined stdout+stderr of its processes is kept in `out_dir/<name>.output.txt`.
    """
    trace_dir = out_dir / scenario.name
    trace_dir.mkdir(parents=True, exist_ok=True)
    clear_old_logs(trace_dir)
    output = out_dir / f"{scenario.name}.output.txt"
    output.write_bytes(b"")
    result = ScenarioResult(scenario, trace_dir, make_temp_root(scenario), device)
    start = time.monotonic()
    try:
        run_processes(result, output, timeout)
    except BaseException:  # Ctrl-C: the caller never gets the result to clean up
        cleanup(result)
        raise
    finally:
        result.seconds = time.monotonic() - start
    if result.ok:
        check_outputs(result)
    return result


def run_processes(result: ScenarioResult, output: Path, timeout: float) -> None:
    """Run the scenario's process(es) in turn, stopping at the first failure."""
    scenario = result.scenario
    env = scenario_env(scenario, result.trace_dir, result.temp_root, result.device)
    # -P: do not put the scenarios directory on sys.path, where `triton.py` would shadow
    # the real triton package (and any other scenario name could shadow a module).
    cmd = [sys.executable, "-P", str(scenario.script)]
    for number in range(1, scenario.processes + 1):
        with open(output, "ab") as out:
            out.write(f"== {scenario.name}: process {number} of {scenario.processes} ==\n".encode())
        rc, timed_out = run_process(cmd, env, result.temp_root / "cwd", output, timeout)
        for path in find_logs(result.trace_dir):
            result.log_process.setdefault(path, number)
        if timed_out or rc != expected_exit(scenario):
            record_failure(result, rc, timed_out, timeout, number)
            result.tail = read_tail(output)
            return


def expected_exit(scenario: Scenario) -> int:
    """The exit code of a successful run: 0, or death by SIGKILL for `expect_killed`."""
    return -signal.SIGKILL if scenario.expect_killed else 0


def record_failure(result: ScenarioResult, rc: int | None, timed_out: bool, timeout: float,
                   number: int) -> None:
    """Mark `result` failed, with a one-line reason that names the exit code."""
    result.status, result.returncode, result.timed_out = "FAILED", rc, timed_out
    if timed_out:
        problem = f"timed out after {timeout:g} s, killed: exit code {rc}"
    elif result.scenario.expect_killed:
        problem = f"exit code {rc}, expected death by SIGKILL ({-signal.SIGKILL})"
    else:
        problem = f"exit code {rc}"
    if result.scenario.processes > 1:
        problem += f" (process {number} of {result.scenario.processes})"
    result.problem = problem


def cleanup(result: ScenarioResult) -> None:
    """Delete the scenario's caches and temp files (the trace dir is kept)."""
    shutil.rmtree(result.temp_root, ignore_errors=True)
