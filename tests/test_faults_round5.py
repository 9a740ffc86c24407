"""Faults and hostile outputs, round 5 (issue 47): what the tool starts ends with it, what it stages
is removed on every exit path (SIGTERM, SIGKILL at each phase, a full disk), a lock held for a dead
run is taken over, and an output that is a pipe, a FIFO or a character device (/dev/stdout, as
root too) is written in place, never replaced."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from logs import cid, line
from tlparse_py.report.jobs import PARALLEL_PAGES
from tlparse_py.report.targets import MARKER, classify_output

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")


def small_log(path: Path) -> Path:
    path.write_text(line({"dynamo_output_graph": {}, **cid()}, "g") + line({"export": {}}))
    return path


def many_compiles(path: Path, count: int = PARALLEL_PAGES + 60) -> Path:
    """Enough compile pages for the page builder to fork (report.jobs.PARALLEL_PAGES)."""
    with open(path, "w") as handle:
        for frame in range(count):
            handle.write(line({"dynamo_output_graph": {}, **cid(frame)}, f"def f(x):\n    return x + {frame}"))
    return path


def tool(*args, **kwargs) -> subprocess.CompletedProcess:
    browser = [] if args[0] == "pack" else ["--no-browser"]
    return subprocess.run([sys.executable, "-m", "tlparse_py", *map(str, args), *browser], cwd=REPO,
                          capture_output=True, timeout=120, **kwargs)


def hidden(folder: Path) -> list[str]:
    """What the tool may leave beside -o by mistake: staging folders, locks, temporary files."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_gone(pids: list[int], seconds: float = 5.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


# A run of the tool in a child Python with a fault put in: `PATCH` runs first (it may SIGKILL or
# SIGTERM the run at a chosen point); every pid the run forks is written to FORKS.
RUNNER = r"""
import os, sys, signal, time
forks_file = sys.argv[1]
real_fork = os.fork
def fork():
    pid = real_fork()
    if pid:
        with open(forks_file, "a") as handle:
            handle.write(f"{pid}\n")
    return pid
os.fork = fork
PARENT = os.getpid()
exec(sys.argv[2])
from tlparse_py.cli import main
sys.argv = ["tlparse-py", *sys.argv[3:], "--no-browser"]
main()
"""


def faulty(tmp_path: Path, patch: str, *args) -> tuple[subprocess.CompletedProcess, list[int]]:
    forks = tmp_path / "forks.txt"
    forks.write_text("")
    with open(tmp_path / "stderr.txt", "w+b") as stderr:  # not a pipe: a helper left running would hold it open
        proc = subprocess.run([sys.executable, "-c", RUNNER, str(forks), patch, *map(str, args)], cwd=REPO,
                              stdout=subprocess.DEVNULL, stderr=stderr, timeout=120)
        stderr.seek(0)
        proc.stderr = stderr.read()
    (tmp_path / "stderr.txt").unlink()
    return proc, [int(p) for p in forks.read_text().split()]


SLOW_PAGE_CHILD = """
from tlparse_py.report import jobs
_fork = jobs.PageJobs._fork
def slow_fork(self, work):
    def slow():
        time.sleep(2)  # the forked page builder takes a while: long enough to outlive its parent
        return work()
    return _fork(self, slow)
jobs.PageJobs._fork = slow_fork
"""

KILL_AT = {
    # reading: the log scanned in a forked child (any size), the run killed while it streams records
    "reading": """
from tlparse_py.reading import records, forked
records.SCANNING_CHILD_MIN_BYTES = 0
_items = forked.forked_items
def slow_items(produce, size):
    def slow():
        time.sleep(2)  # the scanning child takes a while: long enough to outlive its parent
        return produce()
    return _items(slow, size)
records.forked_items = slow_items
def receive(pipe):
    os.kill(os.getpid(), signal.SIGKILL)
forked._receive = receive
""",
    # pages: the page builder forked, the run killed at once
    "pages": SLOW_PAGE_CHILD + """
def kill_after_fork(self, work):
    started = slow_fork(self, work)
    time.sleep(0.3)
    os.kill(os.getpid(), signal.SIGKILL)
jobs.PageJobs._fork = kill_after_fork
""",
    # removal: the old report (--overwrite, 260 folders) removed by this process and a forked
    # child (staging.remove_tree), the run killed once its own half is done
    "removal": """
from tlparse_py.report import staging
def kill(pid):
    os.kill(os.getpid(), signal.SIGKILL)
staging._reap = kill
""",
    # commit: the old report moved aside (--overwrite), the new one not yet in place
    "commit": """
from tlparse_py.report import staging
def kill(self):
    os.kill(os.getpid(), signal.SIGKILL)
staging.ReportWriter._claim_and_rename = kill
""",
}


