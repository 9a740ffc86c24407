"""--dask-scheduler: rank reports built on a real Dask cluster (a LocalCluster of two worker
processes) are the local pool's, byte for byte; an unusable scheduler writes nothing; a worker
that dies while building a rank costs one retry, and a rank whose worker always dies is shown as
failed while the other ranks are kept. The same retry-once for the local process pool.

distributed is in the `test` extra: without it these tests skip, except in CI
(TLPARSE_PY_REQUIRE_ALL=1, see conftest.py), where its absence is an error.
"""

from __future__ import annotations

import os
import socket
import time
import threading
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import TRACES, read_json
from linkcheck import broken_links
from tlparse_py.analysis.summary import Summary
from tlparse_py.cli import main
from tlparse_py.options import Options
from tlparse_py.multirank import cluster as cluster_module
from tlparse_py.multirank import landing as landing_module
from tlparse_py.multirank import run as run_module
from tlparse_py.multirank.run import build_rank as real_build_rank

distributed = pytest.importorskip("distributed")
import dask  # noqa: E402  (installed with distributed)
from distributed.diagnostics.plugin import SchedulerPlugin  # noqa: E402

FIXTURES = ("collectives", "distributed")


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def cluster():
    """Two single-threaded worker processes (so a worker can really die), each given one task at a
    time (so a dying rank takes no other rank with it); the scheduler gives up on a task at its
    first dead worker, so every retry seen here is the tool's own."""
    with dask.config.set({"distributed.scheduler.allowed-failures": 0, "distributed.scheduler.worker-saturation": 1.0}):
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as local:
            local.finished = Finished()
            local.scheduler.add_plugin(local.finished)
            yield local


class Finished(SchedulerPlugin):
    """The keys of the tool's rank tasks that finished on the cluster."""

    def __init__(self):
        self.keys: list[str] = []

    def transition(self, key, start, finish, *args, **kwargs):
        if finish == "memory" and str(key).startswith("tlparse-"):
            self.keys.append(str(key))


@pytest.fixture(scope="module")
def local_builds(tmp_path_factory):
    """Each fixture's multi-rank report from the local process pool: what the cluster must match."""
    root = tmp_path_factory.mktemp("local")
    for name in FIXTURES:
        result = cli(TRACES / name, "--all-ranks-html", "-o", root / name, "--no-browser")
        assert result.exit_code == 0, result.output
    return root


class Dies:
    """A build_rank that kills its worker process (os._exit) while building `rank`, on its first
    `times` attempts; every attempt leaves a file in `marks`, so the test counts them."""

    def __init__(self, rank: int, marks: Path, times: int):
        self.rank, self.marks, self.times = rank, marks, times

    def __call__(self, job, root):
        if job.rank == self.rank:
            attempt = len(list(self.marks.iterdir())) + 1
            (self.marks / f"attempt-{attempt}-pid-{os.getpid()}").touch()
            if attempt <= self.times:
                os._exit(1)
        return real_build_rank(job, root)


def dying(monkeypatch, tmp_path, times):
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setattr(run_module, "build_rank", Dies(1, marks, times))
    return marks


# -- the cluster builds the same report ------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
def test_cluster_report_is_the_local_pools_byte_for_byte(tmp_path, cluster, local_builds, name):
    before = len(cluster.finished.keys)
    out = tmp_path / "dask"
    result = cli(TRACES / name, "--all-ranks-html", "-o", out, "--no-browser", "--dask-scheduler", cluster.scheduler_address)
    assert result.exit_code == 0, result.output
    assert "Multi-rank report generated" in result.stdout
    ran = sorted(key.rsplit("-", 1)[0] for key in cluster.finished.keys[before:])
    assert ran == ["tlparse-rank_0", "tlparse-rank_1"]  # both ranks really ran on the cluster
    local = tree(local_builds / name)
    built = tree(out)
    assert sorted(built) == sorted(local)
    assert "index.html" in built and "rank_0/summary.json" in built and "rank_1/summary.json" in built
    assert [path for path in local if built[path] != local[path]] == []


