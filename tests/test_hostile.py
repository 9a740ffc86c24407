"""Hostile logs through the command line: no traceback, the right exit code, nothing written outside
the output folder, and no log text unescaped in any page."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
from click.testing import CliRunner

from linkcheck import broken_links, parse
from logs import cid, line, md5
from test_pages import XSS, hostile_log
from tlparse_py.cli import main

HEADER = "V1202 12:14:23.064000 1 torch/_dynamo/x.py:9] "


def raw(envelope: str) -> str:
    return HEADER + envelope + "\n"


def wrong_types() -> str:
    """Every kind we parse, with metadata of the wrong type in every field."""
    frames = [1, "frame", {"filename": [], "line": "x", "name": 5}, {"filename": 10**30, "line": -1}]
    cases = [
        {"dynamo_start": {"stack": "not a list"}},
        {"dynamo_start": {"stack": frames}},
        {"dynamo_start": [1, 2]},
        {"compilation_metrics": {"graph_op_count": "many", "restart_reasons": "x", "fail_type": 5, "fail_reason": ["a"],
                                 "entire_frame_compile_time_s": "slow", "co_firstlineno": [], "co_name": {"a": 1}}},
        {"compilation_metrics": "metrics"},
        {"bwd_compilation_metrics": [1]},
        {"artifact": {"name": 5, "encoding": []}},
        {"artifact": {"name": None}},
        {"artifact": "x"},
        {"link": {"name": [], "url": 5}},
        {"dump_file": {"name": {}}},
        {"graph_dump": {"name": None}},
        {"optimize_ddp_split_child": {"name": 3}},
        {"inductor_output_code": {"filename": 7}},
        {"symbolic_shape_specialization": {"sources": "x", "user_stack": "y"}},
        {"guard_added_fast": 5},
        {"guard_added": {"frame_locals": "x", "prefix": "eval", "expr_node_id": "n"}},
        {"describe_tensor": {"size": "x", "describer_id": []}},
        {"describe_source": []},
        {"create_symbol": {"source": 5}},
        {"str": ["x"]},
        {"str": "x"},
        {"dynamo_output_graph": {}, "frame_id": "zero", "rank": "one"},
        {"dynamo_output_graph": {}, "frame_id": 1.5, "attempt": [], "stack": "s"},
        {"dynamo_guards": {}},
        {"chromium_event": {}},
    ]
    text = "".join(line({**case, **({} if "frame_id" in case else cid())}, "not json {") for case in cases)
    return text + raw('{"export": {}, "has_payload": 5}') + "\tdata\n"


NOT_A_TRACE = {"binary garbage", "JSON that is not an object"}  # no line holds a record envelope
CASES = {
    "binary garbage": lambda: bytes(random.Random(1).getrandbits(8) for _ in range(20000)),
    "NUL bytes": lambda: (line({"dynamo_output_graph": {}, **cid()}, "a\x00b") + "\x00\x00\n" + raw('{"export": {}}\x00')).encode(),
    "invalid UTF-8": lambda: raw('{"artifact": {"name": "x\\u00ff", "encoding": "string"}, "has_payload": "0"}').encode() + b"\t\xff\xfe\n" + b"V1202 12:14:23.064000 1 t.py:1] {\"a\xff\": 1}\n",
    "CRLF": lambda: (line({"dynamo_output_graph": {}, **cid()}, "a\nb") + line({"export": {}})).replace("\n", "\r\n").encode(),
    "truncated final record": lambda: (line({"export": {}}) + line({"dynamo_output_graph": {}, **cid()}, "x" * 100))[:-40].encode(),
    "md5 mismatches": lambda: line({"dynamo_output_graph": {}, **cid()}, "g").replace(md5("g"), md5("h")).encode(),
    "JSON that is not an object": lambda: "".join(raw(e) for e in ("[1, 2]", '"s"', "3", "null", "true")).encode(),
    "NaN and Infinity": lambda: raw('{"compilation_metrics": {"entire_frame_compile_time_s": NaN, "graph_op_count": Infinity}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0}').encode(),
    "100k-deep nesting": lambda: raw('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}").encode(),
    "a 30 MB line": lambda: raw(json.dumps({"artifact": {"name": "big", "encoding": "string"}, "x": "y" * 30_000_000})).encode(),
    "wrong field types everywhere": lambda: wrong_types().encode(),
    "payload lines with no record": lambda: ("\torphan\n\tlines\n" + line({"export": {}}) + "\tmore\n").encode(),
    "unknown kinds": lambda: (line({XSS: {"a": XSS}, **cid()}, XSS) + line({"brand_new": [1, 2]})).encode(),
    "failure without a reason": lambda: line({"compilation_metrics": {"fail_type": "Boom"}, **cid()}).encode(),
    "script injection and path traversal": lambda: hostile_log_bytes(),
    "javascript links": lambda: (line({"link": {"name": "x", "url": "javascript:alert(1)"}, **cid()})
                                 + line({"link": {"name": "y", "url": " JaVaScRiPt:alert(1)"}, **cid()})
                                 + line({"link": {"name": "z", "url": "data:text/html,<script>alert(1)</script>"}, **cid()})).encode(),
}


def hostile_log_bytes() -> bytes:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        return hostile_log(Path(folder) / "h.log").read_bytes()


def snapshot(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_log(tmp_path, case):
    work = tmp_path / "work"
    work.mkdir()
    log = work / "dedicated_log_torch_trace_x.log"
    log.write_bytes(CASES[case]())
    out = work / "out"
    before = snapshot(tmp_path)
    result = CliRunner().invoke(main, [str(log), "-o", str(out), "--no-browser"], catch_exceptions=False)
    assert "Traceback" not in result.output
    if case in NOT_A_TRACE:  # no record at all: refused in one line, nothing written
        assert result.exit_code == 2 and "is not a TORCH_TRACE log: no record could be read" in result.output
        assert not out.exists() and snapshot(tmp_path) == before
        return
    assert result.exit_code == 0, result.output
    assert [p for p in snapshot(tmp_path) if not p.startswith("work/out")] == before  # nothing outside the report
    for page in out.rglob("*.html"):
        text = page.read_text(errors="replace")
        assert "<script>alert" not in text and "<script>" not in text.replace('<script src="', ""), page
        collected = parse(page)
        assert not [h for h in collected.links if h.strip().lower().startswith(("javascript:", "data:", "vbscript:"))], page
    assert broken_links(out) == []
    strict = CliRunner().invoke(main, [str(log), "-o", str(out), "--no-browser", "--overwrite", "--strict"], catch_exceptions=False)
    assert strict.exit_code in (0, 1) and "Traceback" not in strict.output


def test_hostile_log_in_a_real_process(tmp_path):
    """The same as a user runs it: a subprocess, with the exit code and stderr it really gives."""
    log = tmp_path / "h.log"
    log.write_bytes(wrong_types().encode() + bytes(range(256)) * 50)
    proc = subprocess.run([sys.executable, "-m", "tlparse_py", str(log), "-o", str(tmp_path / "out"), "--no-browser", "--strict"],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("Error: --strict: the log had problems")
    assert (tmp_path / "out" / "index.html").is_file()


def test_interrupted_run_keeps_the_old_report(tmp_path, monkeypatch):
    log = tmp_path / "a.log"
    log.write_text(line({"dynamo_output_graph": {}, **cid()}, "g"))
    out = tmp_path / "out"
    assert CliRunner().invoke(main, [str(log), "-o", str(out), "--no-browser"]).exit_code == 0
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("tlparse_py.pipeline.Pipeline.add", interrupt)
    result = CliRunner().invoke(main, [str(log), "-o", str(out), "--no-browser", "--overwrite"])
    assert result.exit_code != 0
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # the staging folder is gone
