"""Issue 45 item 6: under `tlparse-py run`, how the program ended (the program exit: its exit code, or
the signal that killed it) is part of the report, so a program that crashed does not read like a slow
one: summary.json `program`, the index's header (a red line when it failed), summary.md and --markdown
(first lines), the last line on stderr, the multi-rank landing (the launcher's exit), and the typed
summary `diff` loads. A report written without `run` has none: null, never 0."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TRACES, read_json
from test_summary import validate
from tlparse_py.analysis.program import ProgramExit
from tlparse_py.analysis.summary import Summary
from tlparse_py.analysis.summary_load import load_summary
from tlparse_py.diff.load import read_summary

HAS_TORCH = importlib.util.find_spec("torch") is not None
FAILURE_LOG = TRACES / "failure" / "dedicated_log_torch_trace_fc80ajl8.log"
RANK_LOGS = sorted(str(p) for p in (TRACES / "collectives").glob("dedicated_log*"))

# A stand-in for a torch program: copies real logs where TORCH_TRACE says (their records under its own
# pid, as torch's would be: `run` waits while a process the trace names runs), then ends as told:
# `exit N`, or `kill SIGNAL` (it kills itself)
COPIES_LOGS = """
import os, re, signal, sys
how, what, logs = sys.argv[1], sys.argv[2], sys.argv[3:]
trace = os.environ["TORCH_TRACE"]
for log in logs:
    data = open(log, "rb").read()
    data = re.sub(rb"(?m)^([VIWEC]\\d{4} [0-9:.]+ )\\d+ ", lambda m: m.group(1) + b"%d " % os.getpid(), data)
    with open(os.path.join(trace, os.path.basename(log)), "wb") as f:
        f.write(data)
if how == "kill":
    os.kill(os.getpid(), getattr(signal, what))
sys.exit(int(what))
"""


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tlparse_py", *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def copying_program(tmp_path: Path, how: str, what: str, logs: list[str]) -> list[str]:
    """The command line of the stand-in program, ending `how` (`exit`, `kill`) with `what`."""
    script = tmp_path / "prog.py"
    script.write_text(COPIES_LOGS)
    return [sys.executable, str(script), how, what, *logs]


def without_program_exit(files: dict[str, bytes]) -> dict[str, bytes]:
    """A report's files (path → bytes) with the exit 0 `run` wrote into its top page, summary.md and
    summary.json taken out: what a report of the same trace written without `run` holds."""
    kept = dict(files)
    kept["summary.json"] = json.dumps({**json.loads(files["summary.json"]), "program": None}).encode()
    kept["summary.md"] = re.sub(rb"\nThe program exited with 0: [^\n]*\n\n", b"\n", files["summary.md"])
    kept["index.html"] = re.sub(rb'<p class="muted program-exit"[^\n]*\n', b"", files["index.html"])
    return kept


def as_shown(command: str) -> str:
    """A command as the Markdown shows it: up to 200 characters, a longer one cut with "…" (the README's
    limits; summary.json keeps it whole). The test's own paths decide which, so both are met."""
    return command if len(command) <= 200 else command[:199].rstrip() + "…"


def header_line(index: Path) -> str:
    """The program exit's line right under the page's title (`class="..." id="program-exit">...`)."""
    found = re.search(r'</h1>\n<p (class="[a-z]+ program-exit".*?)</p>', index.read_text())
    assert found is not None
    return found.group(1)


@pytest.mark.parametrize("how, what, exit_code, signal_name, said, status", [
    ("exit", "3", 3, None, "exited with 3", 3),
    ("kill", "SIGKILL", None, "SIGKILL", "was killed by SIGKILL", 128 + signal.SIGKILL),
])
@pytest.mark.parametrize("live", [False, True], ids=["run", "run --live"])
def test_a_program_that_failed_says_how_everywhere(tmp_path, how, what, exit_code, signal_name, said, status, live):
    """No torch needed: the program writes the `failure` fixture's log, then exits 3 or kills itself."""
    command = copying_program(tmp_path, how, what, [str(FAILURE_LOG)])
    done = cli("run", *(["--live"] if live else []), "-o", "out", "--no-browser", "--markdown", "ci.md", "--", *command, cwd=tmp_path)
    assert done.returncode == status, done.stderr
    out = tmp_path / "out"
    summary = read_json(out / "summary.json")
    validate(summary)
    assert summary["program"] == {"command": shlex.join(command), "exit_code": exit_code, "signal": signal_name}
    assert summary["totals"]["failed"] == 3  # the report of what it traced is there all the same
    # the index's header: a red line, the command beside it
    line = header_line(out / "index.html")
    assert line.startswith('class="warning program-exit"') and f"<strong>The program {said}</strong>" in line
    # summary.md and --markdown: the line right under the heading
    expected = f"**The program {said}**: `{as_shown(shlex.join(command))}`"
    for markdown in (out / "summary.md", tmp_path / "ci.md"):
        assert markdown.read_text().splitlines()[2] == expected
    # the last line on stderr
    assert done.stderr.splitlines()[-1] == f"{sys.executable} {said}; its report is in out"
    # what `diff` reads of the report, and the loader of summary.json
    loaded = read_summary(out / "summary.json", "base")
    assert isinstance(loaded, Summary) and loaded.program == ProgramExit(shlex.join(command), exit_code, signal_name)
    assert loaded.program.failed and load_summary(summary).program == loaded.program


