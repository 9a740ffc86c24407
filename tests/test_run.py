"""`tlparse-py run -- COMMAND`: the program runs under TORCH_TRACE and its report is written."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import read_json
from linkcheck import broken_links
from logs import metrics, start

# A stand-in for a torch program: writes one compile's records where TORCH_TRACE says, then exits.
# Its records name its own pid, as torch's do: `run` waits while a process the trace names runs, and
# a made-up pid may be a live process of this machine (it was, once: `run` waited for it)
FAKE = """
import os, sys
trace = os.environ["TORCH_TRACE"]
with open(os.path.join(trace, "dedicated_log_torch_trace_fake.log"), "w") as f:
    f.write({text!r}.replace(" 4242 ", " %d " % os.getpid()))
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
    assert "exited with 7; its report is in out" in proc.stderr
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


# -- the options of a report, checked before the program starts -------------------------------------

MARKER = """
import pathlib, sys
pathlib.Path(sys.argv[1]).write_text("ran")
"""


def marker_program(tmp_path: Path) -> tuple[Path, Path]:
    script = tmp_path / "marks.py"
    script.write_text(MARKER)
    return script, tmp_path / "ran.txt"


@pytest.mark.parametrize("options, says", [
    (["--fail-on", "graph_breaks>0,nonsense"], "malformed condition 'nonsense'"),
    (["--fail-on", "no_such_total>0"], "unknown name 'no_such_total'"),
    (["--markdown", "missing/folder/summary.md"], "does not exist"),
    (["--report-url", "ftp://example.com/r"], "--report-url"),
])
def test_a_bad_option_stops_run_before_the_program_starts(tmp_path, options, says):
    script, ran = marker_program(tmp_path)
    proc = tlparse("run", "-o", "out", "--no-browser", *options, "--", sys.executable, str(script), str(ran), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and "Traceback" not in proc.stderr
    assert not ran.exists(), "the program must not have started"
    assert not (tmp_path / "out").exists() and not [p for p in tmp_path.iterdir() if ".trace-" in p.name]


def test_an_existing_output_folder_stops_run_before_the_program_starts(tmp_path):
    script, ran = marker_program(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("keep")
    proc = tlparse("run", "-o", "out", "--no-browser", "--", sys.executable, str(script), str(ran), cwd=tmp_path)
    assert proc.returncode == 2 and "--overwrite" in proc.stderr
    assert not ran.exists() and (tmp_path / "out" / "mine.txt").read_text() == "keep"


def test_run_gates_and_writes_markdown_like_the_report_command(tmp_path):
    summary = tmp_path / "step_summary.md"
    proc = tlparse("run", "-o", "out", "--no-browser", "--fail-on", "compiles>0,graph_breaks>0", "--markdown", str(summary),
                   "--report-url", "https://ci.example.com/artifacts/tl_out", "--", sys.executable, str(fake_program(tmp_path, 0)), cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert "--fail-on compiles>0: compiles is 1" in proc.stderr and "graph_breaks>0" not in proc.stderr.split("--fail-on compiles>0")[0]
    text = summary.read_text()
    assert "](https://ci.example.com/artifacts/tl_out/index.html)" in text and "Gate failed" in text
    assert (tmp_path / "out" / "trace" / "dedicated_log_torch_trace_fake.log").is_file()  # the report was written, the trace kept in it


def test_a_report_that_cannot_be_written_keeps_the_trace(tmp_path):
    """The program ran (maybe for hours): when its report cannot be written, the trace is kept and named."""
    script = tmp_path / "prog.py"
    # the program itself makes a folder of its own at -o while it runs: the report may not replace it
    script.write_text(FAKE.format(text=start() + metrics(), status=0).replace("sys.exit(", "os.makedirs('out'); open('out/mine.txt', 'w').write('mine'); sys.exit("))
    proc = tlparse("run", "-o", "out", "--no-browser", "--", sys.executable, str(script), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "the trace is kept in" in proc.stderr and "Traceback" not in proc.stderr
    kept = Path(proc.stderr.split("the trace is kept in", 1)[1].split()[0])
    assert (tmp_path / kept).joinpath("dedicated_log_torch_trace_fake.log").is_file()
    assert (tmp_path / "out" / "mine.txt").read_text() == "mine"  # never touched


# A program that traces one compile, says it is running (with its pid), then runs until stopped.
LONG = """
import os, pathlib, time
trace = os.environ["TORCH_TRACE"]
with open(os.path.join(trace, "dedicated_log_torch_trace_fake.log"), "w") as f:
    f.write({text!r}.replace(" 4242 ", " %d " % os.getpid()))
pathlib.Path({ready!r}).write_text(str(os.getpid()))
time.sleep(120)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stopping_signal_stops_the_program_too_and_keeps_the_trace(tmp_path, sig):
    ready = tmp_path / "ready"
    script = tmp_path / "long.py"
    script.write_text(LONG.format(text=start() + metrics(), ready=str(ready)))
    proc = subprocess.Popen([sys.executable, "-m", "tlparse_py", "run", "-o", "out", "--no-browser", "--", sys.executable, str(script)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(ready.read_text())
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig, stderr
    assert not alive(child)  # passed on to the program: it is not left running
    assert (tmp_path / "out.trace" / "dedicated_log_torch_trace_fake.log").is_file()
    assert "the trace is kept in" in stderr and "Traceback" not in stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.trace-")] and not (tmp_path / "out").exists()


def test_the_trace_moves_across_filesystems_by_copy(tmp_path, monkeypatch):
    """os.replace across filesystems fails with EXDEV: the trace is copied, then removed."""
    import errno as errno_module

    from tlparse_py.commands import run as run_command

    source = tmp_path / "trace"
    source.mkdir()
    (source / "dedicated_log_torch_trace_x.log").write_text("log")
    real_replace = os.replace

    def cross_device(src, dst):
        if Path(src) == source:
            raise OSError(errno_module.EXDEV, "Invalid cross-device link")
        return real_replace(src, dst)

    monkeypatch.setattr(run_command.os, "replace", cross_device)
    run_command._move(source, tmp_path / "kept")
    assert (tmp_path / "kept" / "dedicated_log_torch_trace_x.log").read_text() == "log" and not source.exists()
