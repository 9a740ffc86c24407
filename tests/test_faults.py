"""Faults around the output folder: kills, concurrent runs, folders appearing mid-run, --overwrite
of something that is not ours. Nothing the tool did not write may be deleted, and nothing it
wrote may be left behind half-done."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import TRACES, full_disk_where
from logs import cid, line
from tlparse_py.cli import main
from tlparse_py.report.targets import MARKER


def small_log(path: Path) -> Path:
    path.write_text(line({"dynamo_output_graph": {}, **cid()}, "g") + line({"export": {}}))
    return path


def run(*args) -> object:
    return CliRunner().invoke(main, [*map(str, args), "--no-browser"])


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_every_report_carries_the_marker_and_overwrite_needs_it(tmp_path):
    log = small_log(tmp_path / "a.log")
    assert run(log, "-o", tmp_path / "out").exit_code == 0
    assert (tmp_path / "out" / MARKER).is_file()
    assert run(log, "-o", tmp_path / "out", "--overwrite").exit_code == 0
    assert leftovers(tmp_path) == []


def test_overwrite_never_replaces_a_folder_holding_git(tmp_path):
    work = tmp_path / "thesis"
    work.mkdir()
    for name in ("index.html", "raw.jsonl", "compile_directory.json", "thesis.tex"):
        (work / name).write_text("mine")
    (work / ".git").mkdir()
    result = run(small_log(tmp_path / "a.log"), "-o", work, "--overwrite")
    assert result.exit_code == 2 and "does not look like a tlparse report" in result.output
    assert sorted(p.name for p in work.iterdir()) == [".git", "compile_directory.json", "index.html", "raw.jsonl", "thesis.tex"]


def test_a_folder_appearing_at_the_output_during_the_run_is_kept(tmp_path, monkeypatch):
    from tlparse_py import pipeline

    out = tmp_path / "out"
    finish = pipeline.Pipeline.finish

    def someone_else_writes_there(self, *args, **kwargs):
        out.mkdir()
        (out / "theirs.txt").write_text("not yours")
        return finish(self, *args, **kwargs)

    monkeypatch.setattr(pipeline.Pipeline, "finish", someone_else_writes_there)
    result = run(small_log(tmp_path / "a.log"), "-o", out)
    assert result.exit_code == 1 and "appeared while the report was being written" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["theirs.txt"]
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("out.tlparse-py-")]
    assert len(kept) == 1 and (kept[0] / "index.html").is_file() and str(kept[0]) in result.output
    assert leftovers(tmp_path) == []


def test_a_second_run_for_the_same_output_fails_clearly(tmp_path):
    lock = tmp_path / ".out.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # what a running tlparse-py holds
        result = run(small_log(tmp_path / "a.log"), "-o", tmp_path / "out")
        assert result.exit_code == 2 and "another tlparse-py run is writing" in result.output
        assert not (tmp_path / "out").exists()
    finally:
        os.close(fd)
    assert run(tmp_path / "a.log", "-o", tmp_path / "out").exit_code == 0


def test_staging_left_by_killed_runs_is_removed_and_nothing_else(tmp_path):
    dead = 2**22 + 12345  # above the default pid_max: no such process
    stale = tmp_path / f".out.partial-{dead}-abcd"
    stale.mkdir()
    (stale / MARKER).write_text("")
    (stale / "index.html").write_text("half")
    lookalike = tmp_path / f".out.partial-{dead}-wxyz"  # the name, but not our marker: not ours
    lookalike.mkdir()
    (lookalike / "notes.txt").write_text("keep")
    assert run(small_log(tmp_path / "a.log"), "-o", tmp_path / "out").exit_code == 0
    assert not stale.exists() and (lookalike / "notes.txt").read_text() == "keep"


def sessions_members(sid: int) -> list[int]:
    members = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def big_log(path: Path, megabytes: int = 40) -> Path:
    code = "\n".join(f"def f{i}(x):\n    return torch.ops.aten.add(x, {i})  # kernel" for i in range(40))
    with open(path, "w") as handle:
        frame = 0
        while handle.tell() < megabytes << 20:
            handle.write(line({"dynamo_output_graph": {}, **cid(frame)}, code + f"\n# {frame}"))
            handle.write(line({"inductor_output_code": {"filename": f"/tmp/k{frame}.py"}, **cid(frame)}, code + f"\n# {frame}"))
            frame += 1
    return path


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to find leftover processes")
def test_sigterm_mid_run_leaves_no_staging_and_no_processes(tmp_path):
    log = big_log(tmp_path / "big.log")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "tlparse_py", str(log), "-o", str(out), "--no-browser"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(p.name.startswith(".out.partial-") for p in tmp_path.iterdir()):
        time.sleep(0.05)
    time.sleep(1.5)  # into the run: reading, highlight workers started
    assert proc.poll() is None, "the run ended before it could be interrupted: make the log bigger"
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    assert b"Traceback" not in stderr and b"Terminated (SIGTERM)" in stderr
    for _ in range(100):  # processes the kernel is still tearing down
        if not sessions_members(proc.pid):
            break
        time.sleep(0.05)
    assert sessions_members(proc.pid) == []
    assert not out.exists() and leftovers(tmp_path) == []


def test_a_file_written_behind_the_reading_that_fails_fails_the_report_and_leaves_nothing(tmp_path, monkeypatch):
    """Payloads are written by a thread beside the reading (behind.BehindWrites): a failure there
    (a full disk) still ends the report with the OSError, and nothing is left beside -o."""
    import errno

    from tlparse_py.pipeline import write_report

    full_disk_where(monkeypatch, lambda rel: rel.startswith("payloads/"))
    log = sorted((TRACES / "graph_break").glob("dedicated_log*"))[0]
    with pytest.raises(OSError) as raised:
        write_report(log, tmp_path / "out")
    assert raised.value.errno == errno.ENOSPC
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no report, no staging folder, no lock