def test_a_program_that_succeeded_says_so_quietly(tmp_path):
    command = copying_program(tmp_path, "exit", "0", [str(FAILURE_LOG)])
    done = cli("run", "-o", "out", "--no-browser", "--", *command, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    assert read_json(out / "summary.json")["program"] == {"command": shlex.join(command), "exit_code": 0, "signal": None}
    assert header_line(out / "index.html").startswith('class="muted program-exit"')
    assert (out / "summary.md").read_text().splitlines()[2] == f"The program exited with 0: `{as_shown(shlex.join(command))}`"
    assert "exited with" not in done.stderr  # the report's line is the last: nothing went wrong


def test_a_report_written_without_run_knows_no_program_exit(tmp_path):
    """null, never 0: the log does not tell how its program ended."""
    done = cli(str(FAILURE_LOG), "-o", "out", "--no-browser", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    summary = read_json(out / "summary.json")
    validate(summary)
    assert "program" in summary and summary["program"] is None
    assert "program-exit" not in (out / "index.html").read_text()
    assert "The program" not in (out / "summary.md").read_text()
    assert load_summary(summary).program is None
    older = {key: value for key, value in summary.items() if key != "program"}  # a summary.json of 4.0
    assert load_summary(older).program is None


@pytest.mark.parametrize("live", [False, True], ids=["run", "run --live"])
def test_a_launcher_that_failed_says_so_on_the_landing(tmp_path, live):
    """`run -- torchrun ...`: the launcher's exit is the landing's (summary.json, its page, summary.md);
    the rank reports know none of their own."""
    command = copying_program(tmp_path, "exit", "1", RANK_LOGS)
    done = cli("run", *(["--live"] if live else []), "-o", "out", "--no-browser", "--markdown", "ci.md", "--", *command, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    out = tmp_path / "out"
    landing = read_json(out / "summary.json")
    validate(landing)
    assert landing["program"] == {"command": shlex.join(command), "exit_code": 1, "signal": None}
    assert [entry["summary"]["program"] for entry in landing["ranks"]] == [None, None]
    assert read_json(out / "rank_0" / "summary.json")["program"] is None
    assert "<strong>The program exited with 1</strong>" in header_line(out / "index.html")
    for markdown in (out / "summary.md", tmp_path / "ci.md"):
        assert markdown.read_text().splitlines()[2].startswith("**The program exited with 1**: `")
    assert done.stderr.splitlines()[-1] == f"{sys.executable} exited with 1; its report is in out"
    loaded = read_summary(out / "summary.json", "base")
    assert loaded.program == ProgramExit(shlex.join(command), 1, None)


def test_the_program_exit_in_words():
    assert ProgramExit.of(["python", "train.py", "--name", "a b"], 0) == ProgramExit("python train.py --name 'a b'", 0, None)
    assert ProgramExit.of(["python"], -signal.SIGSEGV) == ProgramExit("python", None, "SIGSEGV")
    assert ProgramExit.of(["python"], -signal.SIGSEGV).outcome == "was killed by SIGSEGV"
    assert not ProgramExit.of(["python"], 0).failed and ProgramExit.of(["python"], 2).failed
    assert ProgramExit.of(["python"], 2).outcome == "exited with 2"
    unnamed = max(signal.valid_signals()) + 1
    assert ProgramExit.of(["python"], -unnamed).signal == f"signal {unnamed}"
    neither = ProgramExit("python", None, None)  # no summary.json `run` wrote says so: no verdict
    assert not neither.failed and neither.outcome == "ended, how is not known"


# -- real torch programs --------------------------------------------------------------------------

COMPILES_THEN = """
import os, signal, sys
import torch
f = torch.compile(lambda x: x.sin() + 1, backend="eager")
f(torch.ones(3))
{end}
"""


@pytest.mark.torch
@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (pip install torch==2.13.0)")
@pytest.mark.parametrize("end, exit_code, signal_name, status", [
    ("sys.exit(3)", 3, None, 3),
    ("os.kill(os.getpid(), signal.SIGKILL)", None, "SIGKILL", 128 + signal.SIGKILL),
    ("", 0, None, 0),
], ids=["exit 3", "SIGKILL", "exit 0"])
def test_a_torch_program_s_exit(tmp_path, end, exit_code, signal_name, status):
    (tmp_path / "prog.py").write_text(COMPILES_THEN.format(end=end))
    done = cli("run", "-o", "out", "--no-browser", "--", sys.executable, "prog.py", cwd=tmp_path)
    assert done.returncode == status, done.stderr[-3000:]
    summary = read_json(tmp_path / "out" / "summary.json")
    assert summary["program"] == {"command": shlex.join([sys.executable, "prog.py"]), "exit_code": exit_code, "signal": signal_name}
    assert summary["totals"]["compiles"] == 1 and summary["compiles"][0]["status"] == "ok"
    first = (tmp_path / "out" / "summary.md").read_text().splitlines()[2]
    said = f"was killed by {signal_name}" if signal_name else f"exited with {exit_code}"
    assert first == (f"**The program {said}**" if status else f"The program {said}") + f": `{as_shown(shlex.join([sys.executable, 'prog.py']))}`"