def test_cluster_results_are_the_local_ones_typed(tmp_path, cluster):
    """What travels back from a worker: the rank's typed summary and facts, equal to a local build's."""
    jobs = run_module.discover(TRACES / "collectives", Options(workers=0))
    client = cluster_module.connect(cluster.scheduler_address)
    try:
        remote = run_module.build_all(jobs, tmp_path / "dask", cluster=client)
    finally:
        cluster_module.close(client)
    local = run_module.build_all(jobs, tmp_path / "local", workers=1)
    assert remote == local and all(isinstance(r.summary, Summary) and r.summary.compiles for r in remote)


# -- an unusable scheduler: one line, exit 2, nothing written ----------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def nothing_written(tmp_path: Path) -> bool:
    return sorted(p.name for p in tmp_path.iterdir()) == []


def test_unreachable_scheduler_says_one_line_and_writes_nothing(tmp_path):
    """A real process, so the one line is all of stderr (distributed's own logging included)."""
    address = f"tcp://127.0.0.1:{free_port()}"
    env = {**os.environ, cluster_module.TIMEOUT_ENV: "1"}
    command = [sys.executable, "-m", "tlparse_py", str(TRACES / "collectives"), "--all-ranks-html", "-o", "out", "--no-browser", "--dask-scheduler", address]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"Error: cannot reach the Dask scheduler at {address}: Timed out trying to connect to {address} after 1 s"]
    assert nothing_written(tmp_path)


SILENT = b""  # accepts the connection, never answers
HTTP = b"HTTP/1.0 200 OK\r\nContent-Length: 1000000000\r\n\r\n" + b"x" * 65536  # answers, but not as Dask


@pytest.fixture(params=[SILENT, HTTP], ids=["silent", "http"])
def not_a_scheduler(request):
    """A loopback port that accepts connections and is no Dask scheduler."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held = []

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)
            if request.param:
                try:
                    conn.sendall(request.param)
                except OSError:
                    pass

    threading.Thread(target=serve, daemon=True).start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    server.close()
    for conn in held:
        conn.close()


def test_a_port_that_is_no_scheduler_is_given_up_on_in_time(tmp_path, not_a_scheduler):
    """distributed's own timeout covers reaching the port, not a peer that never answers as Dask."""
    env = {**os.environ, cluster_module.TIMEOUT_ENV: "1"}
    command = [sys.executable, "-m", "tlparse_py", str(TRACES / "collectives"), "--all-ranks-html", "-o", "out", "--no-browser",
               "--dask-scheduler", not_a_scheduler]
    started = time.monotonic()
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < 20  # the timeout, a moment of grace and start-up; it hung before
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line in (f"Error: cannot reach the Dask scheduler at {not_a_scheduler}: no answer in 1 s (is it a Dask scheduler?)",
                    f"Error: cannot reach the Dask scheduler at {not_a_scheduler}: it answered, but not as a Dask scheduler")
    assert nothing_written(tmp_path)


@pytest.mark.parametrize("address, says", [
    ("nonsense", "--dask-scheduler nonsense: not a scheduler address"),
    ("foo://host:1", "unknown address scheme 'foo'"),
    ("inproc://x", "inproc:// names a scheduler inside this same process"),
])
def test_malformed_address_is_refused_at_once(tmp_path, address, says):
    out = tmp_path / "out"
    result = cli(TRACES / "collectives", "--all-ranks-html", "-o", out, "--no-browser", "--dask-scheduler", address)
    assert result.exit_code == 2 and says in result.stderr and len(result.stderr.splitlines()) == 1
    assert nothing_written(tmp_path)


def test_dask_scheduler_needs_all_ranks_html(tmp_path):
    result = cli(TRACES / "collectives", "-o", tmp_path / "out", "--no-browser", "--dask-scheduler", "tcp://127.0.0.1:8786")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["Error: --dask-scheduler builds the rank reports of --all-ranks-html: use it with --all-ranks-html"]
    assert nothing_written(tmp_path)


