"""The reader on hand-written logs: every quirk of the format, and every way a line can be bad."""

from __future__ import annotations

import json

import pytest

from logs import cid, line, md5, write_log
from tlparse_py.model import CompileId, Stats
from tlparse_py.reading.records import DiagnosticLog, LogReader


def read(path):
    stats = Stats()
    diagnostics = DiagnosticLog()
    reader = LogReader(path, stats, diagnostics)
    records = list(reader.records())
    return records, stats, diagnostics, reader


def test_payload_lines_are_joined_and_md5_checked(tmp_path):
    log = write_log(tmp_path / "a.log", [line({"artifact": {"name": "x", "encoding": "string"}}, "first\n\tindented\n\nlast")])
    records, stats, _, _ = read(log)
    assert [r.payload for r in records] == [b"first\n\tindented\n\nlast"]
    assert stats["ok"] == 1 and stats["fail_payload_md5"] == 0


def test_md5_mismatch_is_counted_and_the_record_kept(tmp_path):
    text = line({"artifact": {"name": "x", "encoding": "string"}}, "abc").replace("\tabc", "\tabd")
    records, stats, diagnostics, _ = read(write_log(tmp_path / "a.log", text))
    assert len(records) == 1 and records[0].payload == b"abd"
    assert stats["fail_payload_md5"] == 1
    assert diagnostics.kept[0].lineno == 1 and "md5" in diagnostics.kept[0].problem


def test_empty_payload_is_a_single_tab_line(tmp_path):
    records, stats, _, _ = read(write_log(tmp_path / "a.log", [line({"dynamo_output_graph": {}}, "")]))
    assert records[0].payload == b"" and stats["fail_payload_md5"] == 0


def test_blank_lines_and_crlf_are_tolerated(tmp_path):
    text = "\n" + line({"artifact": {"name": "x", "encoding": "string"}}, "a\nb") + "\n\n" + line({"dynamo_start": {"stack": []}})
    records, stats, _, _ = read(write_log(tmp_path / "a.log", text.replace("\n", "\r\n")))
    assert [r.payload for r in records] == [b"a\nb", None]
    assert stats.counts["ok"] == 2 and stats.strict_failures() == 0
    assert [r.lineno for r in records] == [2, 7]


def test_string_table_is_filled_and_not_counted(tmp_path):
    lines = [line({"str": ["/a/b.py", 0]}), line({"str": ["/c.py", 3]}), line({"dynamo_start": {"stack": []}, **cid()})]
    records, stats, _, reader = read(write_log(tmp_path / "a.log", lines))
    assert len(records) == 1 and stats["ok"] == 1
    assert reader.strings.as_list() == ["/a/b.py", None, None, "/c.py"]
    assert reader.strings.lookup(3) == "/c.py" and reader.strings.lookup(9) is None


def test_empty_string_table_is_a_single_null(tmp_path):
    _, _, _, reader = read(write_log(tmp_path / "a.log", [line({"artifact": {"name": "x", "encoding": "string"}})]))
    assert reader.strings.as_list() == [None]


def test_glog_prefix_fields_without_tlparse_leading_space(tmp_path):
    records, _, _, _ = read(write_log(tmp_path / "a.log", [line({"export": {}}, pid=77, path="torch/export/_trace.py", lineno=2506)]))
    record = records[0]
    assert (record.pid, record.pathname, record.source_line) == (77, "torch/export/_trace.py", 2506)
    assert record.timestamp.endswith("-12-02T12:14:23.064000Z")


def test_rank_prefix_and_windows_paths_are_accepted(tmp_path):
    text = "[rank0]:" + line({"export": {}}) + line({"export": {}}, path="C:\\torch\\x.py")
    records, stats, _, _ = read(write_log(tmp_path / "a.log", text))
    assert stats["ok"] == 2 and records[1].pathname == "C:\\torch\\x.py"


def test_lines_without_glog_prefix_are_counted_with_their_number(tmp_path):
    text = "garbage here\n" + line({"export": {}}) + "more garbage\n"
    records, stats, diagnostics, _ = read(write_log(tmp_path / "a.log", text))
    assert len(records) == 1 and stats["fail_glog"] == 2
    assert [d.lineno for d in diagnostics.kept] == [1, 3]


