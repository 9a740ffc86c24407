"""A live report's pieces are scanned by the process it forked once (records.PieceServer), while it
builds records from what that process sends: exactly what scanning them itself gives, whatever the
pieces are; a piece the server cannot scan (its process gone, another file at the path) is scanned
by the report itself, and the server ends with the report.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from test_live import fixture_bytes, grow_live, tree
from tlparse_py.limits import Limits
from tlparse_py.live import LiveReport
from tlparse_py.model import DiagnosticLog, Stats
from tlparse_py.options import Options
from tlparse_py.pipeline import write_report
from tlparse_py.reading import forked
from tlparse_py.reading import records as reader

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or (os.cpu_count() or 1) < 2, reason="needs fork and two cores")


@pytest.fixture
def answered(monkeypatch):
    """The pieces the servers answered (not refused), as (pid, piece size)."""
    found: list[tuple[int, int]] = []
    answer = forked.ForkedServer.answer

    def counted(self, request):
        items = answer(self, request)
        if items is not None:
            found.append((self.pid, reader._PIECE.unpack(request)[1]))
        return items

    monkeypatch.setattr(forked.ForkedServer, "answer", counted)
    return found


@pytest.mark.parametrize("name", ["killed_midcompile", "recompile", "training", "export_compile", "compiled_autograd"])
def test_a_live_report_scanned_by_its_server_ends_as_the_one_shot_report(tmp_path, name, answered):
    log = tmp_path / "trace" / "dedicated_log_torch_trace_x.log"
    log.parent.mkdir()
    live = grow_live(log, fixture_bytes(name), tmp_path / "live", seed=7)
    assert live.tail.reader.server is not None and len(answered) > 3  # the pieces were the server's
    live.finish()
    assert live.tail.reader.server is None  # ended once the log is read to its end
    live.close()
    write_report(log, tmp_path / "one_shot")
    assert tree(tmp_path / "live") == tree(tmp_path / "one_shot")


def test_a_piece_the_server_did_not_scan_is_scanned_here(tmp_path, answered):
    """Its process killed between two updates: the next pieces are scanned by the report itself,
    and the report still ends as the one-shot report."""
    data = fixture_bytes("recompile")
    log = tmp_path / "trace" / "dedicated_log_torch_trace_x.log"
    log.parent.mkdir()
    log.write_bytes(data[: len(data) // 3])
    live = LiveReport(log, tmp_path / "live", Options())
    live.update("first", live.read())
    server = live.tail.reader.server
    assert server is not None and answered
    os.kill(server.server.pid, signal.SIGKILL)
    os.waitpid(server.server.pid, 0)
    before = len(answered)
    with open(log, "ab") as handle:
        handle.write(data[len(data) // 3 :])
    live.update("second", live.read())
    assert len(answered) == before  # refused: scanned here
    live.finish()
    live.close()
    write_report(log, tmp_path / "one_shot")
    assert tree(tmp_path / "live") == tree(tmp_path / "one_shot")


def test_the_server_scans_no_other_file_than_the_log(tmp_path):
    """A file put at the log's path since the report opened the log, or a FIFO, is not the log the
    report reads: refused (the report then meets it itself), never waited on."""
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_bytes(fixture_bytes("recompile"))
    other = tmp_path / "other.log"
    other.write_bytes(log.read_bytes())
    read = reader.LogReader(log, Stats(), DiagnosticLog(), limits=Limits())
    reader.PieceServer.start(read)
    assert read.server is not None
    pid = read.server.server.pid
    try:
        with open(log, "rb") as handle:
            assert list(read.server.events(handle, 0, os.path.getsize(log), 0))  # the log itself: scanned
            os.replace(other, log)  # the same bytes, another file
            assert read.server.events(handle, 0, 1000, 0) is None
            os.unlink(log)
            os.mkfifo(log)
            assert read.server.events(handle, 0, 1000, 0) is None
            assert read.server.server.answers is not None  # refusing a piece is no failure of the server
    finally:
        reader.PieceServer.stop(read)
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, 0)  # reaped: gone


def test_the_server_ends_with_the_report(tmp_path):
    log = tmp_path / "trace" / "dedicated_log_torch_trace_x.log"
    log.parent.mkdir()
    log.write_bytes(fixture_bytes("recompile"))
    live = LiveReport(log, tmp_path / "live", Options())
    live.update("first", live.read())
    pid = live.tail.reader.server.server.pid
    live.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, 0)


def test_a_rank_report_forks_no_server(tmp_path):
    """A rank's report among many (a writer handed in): no process of its own."""
    log = tmp_path / "trace" / "dedicated_log_torch_trace_x.log"
    log.parent.mkdir()
    log.write_bytes(b"")
    from tlparse_py.report.live_writer import LiveWriter

    live = LiveReport(log, Path("unused"), Options(), writer=LiveWriter(tmp_path / "rank_0", overwrite=False))
    assert live.tail.reader.server is None
    live.close()