forks_helpers = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the helpers are forked only with a second core")


@forks_helpers
@pytest.mark.parametrize("phase", sorted(KILL_AT))
def test_sigkill_at_each_phase_leaves_nothing_a_rerun_cannot_clear(tmp_path, phase):
    """kill -9 (or the OOM killer) at each phase: the helpers it forked die with it, the output is
    not left locked, and a rerun with --overwrite succeeds and leaves no hidden folder beside -o."""
    log, out = many_compiles(tmp_path / "a.log"), tmp_path / "out"
    assert tool(log, "-o", out).returncode == 0  # an old report: --overwrite moves it aside at commit
    killed, forks = faulty(tmp_path, KILL_AT[phase], log, "-o", out, "--overwrite")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert forks, "nothing was forked: the phase was not reached"
    rerun = tool(log, "-o", out, "--overwrite")  # at once: no helper of the killed run holds the output
    assert rerun.returncode == 0, rerun.stderr
    assert wait_gone(forks, 0.5) == [], f"helpers of the killed run still running ({phase})"
    assert (out / "index.html").is_file() and (out / MARKER).is_file()
    assert hidden(tmp_path) == []


@forks_helpers
def test_a_full_disk_in_the_pages_stops_the_page_builder_and_leaves_nothing(tmp_path):
    """The disk fills while this process writes its pages; the forked builder, slower, must not go
    on writing into (re-creating) the staging folder once the run gave up."""
    patch = SLOW_PAGE_CHILD + """
import errno
from tlparse_py.report import folder_writer
_write = folder_writer.FolderWriter.write
def write(self, rel, data):
    if os.getpid() == PARENT and rel.endswith("index.html") and "/" in rel:
        raise OSError(errno.ENOSPC, "No space left on device", rel)
    return _write(self, rel, data)
folder_writer.FolderWriter.write = write
"""
    out = tmp_path / "out"
    proc, forks = faulty(tmp_path, patch, many_compiles(tmp_path / "a.log"), "-o", out)
    assert proc.returncode == 1 and b"No space left on device" in proc.stderr and b"nothing was changed" in proc.stderr
    assert forks and wait_gone(forks, 0.5) == []
    time.sleep(2.5)  # what a surviving builder would write meanwhile
    assert not out.exists() and hidden(tmp_path) == []


@pytest.mark.parametrize("make_log", [small_log, many_compiles], ids=["one process", "shared with a child"])
def test_sigterm_while_the_old_report_is_removed_leaves_no_old_folder(tmp_path, make_log):
    """Regression: SIGTERM while --overwrite removed the report it replaced left `.out.old-PID-*`
    (a big report takes seconds to remove). The commit is finished first, then the run stops; a big
    old report is removed by this process and a forked child (staging.remove_tree) all the same."""
    log, out = make_log(tmp_path / "a.log"), tmp_path / "out"
    assert tool(log, "-o", out).returncode == 0
    patch = """
from tlparse_py.report import staging
_remove_tree = staging.remove_tree
def remove_tree(path, *rest):
    if ".old-" in str(path):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)  # the handler runs here, inside the removal
    return _remove_tree(path, *rest)
staging.remove_tree = remove_tree
"""
    proc, _ = faulty(tmp_path, patch, log, "-o", out, "--overwrite")
    assert proc.returncode == 143, proc.stderr
    assert b"Traceback" not in proc.stderr and b"the report was written to" in proc.stderr
    assert (out / "index.html").is_file() and hidden(tmp_path) == []


