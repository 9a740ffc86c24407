"""`run` waits for what its program started (issue 47 item 8).

A child the program started and never waited for (a `subprocess.Popen` left running, in the
program's process group or in one of its own) may still be starting when the program exits: it
has written no trace yet, so no log names its pid, and `run` reported half a second later, without
the compiles that child then wrote into `run`'s own trace folder. `run` now waits while any process
of the program's session runs, says so on stderr, and Ctrl-C stops the wait and reports what is there.

The program is a stand-in (the records as torch writes them, each process naming its own pid).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import read_json
from logs import line, metrics, start

# The program writes its compile and exits at once; the child it starts writes its own compile
# `pause` seconds later (it has not traced before the program exits). argv: name, records, pause,
# "own-group" or "same-group", the file the child's pid goes to.
PROGRAM = """
import os, subprocess, sys, time
name, text, pause = sys.argv[1], sys.argv[2], float(sys.argv[3])
if name == "program":
    options = {"process_group": 0} if sys.argv[4] == "own-group" else {}
    child = subprocess.Popen([sys.executable, __file__, "child", text, sys.argv[3]], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **options)
    open(sys.argv[5], "w").write(str(child.pid))
else:
    time.sleep(pause)
with open(os.path.join(os.environ["TORCH_TRACE"], "dedicated_log_torch_trace_" + name + ".log"), "w") as f:
    f.write(text.replace(" 4242 ", " %d " % os.getpid()))
"""
WAITING = "waiting for the processes still writing its trace, or started by it and still running"


def command(tmp_path: Path, pause: float, group: str) -> list[str]:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    text = start() + line({"str": ["/src/prog.py", 0]}) + metrics()
    return [sys.executable, str(script), "program", text, str(pause), group, str(tmp_path / "child.pid")]


def kill_child(tmp_path: Path) -> None:
    try:
        os.kill(int((tmp_path / "child.pid").read_text()), signal.SIGKILL)
    except (OSError, ValueError):
        pass


@pytest.mark.parametrize("live", [[], ["--live"]], ids=["one-shot", "live"])
@pytest.mark.parametrize("group", ["same-group", "own-group"])
def test_run_waits_for_a_child_that_traces_after_its_program_exited(tmp_path, group, live):
    try:
        done = subprocess.run([sys.executable, "-m", "tlparse_py", "run", "--no-browser", "-o", "out", *live, "--",
                               *command(tmp_path, 2.0, group)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    finally:
        kill_child(tmp_path)
    assert done.returncode == 0, done.stderr
    if not live:
        assert WAITING in done.stderr, done.stderr
    summary = read_json(tmp_path / "out" / "summary.json")
    assert summary["totals"]["compiles"] == 2, done.stderr
    assert sorted(p.name for p in (tmp_path / "out" / "trace").iterdir()) == [
        "dedicated_log_torch_trace_child.log", "dedicated_log_torch_trace_program.log"]


def test_ctrl_c_stops_the_wait_and_reports_what_is_there(tmp_path):
    err = tmp_path / "stderr.txt"
    try:
        with open(err, "w") as handle:
            run = subprocess.Popen([sys.executable, "-m", "tlparse_py", "run", "--no-browser", "-o", "out", "--",
                                    *command(tmp_path, 120.0, "same-group")], cwd=tmp_path, stderr=handle, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while WAITING not in err.read_text() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert WAITING in err.read_text(), err.read_text()
        run.send_signal(signal.SIGINT)
        assert run.wait(timeout=120) == 0, err.read_text()
    finally:
        kill_child(tmp_path)
    assert read_json(tmp_path / "out" / "summary.json")["totals"]["compiles"] == 1
    assert [p.name for p in (tmp_path / "out" / "trace").iterdir()] == ["dedicated_log_torch_trace_program.log"]
