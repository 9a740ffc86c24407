"""Issue 33 ("Done when"): real torch 2.13 CPU runs as harness scenarios, the report checked against the raw log.

* `aot_inductor`: torch.export, then AOTInductor compiles the program ahead of time. It is real
  compiling, logged outside any compile id, with no compile time field: the report's total compile
  time is unknown (null, "unknown"), never 0.
* `export_qualified_dim`: two failing non-strict exports written as most code writes them
  (`torch.export.Dim("batch")` in a `dynamic_shapes` dict, a call over several lines; a Dim bound to a
  name, a tuple `dynamic_shapes`). The inferred verdict names the Dim where the logged call text shows
  it and stays unknown, saying why, where it does not.

Every expected value is computed here from the fixture's text with the raw-record helper of
test_new_scenarios (glog header, JSON envelope, payload lines; not tlparse_py's reader). Only the last
test runs torch (and is skipped without it).
"""

from __future__ import annotations

import html
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import read_json
from test_new_scenarios import Rec, kind, logs, parse, read_text
from test_truth_round3 import cards, run, text_of
from test_truth_round4 import invoke, last_line, validate

HAS_TORCH = importlib.util.find_spec("torch") is not None
EXPORT_DIR = "/torch/export/"  # torch.export's own files, where the user's call enters it


# -- aot_inductor ----------------------------------------------------------------------------------


def chromium(recs: list[Rec]) -> list[dict]:
    """Every chromium event, its JSON payload parsed."""
    return [json.loads(r.payload) for r in kind(recs, "chromium_event")]


def aot_facts(log: Path) -> dict:
    """What the raw log says of the AOTInductor compile: no record in a compile id, one metrics record
    without a compile id or a time field but with a start and an end, and the compile_fx_aot span."""
    recs = parse(log)
    in_compile = [r for r in recs if r.env.get("frame_id") is not None or r.env.get("compiled_autograd_id") is not None]
    (metrics,) = kind(recs, "compilation_metrics")
    events = chromium(recs)
    (begin,) = [e for e in events if e["name"] == "compile_fx_aot" and e["ph"] == "B"]
    (end,) = [e for e in events if e["name"] == "compile_fx_aot" and e["ph"] == "E"]
    dumps = {r.body["name"]: r.payload for r in kind(recs, "graph_dump")}
    return {
        "in_compile": in_compile,
        "metrics": metrics.body,
        "span_s": (end["ts"] - begin["ts"]) / 1e6,
        "dumps": dumps,
        "dynamo_starts": kind(recs, "dynamo_start"),
    }


def test_aot_inductor_compiles_outside_any_compile_id_and_logs_no_compile_time():
    """The raw facts the report's verdict rests on: real compiling, none of it under a compile id."""
    (log,) = logs("aot_inductor")
    facts = aot_facts(log)
    assert facts["in_compile"] == [] and facts["dynamo_starts"] == []
    metrics = facts["metrics"]
    assert metrics["compile_id"] is None and metrics["fail_type"] is None
    for field in ("entire_frame_compile_time_s", "inductor_compile_time_s", "backend_compile_time_s"):
        assert metrics[field] is None, field  # no time the report could add up
    assert metrics["end_time_us"] > metrics["start_time_us"]  # yet it compiled, for a while
    assert facts["span_s"] > 0.1
    assert "inductor_aot_wrapper_code" in facts["dumps"] and "inductor_aot_kernel_code" in facts["dumps"]