def test_staging_of_a_dead_run_is_removed_even_when_its_pid_is_reused(tmp_path):
    """Regression: a dead run's `.out.old-PID-*` / `.out.partial-PID-*` stayed when PID now named
    another process (pids are reused, in a container most of all). With the output's lock held, no
    live run can be using them; only ours (name and marker, or empty) are removed."""
    reused = os.getpid()  # alive, and not the run's
    old = tmp_path / f".out.old-{reused}-abcd"
    (old / "report").mkdir(parents=True)
    (old / MARKER).write_text("")
    (old / "report" / "index.html").write_text("old")
    half_removed = tmp_path / f".out.old-{reused}-efgh"  # stopped after the marker went: empty
    half_removed.mkdir()
    partial = tmp_path / f".out.partial-{reused}-ijkl"
    partial.mkdir()
    (partial / MARKER).write_text("")
    theirs = tmp_path / f".out.old-{reused}-mnop"  # our name, not our marker: not ours
    theirs.mkdir()
    (theirs / "notes.txt").write_text("keep")
    assert tool(small_log(tmp_path / "a.log"), "-o", tmp_path / "out").returncode == 0
    assert hidden(tmp_path) == [theirs.name] and (theirs / "notes.txt").read_text() == "keep"


def hold_lock(lock: Path, holder: dict) -> subprocess.Popen:
    """A process holding `lock` as a run's leftover helper would, the lock file naming `holder`."""
    code = ("import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "os.write(fd, sys.argv[2].encode())\n"
            "print('locked', flush=True)\n"
            "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(lock), json.dumps(holder)], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"locked\n"
    return proc


def test_a_lock_held_for_a_dead_run_is_taken_over_and_a_live_ones_is_not(tmp_path):
    from tlparse_py.report.lock import _holder

    log, out, lock = small_log(tmp_path / "a.log"), tmp_path / "out", tmp_path / ".out.lock"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = hold_lock(lock, {**_holder(), "pid": int(dead.stdout)})  # the run is gone, its helper holds the lock
    try:
        result = tool(log, "-o", out)
        assert result.returncode == 0, result.stderr
        assert hidden(tmp_path) == []
    finally:
        orphan.kill()
        orphan.wait()
    lock.unlink(missing_ok=True)
    running = hold_lock(lock, _holder())  # this test's own process: alive
    try:
        result = tool(log, "-o", out, "--overwrite")
        assert result.returncode == 2 and b"another tlparse-py run is writing" in result.stderr
    finally:
        running.kill()
        running.wait()
    lock.unlink(missing_ok=True)
    elsewhere = hold_lock(lock, {**_holder(), "pid": int(dead.stdout), "pids": "pid:[1]"})  # another container's run
    try:
        assert tool(log, "-o", out, "--overwrite").returncode == 2
    finally:
        elsewhere.kill()
        elsewhere.wait()


# -- outputs that are streams: written in place, never replaced -------------------------------------


def test_outputs_are_classified_once(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "file").write_text("x")
    (tmp_path / "to_fifo").symlink_to(fifo)
    (tmp_path / "to_file").symlink_to(tmp_path / "file")
    (tmp_path / "dangling").symlink_to(tmp_path / "nothing")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    try:
        kinds = {name: classify_output(tmp_path / name)[1:] for name in
                 ("nothing", "file", "fifo", "to_fifo", "to_file", "dangling", "sock")}
    finally:
        sock.close()
    assert kinds == {"nothing": ("missing", False), "file": ("file", False), "fifo": ("stream", False),
                     "to_fifo": ("stream", True), "to_file": ("file", True), "dangling": ("missing", True),
                     "sock": ("other", False)}
    assert classify_output(tmp_path)[1:] == ("folder", False)
    assert classify_output(Path("/dev/null"))[1:] == ("stream", False)
    assert classify_output(Path("/dev/stdout")).kind == "stream"  # a terminal, a pipe, or a file we hold open


def test_markdown_to_dev_stdout_is_printed_and_dev_stdout_stays(tmp_path):
    """As root (Docker, CI) `--markdown /dev/stdout` deleted /dev/stdout and wrote a plain file there."""
    before = os.readlink("/dev/stdout")
    try:
        result = tool(small_log(tmp_path / "a.log"), "-o", tmp_path / "out", "--markdown", "/dev/stdout")
    finally:
        if not os.path.islink("/dev/stdout"):  # repair the container before failing
            os.replace(Path("/dev/stdout"), tmp_path / "was_dev_stdout") if os.path.exists("/dev/stdout") else None
            os.symlink(before, "/dev/stdout")
            pytest.fail("/dev/stdout was replaced")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(b"### torch.compile report")
    assert os.readlink("/dev/stdout") == before


def test_markdown_through_dev_stdout_redirected_to_a_file_appends_to_it(tmp_path):
    redirected = tmp_path / "log.txt"
    with open(redirected, "wb") as stdout:
        stdout.write(b"earlier step\n")
        stdout.flush()
        proc = subprocess.run([sys.executable, "-m", "tlparse_py", str(small_log(tmp_path / "a.log")), "-o", str(tmp_path / "out"),
                               "--no-browser", "--markdown", "/dev/stdout"], cwd=REPO, stdout=stdout, stderr=subprocess.PIPE, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = redirected.read_text()
    assert text.startswith("earlier step\n") and "### torch.compile report" in text
    assert os.path.islink("/dev/stdout")


@pytest.mark.parametrize("option", ["--markdown", "--single-file"])
def test_a_pipe_given_as_proc_self_fd_is_written_in_place(tmp_path, option):
    read_end, write_end = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "tlparse_py", str(small_log(tmp_path / "a.log")), "-o", str(tmp_path / "out"),
                             "--no-browser", option, f"/proc/self/fd/{write_end}"], cwd=REPO, pass_fds=[write_end],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        received = pipe.read()
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert received.startswith(b"### torch.compile report" if option == "--markdown" else b"<!doctype html>"), (received[:200], stderr)
    assert hidden(tmp_path) == []


def read_fifo(fifo: Path, into: list[bytes]) -> threading.Thread:
    def read() -> None:
        with open(fifo, "rb") as handle:
            into.append(handle.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("option", ["--markdown", "--single-file"])
def test_a_fifo_is_written_in_place(tmp_path, option):
    fifo = tmp_path / "summary"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = read_fifo(fifo, received)
    result = tool(small_log(tmp_path / "a.log"), "-o", tmp_path / "out", option, fifo)
    reader.join(30)
    assert result.returncode == 0, result.stderr
    assert received and received[0].startswith(b"### torch.compile report" if option == "--markdown" else b"<!doctype html>"), \
        ([r[:200] for r in received], result.stderr)
    assert classify_output(fifo)[1:] == ("stream", False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.log", "out", "summary"]  # no temporary file beside it


def test_pack_and_diff_write_a_fifo_in_place(tmp_path):
    log = small_log(tmp_path / "a.log")
    assert tool(log, "-o", tmp_path / "r").returncode == 0
    for command in (["pack", tmp_path / "r"], ["diff", tmp_path / "r", log, "-o", tmp_path / "d", "--markdown"]):
        fifo = tmp_path / "target"
        os.mkfifo(fifo)
        received: list[bytes] = []
        reader = read_fifo(fifo, received)
        result = tool(*command, fifo)
        reader.join(30)
        assert result.returncode == 0, result.stderr
        assert received and received[0][:3] in (b"<!d", b"###"), received
        assert classify_output(fifo).kind == "stream"
        fifo.unlink()
    assert hidden(tmp_path) == []


def test_a_socket_is_no_output(tmp_path):
    log = small_log(tmp_path / "a.log")
    assert tool(log, "-o", tmp_path / "r").returncode == 0
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    try:
        for command in (["pack", tmp_path / "r"], ["diff", tmp_path / "r", log, "-o", tmp_path / "d", "--markdown"],
                        [log, "-o", tmp_path / "r2", "--single-file"]):
            result = tool(*command, tmp_path / "sock")
            assert result.returncode == 2 and b"neither a file" in result.stderr, (command, result.stderr)
    finally:
        sock.close()


def test_a_lock_file_in_a_forked_child_is_closed(tmp_path):
    """A child forked while a run holds the output's lock does not hold it too (helpers that
    outlive a killed run must not keep its output locked)."""
    from tlparse_py.report.staging import ReportWriter

    writer = ReportWriter(tmp_path / "out", False)
    try:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                held = [fd for fd in map(int, os.listdir("/proc/self/fd")) if _is(fd, tmp_path / ".out.lock")]
                os.write(write_end, json.dumps(held).encode())
            finally:
                os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            assert json.loads(pipe.read()) == []
        os.waitpid(pid, 0)
        fd = os.open(tmp_path / ".out.lock", os.O_RDWR)  # the child's close did not release the run's lock
        with pytest.raises(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.close(fd)
    finally:
        writer.abort()
    assert hidden(tmp_path) == []


def _is(fd: int, path: Path) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