def test_broken_json_is_counted_once_and_its_payload_skipped(tmp_path):
    bad = line({"artifact": {"name": "x", "encoding": "string"}}, "p1\np2").replace('"encoding"', '"encoding', 1)
    records, stats, diagnostics, _ = read(write_log(tmp_path / "a.log", bad + line({"export": {}})))
    assert stats["fail_json"] == 1  # tlparse counts invalid JSON twice
    assert stats["fail_glog"] == 0  # and each payload line of the bad record as a bad line
    assert len(records) == 1 and records[0].kinds == ["export"]
    assert diagnostics.kept[0].lineno == 1


@pytest.mark.parametrize("envelope", ["[1, 2]", '"text"', "3", "null"])
def test_json_that_is_not_an_object_is_counted(tmp_path, envelope):
    text = f"V1202 12:14:23.064000 1 torch/x.py:1] {envelope}\n"
    records, stats, _, _ = read(write_log(tmp_path / "a.log", text))
    assert records == [] and stats["fail_json"] == 1


def test_python_nan_and_infinity_are_accepted(tmp_path):
    text = 'V1202 12:14:23.064000 1 torch/x.py:1] {"compilation_metrics": {"a": NaN, "b": Infinity, "c": -Infinity}, "frame_id": 0}\n'
    records, stats, _, _ = read(write_log(tmp_path / "a.log", text))
    meta = records[0].envelope["compilation_metrics"]
    assert stats["ok"] == 1 and meta["b"] == float("inf") and meta["a"] != meta["a"]


def test_invalid_utf8_does_not_stop_the_run(tmp_path):
    header = b'V1202 12:14:23.064000 1 torch/x.py:1] {"artifact": {"name": "caf\xff", "encoding": "string"}}\n'
    data = header + b"\xfe\xff junk line\n" + line({"export": {}}).encode()
    log = tmp_path / "a.log"
    log.write_bytes(data)
    records, stats, _, _ = read(log)
    assert [r.kinds for r in records] == [["artifact"], ["export"]]
    assert records[0].envelope["artifact"]["name"] == "caf\ufffd"
    assert stats["fail_utf8"] == 1 and stats["fail_glog"] == 1


def test_invalid_utf8_in_payload_keeps_the_bytes_and_the_md5(tmp_path):
    payload = b"ok \xff\xfe bytes"
    header = f'V1202 12:14:23.064000 1 torch/x.py:1] {{"artifact": {{"name": "b", "encoding": "string"}}, "has_payload": "{md5(payload)}"}}\n'
    log = tmp_path / "a.log"
    log.write_bytes(header.encode() + b"\t" + payload + b"\n")
    records, stats, _, _ = read(log)
    assert records[0].payload == payload and stats["fail_payload_md5"] == 0
    assert "\ufffd" in records[0].payload_text()


def test_payload_lines_without_a_record_are_counted_once_per_block(tmp_path):
    text = "\torphan 1\n\torphan 2\n" + line({"export": {}}) + "\tstray\n" + line({"export": {}})
    records, stats, diagnostics, _ = read(write_log(tmp_path / "a.log", text))
    assert len(records) == 2 and stats["fail_orphan_payload"] == 2
    assert [(d.lineno, d.detail) for d in diagnostics.kept] == [(1, "2 line(s)"), (4, "1 line(s)")]


def test_truncated_final_record_keeps_what_was_read(tmp_path):
    full = line({"export": {}}) + line({"artifact": {"name": "x", "encoding": "string"}}, "one\ntwo\nthree")
    cut = full[: full.index("two") + 2]
    records, stats, _, _ = read(write_log(tmp_path / "a.log", cut))
    assert len(records) == 2 and records[1].payload == b"one\ntw"
    assert stats["fail_payload_md5"] == 1


def test_gzip_logs_are_read_transparently(tmp_path):
    log = write_log(tmp_path / "a.log.gz", [line({"export": {}}), line({"dynamo_output_graph": {}}, "g")], gz=True)
    records, stats, _, _ = read(log)
    assert stats["ok"] == 2 and records[1].payload == b"g"