def test_without_distributed_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` now fails
    result = cli(TRACES / "collectives", "--all-ranks-html", "-o", tmp_path / "out", "--no-browser", "--dask-scheduler", "tcp://127.0.0.1:8786")
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1
    assert "pip install 'tlparse-py[dask]'" in result.stderr
    assert nothing_written(tmp_path)


def test_a_refused_output_folder_is_said_before_connecting(tmp_path, monkeypatch):
    (tmp_path / "out").mkdir()
    monkeypatch.setattr(landing_module, "connect", lambda *a, **k: pytest.fail("connected before checking -o"))
    result = cli(TRACES / "collectives", "--all-ranks-html", "-o", tmp_path / "out", "--no-browser", "--dask-scheduler", "tcp://127.0.0.1:1")
    assert result.exit_code == 2 and "already exists" in result.stderr


# -- a worker dies while building a rank ------------------------------------------------------------


def failed_rank_kept_others(out: Path, local: Path, why: str) -> None:
    summary = read_json(out / "summary.json")
    errors = {entry["folder"]: entry["error"] for entry in summary["ranks"]}
    assert errors["rank_0"] is None and why in errors["rank_1"]
    assert f"could not be read: {why}" in (out / "index.html").read_text()
    assert (out / "rank_0" / "summary.json").read_bytes() == (local / "rank_0" / "summary.json").read_bytes()
    assert (out / "rank_0" / "index.html").read_bytes() == (local / "rank_0" / "index.html").read_bytes()
    assert why in (out / "rank_1" / "index.html").read_text()  # the landing's links to rank 1 lead to why
    assert broken_links(out) == []


def test_cluster_worker_dying_once_costs_one_retry(tmp_path, monkeypatch, cluster, local_builds):
    marks = dying(monkeypatch, tmp_path, times=1)
    out = tmp_path / "dask"
    result = cli(TRACES / "collectives", "--all-ranks-html", "-o", out, "--no-browser", "--dask-scheduler", cluster.scheduler_address)
    assert result.exit_code == 0, result.output
    attempts = sorted(marks.iterdir())
    assert len(attempts) == 2 and attempts[0].name.split("-pid-")[1] != str(os.getpid())  # it died in a worker, then ran again
    assert tree(out) == tree(local_builds / "collectives")


def test_cluster_worker_always_dying_fails_that_rank_only(tmp_path, monkeypatch, cluster, local_builds):
    marks = dying(monkeypatch, tmp_path, times=99)
    out = tmp_path / "dask"
    result = cli(TRACES / "collectives", "--all-ranks-html", "-o", out, "--no-browser", "--dask-scheduler", cluster.scheduler_address)
    assert result.exit_code == 0, result.output
    assert len(list(marks.iterdir())) == 2  # tried, then retried once: no more
    assert "rank_1: could not be read: its Dask worker died 2 times" in result.stderr
    failed_rank_kept_others(out, local_builds / "collectives", "its Dask worker died 2 times while building this rank (KilledWorker)")


def test_pool_worker_dying_once_costs_one_retry(tmp_path, monkeypatch, local_builds):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # a process pool even on a one-core machine
    marks = dying(monkeypatch, tmp_path, times=1)
    out = tmp_path / "pool"
    result = cli(TRACES / "collectives", "--all-ranks-html", "-o", out, "--no-browser")
    assert result.exit_code == 0, result.output
    assert len(list(marks.iterdir())) == 2
    assert tree(out) == tree(local_builds / "collectives")


def test_pool_worker_always_dying_fails_that_rank_only(tmp_path, monkeypatch, local_builds):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    marks = dying(monkeypatch, tmp_path, times=99)
    out = tmp_path / "pool"
    result = cli(TRACES / "collectives", "--all-ranks-html", "-o", out, "--no-browser")
    assert result.exit_code == 0, result.output
    assert len(list(marks.iterdir())) == 2
    failed_rank_kept_others(out, local_builds / "collectives", "its worker process died twice while building this rank (BrokenProcessPool)")
