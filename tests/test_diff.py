"""`tlparse-py diff BASE NEW`: two runs compared, on real harness traces (tests/fixtures/traces)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import tlparse_py
from linkcheck import broken_links
from logs import envelopes_of
from tlparse_py.cli import main
from tlparse_py.analysis import comparison as compare
from tlparse_py.diff.output import diff_json
from tlparse_py.analysis.conditions import Condition, ConditionError, parse_conditions, unknown, violated
from tlparse_py.analysis.totals import DIFF_GATES
from tlparse_py.diff.view import markdown
from tlparse_py.units import format_seconds

TRACES = Path(__file__).parent / "fixtures" / "traces"
COLD = TRACES / "train_warm" / "dedicated_log_torch_trace_7nvvy7q4.log.gz"  # process 1 of 2: cold cache
WARM = TRACES / "train_warm" / "dedicated_log_torch_trace_pnf633u3.log"  # process 2 of 2: warm cache
GB_BASE = TRACES / "gb_base"
GB_EXTRA = TRACES / "gb_extra"
SCHEMA = Path(tlparse_py.__file__).parent / "diff.schema.json"


def run(*args):
    return CliRunner().invoke(main, ["diff", *[str(a) for a in args], "--no-browser"], catch_exceptions=False)


def as_data(diff) -> dict:
    """The typed diff as diff.json holds it."""
    return json.loads(diff_json(diff))


def read(out: Path) -> dict:
    return json.loads((out / "diff.json").read_text())


def validate(data: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(data)


@pytest.fixture(scope="module")
def gb(tmp_path_factory):
    """gb_base vs gb_extra, gated on new graph breaks, with a Markdown summary."""
    tmp = tmp_path_factory.mktemp("gb")
    result = run(GB_BASE, GB_EXTRA, "-o", tmp / "out", "--fail-on", "new_graph_breaks>0", "--markdown", tmp / "ci" / "diff.md")
    return tmp, result


@pytest.fixture(scope="module")
def report_base(tmp_path_factory):
    """A tlparse-py report of gb_base (read through its summary.json)."""
    out = tmp_path_factory.mktemp("report") / "gb_base_report"
    tlparse_py.build(GB_BASE, out)
    return out


# ------------------------------------------------------------------------------------------------
# real runs


def cache_hits_in_log(path: Path) -> int:
    """Independently of the tool: the cache hits the raw log records (FX graph and AOTAutograd artifacts)."""
    text = open_log_text(path)
    return len(re.findall(r'"name": "(?:fx_graph|aotautograd)_cache_hit"', text))


@pytest.mark.parametrize("base, new", [(COLD, WARM), (WARM, COLD)], ids=["cold-then-warm", "warm-then-cold"])
def test_warm_against_cold_is_no_time_regression_nor_saving(tmp_path, base, new):
    """The same program traced on a cold and on a warm Inductor cache: the times measure the cache,
    so the time gate is not checked (exit 0) and says why, either way round."""
    result = run(base, new, "-o", tmp_path / "out", "--fail-on", "compile_time_ratio>1.25,compile_time_ratio<0.8")
    assert result.exit_code == 0, result.output
    data = read(tmp_path / "out")
    hits = cache_hits_in_log(WARM) - cache_hits_in_log(COLD)
    assert hits > 0
    who, other = ("BASE", "NEW") if base == WARM else ("NEW", "BASE")
    why = f"cache states differ: {who} hit the cache {hits} times where {other} missed: compile times are not comparable"
    time = data["comparison"]["time"]
    assert time["comparable"] is False and time["why_not"] == why and time["ratio"] is None and time["cache_differs"] == 1
    assert data["metrics"]["compile_time_ratio"] is None and data["unchecked"]["compile_time_ratio"] == why
    assert data["comparison"]["totals"]["compile_time_s"]["ratio"] is None  # the raw totals, shown without a verdict
    assert data["totals"]["compile_time_s"]["ratio"] is None
    unchecked = [line for line in result.stderr.splitlines() if line.startswith("--fail-on compile_time_ratio")]
    assert len(unchecked) == 2 and all(f"not checked: {why}" in line for line in unchecked)
    assert why[0].upper() + why[1:] in data["notes"]
    # the cache totals still say what happened, and the page neither greens nor reds the time
    assert data["comparison"]["totals"]["cache"]["hit"]["delta"] == (hits if base == COLD else -hits)
    page = (tmp_path / "out" / "index.html").read_text()
    assert "Not compared: cache states differ" in page and "(not compared: cache results differ: BASE " in page
    validate(data)


def test_the_time_gate_holds_where_times_compare(tmp_path):
    """A run against itself: every paired compile has the same cache results, the ratio is checked."""
    result = run(WARM, WARM, "-o", tmp_path / "out", "--fail-on", "compile_time_ratio>0.5")
    assert result.exit_code == 3, result.output
    data = read(tmp_path / "out")
    assert data["comparison"]["time"]["comparable"] and data["metrics"]["compile_time_ratio"] == 1.0
    assert "compile_time_ratio>0.5: compile_time_ratio = 1" in result.stderr


def test_one_extra_graph_break_is_listed_and_fails_the_gate(gb):
    tmp, result = gb
    assert result.exit_code == 3, result.output
    data = read(tmp / "out")
    [extra] = data["comparison"]["graph_breaks"]["new"]
    assert extra["user_location"].endswith("gb_program.py:30") and "graph_break()" in extra["reason"]
    assert data["comparison"]["graph_breaks"]["gone"] == []
    assert data["metrics"]["new_graph_breaks"] == 1
    # one line naming what: the condition and the new graph break itself
    lines = [line for line in result.stderr.splitlines() if line.startswith("--fail-on")]
    assert len(lines) == 1 and "new_graph_breaks>0" in lines[0] and "gb_program.py:30" in lines[0]
    page = (tmp / "out" / "index.html").read_text()
    assert "gb_program.py:30" in page and "New in NEW (1)" in page
    validate(data)


def test_frames_pair_by_code_not_compile_id(gb):
    data = read(gb[0] / "out")
    rows = data["comparison"]["frames"]
    frames = {(f["frame"], f["user_location"].rsplit("/", 1)[-1], f["presence"]): f for f in rows}
    assert frames[("prepare", "gb_program.py:21", "both")]["pairing"] == "same"
    assert frames[("head", "gb_program.py:27", "new")]["pairing"] == "new"
    # the resume function of `step` is compiled as two frames in NEW (after each break): the first pairs
    resumes = [f for f in rows if f["frame"] == "torch_dynamo_resume_in_step_at_35"]
    assert [(f["presence"], [(p["base"] and p["base"]["id"], p["new"]["id"]) for p in f["pairs"]]) for f in resumes] == [
        ("both", [("[3/0]", "[3/0]")]), ("new", [(None, "[6/0]")])]
    assert all(f["recompiles"]["new"] == 0 for f in resumes)  # another frame id, not a recompile
    [ops] = [o for o in data["comparison"]["graph_op_counts"] if o["frame"] == "torch_dynamo_resume_in_step_at_35"]
    assert ops["graph_op_count"] == {"base": 4, "new": 0, "delta": -4}


def test_markdown_summary_links_into_the_page(gb):
    tmp, _ = gb
    text = (tmp / "ci" / "diff.md").read_text()
    assert "../out/index.html#graph-breaks" in text and "(../out/index.html)" in text
    assert "gb\\_program.py:30" in text and "new_graph_breaks>0" in text  # log text escaped as Markdown
    assert "| graph breaks | 2 | 4 | +2 |" in text
    assert len(text.splitlines()) <= 40


def test_diff_page_links_resolve(gb):
    assert broken_links(gb[0] / "out") == []


def test_a_trace_diffed_with_itself_is_empty(tmp_path):
    result = run(GB_BASE, GB_BASE, "-o", tmp_path / "out", "--fail-on", "new_graph_breaks>0,new_recompiles>0,new_failures>0,cache_miss_delta!=0")
    assert result.exit_code == 0, result.output
    data = read(tmp_path / "out")
    c = data["comparison"]
    assert c["graph_breaks"] == {"new": [], "gone": [], "changed": [], "moved": []}
    assert c["failures"] == {"new": [], "fixed": []} and c["graph_op_counts"] == []
    assert all(f["presence"] == "both" and not f["new_recompile_reasons"] for f in c["frames"])
    # every gate is there (from its declaration), and nothing changed: a ratio of 1, every count 0
    assert data["metrics"] == {gate.name: 1.0 if gate.unit == "ratio" else 0 for gate in DIFF_GATES}
    assert not data["torch_versions_differ"] and data["notes"] == []
    assert "No graph break, recompile, failure" in (tmp_path / "out" / "index.html").read_text()
    validate(data)


# ------------------------------------------------------------------------------------------------
# report folders


def test_report_folder_is_read_through_its_summary(tmp_path, report_base):
    result = run(report_base, GB_EXTRA, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    [extra] = read(tmp_path / "out")["comparison"]["graph_breaks"]["new"]
    assert extra["user_location"].endswith("gb_program.py:30")


def test_report_folder_without_summary_json_is_refused(tmp_path, report_base):
    old = tmp_path / "tlparse_report"
    shutil.copytree(report_base, old)
    (old / "summary.json").unlink()  # as tlparse (Rust) writes it
    result = run(old, GB_EXTRA, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert "without summary.json" in result.stderr and "point at the trace instead" in result.stderr
    assert not (tmp_path / "out").exists()


def test_different_torch_versions_are_diffed_with_a_warning(tmp_path, report_base):
    other = tmp_path / "other"
    shutil.copytree(report_base, other)
    summary = json.loads((other / "summary.json").read_text())
    summary["torch_version"] = "2.99.0"
    (other / "summary.json").write_text(json.dumps(summary))
    result = run(report_base, other, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "warning:" in result.stderr and "2.99.0" in result.stderr
    data = read(tmp_path / "out")
    assert data["torch_versions_differ"] and data["new"]["torch_version"] == "2.99.0"
    assert "different torch versions" in (tmp_path / "out" / "index.html").read_text()
    validate(data)


# ------------------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize("expression", ["new_graph_breaks>>0", "bogus>0", "new_graph_breaks>", "", "compile_time_ratio>1.2,"])
def test_malformed_fail_on_is_a_usage_error_listing_names(tmp_path, expression):
    result = run(GB_BASE, GB_BASE, "-o", tmp_path / "out", "--fail-on", expression)
    assert result.exit_code == 2
    for gate in DIFF_GATES:
        assert gate.name in result.stderr
    assert not (tmp_path / "out").exists()


def test_missing_input_is_exit_2(tmp_path):
    result = run(tmp_path / "nope", GB_BASE, "-o", tmp_path / "out")
    assert result.exit_code == 2 and "BASE" in result.stderr and "does not exist" in result.stderr


def test_existing_output_needs_overwrite(tmp_path):
    out = tmp_path / "out"
    assert run(GB_BASE, GB_BASE, "-o", out).exit_code == 0
    assert run(GB_BASE, GB_BASE, "-o", out).exit_code == 2
    assert run(GB_BASE, GB_BASE, "-o", out, "--overwrite").exit_code == 0


# ------------------------------------------------------------------------------------------------
# multi-rank


def test_multi_rank_folders_are_compared_rank_by_rank(tmp_path):
    folder = TRACES / "collectives_gloo_fail"
    result = run(folder, folder, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    data = read(tmp_path / "out")
    assert data["comparison"] is None and data["base"]["ranks"] == 2
    assert [r["folder"] for r in data["ranks"]] == ["rank_0", "rank_1"]
    assert all(r["comparison"] is not None for r in data["ranks"])
    page = (tmp_path / "out" / "index.html").read_text()
    assert 'id="rank_0"' in page and 'id="rank_1-graph-breaks"' in page
    assert broken_links(tmp_path / "out") == []
    validate(data)


def test_a_rank_on_one_side_only_and_mixed_inputs():
    rank = {"schema_version": "1.0", "torch_version": None, "totals": {}, "compiles": []}
    base = {"schema_version": "1.0", "ranks": [{"rank": 0, "folder": "rank_0", "error": None, "summary": rank}]}
    new = {"schema_version": "1.0", "ranks": [*base["ranks"], {"rank": 1, "folder": "rank_1", "error": None, "summary": rank}]}
    data = as_data(compare.diff(base, new))
    assert [r["note"] for r in data["ranks"]] == [None, "only in NEW"]
    validate(data)
    with pytest.raises(ValueError, match="several ranks"):
        compare.diff(base, rank)


# ------------------------------------------------------------------------------------------------
# pure parts


def test_unknown_values_are_null():
    base = {"schema_version": "1.1", "totals": {"compile_time_s": None, "cache": {}}, "compiles": [
        {"id": "[0/0]", "frame": "f", "user_location": "a.py:1", "compile_time_s": {"total": None}, "graph_op_count": None}]}
    new = {"schema_version": "1.1", "totals": {"compile_time_s": 2.0, "cache": {}}, "compiles": [
        {"id": "[0/0]", "frame": "f", "user_location": "a.py:1", "compile_time_s": {"total": 2.0}, "graph_op_count": 3}]}
    result = compare.diff(base, new)
    data = as_data(result)
    assert data["comparison"]["totals"]["compile_time_s"] == {"base": None, "new": 2.0, "delta": None, "ratio": None}
    assert data["metrics"]["compile_time_ratio"] is None and data["unchecked"]["compile_time_ratio"]
    assert data["metrics"]["cache_miss_delta"] == 0  # totals come from the compiles, and neither lists a cache lookup
    validate(data)
    text = markdown(result, "out/index.html")
    assert "unknown" in text


def test_new_and_fixed_failures_pair_in_order():
    def c(i, failure=None):
        return {"id": f"[0/{i}]", "frame": "f", "user_location": "a.py:1", "failure": failure, "compile_time_s": {"total": 1.0}}

    boom = {"type": "RuntimeError", "reason": "boom"}
    data = as_data(compare.diff({"schema_version": "1.1", "compiles": [c(0, boom), c(1)]},
                                {"schema_version": "1.1", "compiles": [c(0), c(1, boom), c(2, boom)]}))
    failures = data["comparison"]["failures"]
    assert [f["new"]["id"] for f in failures["new"]] == ["[0/1]", "[0/2]"]
    assert [f["base"]["id"] for f in failures["fixed"]] == ["[0/0]"]
    assert data["metrics"]["new_failures"] == 2
    assert data["metrics"]["new_recompiles"] == 1  # [0/1] on both sides, [0/2] only in NEW


def test_gates_parse_and_evaluate():
    names = ["a", "b", "c"]
    conditions = parse_conditions(" a > 0 , b>=1.5,c!=-2e0", names)
    assert conditions == [Condition("a", ">", 0), Condition("b", ">=", 1.5), Condition("c", "!=", -2.0)]
    assert [str(c) for c in conditions] == ["a>0", "b>=1.5", "c!=-2"]
    assert [v.condition.name for v in violated(conditions, {"a": 1, "b": 1.0, "c": -2})] == ["a"]
    assert violated(conditions, {"a": 0, "b": None, "c": -2}) == []
    assert unknown(conditions, {"a": 0, "b": None, "c": -2}) == [conditions[1]]
    for op, holds in [("<", False), ("<=", True), ("==", True), (">", False), (">=", True), ("!=", False)]:
        assert bool(violated(parse_conditions(f"a{op}1", names), {"a": 1})) is holds
    for bad in ["", "a", "a=1", "a>x", "d>1", "a>1,,b<2", "a>nan", "a>inf"]:
        with pytest.raises(ConditionError, match="valid names: a, b, c"):
            parse_conditions(bad, names)


# ------------------------------------------------------------------------------------------------
# pairing by code identity, on real traces of one program before and after a pull request's edits
# (the edit_* harness scenarios: tlparse_py/harness/scenarios/edit_program.py)

EDIT_BASE = TRACES / "edit_base"


def edit_diff(tmp_path, variant, *args):
    out = tmp_path / variant
    result = run(EDIT_BASE, TRACES / f"edit_{variant}", "-o", out, "--fail-on", "new_graph_breaks>0,new_recompiles>0", *args)
    return result, read(out)


def break_lines(scenario):
    """Independently of the tool: the user code lines where the log says the graph broke."""
    text = "".join(open_log_text(p) for p in sorted((TRACES / scenario).glob("dedicated_log*")))
    return sorted({int(m) for m in re.findall(r"Graph break in user code at \S+/model\.py:(\d+)", text)})


def open_log_text(path):
    import gzip

    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8", "replace")


def test_lines_added_above_the_model_change_nothing(tmp_path):
    result, data = edit_diff(tmp_path, "shifted")
    assert result.exit_code == 0, result.output
    assert data["metrics"]["new_graph_breaks"] == 0 and data["metrics"]["new_recompiles"] == 0
    (base_line,), (new_line,) = break_lines("edit_base"), break_lines("edit_shifted")
    assert new_line == base_line + 4  # the edit added four lines above the model
    breaks = data["comparison"]["graph_breaks"]
    assert breaks["new"] == [] and breaks["gone"] == [] and breaks["changed"] == []
    assert [g["moved"] for g in breaks["moved"]] == [{"from": base_line, "to": new_line}]
    frames = data["comparison"]["frames"]
    assert {f["pairing"] for f in frames} == {"moved"} and all(f["moved"]["to"] - f["moved"]["from"] == 4 for f in frames)
    assert "moved (line" in (tmp_path / "shifted" / "index.html").read_text()
    validate(data)


def test_a_renamed_function_is_not_a_new_recompile(tmp_path):
    result, data = edit_diff(tmp_path, "renamed")
    assert result.exit_code == 0, result.output
    assert data["metrics"] == {**data["metrics"], "new_graph_breaks": 0, "new_recompiles": 0}
    renamed = [(f["base_frame"], f["frame"]) for f in data["comparison"]["frames"] if f["pairing"] == "renamed"]
    assert ("prepare", "prepare_input") in renamed
    assert all(f["presence"] == "both" for f in data["comparison"]["frames"])


def test_a_removed_graph_break_is_gone(tmp_path):
    result, data = edit_diff(tmp_path, "fixed")
    assert result.exit_code == 0, result.output
    breaks = data["comparison"]["graph_breaks"]
    assert breaks["new"] == [] and [g["user_location"].rsplit("/", 1)[1] for g in breaks["gone"]] == [f"model.py:{break_lines('edit_base')[0]}"]
    assert break_lines("edit_fixed") == []  # the log of the fixed program has no graph break at all


def test_a_real_new_graph_break_is_new_and_explained(tmp_path):
    result, data = edit_diff(tmp_path, "newbreak")
    assert result.exit_code == 3
    [new] = data["comparison"]["graph_breaks"]["new"]
    [added] = sorted(set(break_lines("edit_newbreak")) - set(break_lines("edit_base")))  # the prepare break stays where it was
    assert new["user_location"].endswith(f"model.py:{added}")
    assert new["registry_id"] == "GB0025" and new["hints"] and new["doc_url"].endswith("/gb0025.html")
    line = next(line for line in result.stderr.splitlines() if line.startswith("--fail-on new_graph_breaks"))
    assert "new graph break GB0025: Call to `torch._dynamo.graph_break()`" in line and "Hint: " in line
    validate(data)


def test_unrelated_programs_are_unpaired_and_it_says_so(tmp_path):
    result = run(TRACES / "graph_break", TRACES / "training", "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    data = read(tmp_path / "out")
    assert all(f["presence"] != "both" for f in data["comparison"]["frames"])
    assert any("different programs" in note for note in data["notes"]) and "different programs" in result.stderr


def test_a_pair_naming_no_file_is_refused_listing_the_files(tmp_path):
    result = run(EDIT_BASE, TRACES / "edit_shifted", "-o", tmp_path / "out", "--pair", "nope.py=model.py")
    assert result.exit_code == 2 and "nope.py is not a file of BASE" in result.stderr and "BASE has model.py" in result.stderr
    assert not (tmp_path / "out").exists()


def test_report_url_must_be_http(tmp_path):
    result = run(EDIT_BASE, TRACES / "edit_shifted", "-o", tmp_path / "out", "--report-url", "javascript:alert(1)")
    assert result.exit_code == 2 and "--report-url" in result.stderr
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------------
# over ranks: one combine rule


def test_a_multi_rank_diff_shows_the_figures_its_reports_show(tmp_path):
    """The diff's totals over ranks are combined as the report's own summary.md combines them
    (failures summed, frames per rank, compile time on the slowest rank): never summed by hand."""
    from tlparse_py.analysis.totals import columns

    report = tmp_path / "ranks"
    assert CliRunner().invoke(main, [str(TRACES / "distributed"), "-o", str(report), "--no-browser"]).exit_code == 0
    result = run(report, report, "-o", tmp_path / "out", "--markdown", tmp_path / "diff.md")
    assert result.exit_code == 0, result.output
    summary_md = (report / "summary.md").read_text()
    header = next(line for line in summary_md.splitlines() if line.startswith("| rank |"))
    all_row = next(line for line in summary_md.splitlines() if line.startswith("| **all** |"))
    cells = dict(zip([h.strip() for h in header.strip("|").split("|")], [c.strip() for c in all_row.strip("|").split("|")]))
    expected = {}
    for column, totals in columns():
        parts = cells[column].split(" / ") if len(totals) > 1 else [cells[column]]
        expected.update({t.label: part for t, part in zip(totals, parts, strict=True)})
    diff_md = (tmp_path / "diff.md").read_text()
    for label, shown in expected.items():
        assert f"| {label} | {shown} | {shown} | ±0 |" in diff_md, (label, shown)
    data = read(tmp_path / "out")
    rank_times = [r["comparison"]["totals"]["compile_time_s"]["base"] for r in data["ranks"]]
    assert data["totals"]["compile_time_s"]["base"] == max(rank_times)  # the slowest rank, not the sum
    assert data["totals"]["compiles"]["base"] == max(r["comparison"]["totals"]["compiles"]["base"] for r in data["ranks"])
    validate(data)


# ------------------------------------------------------------------------------------------------
# a forward that no longer compiles (skip_base → skip_nan: a NaN check inside a loop makes torch
# skip the whole frame): a regression, not a failure and not a saving

SKIP_BASE, SKIP_NAN = TRACES / "skip_base", TRACES / "skip_nan"


def raw_metrics(folder: Path, kind: str = "compilation_metrics") -> list[dict]:
    """Independently of the tool: every `kind` record of the folder's log."""
    return envelopes_of(folder, kind)