def test_compile_ids_and_their_normalisation(tmp_path):
    lines = [
        line({"export": {}, **cid(0, 0, 0)}),
        line({"export": {}, **cid(1, 2, None)}),
        line({"export": {}, **cid(None, None, 0, ca=3)}),
        line({"export": {}}),
        line({"export": {}, "frame_id": "zero"}),
        line({"export": {}, "frame_id": -1}),
        line({"export": {}, "frame_id": True}),
    ]
    records, stats, _, _ = read(write_log(tmp_path / "a.log", lines))
    ids = [r.compile_id for r in records]
    assert ids[:4] == [CompileId(None, 0, 0, 0), CompileId(None, 1, 2, None), CompileId(3, None, None, 0), CompileId()]
    assert ids[4:] == [None, None, None]
    assert [str(i) for i in ids[:4]] == ["[0/0]", "[1/2]", "[!3/-/-]", "[-/-]"]
    assert [i.dirname for i in ids[:4]] == ["-_0_0_0", "-_1_2_-", "3_-_-_0", "-_-_-_-"]
    assert ids[1].directory_key() == CompileId(None, 1, 2, 0)
    assert CompileId(None, 1, 2, 3).frame_key() == CompileId(None, 1, 2, 0)
    assert str(CompileId(2, 1, 2, 1)) == "[!2/1/2_1]"


def test_rank_filter_keeps_rankless_records_after_detection(tmp_path):
    lines = [line({"export": {}}), line({"export": {}, "rank": 1}), line({"artifact": {"name": "torch_version", "encoding": "json"}}, "{}"), line({"export": {}, "rank": 0})]
    detected = []
    stats, diagnostics = Stats(), DiagnosticLog()
    reader = LogReader(write_log(tmp_path / "a.log", lines), stats, diagnostics)
    reader.on_rank_detected = detected.append
    records = list(reader.records())
    assert detected == [1]
    assert [r.other_rank for r in records] == [False, False, False, True]
    assert stats["ok"] == 3 and stats["other_rank"] == 1


def test_kinds_exclude_context_keys(tmp_path):
    meta = {"create_symbol": {"symbol": "s0"}, "rank": 0, "subgraph_name": "sub", "stack": [], **cid()}
    records, _, _, _ = read(write_log(tmp_path / "a.log", [line(meta, "")]))
    assert records[0].kinds == ["create_symbol"]


def test_deeply_nested_json_is_a_counted_failure(tmp_path):
    text = 'V1202 12:14:23.064000 1 torch/x.py:1] {"a": ' + "[" * 100_000 + "]" * 100_000 + "}\n"
    records, stats, _, _ = read(write_log(tmp_path / "a.log", text + line({"export": {}})))
    assert stats["fail_json"] == 1 and len(records) == 1


def test_integers_beyond_64_bits_are_read(tmp_path):
    text = 'V1202 12:14:23.064000 1 torch/x.py:1] {"export": {"n": 123456789012345678901234567890}}\n'
    records, stats, _, _ = read(write_log(tmp_path / "a.log", text))
    assert records[0].envelope["export"]["n"] == pytest.approx(1.2345678901234568e29) and stats["ok"] == 1


def test_has_payload_of_the_wrong_type_is_a_md5_failure_not_a_crash(tmp_path):
    text = 'V1202 12:14:23.064000 1 torch/x.py:1] {"export": {}, "has_payload": 5}\n\tdata\n'
    records, stats, _, _ = read(write_log(tmp_path / "a.log", text))
    assert records[0].payload == b"data" and stats["fail_payload_md5"] == 1


def test_reader_streams_without_reading_the_whole_file(tmp_path):
    """A generator: the first record is available before the rest of the file is touched."""
    log = write_log(tmp_path / "a.log", [line({"export": {}}, "x" * 1000) for _ in range(2000)])
    stats = Stats()
    reader = LogReader(log, stats, DiagnosticLog())
    records = reader.records()
    next(records)
    assert reader.bytes_read < log.stat().st_size / 10
    records.close()


def test_record_json_round_trip_matches_torch_format(tmp_path):
    payload = json.dumps({"k": [1, 2]}, indent=0)
    records, stats, _, _ = read(write_log(tmp_path / "a.log", [line({"artifact": {"name": "j", "encoding": "json"}, **cid()}, payload)]))
    assert json.loads(records[0].payload) == {"k": [1, 2]} and stats.strict_failures() == 0


def test_blank_lines_inside_a_payload_are_skipped_not_a_new_record(tmp_path):
    text = line({"artifact": {"name": "x", "encoding": "string"}}, "a\nb").replace("\ta\n", "\ta\n\n\n") + line({"export": {}})
    records, stats, _, _ = read(write_log(tmp_path / "a.log", text))
    assert [r.payload for r in records] == [b"a\nb", None]
    assert stats.strict_failures() == 0 and [r.lineno for r in records] == [1, 6]
