"""Issue 44 items 4 and 5: a failed export is reported as failed, from the evidence its log holds, and
every export report names the torch that wrote the log.

`export_data_dependent` (a user's program: one export that succeeds, then one that fails on
`if h.mean() > 0:`) logs no exception: only an unbacked symbol created at that line and the graph
traced until the failure (`make_fx_fail_partial`). Every expected value is read here from the raw log
(test_new_scenarios' reader, not tlparse_py's) and from the scenario's source; the report's
summary.json, summary.md and index must say the same.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import tlparse_py
from conftest import TRACES, read_json
from test_new_scenarios import Rec, artifacts, kind, logs, parse, read_text
from test_summary import validate
from test_truth_round3 import run, text_of
from tlparse_py.harness.registry import SCENARIO_DIR
from tlparse_py.notebook import summary_html

EXPORT_DIR = "/torch/export/"
TRUTH_VALUE = "return (args[0] != 0).item()"  # how torch asks a tensor's truth value under tracing (aten.is_nonzero)


def strings(recs: list[Rec]) -> dict[int, str]:
    return {r.body[1]: r.body[0] for r in kind(recs, "str")}


def export_caller(stack: list[dict], files: dict[int, str]) -> str:
    """`file:line` of the frame that called into torch.export."""
    entry = next(i for i, f in enumerate(stack) if EXPORT_DIR in files[f["filename"]])
    return f"{files[stack[entry - 1]['filename']]}:{stack[entry - 1]['line']}"


def source_line(scenario: str, text: str) -> int:
    """The line of the scenario's program that starts with `text` (indented), counted from 1."""
    lines = (SCENARIO_DIR / f"{scenario}.py").read_text().splitlines()
    (found,) = [i + 1 for i, line in enumerate(lines) if line.lstrip().startswith(text)]
    return found


def unescaped(markdown: str) -> str:
    """summary.md as it reads: Markdown's backslash escapes resolved."""
    return re.sub(r"\\(.)", r"\1", markdown)


def rewrite(log: Path, target: Path, change) -> Path:
    """The log with some records' envelopes changed, or dropped with their payload (`change` returns None)."""
    out, dropping = [], False
    for line in log.read_text().splitlines():
        if line.startswith("\t"):
            if not dropping:
                out.append(line)
            continue
        head, _, body = line.partition("] ")
        envelope = change(json.loads(body))
        dropping = envelope is None
        if not dropping:
            out.append(f"{head}] {json.dumps(envelope)}")
    target.write_text("\n".join(out) + "\n")
    return target


# -- 4. the failure, its line and its partial graph ---------------------------------------------


def data_dependent_facts() -> dict:
    (log,) = logs("export_data_dependent")
    recs = parse(log)
    files = strings(recs)
    assert not kind(recs, "compilation_metrics") and not kind(recs, "exported_program")  # no exception, no program
    (symbol,) = kind(recs, "create_unbacked_symbol")
    (graph,) = artifacts(recs, "make_fx_fail_partial")
    assert recs.index(symbol) < recs.index(graph)
    body = symbol.body
    user = body["user_stack"][-1]
    assert any(f["loc"].startswith(TRUTH_VALUE) for f in body["stack"])  # made for a tensor's truth value
    return {
        "log": log, "symbol": body["symbol"], "range": body["vr"], "payload": graph.payload,
        "user_location": f"{files[user['filename']]}:{user['line']}", "user_source": user["loc"], "function": user["name"],
        "call_location": export_caller(graph.env["stack"], files),
        "call": next(f["loc"] for f in graph.env["stack"] if "export(Bad()" in f["loc"]),
    }


def test_the_log_holds_the_branch_and_the_partial_graph_at_the_programs_lines():
    facts = data_dependent_facts()
    scenario = "/work/scenarios/export_data_dependent.py"
    assert facts["user_location"] == f"{scenario}:{source_line('export_data_dependent', 'if h.mean() > 0:')}"
    assert facts["call_location"] == f"{scenario}:{source_line('export_data_dependent', 'torch.export.export(Bad()')}"
    assert (facts["symbol"], facts["range"], facts["user_source"], facts["function"]) == ("u0", "[0, 1]", "if h.mean() > 0:", "forward")