def test_aot_inductor_compile_time_is_unknown_never_0(tmp_path):
    (log,) = logs("aot_inductor")
    facts = aot_facts(log)
    out = tmp_path / "out"
    code, stdout, stderr = invoke(str(log), "-o", str(out), "--fail-on", "compile_time_s>0,compile_time_s<1")
    assert code == 0, stderr  # neither condition is checked: the time is not known
    summary = read_json(out / "summary.json")
    validate(summary)
    assert summary["totals"]["compile_time_s"] is None
    assert summary["totals"]["compiles"] == len(facts["dynamo_starts"]) == 0 and summary["compiles"] == []
    assert "compile time unknown" in last_line(stdout) and "compile time 0" not in last_line(stdout)
    assert "unknown compile time" in cards(out / "index.html")
    assert re.search(r"compile_time_s>0: unknown .* not checked", stderr) and re.search(r"compile_time_s<1: unknown .* not checked", stderr)
    md = (out / "summary.md").read_text(encoding="utf-8")
    head, _, row = [l for l in md.splitlines() if l.startswith("|")][:3]
    column = [h.strip() for h in head.strip("|").split("|")].index("compile time")
    assert [c.strip() for c in row.strip("|").split("|")][column] == "unknown"
    # what it compiled is there, under the records logged outside any compile id
    (wrapper,) = (out / "-_-_-_-").glob("inductor_aot_wrapper_code_*.txt")
    assert wrapper.read_text(encoding="utf-8").strip() == facts["dumps"]["inductor_aot_wrapper_code"].strip()


# -- export_qualified_dim ------------------------------------------------------------------------


def page_text(page: Path) -> str:
    """A page's visible text, whitespace collapsed, every entity decoded (`&#34;` too)."""
    return html.unescape(text_of(page))


def strings(recs: list[Rec]) -> dict[int, str]:
    """The log's string table: `{"str": [path, index]}` records, which stack frames name files by."""
    return {r.body[1]: r.body[0] for r in kind(recs, "str")}


def user_call(stack: list[dict], table: dict[int, str]) -> tuple[str, str]:
    """(text, `file:line`) of the frame that called into torch.export: the one before the first frame
    in torch/export/."""
    files = [table[f["filename"]] if isinstance(f["filename"], int) else f["filename"] for f in stack]
    first = next(i for i, path in enumerate(files) if EXPORT_DIR in path)
    return stack[first - 1]["loc"], f"{files[first - 1]}:{stack[first - 1]['line']}"


def balanced(text: str) -> bool:
    opened = sum(text.count(c) for c in "([{")
    return opened == sum(text.count(c) for c in ")]}")


def qualified_facts(log: Path) -> dict:
    """One export's facts from the raw log: its symbol, the guard narrowing it, the user's call as
    logged, and the Dim that call text declares for `x`'s dimension 0 (None when it shows none)."""
    recs = parse(log)
    (symbol,) = kind(recs, "create_symbol")
    (guard,) = kind(recs, "guard_added_fast")
    assert not kind(recs, "exported_program") and not kind(recs, "compilation_metrics")
    assert symbol.env.get("frame_id") is None and guard.env.get("frame_id") is None  # outside any compile
    call, location = user_call(symbol.body["stack"], strings(recs))
    assert user_call(guard.body["stack"], strings(recs)) == (call, location)  # the same export
    name, op, bound = re.fullmatch(r"(s\d+) (>) (\d+)", guard.body["expr"]).groups()
    assert name == symbol.body["symbol"] and symbol.body["source"] == "L['x'].size()[0]"
    low = int(re.match(r"\[(\d+),", symbol.body["vr"]).group(1))
    assert int(bound) >= low  # the guard narrows the declared range [low, int_oo]
    declared = re.search(r"""["']x["']\s*:\s*\{\s*0\s*:\s*torch\.export\.Dim\(["'](\w+)["']""", call)
    return {
        "symbol": symbol.body["symbol"], "source": symbol.body["source"], "range": symbol.body["vr"],
        "guard": guard.body["expr"], "min": int(bound) + 1, "call": call, "location": location,
        "dim": declared.group(1) if declared else None, "cut": not balanced(call), "text": read_text(log),
    }


def by_form() -> dict[str, dict]:
    """The scenario's two logs, told apart by what their calls' text shows."""
    facts = [qualified_facts(log) | {"log": log} for log in logs("export_qualified_dim")]
    assert len(facts) == 2
    return {"dict": next(f for f in facts if f["dim"]), "bound": next(f for f in facts if not f["dim"])}


