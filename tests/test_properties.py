"""Properties over generated runs: what the tool reports of a whole synthetic TORCH_TRACE run equals what
the independent oracle (tests/oracle.py) counts from the raw records.

The runs come from tests/run_strategies.py (processes and their children, frames, restarts,
recompiles, retries, failures, skipped frames, the recompile limit, graph breaks, cache lookups,
reset() generations, compiled autograd, killed and cut logs). For each run the command line writes a
report (with `--fail-on`), and these must equal the oracle:

- summary.json: every total, each compile in log order (id, generation, process, frame, status,
  cause, attempts, graph breaks, compile time), and the processes (number, pid, log, compiles);
- index.html: the total cards, the compiles table (label, status, frame, in order), the graph-break
  section;
- summary.md: the totals table;
- `--fail-on`: exit 3 exactly when a condition holds on the oracle's totals, each held condition
  named, an unknown compile time reported as not checked;
- `tlparse_py.analyze()`: its `to_dict()` and its typed `compiles()`.

CI runs 100 examples of the main property and 15 of each other (the whole file takes about half a
minute). To search harder, run many more:

    TLPARSE_PY_PROPERTY_EXAMPLES=10000 python -m pytest -q tests/test_properties.py

A disagreement found this way is shrunk by Hypothesis to a small run; once the oracle is checked
against the glossary (docs/glossary.md) and the README's totals table, it is kept below as a
hand-written regression test.

Four readings of the glossary that earlier versions got wrong are each forced by a property of their
own and pinned by small hand-written logs: reset() starts a new generation for every later compile of
its process; compiles are listed in log order; the compile over the recompile limit is no recompile;
a spawned child's log belongs to its parent's run however quiet the parent was.
"""

from __future__ import annotations

import html
import math
import os
import re
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tlparse_py
from conftest import read_json
from logs import cid, line, metrics, start, write_log
from oracle import oracle
from run_strategies import LIMIT_REASON, Features, runs
from tlparse_py.cli import main
from tlparse_py.units import format_seconds  # how a time is shown: presentation, not a fact the oracle counts

EXAMPLES = int(os.environ.get("TLPARSE_PY_PROPERTY_EXAMPLES", "0"))
TOTALS = ("compiles", "frames", "graph_breaks", "torch_graph_breaks", "recompiles", "retries", "restarts", "failed", "skipped", "recompile_limit",
          "compile_time_s", "cache.hit", "cache.miss", "cache.bypass")
COMPILE_FIELDS = ("id", "generation", "process", "frame", "status", "cause", "attempts")
OPS = {">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
       "==": lambda a, b: a == b, "!=": lambda a, b: a != b}

MAIN = Features(resets=True, limits=True, late_children=True)


