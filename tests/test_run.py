"""`tlparse-py run -- COMMAND`: the program runs under TORCH_TRACE and its report is written."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import read_json
from linkcheck import broken_links
from logs import metrics, start

# A stand-in for a torch program: writes one compile's records where TORCH_TRACE says, then exits.
FAKE = """
import os, sys
trace = os.environ["TORCH_TRACE"]
with open(os.path.join(trace, "dedicated_log_torch_trace_fake.log"), "w") as f:
    f.write({text!r})
sys.exit({status})
"""


def tlparse(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tlparse_py", *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def fake_program(tmp_path: Path, status: int) -> Path:
    script = tmp_path / "prog.py"
    script.write_text(FAKE.format(text=start() + metrics(), status=status))
    return script


def test_run_writes_the_report_and_keeps_the_trace(tmp_path):
    proc = tlparse("run", "-o", "out", "--no-browser", "--", sys.executable, str(fake_program(tmp_path, 0)), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    assert [c["id"] for c in read_json(out / "summary.json")["compiles"]] == ["[0/0]"]
    assert (out / "trace" / "dedicated_log_torch_trace_fake.log").is_file()
    assert broken_links(out) == []
    assert not [p for p in tmp_path.iterdir() if ".trace-" in p.name]  # no temporary trace folder left


def test_a_failed_program_still_gets_its_report_and_its_exit_status(tmp_path):
    proc = tlparse("run", "-o", "out", "--no-browser", "--", sys.executable, str(fake_program(tmp_path, 7)), cwd=tmp_path)
    assert proc.returncode == 7
    assert "exited with status 7" in proc.stderr
    assert (tmp_path / "out" / "index.html").is_file()


def test_a_program_that_traces_nothing_is_named_plainly(tmp_path):
    proc = tlparse("run", "-o", "out", "--no-browser", "--", sys.executable, "-c", "print('no torch here')", cwd=tmp_path)
    assert proc.returncode == 2
    assert "wrote no TORCH_TRACE log" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()
    crashed = tlparse("run", "-o", "out", "--no-browser", "--", sys.executable, "-c", "import no_such_module", cwd=tmp_path)
    assert crashed.returncode == 1 and "wrote no TORCH_TRACE log" in crashed.stderr


def test_run_needs_a_command(tmp_path):
    proc = tlparse("run", "-o", "out", cwd=tmp_path)
    assert proc.returncode == 2 and "Missing argument" in proc.stderr


def test_a_command_that_does_not_exist(tmp_path):
    proc = tlparse("run", "--no-browser", "--", "no-such-program-here", cwd=tmp_path)
    assert proc.returncode == 127 and "cannot run no-such-program-here" in proc.stderr


@pytest.mark.torch
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_run_a_real_torch_compile_program(tmp_path):
    program = "import torch\nf = torch.compile(lambda x: x.sin() + 1, backend='eager')\nprint(f(torch.ones(3)))"
    proc = tlparse("run", "-o", "out", "--no-browser", "--", sys.executable, "-c", program, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = read_json(tmp_path / "out" / "summary.json")
    assert summary["totals"]["compiles"] == 1 and summary["compiles"][0]["status"] == "ok"
    assert summary["torch_version"] and summary["torch_version"].startswith("2.")
