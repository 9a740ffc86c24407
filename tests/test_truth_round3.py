"""Issue 23: what the report concludes on nine more real traces, checked against the raw log.

Every expected value is computed here from the fixture's text with the raw-record helper of
test_new_scenarios (glog header, JSON envelope, payload lines; not tlparse_py's reader). The report's
summary.json, its index headline and its compile pages must say the same.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import read_json
from linkcheck import broken_links
from test_new_scenarios import Rec, artifacts, kind, logs, parse
from tlparse_py.cli import main

LIBRARY = ("/site-packages/", "/stdlib/", "<")  # how the harness writes torch's and Python's files


def run(tmp_path: Path, *args: str, name: str = "out") -> tuple[Path, str]:
    out = tmp_path / name
    result = CliRunner().invoke(main, [*args, "-o", str(out), "--no-browser"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert broken_links(out) == []
    return out, result.output


def text_of(page: Path) -> str:
    """A page's visible text, whitespace collapsed."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.read_text())).replace("&quot;", '"').replace("&#39;", "'")


def cards(index: Path) -> str:
    """The index's headline: its cards, as text."""
    html = index.read_text()
    return text_of_html(html[html.index('<ul class="cards">'): html.index("</ul>", html.index('<ul class="cards">'))])


def text_of_html(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def compiles_by_id(summary: dict) -> dict[str, dict]:
    return {c["id"]: c for c in summary["compiles"]}


def frame_compile(rec: Rec) -> str:
    """`[1/0]` for a record of any attempt of that frame compile."""
    return f"[{rec.env['frame_id']}/{rec.env['frame_compile_id']}]"


def reason_after_preambles(payload: str) -> str:
    """The break's own headline: the first line after torch's "Graph Break Reason:" preambles."""
    lines = [l.strip() for l in payload.splitlines()]
    start = next(i for i, l in enumerate(lines) if l.startswith("Graph Break Reason:"))
    rest = [lines[start][len("Graph Break Reason:"):].strip()] + lines[start + 1:]
    return next(l for l in rest if l and not l.endswith(":") and not l.startswith("Failed to handle graph break gracefully"))


# -- 1. a frame Dynamo skipped ------------------------------------------------------------------


def test_a_skipped_frame_is_skipped_not_failed_and_its_break_has_its_own_reason(tmp_path):
    (log,) = logs("skipped_frame")
    recs = parse(log)
    failed = [r for r in kind(recs, "compilation_metrics") if r.body.get("fail_type")]
    breaks = artifacts(recs, "dynamo_graph_break_reason")
    wrapped = [b for b in breaks if "Failed to handle graph break gracefully. Skipping the function and falling back to eager." in b.payload]
    assert len(failed) == 1 and len(wrapped) == 1 and frame_compile(wrapped[0]) == frame_compile(failed[0])
    skipped_id = frame_compile(failed[0])
    sites = {re.search(r"gb/(gb\d+)\.html", b.payload).group(1).upper() for b in breaks}

    out, _ = run(tmp_path, str(log))
    summary = read_json(out / "summary.json")
    skipped = compiles_by_id(summary)[skipped_id]
    assert skipped["status"] == "skipped"
    assert skipped["failure"]["type"] == failed[0].body["fail_type"]  # what torch logged is kept
    assert summary["totals"]["failed"] == 0 and summary["totals"]["skipped"] == 1
    (brk,) = skipped["graph_breaks"]
    assert brk["reason"] == reason_after_preambles(wrapped[0].payload) == "Call to `torch._dynamo.graph_break()`"
    assert summary["totals"]["graph_breaks"] == len(breaks)

    headline = cards(out / "index.html")
    assert f"{len(breaks)} graph breaks ({len(sites)} distinct)" in headline
    assert "0 failed compiles" in headline and "1 skipped frame (ran eagerly)" in headline
    page = text_of(out / skipped["url"])
    assert f"Compile {skipped_id} Skipped: ran eagerly" in page
    assert "Failed to handle graph break gracefully" not in text_of(out / "index.html")


# -- 2. a retry is not a recompile ---------------------------------------------------------------


def test_a_retry_after_a_failed_compile_is_not_a_recompile(tmp_path):
    (log,) = logs("retry_fullgraph")
    recs = parse(log)
    metrics = {frame_compile(r): r.body for r in kind(recs, "compilation_metrics")}
    assert metrics["[0/0]"]["fail_type"] == "Unsupported"
    retried = "[0/1]"
    assert metrics[retried]["recompile_reason"] is None
    assert not [r for r in artifacts(recs, "recompile_reasons") if frame_compile(r) == retried]
    broke = {frame_compile(r) for r in artifacts(recs, "dynamo_graph_break_reason")}
    assert retried in broke

    out, _ = run(tmp_path, str(log))
    summary = read_json(out / "summary.json")
    compile_ = compiles_by_id(summary)[retried]
    assert compile_["cause"] == "retry"
    assert compile_["status"] == "break"  # it broke the graph: never plain "ok"
    assert summary["totals"]["recompiles"] == 0 and summary["totals"]["retries"] == 1
    assert summary["totals"]["failed"] == 1
    headline = cards(out / "index.html")
    assert "0 recompiles" in headline and "1 retry after a failed compile" in headline
    index = text_of(out / "index.html")
    assert f"{retried} : a retry, not a recompile: [0/0] failed ( Unsupported )" in index
    assert re.search(r"Compile \[0/1(_\d+)?\] Success with graph breaks", text_of(out / compile_["url"]))


def test_every_compile_with_a_graph_break_says_so(tmp_path):
    """No compile that logged a graph break is shown as plain success, in any fixture."""
    for scenario in ("skipped_frame", "retry_fullgraph", "graph_break", "gb_base", "distributed"):
        for log in logs(scenario):
            broke = {frame_compile(r) for r in artifacts(parse(log), "dynamo_graph_break_reason")}
            summary = read_json(run(tmp_path, str(log), name=log.name)[0] / "summary.json")
            for compile_ in summary["compiles"]:
                if compile_["id"] in broke:
                    assert compile_["status"] in ("break", "skipped", "error"), (scenario, compile_["id"])


# -- 3. a restart is not a graph break -----------------------------------------------------------


def test_a_tensorify_restart_is_labelled_a_restart_with_its_reason(tmp_path):
    (log,) = logs("tensorify_restart")
    recs = parse(log)
    restarted = [r for r in kind(recs, "compilation_metrics") if r.body.get("restart_reasons")]
    (restart,) = restarted
    assert "TensorifyScalarRestartAnalysis" in restart.body["restart_reasons"][0]
    assert not artifacts(recs, "dynamo_graph_break_reason")
    compile_id = frame_compile(restart)

    out, _ = run(tmp_path, str(log))
    summary = read_json(out / "summary.json")
    compile_ = compiles_by_id(summary)[compile_id]
    assert compile_["status"] == "restart"
    assert compile_["restart_reasons"] == ["Dynamo traced the frame again to turn a Python scalar into a tensor input"]
    assert compile_["graph_breaks"] == [] and summary["totals"]["graph_breaks"] == 0
    md_rows = [l for l in (out / "summary.md").read_text().splitlines() if l.startswith("|") and compile_id.replace("[", "\\[").replace("]", "\\]") in l]
    assert all("break" not in row for row in md_rows) and any("restart" in row for row in md_rows)
    page = text_of(out / compile_["url"])
    assert re.search(r"Compile \[0/1(_\d+)?\] Success after a restart", page) and "Graph breaks (0)" in page
    assert "Success with graph breaks" not in text_of(out / "index.html").split("Stack trie")[0]


# -- 4. the backward compiled inside the forward -------------------------------------------------


def test_a_backward_compiled_inside_the_forward_is_shown_as_part_of_it(tmp_path):
    (log,) = logs("dynamic_backward")
    recs = parse(log)
    lazy = {r.body["compile_id"] for r in kind(recs, "bwd_compilation_metrics")}
    events = [json.loads(r.payload) for r in kind(recs, "chromium_event")]
    inside = {}
    for compile_id in {e["args"].get("compile_id") for e in events if isinstance(e.get("args"), dict)} - lazy - {None}:
        spans = [e for e in events if e.get("name", "").endswith("bw_compiler") and e["args"].get("compile_id") == compile_id]
        begins = [e["ts"] for e in spans if e["ph"] == "B"]
        ends = [e["ts"] for e in spans if e["ph"] == "E"]
        if begins:
            inside[f"[{compile_id}]"] = sum(ends) - sum(begins)
    assert list(inside) == ["[0/1]"]
    forward = next(r.body for r in kind(recs, "compilation_metrics") if r.cid == "[0/1]")["entire_frame_compile_time_s"]

    out, _ = run(tmp_path, str(log))
    compile_ = compiles_by_id(read_json(out / "summary.json"))["[0/1]"]
    times = compile_["compile_time_s"]
    assert times["backward"] is None  # no lazy backward compile was logged
    assert times["backward_in_forward"] == pytest.approx(inside["[0/1]"] / 1e6, abs=1e-6)
    assert times["total"] == pytest.approx(forward)  # part of the forward time, not added again
    page = text_of(out / compile_["url"])
    assert f"of which the backward compile {inside['[0/1]'] / 1e6:.2f} s" in page and "part of the forward time" in page


# -- 5. -e on an export that is then compiled ------------------------------------------------------


def test_export_mode_keeps_the_cache_results_and_titles_a_plain_export(tmp_path):
    (log,) = logs("export_compile")
    recs = parse(log)
    misses = [r for r in kind(recs, "artifact") if r.name.endswith("_cache_miss")]
    assert len(misses) == 2 and not kind(recs, "exported_program")

    plain, _ = run(tmp_path, str(log), name="plain")
    export, _ = run(tmp_path, str(log), "-e", name="export")
    for out in (plain, export):
        summary = read_json(out / "summary.json")
        assert summary["totals"]["cache"]["miss"] == len(misses)
        assert sum(len(c["cache"]) for c in summary["compiles"]) == len(misses)
    index = text_of(export / "index.html")
    assert "Export report" in index and "Draft export" not in index


# -- 6. a failed non-strict export, inferred ------------------------------------------------------


def nonstrict_facts(log: Path) -> tuple[dict, dict]:
    recs = parse(log)
    (symbol,) = kind(recs, "create_symbol")
    (guard,) = kind(recs, "guard_added_fast")
    assert not kind(recs, "exported_program") and not kind(recs, "compilation_metrics")
    return symbol.body, guard.body


def test_a_failed_nonstrict_export_is_inferred_with_its_evidence_and_fix(tmp_path):
    (log,) = logs("export_nonstrict_fail")
    symbol, guard = nonstrict_facts(log)
    low = int(re.match(r"\[(\d+),", symbol["vr"]).group(1))
    name, op, bound = re.match(r"(s\d+) (>) (\d+)$", guard["expr"]).groups()
    assert name == symbol["symbol"] and int(bound) >= low  # the guard narrows the declared range
    declared = re.search(r'Dim\("(\w+)"\)', next(f["loc"] for f in symbol["stack"] if "dynamic_shapes" in f["loc"])).group(1)

    for args in ((), ("-e",)):
        out, _ = run(tmp_path, str(log), *args, name=f"out{len(args)}")
        export = read_json(out / "summary.json")["export"]
        assert export["status"] == "failed" and export["basis"] == "inferred"
        assert export["suggested_fix"] == f'Dim("{declared}", min={int(bound) + 1})'
        evidence = export["evidence"]
        assert (evidence["symbol"], evidence["source"], evidence["declared_range"], evidence["guard"], evidence["dim"]) == (
            symbol["symbol"], symbol["source"], symbol["vr"], guard["expr"], declared)
        index = text_of(out / "index.html")
        assert "Export failed (inferred)" in index and "This is an inference" in index
        assert guard["expr"].replace(">", "&gt;") in (out / "index.html").read_text()


def rewrite(log: Path, target: Path, change) -> Path:
    """The log with some records' envelopes changed (these records have no payload, so no md5 to fix)."""
    lines = []
    for line in log.read_text().splitlines():
        head, sep, body = line.partition("] ")
        if sep and body.startswith("{"):
            envelope = change(json.loads(body))
            if envelope is None:
                continue
            line = f"{head}] {json.dumps(envelope)}"
        lines.append(line)
    target.write_text("\n".join(lines) + "\n")
    return target


def test_an_inference_with_missing_evidence_stays_unknown(tmp_path):
    (log,) = logs("export_nonstrict_fail")

    def hide_dim(envelope):  # the export call's text no longer shows the Dim (a variable holds it)
        if "create_symbol" in envelope:
            for frame in envelope["create_symbol"]["stack"]:
                frame["loc"] = frame["loc"].replace('{"x": {0: Dim("b")}}', "shapes")
        return envelope

    out, _ = run(tmp_path, str(rewrite(log, tmp_path / "no_dim.log", hide_dim)), "-e", name="no_dim")
    export = read_json(out / "summary.json")["export"]
    assert export["status"] == "unknown" and export["basis"] == "logged"
    assert export["evidence"]["dim"] is None and "does not show" in export["missing"]
    assert "part of the evidence" in text_of(out / "index.html")

    out, _ = run(tmp_path, str(rewrite(log, tmp_path / "no_guard.log", lambda e: None if "guard_added_fast" in e else e)), "-e",
                 name="no_guard")
    export = read_json(out / "summary.json")["export"]
    assert export["status"] == "unknown" and "evidence" not in export
    out, _ = run(tmp_path, str(tmp_path / "no_guard.log"), name="no_guard_plain")
    assert "export" not in read_json(out / "summary.json")  # no export verdict is claimed without -e


# -- 7, 8. two ranks that differ only in cache results, and rank totals ----------------------------


def cache_marks(recs: list[Rec]) -> list[str]:
    return [m.group(1) for r in kind(recs, "artifact") if (m := re.fullmatch(r"(?:fx_graph|aotautograd)_cache_(hit|miss|bypass)", r.name))]


def compile_seconds(recs: list[Rec]) -> float:
    return (sum(r.body.get("entire_frame_compile_time_s") or 0 for r in kind(recs, "compilation_metrics"))
            + sum(r.body.get("inductor_compile_time_s") or 0 for r in kind(recs, "bwd_compilation_metrics")))


def test_ranks_that_differ_only_in_cache_results_get_a_note_not_a_divergence(tmp_path):
    by_rank = {int(re.search(r"rank_(\d+)", p.name).group(1)): parse(p) for p in logs("ddp_cache_race")}
    assert sorted(by_rank) == [0, 1]
    marks = {rank: cache_marks(recs) for rank, recs in by_rank.items()}
    at = next(i for i, (a, b) in enumerate(zip(marks[0], marks[1])) if a != b)
    assert marks[0].count("hit") < marks[1].count("hit")
    graphs = {rank: [r.payload for r in kind(recs, "dynamo_output_graph")] for rank, recs in by_rank.items()}
    assert graphs[0] == graphs[1]  # the same graphs on both ranks
    seconds = {rank: compile_seconds(recs) for rank, recs in by_rank.items()}

    out, output = run(tmp_path, str(logs("ddp_cache_race")[0].parent), "--all-ranks-html")
    assert "Ranks diverge" not in output
    summary = read_json(out / "summary.json")
    assert summary["divergences"] == []
    (note,) = summary["notes"]
    assert note["kind"] == "cache" and note["ranks"] == [1]
    assert f"lookup {at + 1} " in note["detail"] and "rank 0" in note["detail"] and "majority" not in note["detail"]
    assert f"was a {marks[1][at]} where rank 0 had a {marks[0][at]}" in note["detail"]
    assert note["compile_time_s"] == {str(r): pytest.approx(s, abs=1e-5) for r, s in seconds.items()}
    assert note["spread_s"] == pytest.approx(abs(seconds[0] - seconds[1]), abs=1e-5)
    landing = text_of(out / "index.html")
    assert "Do the ranks agree? Yes" in landing and "can hang or time out" not in landing
    assert f"first different at lookup {at + 1} " in landing and "position" not in landing

    # 8: per-rank totals are not added up across ranks
    frames = {rank: len({r.env["frame_id"] for r in kind(recs, "compilation_metrics")}) for rank, recs in by_rank.items()}
    assert frames[0] == frames[1]
    all_row = next(l for l in (out / "summary.md").read_text().splitlines() if l.startswith("| **all**"))
    cells = [c.strip() for c in all_row.strip("|").split("|")]
    header = next(l for l in (out / "summary.md").read_text().splitlines() if l.startswith("| rank"))
    column = dict(zip([c.strip() for c in header.strip("|").split("|")], cells))
    assert column["frames"] == f"{frames[0]} on every rank"
    slowest, median = max(seconds.values()), statistics.median(seconds.values())
    assert column["compile time"] == f"max {slowest:.2f} s, median {median:.2f} s per rank"


# -- 9. graph breaks inside torch ------------------------------------------------------------------


def test_breaks_inside_torch_are_attributed_to_the_nearest_user_line(tmp_path):
    log = next(p for p in logs("distributed") if "rank_0" in p.name)
    expected = set()
    for brk in artifacts(parse(log), "dynamo_graph_break_reason"):
        logged = re.search(r"Graph break in user code at (\S+:\d+)", brk.payload).group(1)
        traceback = brk.payload.split("User code traceback:", 1)[1].split("Traceback (most recent call last)", 1)[0]
        user = [f"{f}:{n}" for f, n in re.findall(r'File "([^"]+)", line (\d+)', traceback) if not f.startswith(LIBRARY)]
        assert logged.startswith(LIBRARY)  # torch names its own (or contextlib's) line as "user code"
        expected.add((user[-1], logged))

    out, _ = run(tmp_path, str(log))
    summary = read_json(out / "summary.json")
    shown = {(b["user_location"], b["library_location"]) for c in summary["compiles"] for b in c["graph_breaks"]}
    assert shown == expected
    index = text_of(out / "index.html")
    for user, library in expected:
        inside = "torch" if "/torch/" in library else "the standard library"
        assert f"{user} " in index and f"inside {inside}: {library}" in index


@pytest.mark.parametrize("written, declared", [
    ('{"x": {0: torch.export.Dim("b")}}', "b"),  # qualified, as most code writes it (issue 33 item 5)
    ("{'x': {0: export.Dim('b', min=2)}}", "b"),
    ('{"y": {1: Dim("c")}, "x": {0: Dim("b")}}', "b"),  # another argument's Dim first
    ('{"x": (torch.export.Dim("b"), None)}', "b"),  # a tuple of Dims, one per dimension
    ('({0: Dim("b")},)', None),  # positional: which argument is x the text does not say
    ('{"x": {0: batch}}', None),  # a variable: its Dim is defined on a line the log does not show
])
def test_the_export_calls_dim_is_read_in_the_forms_code_writes_it(tmp_path, written, declared):
    """The real export_nonstrict_fail trace with its call written another way: the inferred verdict
    names the Dim whenever the call's text shows it, and stays unknown (saying why) when it does not."""
    (log,) = logs("export_nonstrict_fail")

    def rewritten(envelope):
        if "create_symbol" in envelope:
            for frame in envelope["create_symbol"]["stack"]:
                frame["loc"] = frame["loc"].replace('{"x": {0: Dim("b")}}', written)
        return envelope

    out, _ = run(tmp_path, str(rewrite(log, tmp_path / "call.log", rewritten)), "-e", name="out")
    export = read_json(out / "summary.json")["export"]
    assert written in export["evidence"]["call"]
    if declared is None:
        assert export["status"] == "unknown" and export["evidence"]["dim"] is None and "does not show" in export["missing"]
    else:
        assert export["status"] == "failed" and export["evidence"]["dim"] == declared
        assert export["suggested_fix"].startswith(f'Dim("{declared}"')
