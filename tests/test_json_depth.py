"""Deep JSON (issue 47, item 2): one bounded decode (`tlparse_py.jsondepth`) for every JSON the tool
reads. A too-deep envelope or payload is a counted, shown problem, never a traceback; `diff` given a
too-deep summary.json says so in one line and exits 2; whatever is read can be written back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tlparse_py
from logs import cid, line, start, write_log
from tlparse_py import jsondepth
from tlparse_py.jsondepth import MAX_JSON_DEPTH, OWN_FILE_DEPTH, TooDeep

ROOT = Path(__file__).resolve().parent.parent


def nested(depth: int, inner: str = "") -> str:
    return "[" * depth + inner + "]" * depth


def test_the_limit_is_read_and_one_more_level_is_refused_by_every_decode():
    assert jsondepth.loads(nested(MAX_JSON_DEPTH)) is not None
    assert jsondepth.loads_text(nested(MAX_JSON_DEPTH, "NaN")) is not None
    for depth in (MAX_JSON_DEPTH + 1, 300, 1025, 100_000):
        for decode in (jsondepth.loads, jsondepth.loads_text):
            with pytest.raises(TooDeep, match=f"deeper than {MAX_JSON_DEPTH} levels"):
                decode(nested(depth).encode())
    with pytest.raises(TooDeep):
        jsondepth.split(b'{"a": ' + nested(100_000).encode() + b"}", dict)


def test_too_deep_is_not_json_to_callers_that_count_bad_json():
    """TooDeep is an orjson.JSONDecodeError (a ValueError): every `except` that counts bad JSON counts it."""
    assert issubclass(TooDeep, orjson.JSONDecodeError) and issubclass(TooDeep, ValueError)
    with pytest.raises(orjson.JSONDecodeError) as caught:
        jsondepth.loads(b"{oops")
    assert not isinstance(caught.value, TooDeep)


def test_whatever_is_read_can_be_written_back():
    """The limit leaves orjson.dumps (254 levels) room for the levels the report wraps around a value."""
    value = jsondepth.loads(nested(MAX_JSON_DEPTH))
    wrapped = {"vllm": {"calls": [{"config": {"deep": value}}]}}
    orjson.dumps(wrapped, option=orjson.OPT_INDENT_2)


def test_a_log_with_deep_envelopes_and_payloads_gives_a_report_that_counts_them(tmp_path):
    deep_artifact = json.dumps({"a": json.loads(nested(300))})
    at_limit = json.dumps({"a": json.loads(nested(MAX_JSON_DEPTH - 1))})
    log = write_log(tmp_path / "deep.log", [
        start(),
        f'V1202 12:14:23.064000 4242 torch/_dynamo/x.py:7] {{"x": {nested(100_000)}, "frame_id": 0}}\n',
        f'V1202 12:14:23.064000 4242 torch/_dynamo/x.py:7] {{"x": {nested(300)}, "frame_id": 0}}\n',
        line({"artifact": {"name": "deep_json", "encoding": "json"}, **cid()}, deep_artifact),
        line({"artifact": {"name": "at_limit_json", "encoding": "json"}, **cid()}, at_limit),
        line({"dynamo_guards": {}, **cid()}, nested(5000)),
        line({"artifact": {"name": "nan_at_limit", "encoding": "json"}, "deep": json.loads(nested(MAX_JSON_DEPTH - 2)), **cid()},
             "{\"a\": NaN}"),
    ])
    out = tmp_path / "out"
    tlparse_py.build(log, out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stats"]["fail_json"] == 2  # the two deep envelopes, skipped and counted
    assert summary["stats"]["fail_dynamo_guards_json"] == 1
    shown = "".join(page.read_text() for page in out.glob("*.html"))
    assert f"deeper than {MAX_JSON_DEPTH} levels" in shown
    folder = out / "-_0_0_0"
    # the too-deep artifact keeps its text as logged; the one at the limit is pretty-printed
    assert any(p.read_text() == deep_artifact for p in folder.glob("deep_json_*.json"))
    [pretty] = folder.glob("at_limit_json_*.json")
    assert pretty.read_text().startswith('{\n  "a": [')
    rows = [json.loads(row) for row in (out / "raw.jsonl").read_text().splitlines()]
    assert len(rows) >= 5


@pytest.mark.parametrize("text", [
    nested(100_000),
    '{"schema_version": "3.0", "compiles": ' + nested(100_000) + "}",
    '{"schema_version": "3.0", "x": ' + nested(100_000) + ', "compiles": []}',
    '{"schema_version": "3.0", "x": ' + nested(300) + ', "compiles": []}',
    '{\n  "schema_version": "3.0",\n  "compiles": [\n    {"a": ' + nested(100_000) + "\n    }\n  ]\n}",
], ids=["array", "compiles", "head", "head-300", "streamed"])
def test_diff_of_a_too_deep_summary_is_a_one_line_error(tmp_path, text):
    report = tmp_path / "report"
    report.mkdir()
    (report / "summary.json").write_text(text)
    proc = subprocess.run([sys.executable, "-m", "tlparse_py", "diff", str(report), str(report), "-o", str(tmp_path / "d")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    [message] = [row for row in proc.stderr.splitlines() if row.strip()]
    assert f"summary.json nests JSON deeper than {OWN_FILE_DEPTH} levels" in message


def test_diff_reads_back_a_report_whose_vllm_config_is_at_the_limit(tmp_path):
    """summary.json wraps a logged value in levels of its own: `diff` reads what the report wrote."""
    config = json.dumps({"model": "m", "deep": json.loads(nested(MAX_JSON_DEPTH - 1))})
    log = write_log(tmp_path / "v.log", [
        line({"artifact": {"name": "vllm_compilation_config", "encoding": "json"}, **cid()}, config),
        start(),
    ])
    tlparse_py.build(log, tmp_path / "report")
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["vllm"]["calls"][0]["config"]["model"] == "m"
    proc = subprocess.run([sys.executable, "-m", "tlparse_py", "diff", str(tmp_path / "report"), str(tmp_path / "report"),
                           "-o", str(tmp_path / "d")], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


@settings(max_examples=60, deadline=None)
@given(depth=st.integers(MAX_JSON_DEPTH - 3, MAX_JSON_DEPTH + 3), kinds=st.lists(st.booleans(), min_size=1, max_size=8),
       padding=st.sampled_from([0, 10, jsondepth.COUNT_UP_TO]), bracket_text=st.booleans())
def test_a_text_is_refused_exactly_when_it_nests_deeper_than_the_limit_short_or_long(depth, kinds, padding, bracket_text):
    """Short texts are cleared by counting their brackets, long ones by walking their value
    (`jsondepth.COUNT_UP_TO`): either way a text is refused exactly when it is too deep, whatever
    brackets its strings hold. The depth is the one the text was built with, level by level."""
    filler = ("[{" if bracket_text else "ab") * (padding // 2)
    text = ""
    for level in range(depth):  # from the innermost out: a list or an object per level, a sibling string beside it
        as_object = kinds[level % len(kinds)]
        inner = text or "0"
        text = f'{{"k": {inner}, "s": "{filler if level == 0 else ""}"}}' if as_object else f'[{inner}, "{filler if level == 0 else ""}"]'
    for decode in (jsondepth.loads, jsondepth.loads_text):
        for data in (text, text.encode()):
            if depth > MAX_JSON_DEPTH:
                with pytest.raises(TooDeep):
                    decode(data)
            else:
                assert decode(data) is not None