def examples(ci: int) -> Any:
    """At most `ci` examples (TLPARSE_PY_PROPERTY_EXAMPLES: more)."""
    return settings(max_examples=EXAMPLES or ci, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# -- reading what the tool wrote -----------------------------------------------------------------


def value_at(totals: dict[str, Any], name: str) -> Any:
    found: Any = totals
    for part in name.split("."):
        found = found[part]
    return found


def shown(value: int | float | None, seconds: bool) -> str:
    if value is None:
        return "unknown"
    return format_seconds(value) if seconds else str(value)


def compile_rows(compiles: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """summary.json's compiles (or the oracle's), the fields compared."""
    rows = []
    for c in compiles:
        row = {k: c.get(k, 0 if k == "process" else None) for k in COMPILE_FIELDS}
        breaks = c["graph_breaks"]
        row["graph_breaks"] = breaks if isinstance(breaks, int) else len(breaks)
        time = c["compile_time_s"]
        row["compile_time_s"] = time["total"] if isinstance(time, dict) else time
        rows.append(row)
    return rows


def assert_compiles_equal(got: list[dict[str, Any]], expected: list[dict[str, Any]], where: str) -> None:
    for row in [*got, *expected]:
        row["compile_time_s"] = None if row["compile_time_s"] is None else round(row["compile_time_s"], 6)
    assert got == expected, f"{where}: compiles differ from the oracle's"


def assert_totals_equal(got: dict[str, Any], expected: dict[str, Any], where: str) -> None:
    for name in TOTALS:
        value, truth = value_at(got, name), value_at(expected, name)
        if name == "compile_time_s" and value is not None and truth is not None:
            assert math.isclose(value, truth, abs_tol=2e-6), f"{where}: {name} is {value}, the oracle counts {truth}"
        else:
            assert value == truth, f"{where}: {name} is {value}, the oracle counts {truth}"


CARDS = (  # (total, how its card's label begins)
    ("compiles", "compile"), ("frames", "frame"), ("graph_breaks", "graph break"), ("torch_graph_breaks", "torch's graph break"),
    ("recompiles", "recompile"),
    ("retries", "retr"), ("restarts", "restart"), ("failed", "failed"), ("skipped", "skipped"),
    ("recompile_limit", "recompile limit"), ("compile_time_s", "compile time"), ("cache", "cache"),
)


def card_total(label: str) -> str | None:
    """The total a card shows, by its label's beginning (the longest that fits: "recompile limit hits" is not "recompiles")."""
    fits = [(begins, name) for name, begins in CARDS if label.startswith(begins)]
    return max(fits, key=lambda fit: len(fit[0]))[1] if fits else None


def check_index(page: str, truth: dict[str, Any]) -> None:
    cards_html = re.search(r'<ul class="cards">(.*?)</ul>', page, re.S)
    assert cards_html, "index.html has no total cards"
    cards = [(html.unescape(n), html.unescape(label)) for n, label in
             re.findall(r'<span class="n">(.*?)</span>(?:</a>)?<span class="t">(.*?)</span>', cards_html[1])]
    totals = truth["totals"]
    for name, _ in CARDS:
        mine = [n for n, label in cards if card_total(label) == name]
        assert len(mine) == 1, f"index.html: {len(mine)} cards for {name}: {cards}"
        if name == "cache":
            expected = " / ".join(str(totals["cache"][r]) for r in ("hit", "miss", "bypass"))
        else:
            expected = shown(totals[name], name == "compile_time_s")
        assert mine[0] == expected, f"index.html: the {name} card says {mine[0]}, the oracle counts {expected}"
    table = re.search(r'id="compiles-table".*?<tbody>(.*?)</tbody>', page, re.S)
    rows = re.findall(r'<tr><td[^>]*><a [^>]*>(.*?)</a>.*?<span class="status status-([a-z]+)"[^>]*>.*?</td><td>(.*?)</td>',
                      table[1] if table else "", re.S)
    got = [(html.unescape(label), status, html.unescape(re.sub(r"</?code>", "", frame))) for label, status, frame in rows]
    expected = [(c["id"] + (f" (generation {c['generation']})" if c["generation"] else ""), c["status"], c["frame"] or "")
                for c in truth["compiles"]]
    assert got == expected, "index.html: the compiles table differs from the oracle's compiles"
    section = re.search(r'<h2 id="graph-breaks">.*?(?=<h2 )', page, re.S)
    assert section, "index.html has no graph-break section"
    assert ("No graph breaks were logged." in section[0]) == (totals["graph_breaks"] == totals["torch_graph_breaks"] == 0)


MD_COLUMNS = {"compiles": "compiles", "frames": "frames", "graph breaks": "graph_breaks", "torch's graph breaks": "torch_graph_breaks",
              "recompiles": "recompiles",
              "retries": "retries", "restarts": "restarts", "failed": "failed", "skipped": "skipped",
              "recompile limit": "recompile_limit", "compile time": "compile_time_s", "cache hit / miss / bypass": "cache"}


def check_markdown(text: str, truth: dict[str, Any]) -> None:
    lines = text.splitlines()
    at = next(i for i, l in enumerate(lines) if l.startswith("| compiles |"))
    heads = [h.strip() for h in lines[at].strip("|").split("|")]
    cells = [c.strip().replace("\\", "") for c in lines[at + 2].strip("|").split("|")]
    assert set(heads) == set(MD_COLUMNS), f"summary.md totals columns: {heads}"
    totals = truth["totals"]
    for head, cell in zip(heads, cells):
        name = MD_COLUMNS[head]
        if name == "cache":
            expected = " / ".join(str(totals["cache"][r]) for r in ("hit", "miss", "bypass"))
        else:
            expected = shown(totals[name], name == "compile_time_s")
        assert cell == expected, f"summary.md: {head} is {cell}, the oracle counts {expected}"


def gates(conditions: list[tuple[str, str, int]], totals: dict[str, Any]) -> list[tuple[str, bool | None]]:
    """Each `--fail-on` condition as written, and whether it holds on the oracle's totals (None: unknown)."""
    out = []
    for name, op, delta in conditions:
        value = value_at(totals, name)
        if name == "compile_time_s":  # a threshold no sum of whole milliseconds can equal
            threshold: float = round((math.floor(value) if value is not None else 1) + delta + 0.2345, 4)
        else:
            threshold = max(value + delta, 0)
        text = f"{name}{op}{threshold}"
        out.append((text, None if value is None else OPS[op](value, threshold)))
    return out


conditions_strategy = st.lists(st.tuples(st.sampled_from(TOTALS), st.sampled_from(sorted(OPS)), st.sampled_from([-1, 0, 1])),
                               min_size=1, max_size=4)


def check_run(run: Any, conditions: list[tuple[str, str, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = run.write(Path(tmp) / "trace")
        truth = oracle(folder)
        expected_rows = compile_rows(truth["compiles"])
        checks = gates(conditions, truth["totals"])
        out = Path(tmp) / "report"
        result = CliRunner().invoke(main, [str(folder), "-o", str(out), "--no-browser", "--fail-on", ",".join(c for c, _ in checks)],
                                    catch_exceptions=False)
        held = [c for c, holds in checks if holds]
        assert result.exit_code == (3 if held else 0), f"exit {result.exit_code}, held on the oracle's totals: {held}\n{result.stderr}"
        for (name, _, _), (text, holds) in zip(conditions, checks):
            said = f"--fail-on {text}: {name} is " in result.stderr
            assert said == bool(holds), f"--fail-on {text} (holds on the oracle's totals: {holds})\n{result.stderr}"
            unknown = f"--fail-on {text}: unknown" in result.stderr
            assert unknown == (holds is None), f"--fail-on {text} (holds on the oracle's totals: {holds})\n{result.stderr}"

        summary = read_json(out / "summary.json")
        assert_totals_equal(summary["totals"], truth["totals"], "summary.json")
        assert summary["processes"] == truth["processes"], "summary.json: processes differ from the oracle's"
        assert_compiles_equal(compile_rows(summary["compiles"]), expected_rows, "summary.json")
        check_index((out / "index.html").read_text(encoding="utf-8"), truth)
        check_markdown((out / "summary.md").read_text(encoding="utf-8"), truth)

        analysis = tlparse_py.analyze(folder)
        data = analysis.to_dict()
        assert_totals_equal(data["totals"], truth["totals"], "analyze().to_dict()")
        assert_compiles_equal(compile_rows(data["compiles"]), compile_rows(truth["compiles"]), "analyze().to_dict()")
        typed = [(c.id, c.generation, c.process, c.status, c.cause, c.frame) for c in analysis.compiles()]
        assert typed == [(c["id"], c["generation"], c["process"], c["status"], c["cause"], c["frame"]) for c in truth["compiles"]]


# -- the properties -------------------------------------------------------------------------------


@examples(100)
@given(runs(MAIN), conditions_strategy)
def test_every_report_of_a_generated_run_agrees_with_the_oracle(run, conditions):
    check_run(run, conditions)


@examples(15)
@given(runs(replace(MAIN, resets=True, force=("reset",))), conditions_strategy)
def test_runs_with_reset_agree_with_the_oracle(run, conditions):
    """Two frames, torch._dynamo.reset(), three frames (then anything): generations and log order."""
    check_run(run, conditions)


@examples(15)
@given(runs(replace(MAIN, limits=True, force=("limit",))), conditions_strategy)
def test_runs_over_the_recompile_limit_agree_with_the_oracle(run, conditions):
    check_run(run, conditions)


@examples(15)
@given(runs(replace(MAIN, children=True, late_children=True, force=("late_child",))), conditions_strategy)
def test_runs_with_a_child_that_logged_after_its_parent_agree_with_the_oracle(run, conditions):
    check_run(run, conditions)


# -- the oracle on real logs ----------------------------------------------------------------------

TRACES = Path(__file__).resolve().parent / "fixtures" / "traces"
# fixtures whose logs are one run (a folder holding two runs, as `cache`, is outside the oracle's reach)
ONE_RUN = ("recompile", "recompile_limit", "graph_break", "skipped_frame", "retry_fullgraph", "reset_reuse", "processes",
           "compiled_autograd", "tensorify_restart", "failure", "killed_midcompile", "optimizer_step")


@pytest.mark.parametrize("scenario", ONE_RUN)
def test_the_oracle_and_the_tool_agree_on_the_real_traces(scenario):
    truth = oracle(TRACES / scenario)
    data = tlparse_py.analyze(TRACES / scenario).to_dict()
    assert_totals_equal(data["totals"], truth["totals"], scenario)
    assert_compiles_equal(compile_rows(data["compiles"]), compile_rows(truth["compiles"]), scenario)


def test_the_oracle_counts_what_the_glossary_says_of_real_traces():
    """Read by hand from the logs: the oracle is only useful if it is right."""
    counted = {s: oracle(TRACES / s) for s in ("recompile_limit", "retry_fullgraph", "skipped_frame", "processes", "optimizer_step",
                                               "graph_break")}
    limit = counted["recompile_limit"]
    assert [(c["id"], c["status"], c["cause"]) for c in limit["compiles"]] == [
        ("[0/0]", "ok", "first"), ("[0/1]", "ok", "recompile"), ("[0/2]", "limit", "recompile")]
    assert (limit["totals"]["recompiles"], limit["totals"]["recompile_limit"], limit["totals"]["failed"]) == (1, 1, 0)
    retry = counted["retry_fullgraph"]
    assert [(c["id"], c["status"], c["cause"], c["attempts"]) for c in retry["compiles"]] == [
        ("[0/0]", "error", "first", ["[0/0]"]), ("[0/1]", "break", "retry", ["[0/1]", "[0/1_1]"]),
        ("[1/0]", "ok", "first", ["[1/0]"])]
    assert {k: retry["totals"][k] for k in ("retries", "recompiles", "restarts", "failed", "graph_breaks", "frames")} == {
        "retries": 1, "recompiles": 0, "restarts": 1, "failed": 1, "graph_breaks": 1, "frames": 2}
    skipped = counted["skipped_frame"]
    assert [c["status"] for c in skipped["compiles"]] == ["break", "skipped"]
    assert (skipped["totals"]["skipped"], skipped["totals"]["failed"], skipped["totals"]["graph_breaks"]) == (1, 0, 2)
    processes = counted["processes"]
    assert [c["id"] for c in processes["compiles"]] == ["[0/0]", "[0/1]", "[p1:1/0]", "[p2:0/0]", "[p2:0/1]"]
    assert [(p["pid"], p["compiles"]) for p in processes["processes"]] == [(27786, 2), (27823, 1), (27830, 2)]
    assert processes["totals"]["frames"] == 3
    # torch's own graph_break() in optimizer.py, under the user's `step` and the optimizer's `wrapper`;
    # the user's own graph_break() (graph_break.py's helper) stays the user's
    optimizer = counted["optimizer_step"]
    assert [(c["id"], c["status"], c["graph_breaks"]) for c in optimizer["compiles"]] == [
        ("[0/0]", "break", 1), ("[1/0]", "break", 1), ("[2/0]", "ok", 0), ("[3/0]", "empty", 0)]
    assert (optimizer["totals"]["graph_breaks"], optimizer["totals"]["torch_graph_breaks"]) == (0, 2)
    assert (counted["graph_break"]["totals"]["graph_breaks"], counted["graph_break"]["totals"]["torch_graph_breaks"]) == (3, 0)


# -- disagreements the properties found, kept as hand-written logs ----------------------------------

TENSORIFY = "<class 'torch._dynamo.exc.TensorifyScalarRestartAnalysis'>"
ERRORS_LIMIT = LIMIT_REASON.format(limit="recompile_limit", n=1)


def one_log(tmp_path: Path, lines: list[str]) -> Path:
    folder = tmp_path / "trace"
    folder.mkdir()
    write_log(folder / "dedicated_log_torch_trace_a.log", lines)
    return folder


def test_a_restart_after_reset_belongs_to_its_own_generation_only(tmp_path):
    """[0/0] compiles in one attempt; torch._dynamo.reset(); [0/0] compiles again and restarts once
    ([0/0_1]). Each generation is its own compile with its own attempts: one restart in all. (The tool
    listed [0/0_1] under both generations: restarts 2, and the first compile's attempts [0/0], [0/0_1].)"""
    folder = one_log(tmp_path, [
        start(0, 0, 0, fn="f"), metrics(0, 0, 0, co_name="f"),
        start(0, 0, 0, fn="g"),
        line({"describe_source": {"describer_id": 0, "id": 0, "source": "L['x']"}, **cid(0, 0, 1)}),
        metrics(0, 0, 1, co_name="g", restart_reasons=[TENSORIFY]),
    ])
    truth = oracle(folder)
    assert [(c["generation"], c["attempts"], c["status"]) for c in truth["compiles"]] == [
        (0, ["[0/0]"], "ok"), (1, ["[0/0]", "[0/0_1]"], "restart")]
    assert truth["totals"]["restarts"] == 1
    data = tlparse_py.analyze(folder).to_dict()
    assert [(c["generation"], c["attempts"], c["status"]) for c in data["compiles"]] == [
        (0, ["[0/0]"], "ok"), (1, ["[0/0]", "[0/0_1]"], "restart")]
    assert data["totals"]["restarts"] == 1


# -- the readings earlier versions got wrong, each on a hand-written log -----------------------------

REASON = "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8"


def reasons_of(frame: int, compile: int, text: str = REASON) -> str:
    return line({"artifact": {"name": "recompile_reasons", "encoding": "json"}, **cid(frame, compile, 0)}, text)


def facts(folder: Path, in_order: bool = True) -> tuple[list[tuple[Any, ...]], dict[str, Any]]:
    """(id, generation, status, cause) of each compile the tool lists (sorted unless `in_order`: a
    test of generations alone leaves order to its own test), and its totals."""
    data = tlparse_py.analyze(folder).to_dict()
    compiles = [(c["id"], c["generation"], c["status"], c["cause"]) for c in data["compiles"]]
    return (compiles if in_order else sorted(compiles, key=lambda c: (c[1], c[0]))), data["totals"]


def test_after_reset_a_new_frame_id_is_in_the_new_generation(tmp_path):
    """[0/0]; reset(); [0/0] again (the reuse that shows the reset), then [1/0], an id never used before:
    it is compiled after the reset, so it is in generation 1 too (two frames in generation 1)."""
    folder = one_log(tmp_path, [start(0, 0, fn="f"), metrics(0, 0, co_name="f"),
                                start(0, 0, fn="g"), metrics(0, 0, co_name="g"), start(1, 0, fn="h"), metrics(1, 0, co_name="h")])
    expected = [("[0/0]", 0, "ok", "first"), ("[0/0]", 1, "ok", "first"), ("[1/0]", 1, "ok", "first")]
    assert [(c["id"], c["generation"], c["status"], c["cause"]) for c in oracle(folder)["compiles"]] == expected
    compiles, totals = facts(folder, in_order=False)
    assert compiles == expected and totals["frames"] == 3


def test_after_reset_the_compile_over_the_limit_is_in_the_new_generation(tmp_path):
    """[0/0], [0/1] over the recompile limit (no dynamo_start); reset(); the same again. The second
    limit compile, logged with no dynamo_start, is the new generation's: four compiles, two limits."""
    limit = ERRORS_LIMIT
    lines = [start(0, 0), metrics(0, 0), reasons_of(0, 1), metrics(0, 1, co_name=None, fail_type="Unsupported", fail_reason=limit)]
    folder = one_log(tmp_path, lines + lines)
    expected = [("[0/0]", 0, "ok", "first"), ("[0/1]", 0, "limit", "recompile"),
                ("[0/0]", 1, "ok", "first"), ("[0/1]", 1, "limit", "recompile")]
    truth = oracle(folder)
    assert [(c["id"], c["generation"], c["status"], c["cause"]) for c in truth["compiles"]] == expected
    compiles, totals = facts(folder, in_order=False)
    assert compiles == expected
    assert (totals["compiles"], totals["recompile_limit"], totals["recompiles"]) == (4, 2, 0)


def test_after_reset_recompile_reasons_logged_before_dynamo_start_are_the_new_generations(tmp_path):
    """[0/0], [0/1] (a guard failed); reset(); [0/0] fails, then [0/1] with its recompile reasons (logged,
    as torch does, before its dynamo_start). A guard failure was logged: [0/1] is a recompile, not a retry."""
    folder = one_log(tmp_path, [
        start(0, 0), metrics(0, 0), reasons_of(0, 1), start(0, 1), metrics(0, 1),
        start(0, 0), metrics(0, 0, fail_type="BackendCompilerFailed", fail_reason="backend='x' raised:\nRuntimeError: no"),
        reasons_of(0, 1), start(0, 1), metrics(0, 1),
    ])
    expected = [("[0/0]", 0, "ok", "first"), ("[0/1]", 0, "ok", "recompile"),
                ("[0/0]", 1, "error", "first"), ("[0/1]", 1, "ok", "recompile")]
    assert [(c["id"], c["generation"], c["status"], c["cause"]) for c in oracle(folder)["compiles"]] == expected
    compiles, totals = facts(folder, in_order=False)
    assert compiles == expected
    assert (totals["recompiles"], totals["retries"]) == (2, 0)


def test_compiles_are_listed_in_log_order_across_a_reset(tmp_path):
    """[0/0], [1/0]; reset(); [0/0]: summary.json lists them as logged, the reused id last."""
    folder = one_log(tmp_path, [start(0, 0, fn="f"), metrics(0, 0, co_name="f"), start(1, 0, fn="g"), metrics(1, 0, co_name="g"),
                                start(0, 0, fn="h"), metrics(0, 0, co_name="h")])
    expected = [("[0/0]", 0, "ok", "first"), ("[1/0]", 0, "ok", "first"), ("[0/0]", 1, "ok", "first")]
    assert [(c["id"], c["generation"], c["status"], c["cause"]) for c in oracle(folder)["compiles"]] == expected
    assert facts(folder)[0] == expected
