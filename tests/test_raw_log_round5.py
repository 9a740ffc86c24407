"""raw.log is what the report read (issue 47 item 7): the bytes each reader read, from the file it read.

raw.log was copied by opening the log's path again once reading was over: a log still being written
had gained records the report never read, and a log renamed over while it was read was another file
by then. Each test changes the log between its reading and the copy (or during its reading), in
process, through the pipeline's own steps.
"""

from __future__ import annotations

import errno
import gzip
import os
from pathlib import Path

import pytest

from conftest import read_json
from logs import cid, line, metrics, start
from tlparse_py import pipeline as pipeline_module
from tlparse_py.limits import Limits
from tlparse_py.live import LiveReport
from tlparse_py.options import Options
from tlparse_py.pipeline import Pipeline, write_report
from tlparse_py.reading import gunzip


def compiles(count: int, first: int = 0) -> str:
    return "".join(start(frame) + metrics(frame) for frame in range(first, first + count))


def before_finish(monkeypatch: pytest.MonkeyPatch, change) -> None:
    """Run `change()` once every log was read, just before the report's last step writes raw.log."""
    finish = Pipeline.finish

    def changed_then_finished(self):
        change()
        return finish(self)

    monkeypatch.setattr(Pipeline, "finish", changed_then_finished)


def at_first_record(monkeypatch: pytest.MonkeyPatch, change) -> None:
    """Run `change()` once, as the first record of the log is added (the log is open, being read)."""
    add, done = Pipeline.add, []

    def changed_then_added(self, record):
        if not done:
            done.append(change())
        return add(self, record)

    monkeypatch.setattr(Pipeline, "add", changed_then_added)


def appended(log: Path, data: bytes):
    def change() -> None:
        with open(log, "ab") as handle:
            handle.write(data)

    return change


def renamed_over(log: Path, data: bytes):
    def change() -> None:
        other = log.with_name("other.log")
        other.write_bytes(data)
        os.replace(other, log)

    return change


@pytest.mark.parametrize("scanning_child", [False, True], ids=["in-process", "scanning-child"])
def test_a_log_appended_to_after_reading_is_copied_as_read(tmp_path, monkeypatch, scanning_child):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    text = compiles(2)
    if scanning_child:  # past SCANNING_CHILD_MIN_BYTES: a forked child scans it
        text += line({"artifact": {"name": "big", "encoding": "string"}, **cid(1)}, "x" * (9 << 20))
    log.write_text(text)
    read = log.read_bytes()
    before_finish(monkeypatch, appended(log, compiles(300, first=2).encode()))
    write_report(log, tmp_path / "out", options=Options(scanning_child=scanning_child))
    assert (tmp_path / "out" / "raw.log").read_bytes() == read
    assert read_json(tmp_path / "out" / "summary.json")["totals"]["compiles"] == 2


def test_a_log_renamed_over_while_it_is_read_is_copied_as_read(tmp_path, monkeypatch):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text(compiles(3))
    read = log.read_bytes()
    at_first_record(monkeypatch, renamed_over(log, b"TOKEN=hunter2\n" + compiles(1).encode()))
    write_report(log, tmp_path / "out")
    assert (tmp_path / "out" / "raw.log").read_bytes() == read
    assert read_json(tmp_path / "out" / "summary.json")["totals"]["compiles"] == 3


def test_a_gz_log_gaining_a_member_after_reading_is_copied_as_read(tmp_path, monkeypatch):
    log = tmp_path / "dedicated_log_torch_trace_x.log.gz"
    text = compiles(2).encode()
    log.write_bytes(gzip.compress(text))
    before_finish(monkeypatch, appended(log, gzip.compress(compiles(50, first=2).encode())))  # a second gzip member
    write_report(log, tmp_path / "out")
    assert (tmp_path / "out" / "raw.log").read_bytes() == text