def test_the_two_real_calls_are_what_the_scenario_claims():
    forms = by_form()
    one, two = forms["dict"], forms["bound"]
    # 1: qualified Dim in a dict, on the first line of a call written over two lines
    assert one["dim"] == "batch" and one["cut"] and "torch.export.Dim(" in one["call"]
    # 2: one argument a line: the log holds `torch.export.export(` only; the Dim's name is nowhere in it
    assert two["cut"] and two["call"].strip() == "torch.export.export("
    assert '"rows"' not in two["text"] and "Dim(" not in two["text"]
    for form in (one, two):
        assert re.fullmatch(r"/work/scenarios/export_qualified_dim\.py:\d+", form["location"])  # the scenario's own line
    assert one["location"] != two["location"]


def test_a_qualified_dim_in_a_dict_is_read_from_the_real_call(tmp_path):
    facts = by_form()["dict"]
    for args in ((), ("-e",)):
        out, _ = run(tmp_path, str(facts["log"]), *args, name=f"out{len(args)}")
        export = read_json(out / "summary.json")["export"]
        assert export["status"] == "failed" and export["basis"] == "inferred"
        assert export["suggested_fix"] == f'Dim("{facts["dim"]}", min={facts["min"]})'
        assert export["guard"] == facts["guard"]
        evidence = export["evidence"]
        assert (evidence["symbol"], evidence["source"], evidence["declared_range"], evidence["guard"], evidence["dim"]) == (
            facts["symbol"], facts["source"], facts["range"], facts["guard"], facts["dim"])
        assert (evidence["call"], evidence["call_location"]) == (facts["call"], facts["location"])
        index = page_text(out / "index.html")
        assert "Export failed (inferred)" in index and "This is an inference" in index
        assert f'Dim("{facts["dim"]}", min={facts["min"]})' in index


def test_a_call_cut_at_its_first_line_leaves_the_verdict_unknown_and_says_why(tmp_path):
    facts = by_form()["bound"]
    out, _ = run(tmp_path, str(facts["log"]), "-e")
    export = read_json(out / "summary.json")["export"]
    assert export["status"] == "unknown" and export["basis"] == "logged" and export["suggested_fix"] is None
    evidence = export["evidence"]
    assert evidence["dim"] is None  # never guessed
    assert (evidence["symbol"], evidence["guard"], evidence["call"], evidence["call_location"]) == (
        facts["symbol"], facts["guard"], facts["call"], facts["location"])
    assert "several lines" in export["missing"] and "only its first" in export["missing"]
    index = page_text(out / "index.html")
    assert "part of the evidence" in index and "several lines" in index and facts["location"] in index
    assert "Export failed" not in index


# -- the scenario, run live ------------------------------------------------------------------------


@pytest.mark.torch
@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (pip install torch==2.13.0)")
def test_export_qualified_dim_live_gives_the_fixtures_verdicts(tmp_path):
    """The scenario run on the installed torch logs what the committed fixtures hold: one export whose
    Dim the report reads, one whose call is cut at its first line."""
    proc = subprocess.run(
        [sys.executable, "-m", "tlparse_py.harness", "--out", str(tmp_path / "traces"), "--device", "cpu", "export_qualified_dim"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    fresh = sorted((tmp_path / "traces" / "export_qualified_dim").glob("*.log"))
    assert len(fresh) == 2
    verdicts = {}
    for number, log in enumerate(fresh):
        facts = qualified_facts(log)
        out, _ = run(tmp_path, str(log), "-e", name=f"out{number}")
        export = read_json(out / "summary.json")["export"]
        assert export["evidence"]["dim"] == facts["dim"]
        fix = f'Dim("{facts["dim"]}", min={facts["min"]})' if facts["dim"] else None
        verdicts[facts["dim"]] = (export["status"], export["suggested_fix"] == fix)
    assert verdicts == {"batch": ("failed", True), None: ("unknown", True)}