@pytest.mark.parametrize("mode", ["-e", "plain"])
def test_a_data_dependent_branch_is_a_failed_export_with_its_line_and_partial_graph(tmp_path, mode):
    facts = data_dependent_facts()
    out, output = run(tmp_path, str(facts["log"]), *(["-e"] if mode == "-e" else []))
    validate(read_json(out / "summary.json"))
    # the terminal says it before the totals line, the notebook above its totals, summary.md in its title
    headline = "Export failed: a data-dependent branch at export_data_dependent.py:32 (if h.mean() > 0:)"
    said = output.splitlines()
    assert said[-2] == f"{headline} ({out / 'index.html'}#export)" and said[-1].startswith("Report: ")
    notebook = summary_html(tlparse_py.analyze(facts["log"]))
    assert "<h4>torch.export: " in notebook and headline.replace(">", "&gt;") in notebook
    assert (out / "summary.md").read_text().startswith("### torch.export report: ")
    export = read_json(out / "summary.json")["export"]
    assert (export["status"], export["basis"]) == ("failed", "inferred")
    assert export["error"] == (f"GuardOnDataDependentSymNode (inferred): a data-dependent branch at {facts['user_location']} "
                               f"(if h.mean() > 0:): export cannot guard on the truth value of a tensor, the unbacked symbol u0")
    traced = export["trace_failure"]
    partial = "-_-_-_-/index.html#other" if mode == "-e" else "-_-_-_-/make_fx_fail_partial_1.txt"
    assert {k: traced[k] for k in ("cause", "failed_exports", "symbol", "symbol_range", "user_location", "user_source",
                                   "user_function", "call", "call_location", "partial_graph")} == {
        "cause": "data_dependent_branch", "failed_exports": 1, "symbol": facts["symbol"], "symbol_range": facts["range"],
        "user_location": facts["user_location"], "user_source": facts["user_source"], "user_function": facts["function"],
        "call": facts["call"], "call_location": facts["call_location"], "partial_graph": partial,
    }
    target, _, anchor = partial.partition("#")
    page = (out / target).read_text()
    if anchor:  # export mode writes only export outputs: the partial graph is shown on its compile id's page
        assert f'id="{anchor}"' in page and "make_fx_fail_partial" in page and "Sym(Eq(u0, 1))" in page
    else:
        assert page.strip() == facts["payload"].strip()

    index = text_of(out / "index.html")
    assert "Export failed: a data-dependent branch at /work/scenarios/export_data_dependent.py:32 in forward : if h.mean() &gt; 0:" in index
    assert "unbacked symbol u0" in index and "GuardOnDataDependentSymNode" in index and "No issues were found" not in index
    assert f'href="{partial}">the partial graph</a>' in (out / "index.html").read_text()

    md = unescaped((out / "summary.md").read_text())
    assert "\n".join([
        "**[Export failed](index.html#export)** (inferred from the shape facts: torch logged no exception)",
        "",
        "- a data-dependent branch at export_data_dependent.py:32: `if h.mean() > 0:` asks the truth value of a tensor, "
        "the unbacked symbol `u0`, which export cannot guard on (GuardOnDataDependentSymNode)",
        "- fix: export traces one path and cannot branch on a value computed from tensor data: write the branch with "
        "torch.cond, or compute the condition outside the exported module",
        f"- the export call at export_data_dependent.py:40 · [the partial graph]({partial})",
    ]) in md


def test_a_logged_data_dependent_guard_names_the_failure_and_its_line(tmp_path):
    """The `export` fixture (TORCH_DTRACE) exports `Undecidable` plainly: `k = n.item()`, then `if k > 2:`
    fails. Its log holds the guard torch could not decide (`guard_on_data_dependent_error`) right before
    the partial graph: the failure is logged, at the guard's user line, not at the `.item()` line."""
    main_log = next(log for log in logs("export") if artifacts(parse(log), "make_fx_fail_partial"))
    recs = parse(main_log)
    files = strings(recs)
    (graph,) = artifacts(recs, "make_fx_fail_partial")
    (error,) = kind(recs, "guard_on_data_dependent_error")
    assert recs.index(error) == recs.index(graph) - 1  # nothing logged between them
    user = [f for f in error.body["stack"] if not any(p in files[f["filename"]] for p in ("/site-packages/", "/stdlib/", "<"))][-1]
    where = f"{files[user['filename']]}:{user['line']}"
    assert where == f"/work/scenarios/export.py:{source_line('export', 'if k > 2:')}"
    symbols = [r for r in kind(recs, "create_unbacked_symbol") if recs.index(r) < recs.index(graph)]
    assert symbols and not any(f["loc"].startswith(TRUTH_VALUE) for f in symbols[-1].body["stack"])  # made by .item()

    out, _ = run(tmp_path, str(TRACES / "export"), "-e")
    validate(read_json(out / "summary.json"))
    export = read_json(out / "summary.json")["export"]
    traced = export["trace_failure"]
    assert (export["status"], export["basis"], export["guard"]) == ("failed", "logged", error.body["expr"])
    assert export["error"] == f"GuardOnDataDependentSymNode: could not guard on the data-dependent expression u0 > 2 at {where} (if k > 2:)"
    assert (traced["cause"], traced["guard"], traced["user_location"], traced["user_source"], traced["symbol"]) == (
        "data_dependent_guard", "u0 > 2", where, "if k > 2:", None)
    assert traced["call_location"] == export_caller(graph.env["stack"], files) == f"/work/scenarios/export.py:{source_line('export', 'export(Undecidable()')}"
    assert len(export["issues"]) == 2  # what draft_export found is still listed
    index = text_of(out / "index.html")
    assert "Export failed: a guard on a data-dependent value at /work/scenarios/export.py:55 in forward : if k &gt; 2:" in index
    assert "2 issue(s) were found during export" in index
    md = unescaped((out / "summary.md").read_text())
    assert ("**[Export failed](index.html#export)** (logged by torch)\n\n"
            "- a guard on a data-dependent value at export.py:55: `if k > 2:`: export could not decide `u0 > 2` (GuardOnDataDependentSymNode)") in md


