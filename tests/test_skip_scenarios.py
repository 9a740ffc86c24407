"""Issue 31: the skip_base / skip_nan pair, one training program before and after a NaN check.

skip_nan adds `if torch.isnan(x).any(): raise` inside the layer loop of `Model.forward`: a graph
break in a loop, so Dynamo skips the whole frame and the forward runs eagerly. Every expected fact
is read here from the raw fixture text (glog header, JSON envelope, TAB payload lines) with
test_new_scenarios' parser, never through tlparse_py's reader; `tlparse_py.analyze` must agree.
"""

from __future__ import annotations

import pytest

import tlparse_py
from conftest import HERE
from test_new_scenarios import Rec, artifacts, kind, logs, parse

PROGRAM = HERE.parent / "tlparse_py" / "harness" / "scenarios" / "skip_program.py"
CACHE_MARKS = ("fx_graph_cache_hit", "fx_graph_cache_miss", "fx_graph_cache_bypass",
               "aotautograd_cache_hit", "aotautograd_cache_miss", "aotautograd_cache_bypass")


def records(scenario: str) -> list[Rec]:
    (log,) = logs(scenario)
    return parse(log)


def only(recs: list[Rec], k: str) -> Rec:
    (rec,) = kind(recs, k)
    return rec


def user_stack(recs: list[Rec]) -> list[tuple[str, str, int]]:
    """The one dynamo_start's stack as (file, function, line), its interned file names resolved."""
    files = {index: path for path, index in (r.body for r in kind(recs, "str"))}
    return [(files[f["filename"]], f["name"], f["line"]) for f in only(recs, "dynamo_start").body["stack"]]


def cache_marks(recs: list[Rec]) -> dict[str, int]:
    return {name: len(artifacts(recs, name)) for name in CACHE_MARKS}


def summary_of(scenario: str) -> dict:
    (log,) = logs(scenario)
    return tlparse_py.analyze(log).to_dict()


def test_skip_base_compiles_its_forward_and_backward():
    recs = records("skip_base")
    start, metrics = only(recs, "dynamo_start"), only(recs, "compilation_metrics")
    backward = only(recs, "bwd_compilation_metrics")
    assert start.cid == metrics.cid == backward.cid == "[0/0]"
    assert user_stack(recs)[-1] == ("/work/scenarios/skip_program.py", "forward", metrics.body["co_firstlineno"])
    assert metrics.body["co_name"] == "forward"
    assert metrics.body["fail_type"] is None and metrics.body["fail_reason"] is None
    assert metrics.body["entire_frame_compile_time_s"] > 0 and metrics.body["inductor_compile_time_s"] > 0
    assert backward.body["inductor_compile_time_s"] > 0
    assert artifacts(recs, "dynamo_graph_break_reason") == [] and kind(recs, "dynamo_output_graph") != []
    marks = cache_marks(recs)
    assert marks["fx_graph_cache_miss"] == 2 and marks["aotautograd_cache_miss"] == 1  # forward+backward, one joint
    assert sum(marks.values()) == 3

    summary = summary_of("skip_base")
    (compile_,) = summary["compiles"]
    assert compile_["id"] == "[0/0]" and compile_["status"] == "ok" and compile_["failure"] is None
    assert compile_["frame"] == "forward"
    assert compile_["compile_time_s"]["forward"] == pytest.approx(metrics.body["entire_frame_compile_time_s"])
    assert compile_["compile_time_s"]["backward"] == pytest.approx(backward.body["inductor_compile_time_s"])
    totals = summary["totals"]
    assert (totals["failed"], totals["skipped"], totals["graph_breaks"]) == (0, 0, 0)
    assert totals["cache"] == {"hit": 0, "miss": sum(marks.values()), "bypass": 0}


def test_skip_nan_skips_the_forward_on_a_graph_break_in_its_loop():
    recs = records("skip_nan")
    start, metrics = only(recs, "dynamo_start"), only(recs, "compilation_metrics")
    assert start.cid == metrics.cid == "[0/0]"
    assert metrics.body["co_name"] == "forward"
    assert metrics.body["fail_type"] == "Unsupported"
    reason = metrics.body["fail_reason"]
    assert "graph break in loop" in reason and "Skipping the frame and falling back to eager" in reason
    assert f"frame skipped: forward (/work/scenarios/skip_program.py line {metrics.body['co_firstlineno']})" in reason
    # Dynamo gave up before any graph: some compile time, none of it in a backend; no backward
    assert metrics.body["entire_frame_compile_time_s"] > 0
    assert metrics.body["backend_compile_time_s"] is None and metrics.body["inductor_compile_time_s"] is None
    assert kind(recs, "bwd_compilation_metrics") == [] and kind(recs, "dynamo_output_graph") == []
    assert sum(cache_marks(recs).values()) == 0
    (brk,) = artifacts(recs, "dynamo_graph_break_reason")
    assert brk.cid == "[0/0]"
    assert "Failed to handle graph break gracefully. Skipping the function and falling back to eager." in brk.payload
    check = next(n for n, text in enumerate(PROGRAM.read_text().splitlines(), 1) if text.strip().startswith("if NAN_CHECK and torch.isnan("))
    assert f"Graph break in user code at /work/scenarios/skip_program.py:{check}" in brk.payload

    summary = summary_of("skip_nan")
    (compile_,) = summary["compiles"]
    assert compile_["id"] == "[0/0]" and compile_["status"] == "skipped"
    assert compile_["failure"]["type"] == metrics.body["fail_type"]
    assert compile_["compile_time_s"]["total"] == pytest.approx(metrics.body["entire_frame_compile_time_s"])
    assert compile_["compile_time_s"]["backward"] is None
    (gb,) = compile_["graph_breaks"]
    assert gb["user_location"] == f"/work/scenarios/skip_program.py:{check}"
    totals = summary["totals"]
    assert (totals["failed"], totals["skipped"], totals["graph_breaks"], totals["compiles"]) == (0, 1, 1, 1)


def test_the_pair_is_one_frame_before_and_after():
    """Same frame, file, line and user stack in both runs, so `diff` pairs them; skip_nan loses the compile time."""
    base, new = records("skip_base"), records("skip_nan")
    code = ("co_name", "co_filename", "co_firstlineno")
    assert [only(base, "compilation_metrics").body[k] for k in code] == [only(new, "compilation_metrics").body[k] for k in code]
    base_stack, new_stack = user_stack(base), user_stack(new)
    assert [(f, line) for _, f, line in base_stack] == [(f, line) for _, f, line in new_stack]
    # only the launcher differs: skip_base.py vs skip_nan.py, both running skip_program.py
    differing = {(b[0], n[0]) for b, n in zip(base_stack, new_stack) if b[0] != n[0]}
    assert differing == {("/work/scenarios/skip_base.py", "/work/scenarios/skip_nan.py")}

    base_time = only(base, "compilation_metrics").body["entire_frame_compile_time_s"] + \
        only(base, "bwd_compilation_metrics").body["inductor_compile_time_s"]
    new_time = only(new, "compilation_metrics").body["entire_frame_compile_time_s"]
    assert new_time < base_time
    before, after = summary_of("skip_base"), summary_of("skip_nan")
    assert before["compiles"][0]["user_location"] == after["compiles"][0]["user_location"]
    assert before["totals"]["compile_time_s"] == pytest.approx(base_time)
    assert after["totals"]["compile_time_s"] == pytest.approx(new_time)
