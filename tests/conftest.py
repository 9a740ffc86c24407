from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tlparse_py.pipeline import Options, write_report

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
TRACES = FIXTURES / "traces"
SHARED = Path(os.environ.get("TLPARSE_SHARED", HERE.parent.parent / "shared"))


def read_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory):
    """Tests never use (or fill) the user's own cache folder: one fresh cache for the session."""
    if "TLPARSE_PY_CACHE_DIR" not in os.environ:
        os.environ["TLPARSE_PY_CACHE_DIR"] = str(tmp_path_factory.mktemp("user-cache"))
    return Path(os.environ["TLPARSE_PY_CACHE_DIR"])


@pytest.fixture
def report_of(tmp_path):
    """report_of(log, **options) → (report model, output folder)."""
    counter = iter(range(1000))

    def run(log: Path, **options):
        out = tmp_path / f"out{next(counter)}"
        report = write_report(log, out, options=Options(**options))
        return report, out

    return run


def pytest_collection_modifyitems(config, items):
    """In CI (TLPARSE_PY_REQUIRE_ALL=1) a browser, torch or Dask test that would be skipped fails instead."""
    if os.environ.get("TLPARSE_PY_REQUIRE_ALL") != "1":
        return
    import importlib.util
    import shutil

    missing = []
    if importlib.util.find_spec("torch") is None:
        missing.append("torch")
    if importlib.util.find_spec("playwright") is None or shutil.which("chromium") is None:
        missing.append("chromium + playwright")
    if importlib.util.find_spec("distributed") is None:
        missing.append("distributed (the --dask-scheduler tests)")
    if importlib.util.find_spec("nbclient") is None or importlib.util.find_spec("ipykernel") is None:
        missing.append("nbclient + ipykernel (the notebook test)")
    if missing:
        raise pytest.UsageError(f"TLPARSE_PY_REQUIRE_ALL=1 but {', '.join(missing)} missing: CI must run every test")


def noting_forks(monkeypatch) -> list[int]:
    """The pids of the children this process forks from now on (os.fork, noted)."""
    started: list[int] = []
    fork = os.fork

    def noted() -> int:
        pid = fork()
        if pid:
            started.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", noted)
    return started


def full_disk_where(monkeypatch, full) -> None:
    """Every report file whose path `full(rel)` says is written to a full disk (ENOSPC, naming it)."""
    import errno

    from tlparse_py.report import folder_writer

    real_write = folder_writer.FolderWriter.write

    def full_disk(self, rel, data):
        if full(rel):
            raise OSError(errno.ENOSPC, "No space left on device", rel)
        real_write(self, rel, data)

    monkeypatch.setattr(folder_writer.FolderWriter, "write", full_disk)


def reaped(pid: int) -> bool:
    """Whether `pid` is no child of this process any more (a forked helper waited for)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False