def test_a_failure_after_item_is_a_failed_export_whose_cause_is_not_guessed(tmp_path):
    """Without the logged guard, the `export` fixture's failure after `k = n.item()` is a failed trace
    whose cause is unknown: the unbacked symbol was made by `.item()`, on another line."""
    def no_guard_error(envelope):
        return None if "guard_on_data_dependent_error" in envelope else envelope

    folder = tmp_path / "export"
    folder.mkdir()
    for log in logs("export"):
        plain = folder / log.name.removesuffix(".gz")
        plain.write_text(read_text(log))
        rewrite(plain, plain, no_guard_error)
    out, _ = run(tmp_path, str(folder), "-e")
    export = read_json(out / "summary.json")["export"]
    traced = export["trace_failure"]
    assert (export["status"], export["basis"], export["guard"], traced["cause"], traced["symbol"], traced["user_location"]) == (
        "failed", "logged", None, None, None, None)
    assert traced["call_location"] == "/work/scenarios/export.py:98"
    assert export["error"] == "the export's trace failed: torch logged the graph traced until then, not the exception"
    assert "what it failed on is unknown" in text_of(out / "index.html")
    md = unescaped((out / "summary.md").read_text())
    assert "**[Export failed](index.html#export)** (logged by torch)\n\n- its trace failed: torch logged the graph traced" in md


def _truth_value_hidden(envelope: dict) -> dict:
    if "create_unbacked_symbol" in envelope:
        for frame in envelope["create_unbacked_symbol"]["stack"]:
            frame["loc"] = frame["loc"].replace(TRUTH_VALUE, "return x")
    return envelope


def _nested_in_user_code(envelope: dict) -> dict:
    """The partial graph logged by a trace nested in the user's code (as a higher-order op's branch)."""
    if envelope.get("artifact", {}).get("name") == "make_fx_fail_partial":
        stack = envelope["stack"]
        stack.insert(len(stack) - 1, {"line": 32, "name": "forward", "filename": 0, "loc": "if h.mean() > 0:"})
    return envelope


def test_what_the_evidence_does_not_show_is_not_claimed(tmp_path):
    (log,) = logs("export_data_dependent")

    out, _ = run(tmp_path, str(rewrite(log, tmp_path / "no_truth.log", _truth_value_hidden)), "-e", name="no_truth")
    export = read_json(out / "summary.json")["export"]
    assert (export["status"], export["basis"], export["trace_failure"]["cause"], export["trace_failure"]["user_location"]) == (
        "failed", "logged", None, None)

    for name, change in (("nested", _nested_in_user_code),
                         ("no_graph", lambda e: None if e.get("artifact", {}).get("name") == "make_fx_fail_partial" else e)):
        changed = rewrite(log, tmp_path / f"{name}.log", change)
        out, _ = run(tmp_path, str(changed), "-e", name=name)
        export = read_json(out / "summary.json")["export"]
        assert export["status"] == "unknown" and "trace_failure" not in export
        assert "whether the export succeeded is unknown" in text_of(out / "index.html")
        assert "**[Export verdict unknown](index.html#export)**" in unescaped((out / "summary.md").read_text())
        out, _ = run(tmp_path, str(changed), name=f"{name}_plain")
        assert "export" not in read_json(out / "summary.json")  # no verdict claimed without -e


def test_a_successful_export_reports_no_issue(tmp_path):
    """`export_compile` exports (no failure of any kind is logged), then compiles the program."""
    (log,) = logs("export_compile")
    recs = parse(log)
    assert not artifacts(recs, "make_fx_fail_partial") and not [r for r in kind(recs, "compilation_metrics") if r.body.get("fail_type")]
    out, _ = run(tmp_path, str(log), "-e")
    export = read_json(out / "summary.json")["export"]
    assert export["status"] == "unknown" and export["error"] is None and "trace_failure" not in export
    index = text_of(out / "index.html")
    assert "Export failed" not in index and "whether the export succeeded is unknown" in index


# -- 5. the torch version -----------------------------------------------------------------------

EXPORT_FIXTURES = ["export", "export_failure", "export_nonstrict_fail", "export_qualified_dim", "export_compile", "export_data_dependent"]


@pytest.mark.parametrize("scenario", EXPORT_FIXTURES)
def test_every_export_report_names_the_torch_that_wrote_the_log(tmp_path, scenario):
    versions = {json.loads(r.payload)["pytorch_version"] for log in logs(scenario) for r in artifacts(parse(log), "torch_version")}
    assert versions == {"2.13.0+cpu"}
    out, _ = run(tmp_path, str(TRACES / scenario), "-e")  # a folder: its newest run, every log of it
    summary = read_json(out / "summary.json")
    assert summary["torch_version"] == summary["run"]["torch_version"] == "2.13.0+cpu"
    assert 'torch <code>2.13.0+cpu</code>' in (out / "index.html").read_text()
    assert "\ntorch 2.13.0+cpu · " in unescaped((out / "summary.md").read_text())
