"""summary.json: valid against the shipped schema on every fixture, multi-rank and -e reports; equal
to `tlparse_py.analyze(path).to_dict()`; and its numbers equal facts computed from the raw log text."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

import tlparse_py
from conftest import TRACES, read_json
from logs import cid, line, metrics, start, write_log
from test_real_traces import TRACE_LOGS, display, envelopes
from tlparse_py.cli import main

SCHEMA = json.loads(resources.files("tlparse_py").joinpath("summary.schema.json").read_text())
SCENARIOS = sorted({p.parent.name for p in TRACE_LOGS})


def validate(data: dict) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.Draft202012Validator(SCHEMA).validate(data)


def run_cli(*args: str) -> None:
    from click.testing import CliRunner

    result = CliRunner().invoke(main, [*args, "--no-browser"], catch_exceptions=False)
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("summaries")
    made = {}
    for scenario in SCENARIOS:
        run_cli(str(TRACES / scenario), "-o", str(root / scenario))
        made[scenario] = root / scenario
    run_cli(str(TRACES / "export"), "-e", "-o", str(root / "export_e"))
    made["export_e"] = root / "export_e"
    return made


@pytest.mark.parametrize("scenario", SCENARIOS + ["export_e"])
def test_summary_validates(reports, scenario):
    out = reports[scenario]
    data = read_json(out / "summary.json")
    validate(data)
    if "ranks" in data:  # multi-rank: a landing summary and one per rank
        for rank in data["ranks"]:
            validate(read_json(out / rank["folder"] / "summary.json"))
            assert rank["summary"] == read_json(out / rank["folder"] / "summary.json")


def test_export_report_has_its_verdict(reports):
    data = read_json(reports["export_e"] / "summary.json")
    assert data["export"]["status"] == "failed"  # its plain export of `Undecidable` failed: a failed export trace
    # a failure the log holds is reported without -e too (a log without one gets no verdict: test_export_data_dependent)
    assert read_json(reports["export"] / "summary.json")["export"]["status"] == "failed"


def test_ranks_that_agree_have_no_divergences(reports):
    data = read_json(reports["distributed"] / "summary.json")
    assert [r["rank"] for r in data["ranks"]] == [0, 1]
    assert data["divergences"] == []


@pytest.mark.parametrize("scenario", ["training", "graph_break", "recompile", "failure", "cache"])
def test_analyze_equals_summary_json(reports, scenario):
    assert tlparse_py.analyze(TRACES / scenario).to_dict() == read_json(reports[scenario] / "summary.json")


def _raw_compiles(log: Path) -> dict[str, dict]:
    """Per frame compile (attempts pooled), from the envelopes alone: forward time, backward times, failure, op count."""
    found: dict[str, dict] = {}
    for env in envelopes(log):
        key = display({k: v for k, v in env.items() if k != "attempt"})
        if "compilation_metrics" in env:
            meta = env["compilation_metrics"]
            entry = found.setdefault(key, {"backward": []})
            entry.update(forward=meta.get("entire_frame_compile_time_s"), fail=meta.get("fail_type"), ops=meta.get("graph_op_count"),
                         limit="recompile limit" in str(meta.get("fail_reason") or "").lower())
        elif "bwd_compilation_metrics" in env:
            found.setdefault(key, {"backward": []})["backward"].append(env["bwd_compilation_metrics"]["inductor_compile_time_s"])
    return found


@pytest.mark.parametrize("scenario", ["training", "graph_break", "recompile", "failure", "compiled_autograd"])
def test_compile_times_and_failures_match_the_raw_log(reports, scenario):
    logs = sorted((TRACES / scenario).glob("dedicated_log_torch_trace_*"))
    assert len(logs) == 1
    raw = _raw_compiles(logs[0])
    data = read_json(reports[scenario] / "summary.json")
    by_id = {c["id"]: c for c in data["compiles"]}
    for key, truth in raw.items():
        if key not in by_id:
            continue
        times = by_id[key]["compile_time_s"]
        assert times["forward"] == pytest.approx(truth.get("forward")) if truth.get("forward") is not None else times["forward"] is None
        backward = sum(truth["backward"]) if truth["backward"] else None
        assert times["backward"] == (pytest.approx(backward) if backward is not None else None)
        assert (by_id[key]["failure"] is not None) == bool(truth.get("fail"))
        assert by_id[key]["graph_op_count"] == truth.get("ops")
    compiled = [k for k in raw if raw[k].get("forward") is not None]
    assert set(compiled) <= set(by_id)
    total = sum((c["compile_time_s"]["total"] or 0) for c in data["compiles"])
    assert data["totals"]["compile_time_s"] == pytest.approx(total)
    assert data["totals"]["failed"] == sum(1 for k in raw if raw[k].get("fail") and not raw[k].get("limit"))
    assert data["totals"]["recompile_limit"] == sum(1 for k in raw if raw[k].get("limit"))


def test_training_includes_the_lazy_backward_compile(reports):
    data = read_json(reports["training"] / "summary.json")
    (compile_,) = data["compiles"]
    times = compile_["compile_time_s"]
    assert times["backward"] is not None and times["backward"] > 0
    assert times["total"] == pytest.approx(times["forward"] + times["backward"])


def test_unknown_values_are_null(tmp_path):
    """A compile cut off before its metrics: its time and op count are unknown, not zero."""
    log = write_log(tmp_path / "cut.log", [start(), line({"dynamo_output_graph": {}, **cid()}, "graph")])
    data = tlparse_py.analyze(log).to_dict()
    validate(data)
    (compile_,) = data["compiles"]
    assert compile_["status"] == "missing"
    assert compile_["compile_time_s"] == {"forward": None, "backward": None, "total": None, "backward_in_forward": None}
    assert compile_["graph_op_count"] is None and compile_["failure"] is None
    assert data["totals"]["compile_time_s"] is None
    assert data["torch_version"] is None


def test_a_reused_compile_id_is_a_new_generation(tmp_path):
    """After torch._dynamo.reset() ids start again: a dynamo_start for a finished id opens generation 1."""
    lines = [
        start(fn="first"), metrics(co_name="first", entire_frame_compile_time_s=1.0),
        start(fn="second", lineno=9), metrics(co_name="second", entire_frame_compile_time_s=2.0),
    ]
    data = tlparse_py.analyze(write_log(tmp_path / "reset.log", lines)).to_dict()
    validate(data)
    rows = [(c["id"], c["generation"], c["frame"], c["user_location"]) for c in data["compiles"]]
    assert rows == [("[0/0]", 0, "first", "(unknown):3"), ("[0/0]", 1, "second", "(unknown):9")]
    assert data["totals"]["compile_time_s"] == pytest.approx(3.0)
