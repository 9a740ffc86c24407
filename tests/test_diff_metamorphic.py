"""The diff's compile time, checked by what must not change (issue 45): relations between diffs, on
real fixture reports and on generated runs, never numbers written down here.

- diff(A, A) is empty: nothing changed, every gate at its neutral value, the ratio 1;
- a compile removed from A is base-only compile work (its time, to the microsecond), never a saving:
  the ratio over the rest is unchanged;
- the comparable pairs' times ×2 give the ratio 2.00;
- one pair's cache result flipped leaves the ratio over the rest (the pair left apart, with its reason);
- the same runs in other folders give the same diff.
Every view (diff.json, the `Diff:` line, the Markdown, the card) says the one ratio the gate reads.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tlparse_py
from tlparse_py.analysis import comparison
from tlparse_py.analysis.comparison import MIN_COMPARABLE_SHARE, diff
from tlparse_py.commands.diff import _headline
from tlparse_py.diff.output import diff_json
from tlparse_py.diff.view import diff_page, markdown

TRACES = Path(__file__).resolve().parent / "fixtures" / "traces"
REAL = ["recompile", "recompile_limit", "train_warm", "gb_base", "skip_base"]


def data(result) -> dict[str, Any]:
    return json.loads(diff_json(result))


def timed(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in summary["compiles"] if c["compile_time_s"]["total"]]


@pytest.fixture(scope="module", params=REAL)
def real(request) -> dict[str, Any]:
    return tlparse_py.analyze(TRACES / request.param).to_dict()


# ------------------------------------------------------------------------------------------------
# generated runs: frames of a few compiles, each with a time and what its cache lookups found


@st.composite
def runs(draw: st.DrawFn) -> dict[str, Any]:
    compiles = []
    for frame in range(draw(st.integers(1, 4))):
        for i in range(draw(st.integers(1, 4))):
            cache = [{"cache": "fx_graph", "result": draw(st.sampled_from(["hit", "miss"])), "reason": ""}]
            time = draw(st.floats(0.01, 50, allow_nan=False).map(lambda t: round(t, 3)))
            compiles.append({"id": f"[{frame}/{i}]", "frame": f"f{frame}", "user_location": f"/home/me/proj/model.py:{10 * frame + 1}",
                             "status": "ok", "compile_time_s": {"total": time}, "cache": cache, "graph_op_count": 3,
                             "recompile_reasons": [f"guard {i}"] if i else []})
    return {"schema_version": "4.0", "compiles": compiles}


GENERATED = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# ------------------------------------------------------------------------------------------------
# diff(A, A) is empty


def check_empty(summary: dict[str, Any]) -> None:
    result = diff(summary, summary)
    assert result.nothing_changed
    time = result.comparison.time
    assert time.apart_count == 0 and time.base_only.compiles == time.new_only.compiles == 0
    assert result.metrics["base_only_compile_s"] == result.metrics["new_only_compile_s"] == 0
    assert all(result.metrics[g] == 0 for g in ("new_graph_breaks", "new_recompiles", "new_failures", "new_skipped", "cache_miss_delta"))
    if timed(summary):
        assert result.metrics["compile_time_ratio"] == time.ratio == 1.0
    assert "No graph break, recompile, failure or cache change." in markdown(result, "d/index.html")


def test_a_real_report_diffed_with_itself_is_empty(real):
    check_empty(real)


@GENERATED
@given(runs())
def test_a_generated_run_diffed_with_itself_is_empty(run):
    check_empty(run)


# ------------------------------------------------------------------------------------------------
# a compile removed is lost work, never a saving


def check_removed(summary: dict[str, Any], index: int) -> None:
    removed = summary["compiles"][index]
    fewer = {**summary, "compiles": [c for i, c in enumerate(summary["compiles"]) if i != index]}
    whole = diff(summary, summary)
    result = diff(summary, fewer)
    time = result.comparison.time
    assert time.base_only.compiles >= 1 and time.new_only.compiles == 0
    assert result.metrics["base_only_compile_s"] == pytest.approx(sum(
        c.compile_time_s.base for f in result.comparison.frames for c in f.pairs if c.new is None and c.base is not None), abs=1e-6)
    assert time.base_only.seconds == pytest.approx(removed["compile_time_s"]["total"] or 0, abs=1e-6)
    # the ratio over the pairs both runs still have: never below 1 for the same times (no saving)
    assert time.ratio is None or time.ratio == 1.0
    assert whole.comparison.time.base is None or time.base is None or time.base <= whole.comparison.time.base + 1e-6


def last_compiles(summary: dict[str, Any]) -> list[int]:
    """The position of each frame's last compile: what a lower recompile limit takes away (a frame's
    compiles pair in order, so taking one from the middle pairs the rest differently)."""
    last: dict[tuple[int, str], int] = {}
    for i, c in enumerate(summary["compiles"]):
        last[(c.get("generation", 0), c["id"].split("/")[0])] = i
    return sorted(last.values())


def test_a_real_compile_removed_is_base_only_work(real):
    for index in last_compiles(real):
        check_removed(real, index)


@GENERATED
@given(runs(), st.data())
def test_a_generated_compile_removed_is_base_only_work(run, chosen):
    check_removed(run, chosen.draw(st.sampled_from(last_compiles(run))))


def test_the_last_compiles_of_a_frame_removed_are_their_exact_time():
    """BASE compiles a frame 6 times, NEW (a lower recompile limit) 3: the 3 lost compiles are
    base-only work, to the microsecond, and the ratio is over the 3 both have."""
    compiles = [{"id": f"[0/{i}]", "frame": "f", "user_location": "/p/a.py:1", "compile_time_s": {"total": 1.0 + i / 10},
                 "cache": [{"cache": "fx_graph", "result": "miss"}]} for i in range(6)]
    base = {"schema_version": "4.0", "compiles": compiles}
    new = {"schema_version": "4.0", "compiles": compiles[:3]}
    result = diff(base, new)
    time = result.comparison.time
    assert (time.base_only.compiles, time.base_only.seconds) == (3, pytest.approx(1.3 + 1.4 + 1.5))
    assert time.ratio == 1.0 and time.compared == 3 and result.metrics["compile_time_ratio"] == 1.0
    assert result.total("compile_time_s").new < result.total("compile_time_s").base  # the raw totals: times, no verdict
    assert result.total("compile_time_s").ratio is None


# ------------------------------------------------------------------------------------------------
# the comparable pairs ×2 give 2.00


def scaled(summary: dict[str, Any], factor: float) -> dict[str, Any]:
    out = copy.deepcopy(summary)
    for c in out["compiles"]:
        t = c["compile_time_s"]
        for key in ("forward", "backward", "total", "backward_in_forward"):
            if t.get(key) is not None:
                t[key] = round(t[key] * factor, 6)
    return out


def check_scaled(summary: dict[str, Any]) -> None:
    result = diff(summary, scaled(summary, 2))
    time = result.comparison.time
    if not any(c["compile_time_s"]["total"] for c in summary["compiles"]):
        return
    assert time.ratio == pytest.approx(2.0, abs=1e-3) and result.metrics["compile_time_ratio"] == time.ratio
    one = f"compile time ratio ×{time.ratio:.2f}"
    assert one in _headline(result) and one in markdown(result, "d/index.html")
    assert [c for c in diff_page(result).sections[0]["cards"] if c["label"] == "compile time ratio"][0]["text"] == f"×{time.ratio:.2f}"
    assert data(result)["metrics"]["compile_time_ratio"] == data(result)["comparison"]["time"]["ratio"]


def test_a_real_report_twice_as_slow_is_ratio_2(real):
    check_scaled(real)


@GENERATED
@given(runs())
def test_a_generated_run_twice_as_slow_is_ratio_2(run):
    check_scaled(run)


# ------------------------------------------------------------------------------------------------
# one pair's cache result flipped: the ratio over the rest


def check_flipped(summary: dict[str, Any], index: int) -> None:
    new = scaled(summary, 2)
    flipped = new["compiles"][index]
    flipped["cache"] = [{**lookup, "result": "hit" if lookup["result"] == "miss" else "miss"} for lookup in flipped["cache"]]
    result = diff(summary, new)
    time = result.comparison.time
    assert time.apart_count == 1 and time.cache_differs == 1
    assert time.apart[0].new == flipped["id"] and time.apart[0].why.startswith("cache results differ: BASE ")
    rest = [c["compile_time_s"]["total"] for i, c in enumerate(summary["compiles"]) if i != index]
    share = sum(rest) * 3 / (sum(rest) * 3 + summary["compiles"][index]["compile_time_s"]["total"] * 3)
    if share >= MIN_COMPARABLE_SHARE + 1e-3:
        assert time.ratio == pytest.approx(2.0, abs=1e-3) and result.metrics["compile_time_ratio"] == time.ratio
    elif share < MIN_COMPARABLE_SHARE - 1e-3:
        assert time.ratio is None and "cache states differ" in result.unchecked["compile_time_ratio"]


def test_a_real_pair_with_another_cache_result_leaves_the_ratio_over_the_rest():
    summary = tlparse_py.analyze(TRACES / "recompile").to_dict()
    assert len(timed(summary)) >= 3
    smallest = min((i for i, c in enumerate(summary["compiles"]) if c["cache"]), key=lambda i: summary["compiles"][i]["compile_time_s"]["total"])
    check_flipped(summary, smallest)
    result = diff(summary, summary)
    assert result.comparison.time.ratio == 1.0


@GENERATED
@given(runs(), st.data())
def test_a_generated_pair_with_another_cache_result_leaves_the_ratio_over_the_rest(run, chosen):
    check_flipped(run, chosen.draw(st.integers(0, len(run["compiles"]) - 1)))


# ------------------------------------------------------------------------------------------------
# other folders, the same diff


def moved(summary: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """The run as it is logged from another folder (torch names a guard's file without its leading slash too)."""
    return json.loads(json.dumps(summary).replace(old, new).replace(old.lstrip("/"), new.lstrip("/")))


def test_a_real_run_in_other_folders_gives_the_same_diff(real):
    other = moved(real, "/work/scenarios/", "/home/someone/else/checkout/")
    assert "/home/someone/" in json.dumps(other) or "/work/scenarios/" not in json.dumps(real)
    same = data(diff(real, real))
    renamed = data(diff(real, other))
    for d in (same, renamed):
        d["comparison"].pop("graph_breaks")  # break rows name NEW's (or BASE's) own paths
        d["comparison"]["frames"] = [{k: v for k, v in f.items() if "location" not in k} for f in d["comparison"]["frames"]]
        for key in ("failures", ):
            d["comparison"][key] = {side: [{k: v for k, v in r.items() if "location" not in k and k != "failed_at"} for r in rows]
                                    for side, rows in d["comparison"][key].items()}
        d["comparison"]["no_longer_compiled"] = [{k: v for k, v in r.items() if "location" not in k} for r in d["comparison"]["no_longer_compiled"]]
    assert renamed == same


@GENERATED
@given(runs())
def test_a_generated_run_in_other_folders_gives_the_same_metrics(run):
    result = diff(run, moved(run, "/home/me/proj/", "/ci/runner/work/proj/"))
    assert result.nothing_changed and result.metrics == diff(run, run).metrics


def test_the_module_declares_one_threshold():
    assert 0 < comparison.MIN_COMPARABLE_SHARE <= 1