def test_the_raw_log_cap_is_of_what_was_read(tmp_path, monkeypatch):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_bytes(compiles(1).encode() + b"\n" * 700_000)  # 0.7 MB read, under a 1 MB cap
    read = log.read_bytes()
    before_finish(monkeypatch, appended(log, b"\n" * 700_000))  # 1.4 MB by the time raw.log is written
    write_report(log, tmp_path / "out", options=Options(limits=Limits(max_raw_log_mb=1)))
    assert (tmp_path / "out" / "raw.log").read_bytes() == read
    # a log read past the cap is still the note naming it
    before_finish(monkeypatch, lambda: None)
    log.write_bytes(compiles(1).encode() + b"\n" * 1_100_000)
    write_report(log, tmp_path / "big", options=Options(limits=Limits(max_raw_log_mb=1)))
    note = (tmp_path / "big" / "raw.log").read_bytes()
    assert note.startswith(b"raw.log is not copied") and str(log).encode() in note


def test_a_live_report_copies_what_its_last_read_read(tmp_path, monkeypatch):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text(compiles(2))
    live = LiveReport(log, tmp_path / "out", Options())
    live.update("running.", live.read())
    with open(log, "a") as handle:
        handle.write(compiles(1, first=2))
    read = log.read_bytes()
    before_finish(monkeypatch, appended(log, compiles(40, first=3).encode()))  # written after the final read
    live.finish()
    live.close()
    assert (tmp_path / "out" / "raw.log").read_bytes() == read
    assert read_json(tmp_path / "out" / "summary.json")["totals"]["compiles"] == 3


def test_a_live_report_renamed_over_after_its_last_read_copies_what_was_read(tmp_path, monkeypatch):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text(compiles(2))
    read = log.read_bytes()
    live = LiveReport(log, tmp_path / "out", Options())
    live.update("running.", live.read())
    before_finish(monkeypatch, renamed_over(log, b"TOKEN=hunter2\n"))
    live.finish()
    live.close()
    assert (tmp_path / "out" / "raw.log").read_bytes() == read


def test_without_a_descriptor_to_spare_the_log_is_opened_again_and_must_be_the_file_read(tmp_path, monkeypatch):
    """Past the limit of open files the log is opened again by its path: the same file, or an error
    naming it (never another file's bytes)."""

    def no_descriptor(fd: int) -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text(compiles(2))
    read = log.read_bytes()
    monkeypatch.setattr(gunzip.os, "dup", no_descriptor)
    before_finish(monkeypatch, appended(log, compiles(5, first=2).encode()))
    write_report(log, tmp_path / "out")
    assert (tmp_path / "out" / "raw.log").read_bytes() == read
    log.write_text(compiles(2))
    before_finish(monkeypatch, renamed_over(log, b"TOKEN=hunter2\n"))
    with pytest.raises(OSError) as raised:
        write_report(log, tmp_path / "again")
    assert raised.value.errno == errno.ESTALE and raised.value.filename == str(log)
    assert not (tmp_path / "again").exists()


@pytest.mark.parametrize("held_max", [None, 1], ids=["held", "past-held-max"])
def test_every_log_of_a_folder_is_copied_as_read_and_closed_once_copied(tmp_path, monkeypatch, held_max):
    """raw.log holds each log of a folder as read, in the order read; the descriptor kept for each
    log is closed once copied (none is left open after a report). Past HELD_MAX logs held, a log is
    opened again by its path, and copied only as far as it was read."""
    if held_max is not None:
        monkeypatch.setattr(gunzip, "HELD_MAX", held_max)
    folder = tmp_path / "trace"
    folder.mkdir()
    for number in range(5):
        (folder / f"dedicated_log_torch_trace_{number}.log").write_text(compiles(1).replace(" 4242 ", f" {100 + number} "))
    logs = sorted(folder.iterdir())
    read = b"".join(log.read_bytes() for log in logs)
    before_finish(monkeypatch, appended(logs[2], compiles(5, first=1).encode()))
    opened = set(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    pipeline_module.write_report(logs, tmp_path / "out")
    if opened is not None:
        assert set(os.listdir("/proc/self/fd")) <= opened
    assert (tmp_path / "out" / "raw.log").read_bytes() == read
