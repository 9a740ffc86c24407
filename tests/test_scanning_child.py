"""A big log is scanned in a forked child while the parent builds its records (reader.forked_items).

Whatever the log holds, the child must give exactly what reading in one process gives: the same
records, counters, diagnostics (in the same order), string table and byte count; its failures must
surface in the parent as the same errors; and it must never outlive the reading.
"""

from __future__ import annotations

import errno
import gzip
import os
import signal
from pathlib import Path

import orjson
import pytest
from msgspec.structs import replace

from conftest import TRACES, noting_forks
from logs import cid, line, md5, write_log
from tlparse_py.reading import forked
from tlparse_py.reading import records as reader
from tlparse_py.reading.raw_line import joined
from tlparse_py.limits import Limits
from tlparse_py.model import DiagnosticLog, Stats
from tlparse_py.pipeline import Options, write_report
from test_cache import files_of

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or (os.cpu_count() or 1) < 2, reason="needs fork and two cores")


@pytest.fixture
def forks(monkeypatch):
    """Every plain log is scanned in a child; the list holds the pids of the children started."""
    monkeypatch.setattr(reader, "SCANNING_CHILD_MIN_BYTES", 0)
    return noting_forks(monkeypatch)


RAW_KEYS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def raw_line_of(record) -> bytes | None:
    """The record's raw.jsonl line (with a payload file's name), as the child encoded it in pieces,
    or else encoded whole here, as tlparse writes it."""
    if record.raw_pieces is not None:
        return joined(record.raw_pieces, "p/x_1.txt")
    line = {**record.envelope, "timestamp": record.timestamp, "thread": record.pid, "pathname": record.pathname,
            "lineno": record.source_line, "payload_filename": "p/x_1.txt"}
    try:
        return orjson.dumps(line, option=RAW_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return None


def read(path: Path, limits: Limits | None = None):
    stats, diagnostics = Stats(), DiagnosticLog(limit=10_000)
    log_reader = reader.LogReader(path, stats, diagnostics, year=2026, limits=limits)
    read_records = list(log_reader.records())
    records = [replace(record, raw_pieces=None) for record in read_records]
    return {
        "records": records,
        "raw": [raw_line_of(record) for record in read_records],
        "stats": stats.counts,
        "diagnostics": [(d.path, d.lineno, d.problem, d.detail, d.hint) for d in diagnostics.kept],
        "strings": log_reader.strings.strings,
        "bytes_read": log_reader.bytes_read,
        "rank": log_reader.expected_rank,
    }


def both_ways(path: Path, monkeypatch, limits: Limits | None = None):
    monkeypatch.setattr(reader, "SCANNING_CHILD_MIN_BYTES", 1 << 62)
    alone = read(path, limits)
    monkeypatch.setattr(reader, "SCANNING_CHILD_MIN_BYTES", 0)
    return alone, read(path, limits)


def plain(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / source.name.removesuffix(".gz")
    target.write_bytes(gzip.decompress(source.read_bytes()) if source.suffix == ".gz" else source.read_bytes())
    return target


def hostile_log(tmp_path: Path) -> Path:
    """Every problem the scanner reports, around good records, in one log."""
    good = [line({"dynamo_start": {}, **cid(i)}, f"payload {i}\nline two") for i in range(3)]
    text = "".join([
        "\tan orphan payload line\n",
        good[0],
        "not a trace line\n" * 3,
        "junk\n" * 40,  # a run counted in bulk
        "V1202 12:14:23.064000 7 torch/x.py:1] {not json\n\tits payload\n",
        'V1202 12:14:23.064000 7 torch/x.py:1] {"str": "not a pair"}\n',
        'V1202 12:14:23.064000 7 torch/x.py:1] {"str": ["torch/y.py", 3]}\n',
        line({"artifact": {}, **cid(1)}, "x" * 3000),  # over --max-line-mb below
        good[1].replace(md5("payload 1\nline two"), "0" * 32),  # md5 mismatch
        'V1202 12:14:23.064000 7 torch/x.py:1] {"dynamo_start": {}, "frame_id": 9}\n\tpayload without has_payload\n',
        "V1202 12:14:23.064000 7 torch/x.py:1] {\"bad\": \"\xff\"}\n".encode("latin-1").decode("utf-8", "surrogateescape"),
        good[2].replace("\n", "\r\n"),
        # numbers too long to be real, after a bad rank: the child sends the prefix's bytes, counted here in order
        f"V1202 12:14:23.064000 {'9' * 30} torch/x.py:{'8' * 30}] " + '{"rank": -1, "dynamo_start": {}}\n',
        'V1202 12:14:23.064000 7 torch/x.py:1] {"rank": 1, "dynamo_start": {}}\n',
        'V1202 12:14:23.064000 7 torch/x.py:1] {"rank": 0, "dynamo_start": {}}\n',
    ])
    path = tmp_path / "hostile.log"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    return path


@pytest.mark.parametrize("scenario", ["training", "graph_break", "distributed", "export_failure", "killed_midcompile"])
def test_the_child_reads_a_fixture_as_one_process_does(tmp_path, monkeypatch, forks, scenario):
    source = sorted((TRACES / scenario).glob("dedicated_log*"))[0]
    alone, split = both_ways(plain(source, tmp_path), monkeypatch)
    assert forks, "the child was used"
    assert alone["records"] and split == alone


def test_the_child_encodes_raw_lines_that_raw_jsonl_writes_as_one_process_does(tmp_path, monkeypatch, forks):
    """Its lines in two pieces, the payload file's name put in between, are the lines encoded whole;
    those it cannot encode (a key of tlparse's own, an int past 64 bits) are encoded whole, as before."""
    odd = [
        line({"dynamo_start": {"é": 1, "Z": [1.5, None], "payloadz": 2, "pay": "x"}, **cid(0)}, "a payload"),
        line({"dynamo_start": {}, "timestamp": "mine", **cid(1)}),
        line({"dynamo_start": {"big": 2**70}, **cid(2)}),
        line({"artifact": {"name": "n", "encoding": "string"}, "中": True, **cid(3)}, "text"),
    ]
    log = write_log(tmp_path / "dedicated_log_torch_trace_odd.log", "".join(odd))
    alone, split = both_ways(log, monkeypatch)
    assert forks
    assert alone["raw"] == split["raw"] and split["raw"][0] is not None
    write_report(log, tmp_path / "split", options=Options())
    monkeypatch.setattr(reader, "SCANNING_CHILD_MIN_BYTES", 1 << 62)
    write_report(log, tmp_path / "alone", options=Options())
    assert (tmp_path / "split" / "raw.jsonl").read_bytes() == (tmp_path / "alone" / "raw.jsonl").read_bytes()
    assert files_of(tmp_path / "split") == files_of(tmp_path / "alone")


def test_the_child_reports_every_problem_in_the_same_order(tmp_path, monkeypatch, forks):
    alone, split = both_ways(hostile_log(tmp_path), monkeypatch, Limits(max_line_mb=0.002))
    assert forks
    assert len(alone["diagnostics"]) >= 8 and len(alone["records"]) >= 5
    assert split == alone


def test_a_report_through_the_child_is_byte_identical(tmp_path, monkeypatch, forks):
    log = plain(sorted((TRACES / "recompile").glob("dedicated_log*"))[0], tmp_path)
    write_report(log, tmp_path / "split", options=Options())
    assert forks
    monkeypatch.setattr(reader, "SCANNING_CHILD_MIN_BYTES", 1 << 62)
    write_report(log, tmp_path / "alone", options=Options())
    assert files_of(tmp_path / "split") == files_of(tmp_path / "alone")


def reaped(pids: list[int]) -> bool:
    """Every one of these children has ended and been waited for (none left running or a zombie)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        return False
    return bool(pids)


def test_a_read_error_in_the_child_is_raised_in_the_parent(tmp_path, monkeypatch, forks):
    log = write_log(tmp_path / "a.log", [line({"dynamo_start": {}, **cid(i)}, "p" * 100) for i in range(50)])

    def failing_read(self):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(reader.LineScanner, "_read", failing_read)
    with pytest.raises(OSError) as raised:
        read(log)
    assert raised.value.errno == errno.EIO and forks
    assert reaped(forks)


def test_a_killed_child_is_an_error_not_a_short_log(tmp_path, monkeypatch, forks):
    log = write_log(tmp_path / "a.log", [line({"dynamo_start": {}, **cid(i)}, "p" * 100) for i in range(50)])
    original = reader.EventScanner._step
    steps = []

    def dies_midway(self, lines, events):
        steps.append(1)
        if len(steps) == 20:
            os.kill(os.getpid(), signal.SIGKILL)  # runs in the child: the parent's list stays empty
        return original(self, lines, events)

    monkeypatch.setattr(reader.EventScanner, "_step", dies_midway)
    with pytest.raises(forked.ChildStopped):
        read(log)
    assert reaped(forks)


def test_stopping_early_stops_the_child(tmp_path, forks, monkeypatch):
    monkeypatch.setattr(forked, "BATCH_BYTES", 1)  # one record per batch: the child is still busy
    log = write_log(tmp_path / "a.log", [line({"dynamo_start": {}, **cid(i)}, "p" * 100) for i in range(2000)])
    records = reader.LogReader(log, Stats(), DiagnosticLog(), year=2026).records()
    assert next(records).lineno == 1
    records.close()
    assert reaped(forks)


def test_items_that_marshal_cannot_write_arrive_pickled(monkeypatch, forks):
    """Batches are marshalled (the events: built-in types), and pickled when an item is not one:
    either way the parent gets the same items, in order, dicts in their key order."""
    from fractions import Fraction

    monkeypatch.setattr(forked, "BATCH_BYTES", 64)  # several batches, some all built-in, some not
    items = [(0, {"b": 1, "a": [True, None, 2.5, 2**70]}, b"\x00\xff", "\udcff")] * 5 + [Fraction(1, 3)] + [("x", {})] * 5
    received = list(forked.forked_items(lambda: iter(items), lambda item: 32))
    assert received == items and [list(r[1]) for r in received[:5]] == [["b", "a"]] * 5
    assert received[0][1]["a"][0] is True and type(received[5]) is Fraction
