"""A big log's payload files are written by a forked child (behind.ForkedWrites), not a thread.

It must write exactly what the thread writes, every file before `settle` returns; an error in the
child (a full disk) must surface in the parent as the same OSError, and stop the writes; a child
that died must be an error, never a hang; and the child must never outlive the writer.
"""

from __future__ import annotations

import errno
import os
import signal

import pytest

from conftest import TRACES, full_disk_where, reaped as gone
from test_cache import files_of
from tlparse_py.pipeline import write_report
from tlparse_py.reading import records as reader
from tlparse_py.report import behind
from tlparse_py.report.folder_writer import FolderWriter
from tlparse_py.report.live_writer import LiveWriter

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or (os.cpu_count() or 1) < 2, reason="needs fork and two cores")


def test_every_file_put_is_written_once_settled_and_the_child_ends_with_close(tmp_path):
    writer = FolderWriter(tmp_path / "r")
    writes = behind.ForkedWrites(writer.write)
    files = {f"c_{i % 7}/f_{i}.txt": f"payload {i}\n".encode() * (i % 5) for i in range(2_000)}
    files["big/one.txt"] = b"x" * (3 * behind.ForkedWrites.SEND_BYTES + 5)  # sent on its own
    files["named/caf\u00e9 \udcff.txt"] = b"a name from a log"
    for rel, data in files.items():
        writes.put(rel, data)
    pid = writes.pid
    assert pid is not None and pid != os.getpid()
    writes.settle()
    for rel, data in files.items():
        assert writer.path(rel).read_bytes() == data, rel
    writes.close()
    assert writes.pid is None and gone(pid)


def full_disk_for_bad_files(write):
    def writing(rel, data):
        if rel.startswith("bad"):
            raise OSError(errno.ENOSPC, "No space left on device", rel)
        write(rel, data)
    return writing


def test_an_error_in_the_child_stops_its_writes_and_is_raised_by_settle_and_after(tmp_path):
    writer = FolderWriter(tmp_path / "r")
    writes = behind.ForkedWrites(full_disk_for_bad_files(writer.write))
    writes.put("good.txt", b"1")
    writes.put("bad.txt", b"2")
    writes.put("after.txt", b"3")
    for _ in range(2):  # the child reads on after its error: a send never blocks on a full pipe
        writes.put("more.txt", b"y" * behind.ForkedWrites.SEND_BYTES)
    with pytest.raises(OSError) as raised:
        writes.settle()
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == "bad.txt"
    assert (tmp_path / "r" / "good.txt").read_bytes() == b"1"
    assert not (tmp_path / "r" / "after.txt").exists() and not (tmp_path / "r" / "more.txt").exists()
    with pytest.raises(OSError) as again:
        writes.put("later.txt", b"4")
    assert again.value.errno == errno.ENOSPC
    pid = writes.pid
    writes.stop()
    assert gone(pid)


def test_stop_drops_what_is_gathered_and_reaps_the_child(tmp_path):
    writer = FolderWriter(tmp_path / "r")
    writes = behind.ForkedWrites(writer.write)
    writes.put("first.txt", b"1")
    writes.settle()
    writes.put("dropped.txt", b"2")  # gathered, not yet sent
    pid = writes.pid
    writes.stop()
    assert gone(pid) and writes.pid is None
    assert (tmp_path / "r" / "first.txt").exists() and not (tmp_path / "r" / "dropped.txt").exists()
    writes.put("again.txt", b"3")  # a later put forks another child
    assert writes.pid not in (None, pid)
    writes.close()
    assert (tmp_path / "r" / "again.txt").read_bytes() == b"3"


def test_a_child_that_died_is_an_error_not_a_hang(tmp_path):
    writer = FolderWriter(tmp_path / "r")
    writes = behind.ForkedWrites(writer.write)
    writes.put("first.txt", b"1")
    os.kill(writes.pid, signal.SIGKILL)
    with pytest.raises(OSError) as raised:
        for i in range(100):  # more than a pipe holds: the send finds the child gone
            writes.put(f"f_{i}.txt", b"z" * behind.ForkedWrites.SEND_BYTES)
        writes.settle()
    assert raised.value.errno == errno.EIO
    pid = writes.pid
    writes.stop()
    assert gone(pid)


def test_only_a_big_log_and_a_writer_without_state_of_its_own_write_in_a_child(tmp_path, monkeypatch):
    live = LiveWriter(tmp_path / "live", overwrite=False)
    live.write_behind_in_a_process()  # its write keeps state here (pages unchanged are not rewritten)
    assert not live._behind_in_a_process
    plain = FolderWriter(tmp_path / "plain")
    plain.write_behind_in_a_process()
    assert plain._behind_in_a_process and plain._behind.pid is not None  # forked at once, before the reading's threads
    plain.close_behind()
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    one_core = FolderWriter(tmp_path / "one")
    one_core.write_behind_in_a_process()
    assert not one_core._behind_in_a_process


@pytest.fixture
def children_writing(monkeypatch):
    """Every log is big enough for the scanning child and the writing child; the list holds the
    writing children started."""
    started: list[int] = []
    monkeypatch.setattr(reader, "SCANNING_CHILD_MIN_BYTES", 0)
    monkeypatch.setattr(behind.ForkedWrites, "start", noting_children(started))
    return started


def noting_children(started: list[int]):
    """ForkedWrites.start, noting each child it forks in `started`."""
    start = behind.ForkedWrites.start

    def noted(self):
        before = self.pid
        start(self)
        if self.pid != before:
            started.append(self.pid)
    return noted


@pytest.mark.parametrize("trace", ["graph_break", "recompile", "many_small", "cache"])
def test_a_report_written_by_the_child_is_the_threads_byte_for_byte(tmp_path, monkeypatch, trace):
    log = sorted((TRACES / trace).glob("dedicated_log*"))[0]
    monkeypatch.setattr(reader, "SCANNING_CHILD_MIN_BYTES", 1 << 62)
    write_report(log, tmp_path / "thread")
    started: list[int] = []
    monkeypatch.setattr(behind.ForkedWrites, "start", noting_children(started))
    monkeypatch.setattr(reader, "SCANNING_CHILD_MIN_BYTES", 0)
    write_report(log, tmp_path / "child")
    assert len(started) == 1 and gone(started[0])
    thread, child = files_of(tmp_path / "thread"), files_of(tmp_path / "child")
    assert sorted(thread) == sorted(child)
    assert [name for name in thread if thread[name] != child[name]] == []


def test_a_full_disk_in_the_writing_child_fails_the_report_and_leaves_nothing(tmp_path, monkeypatch, children_writing):
    full_disk_where(monkeypatch, lambda rel: "dynamo_output_graph" in rel)
    log = sorted((TRACES / "graph_break").glob("dedicated_log*"))[0]
    with pytest.raises(OSError) as raised:
        write_report(log, tmp_path / "out")
    assert raised.value.errno == errno.ENOSPC and "dynamo_output_graph" in raised.value.filename
    assert children_writing and all(gone(pid) for pid in children_writing)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no report, no staging folder, no lock
