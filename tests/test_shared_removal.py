"""--overwrite's removal of a big old report is shared with a forked child (staging.remove_tree):
between them the two processes must remove everything, follow no link, leave no child behind, and
an interruption must still wait for the child before it is raised."""

from __future__ import annotations

import os
import signal

import pytest

from conftest import noting_forks, reaped
from tlparse_py.report import staging

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or (os.cpu_count() or 1) < 2, reason="needs fork and two cores")


def big_tree(root, folders: int = 3 * staging.SHARED_REMOVAL_FOLDERS):
    for n in range(folders):
        folder = root / f"-_{n}_0_0"
        (folder / "deep").mkdir(parents=True)
        (folder / "index.html").write_bytes(b"x")
        (folder / "deep" / "payload.txt").write_bytes(b"y")
    (root / "index.html").write_bytes(b"top")
    return root


@pytest.fixture
def helpers(monkeypatch):
    """The pids of the removal children forked."""
    return noting_forks(monkeypatch)


def test_a_big_tree_is_removed_by_two_processes_and_nothing_it_links_to(tmp_path, helpers):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept.txt").write_text("kept")
    tree = big_tree(tmp_path / "tree")
    (tree / "-_1_0_0" / "to_outside").symlink_to(outside)
    (tree / "to_file").symlink_to(outside / "kept.txt")
    staging.remove_tree(str(tree))
    assert len(helpers) == 1 and reaped(helpers[0])
    assert not tree.exists() and (outside / "kept.txt").read_text() == "kept"


def test_a_small_tree_is_not_worth_a_fork(tmp_path, helpers):
    tree = big_tree(tmp_path / "tree", folders=staging.SHARED_REMOVAL_FOLDERS - 1)
    staging.remove_tree(str(tree))
    assert helpers == [] and not tree.exists()


def test_each_process_takes_its_half_of_the_entries(tmp_path, monkeypatch):
    """What the child takes (hash parity 1) and what this process takes (0) make the whole folder."""
    tree = big_tree(tmp_path / "tree")
    removed: list[str] = []
    monkeypatch.setattr(staging, "_remove_entry", lambda entry: removed.append(entry.name))
    staging._remove_entries(str(tree), 0)
    mine = set(removed)
    removed.clear()
    staging._remove_entries(str(tree), 1)
    assert mine and removed and mine.isdisjoint(removed)
    assert mine | set(removed) == set(os.listdir(tree))


def test_an_interruption_while_waiting_for_the_child_waits_for_it_then_is_raised(tmp_path, helpers, monkeypatch):
    tree = big_tree(tmp_path / "tree")
    waitpid = os.waitpid
    calls = []

    def interrupted_once(pid, options):
        calls.append(pid)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return waitpid(pid, options)

    monkeypatch.setattr(staging.os, "waitpid", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        staging.remove_tree(str(tree))
    assert len(calls) == 2 and reaped(helpers[0])  # waited again after the interruption
    assert tree.exists() and not any(tree.iterdir())  # both halves gone; the folder is the caller's to finish (remove_staging retries)
    staging.remove_tree(str(tree))
    assert not tree.exists()


def test_a_child_killed_midway_leaves_its_half_to_the_fallback(tmp_path, monkeypatch):
    """The child dies before it removed anything: the folder is not empty after this process's pass,
    and shutil.rmtree removes the rest."""
    tree = big_tree(tmp_path / "tree")
    fork = os.fork

    def dead_child() -> int:
        pid = fork()
        if pid == 0:
            os.kill(os.getpid(), signal.SIGKILL)
        return pid

    monkeypatch.setattr(staging.os, "fork", dead_child)
    staging.remove_tree(str(tree))
    assert not tree.exists()
