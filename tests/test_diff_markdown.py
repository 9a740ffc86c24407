"""The diff's Markdown tells what happened (issue 45 items 4 and 6), on real fixture diffs:

- every user code line is named relative to its run's root (the rule of summary.md, `analysis/roots.py`):
  in the gate failures (the `--fail-on` lines too), the new and gone graph breaks, the failed compiles,
  the frames no longer compiled, and on the page; the same runs in other folders give the same Markdown;
- it lists the graph breaks a change removed (its win), the failed compiles (exception type, message,
  user line), every gate not checked with why (and the `--fail-on` conditions on it that were not
  checked), and each side's program exit when a side's summary says it.

The fixtures were logged from /work/scenarios (the edit_* programs from /tmp/harness/cwd/main): diff.json
keeps those paths as logged, and every view names them from there.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import tlparse_py
from logs import envelopes_of, log_text
from test_diff import validate
from tlparse_py.analysis.comparison import diff
from tlparse_py.analysis.conditions import parse_conditions
from tlparse_py.analysis.totals import DIFF_GATES, check_diff
from tlparse_py.cli import main
from tlparse_py.diff.output import diff_json
from tlparse_py.diff.view import diff_page, markdown

TRACES = Path(__file__).resolve().parent / "fixtures" / "traces"
HINT = "Remove the `torch._dynamo.graph_break()` call."


def plain(text: str) -> str:
    """Markdown as it reads: the escapes `report.markdown.text` adds (`gb\\_program.py`) removed."""
    return text.replace("\\", "")


def cli_diff(tmp_path: Path, base: Path, new: Path, *options: str) -> tuple[Any, str, dict[str, Any]]:
    """`tlparse-py diff BASE NEW --markdown FILE ...`: its result, its Markdown (as it reads) and diff.json."""
    out, md = tmp_path / "out", tmp_path / "diff.md"
    result = CliRunner().invoke(main, ["diff", str(base), str(new), "-o", str(out), "--no-browser", "--markdown", str(md), *options],
                                catch_exceptions=False)
    return result, plain(md.read_text(encoding="utf-8")), json.loads((out / "diff.json").read_text(encoding="utf-8"))


def summary(scenario: str) -> dict[str, Any]:
    return tlparse_py.analyze(TRACES / scenario).to_dict()


def moved(data: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """The run as logged from another folder (torch names a guard's file without its leading slash too)."""
    return json.loads(json.dumps(data).replace(old, new).replace(old.lstrip("/"), new.lstrip("/")))


# ------------------------------------------------------------------------------------------------
# user paths relative to the common folder, everywhere


def test_a_gate_failure_names_the_break_as_the_tables_do(tmp_path):
    result, md, data = cli_diff(tmp_path, TRACES / "gb_base", TRACES / "gb_extra", "--fail-on", "new_graph_breaks>0")
    assert result.exit_code == 3, result.output
    [extra] = data["comparison"]["graph_breaks"]["new"]
    assert (extra["user_location"], extra["where"]) == ("/work/scenarios/gb_program.py:30", "gb_program.py:30")  # as logged, as named
    said = f"new graph break GB0025: Call to `torch._dynamo.graph_break()` at gb_program.py:30. Hint: {HINT}"
    assert f"- ❌ `new_graph_breaks>0`: new_graph_breaks = 1 ({said})" in md.splitlines()
    assert f"- {said}" in md.splitlines()
    assert f"--fail-on new_graph_breaks>0: new_graph_breaks = 1 ({said})" in result.stderr.splitlines()
    assert "/work/scenarios" not in md
    assert "/work/scenarios" not in (tmp_path / "out" / "index.html").read_text(encoding="utf-8")


def test_a_frame_no_longer_compiled_is_named_as_the_tables_do(tmp_path):
    result, md, data = cli_diff(tmp_path, TRACES / "skip_base", TRACES / "skip_nan", "--fail-on", "new_skipped>0")
    assert result.exit_code == 3, result.output
    [eager] = data["comparison"]["no_longer_compiled"]
    assert (eager["user_location"], eager["where"]) == ("/work/scenarios/skip_program.py:33", "skip_program.py:33")
    lines = md.splitlines()
    assert ("- ❌ `new_skipped>0`: new_skipped = 1 (forward [0/0] at skip_program.py:33: no longer compiled: runs eagerly "
            "(skipped: Data-dependent branching))") in lines
    assert "- `forward` [0/0] at skip_program.py:33: skipped: Data-dependent branching" in lines
    assert "/work/scenarios" not in md


def places(value: Any) -> Any:
    """The page's rows without torch's own text (a skip reason quotes the frame's file as torch logged it)."""
    if isinstance(value, dict):
        return {k: places(v) for k, v in value.items() if k not in ("reason", "reasons")}
    return [places(v) for v in value] if isinstance(value, list) else value


PAIRS = [("gb_base", "gb_extra"), ("gb_extra", "gb_base"), ("skip_base", "skip_nan"), ("retry_fullgraph", "failure"),
         ("edit_base", "edit_itembreak")]


@pytest.mark.parametrize("base, new", PAIRS)
def test_the_same_runs_in_other_folders_give_the_same_markdown_and_page(base, new):
    """Each run checked out elsewhere (another folder for each): every place is named the same."""
    b, n = summary(base), summary(new)
    root = "/tmp/harness/cwd/main/" if base.startswith("edit_") else "/work/scenarios/"
    there = moved(b, root, "/ci/runner/one/checkout/"), moved(n, root, "/home/someone/else/")
    assert json.dumps(there) != json.dumps((b, n))
    conditions = parse_conditions(",".join(f"{gate.name}>0" for gate in DIFF_GATES), [gate.name for gate in DIFF_GATES])

    def views(result):
        verdicts = check_diff(conditions, result.sections())
        page = diff_page(result, verdicts.failed, verdicts.unchecked)
        return markdown(result, "d/index.html", verdicts.failed, unchecked=verdicts.unchecked), places(page.sections), page.violations

    here_views, there_views = views(diff(b, n)), views(diff(*there))
    assert here_views == there_views
    assert root not in here_views[0]


# ------------------------------------------------------------------------------------------------
# what the Markdown tells


def test_the_graph_breaks_a_change_removed_are_listed(tmp_path):
    """edit_fixed is edit_base with its graph_break() call taken out: the win is listed, with how often BASE broke there."""
    result, md, data = cli_diff(tmp_path, TRACES / "edit_base", TRACES / "edit_fixed")
    assert result.exit_code == 0, result.output
    [gone] = data["comparison"]["graph_breaks"]["gone"]
    assert (gone["user_location"], gone["where"], gone["count"]["base"]) == ("/tmp/harness/cwd/main/model.py:10", "model.py:10", 4)
    [log] = (TRACES / "edit_base").glob("dedicated_log*")
    assert log_text(log).count('"name": "dynamo_graph_break_reason"') == 4  # the raw log: BASE logged 4 graph breaks, NEW none
    assert "**Gone graph breaks (1)** — [details](out/index.html#graph-breaks)" in md
    assert "- GB0025: Call to `torch._dynamo.graph_break()` at model.py:10 (4× in BASE)" in md.splitlines()
    assert "New graph breaks" not in md


def test_a_break_gone_and_one_new_are_both_listed(tmp_path):
    _, md, _ = cli_diff(tmp_path, TRACES / "gb_extra", TRACES / "gb_base")
    assert "- GB0025: Call to `torch._dynamo.graph_break()` at gb_program.py:30 (2× in BASE)" in md.splitlines()
    _, md, _ = cli_diff(tmp_path / "other", TRACES / "edit_base", TRACES / "edit_otherbreak")
    lines = md.splitlines()
    assert "- GB0025: Call to `torch._dynamo.graph_break()` at model.py:10 (4× in BASE)" in lines
    assert any(line.startswith("- new graph break GB0059: Failed to trace builtin operator at model.py:11.") for line in lines)


def test_failed_compiles_say_the_exception_its_message_and_the_user_line(tmp_path):
    """retry_fullgraph → failure: failure.py's three compiles fail (one raised by a backend, one
    fullgraph=True over a graph break, one suppressed); retry_fullgraph's fullgraph failure is fixed."""
    result, md, data = cli_diff(tmp_path, TRACES / "retry_fullgraph", TRACES / "failure", "--fail-on", "new_failures>0")
    assert result.exit_code == 3, result.output
    raw = {m["co_name"]: m for m in envelopes_of(TRACES / "failure", "compilation_metrics")}
    assert raw["fullgraph_failure"]["fail_type"] == "Unsupported" and raw["fullgraph_failure"]["co_firstlineno"] == 37
    assert (raw["fullgraph_failure"]["fail_user_frame_filename"], raw["fullgraph_failure"]["fail_user_frame_lineno"]) == (
        "/work/scenarios/failure.py", 40)
    assert raw["raised_failure"]["fail_reason"] == "backend='exploding_backend' raised:\nHarnessBackendError: harness: backend refuses graph with 4 nodes"
    [fullgraph] = [f for f in data["comparison"]["failures"]["new"] if f["frame"] == "fullgraph_failure"]
    assert (fullgraph["failed_at"], fullgraph["failed_where"], fullgraph["where"]) == ("/work/scenarios/failure.py:40", "failure.py:40", "failure.py:37")
    lines = md.splitlines()
    assert "**New failures (3)** — [details](out/index.html#failures)" in lines
    assert ("- `raised_failure` [0/0] at failure.py:32: `BackendCompilerFailed`: backend='exploding_backend' raised: "
            "HarnessBackendError: harness: backend refuses graph with 4 nodes") in lines
    assert "- `fullgraph_failure` [1/0] at failure.py:37: `Unsupported`: Call to `torch._dynamo.graph_break()` (failed at failure.py:40)" in lines
    assert "**Fixed failures (1)** — [details](out/index.html#failures)" in lines
    assert "- `f` [0/0] at retry_fullgraph.py:15: `Unsupported`: Call to `torch._dynamo.graph_break()` (failed at retry_fullgraph.py:17)" in lines
    gate = next(line for line in result.stderr.splitlines() if line.startswith("--fail-on new_failures>0"))
    assert "fullgraph_failure [1/0] at failure.py:37: Unsupported: Call to `torch._dynamo.graph_break()`" in gate
    assert "/work/scenarios" not in md and len(lines) <= 60
    page = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert "at failure.py:40" in page and "/work/scenarios/failure.py" not in page
    validate(data)


def test_over_ranks_each_line_names_its_rank(tmp_path):
    """torchrun_ddp → torchrun_rank_fails: rank 1's forward now fails (a print() in it under fullgraph)."""
    result, md, data = cli_diff(tmp_path, TRACES / "torchrun_ddp", TRACES / "torchrun_rank_fails", "--fail-on", "new_failures>0")
    assert result.exit_code == 3, result.output
    [(folder, failure)] = [(r["folder"], f) for r in data["ranks"] for f in r["comparison"]["failures"]["new"]]
    assert (folder, failure["user_location"], failure["failed_at"]) == (
        "rank_1", "/work/scenarios/torchrun_job.py:68", "/work/scenarios/torchrun_job.py:71")
    said = "forward [0/0] at torchrun_job.py:68: Unsupported: Failed to trace builtin operator"
    assert f"- ❌ `new_failures>0`: new_failures = 1 (rank_1: {said})" in md.splitlines()
    assert ("- rank_1: `forward` [0/0] at torchrun_job.py:68: `Unsupported`: Failed to trace builtin operator "
            "(failed at torchrun_job.py:71)") in md.splitlines()
    assert "/work/scenarios" not in md


def test_every_gate_not_checked_says_why_with_its_conditions(tmp_path):
    result, md, data = cli_diff(tmp_path, TRACES / "skip_base", TRACES / "skip_nan",
                                "--fail-on", "compile_time_ratio>1.25,compile_time_ratio<0.8,new_graph_breaks>5")
    assert result.exit_code == 0, result.output  # the ratio not checked passes without a verdict: CI must read why
    why = data["unchecked"]["compile_time_ratio"]
    assert why == "every compile the runs share is one NEW no longer compiles: no time is left to compare"
    assert list(data["unchecked"]) == ["compile_time_ratio"]
    lines = md.splitlines()
    assert f"- ⚠️ compile time ratio not checked (`compile_time_ratio>1.25`, `compile_time_ratio<0.8` not checked): {why}" in lines
    gates = next(line for line in lines if line.startswith("**Gates:**"))
    assert " · compile time ratio not checked · " in gates and why not in gates  # said once, under the gates line
    page = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert "<code>compile_time_ratio&gt;1.25</code>: not checked: every compile the runs share" in page


def test_a_gate_made_unchecked_by_the_cache_says_why():
    """recompile, its biggest compile's cache result flipped in NEW (as test_diff_metamorphic does): the
    pairs left comparable are under half the paired time, so the ratio is not checked, and says why."""
    base = summary("recompile")
    new = copy.deepcopy(base)
    biggest = max((c for c in new["compiles"] if c["cache"]), key=lambda c: c["compile_time_s"]["total"])
    biggest["cache"] = [{**lookup, "result": "hit" if lookup["result"] == "miss" else "miss"} for lookup in biggest["cache"]]
    result = diff(base, new)
    why = result.unchecked["compile_time_ratio"]
    assert why.startswith("cache states differ: ") and result.metrics["compile_time_ratio"] is None
    lines = plain(markdown(result, "d/index.html")).splitlines()
    assert f"- ⚠️ compile time ratio not checked: {why}" in lines


def test_a_diff_where_every_gate_is_known_lists_none_unchecked(tmp_path):
    _, md, data = cli_diff(tmp_path, TRACES / "gb_base", TRACES / "gb_extra")
    assert data["unchecked"] == {} and "not checked" not in md


# ------------------------------------------------------------------------------------------------
# the program exit, under `tlparse-py run`


KILLED = {"command": "python train.py --steps 2", "exit_code": None, "signal": "SIGKILL"}
EXITED_0 = {"command": "python train.py --steps 2", "exit_code": 0, "signal": None}


def test_each_side_s_program_exit_heads_the_markdown(tmp_path):
    """Two report folders whose summary.json say how the program ended (as `run` writes them)."""
    folders = []
    for scenario, program in (("gb_base", EXITED_0), ("gb_extra", KILLED)):
        folder = tmp_path / scenario
        tlparse_py.build(TRACES / scenario, folder)
        written = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        (folder / "summary.json").write_text(json.dumps({**written, "program": program}, indent=2), encoding="utf-8")
        folders.append(folder)
    result, md, data = cli_diff(tmp_path / "diff", *folders)
    assert result.exit_code == 0, result.output
    assert (data["base"]["program"], data["new"]["program"]) == (EXITED_0, KILLED)
    validate(data)
    assert md.splitlines()[2] == "BASE: the program exited with 0 · **NEW: the program was killed by SIGKILL**"
    page = (tmp_path / "diff" / "out" / "index.html").read_text(encoding="utf-8")
    assert '<p class="warning program-exit"><strong>NEW: the program was killed by SIGKILL</strong>: <code>python train.py --steps 2</code>' in page


def test_a_side_without_a_program_exit_says_it_is_unknown():
    base, new = summary("gb_base"), {**summary("gb_extra"), "program": {**EXITED_0, "exit_code": 1}}
    result = diff(base, new)
    assert json.loads(diff_json(result))["base"]["program"] is None
    assert plain(markdown(result, "d/index.html")).splitlines()[2] == "BASE: how the program ended is unknown · **NEW: the program exited with 1**"


def test_no_program_exit_is_said_when_neither_side_knows_it():
    md = markdown(diff(summary("gb_base"), summary("gb_extra")), "d/index.html")
    assert "the program" not in md and md.splitlines()[2].startswith("| ")