@pytest.fixture(scope="module")
def skipped(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("skip")
    result = run(SKIP_BASE, SKIP_NAN, "-o", tmp / "out", "--fail-on", "new_failures>0", "--fail-on", "new_skipped>0",
                 "--fail-on", "compile_time_ratio>1.25,compile_time_ratio<0.8", "--markdown", tmp / "diff.md")
    return tmp, result


def test_the_raw_logs_hold_a_forward_compiled_then_skipped():
    base, new = raw_metrics(SKIP_BASE), raw_metrics(SKIP_NAN)
    assert [(m["co_name"], m.get("fail_type")) for m in base] == [("forward", None)]
    [forward] = new
    assert forward["co_name"] == "forward" and forward["fail_type"] is not None
    assert "Skipping the frame and falling back to eager" in forward["fail_reason"]


def test_a_newly_skipped_forward_is_a_regression_of_its_own(skipped):
    tmp, result = skipped
    assert result.exit_code == 3, result.output
    data = read(tmp / "out")
    forward, [backward] = raw_metrics(SKIP_BASE)[0], raw_metrics(SKIP_BASE, "bwd_compilation_metrics")
    [eager] = data["comparison"]["no_longer_compiled"]
    assert eager["frame"] == "forward" and eager["outcome"] == "skipped"
    assert eager["base"]["status"] != "skipped" and eager["new"]["status"] == "skipped"
    assert "Skipping the frame" in eager["reason"]
    lost = forward["entire_frame_compile_time_s"] + backward["inductor_compile_time_s"]  # its forward and lazy backward
    assert eager["lost_compile_time_s"] == pytest.approx(lost, abs=1e-6)
    assert data["metrics"]["new_skipped"] == 1 and data["metrics"]["new_failures"] == 0
    assert data["comparison"]["failures"] == {"new": [], "fixed": []}
    gates = {line.split(":")[0]: line for line in result.stderr.splitlines() if line.startswith("--fail-on")}
    assert "--fail-on new_skipped>0" in gates and "--fail-on new_failures>0" not in gates
    assert "forward [0/0] at " in gates["--fail-on new_skipped>0"] and "no longer compiled: runs eagerly" in gates["--fail-on new_skipped>0"]
    validate(data)


def test_the_lost_compile_time_is_never_a_saving(skipped):
    tmp, result = skipped
    data = read(tmp / "out")
    time = data["comparison"]["time"]
    assert time["no_longer_compiled"] == 1 and time["ratio"] is None and not time["comparable"]
    assert data["metrics"]["compile_time_ratio"] is None
    [frame] = [f for f in data["comparison"]["frames"] if f["frame"] == "forward"]
    assert frame["regression"] == "no longer compiled: runs eagerly" and frame["compile_time_s"]["ratio"] is None
    page = (tmp / "out" / "index.html").read_text()
    section = page[page.index('id="no-longer-compiled"'):page.index('id="recompiles"')]
    assert "no longer compiled: runs eagerly (skipped)" in section and "forward" in section
    timing = page[page.index('id="compile-time"'):page.index('id="cache"')]
    assert 'class="added"' not in timing  # nothing in green: a frame that stopped compiling saved nothing
    markdown_text = (tmp / "diff.md").read_text()
    assert "No longer compiled: runs eagerly (1)" in markdown_text and "compile time ratio not checked" in markdown_text
    assert f"base-only compile work {format_seconds(time['base_only']['seconds'])}" in markdown_text  # the lost time: its own figure
    assert time["base_only"]["compiles"] == 1 and time["base_only"]["seconds"] == frame["pairs"][0]["compile_time_s"]["base"]


def test_report_and_diff_use_the_same_words_for_a_skipped_frame(tmp_path):
    """The report of NEW counts the skipped forward as skipped, not failed, as the diff does."""
    summary = tlparse_py.analyze(SKIP_NAN).to_dict()
    assert summary["totals"]["failed"] == 0 and summary["totals"]["skipped"] == 1


def test_the_readme_table_of_diff_gates_is_their_declarations():
    """README and `diff --help` say what DIFF_GATES declare: a gate added, renamed or reworded there shows here."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = readme.split("<!-- diff-gates:start -->", 1)[1].split("<!-- diff-gates:end -->", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.strip().splitlines()[2:]]
    assert rows == [[f"`{g.name}`", g.description, f"as `{g.total}`"] for g in DIFF_GATES]
    help_text = " ".join(CliRunner().invoke(main, ["diff", "--help"], terminal_width=10_000).output.split())
    for gate in DIFF_GATES:
        assert f"{gate.name} ({' '.join(gate.description.split())})" in help_text


def test_a_summary_without_cache_results_never_gives_a_time_ratio(tmp_path, report_base):
    """An older summary.json whose compiles say nothing of the cache: the times cannot be compared
    (a warm run may hide behind it), so the ratio is unknown and the gate says why."""
    old = tmp_path / "old"
    shutil.copytree(report_base, old)
    summary = json.loads((old / "summary.json").read_text())
    for compile_ in summary["compiles"]:
        del compile_["cache"]
    (old / "summary.json").write_text(json.dumps(summary))
    result = run(old, report_base, "-o", tmp_path / "out", "--fail-on", "compile_time_ratio>1.25,compile_time_ratio<0.8")
    assert result.exit_code == 0, result.output
    data = read(tmp_path / "out")
    assert data["metrics"]["compile_time_ratio"] is None and data["comparison"]["time"]["ratio"] is None
    assert "records no cache results" in data["unchecked"]["compile_time_ratio"]
    assert result.stderr.count("not checked: a side's summary.json records no cache results") == 2
    validate(data)


def test_a_frame_newly_at_the_recompile_limit_runs_eagerly_and_is_no_failure(tmp_path):
    """NEW is the recompile_limit trace; BASE is the same run before its frame reached the limit
    (the compile over the limit taken out). The frame runs eagerly from there: new_skipped, not a failure."""
    report = tmp_path / "limit"
    tlparse_py.build(TRACES / "recompile_limit", report)
    new = json.loads((report / "summary.json").read_text())
    over = [c for c in new["compiles"] if c["failure"] and "recompile limit" in c["failure"]["reason"].lower()]
    assert len(over) == 1  # the log's compile over the limit
    base = {**new, "compiles": [c for c in new["compiles"] if c is not over[0]]}
    data = as_data(compare.diff(base, new))
    [eager] = data["comparison"]["no_longer_compiled"]
    assert eager["outcome"] == "recompile limit" and eager["new"]["id"] == over[0]["id"] and eager["base"] is None
    assert data["metrics"]["new_skipped"] == 1 and data["metrics"]["new_failures"] == 0
    validate(data)


def test_a_frame_skipped_in_both_runs_is_no_regression():
    summary = tlparse_py.analyze(TRACES / "skipped_frame").to_dict()
    assert summary["totals"]["skipped"] >= 1
    data = as_data(compare.diff(summary, summary))
    assert data["comparison"]["no_longer_compiled"] == [] and data["metrics"]["new_skipped"] == 0
    assert data["comparison"]["time"]["comparable"]
