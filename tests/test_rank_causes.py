"""Multi-rank verdicts a person can trust when a job hangs: the first cause of a divergence (the graph
break, recompile, failure or unfinished compile only some ranks had), graphs compared where each rank
holds them, `--fail-on` naming the ranks that break a condition, and the command's last lines.

The trace is the harness's `torchrun_ddp`: DDP on two gloo ranks, where only rank 1 prints inside
`forward` (a graph break only it has) and only rank 1's last batch has 5 rows, not 8 (recompiles only
it makes). Expectations are read from each rank's own summary (its compiles, graph breaks and
recompile reasons), not written down here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import msgspec
from click.testing import CliRunner

from conftest import TRACES, read_json
from linkcheck import broken_links
from test_multirank import landing_of
from tlparse_py.cli import main

DDP = TRACES / "torchrun_ddp"
SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "tlparse_py" / "summary.schema.json").read_text(encoding="utf-8"))


def line_of(location: str) -> int:
    """The line of the scenario's user code a location names (the harness logs it as /work/scenarios/...)."""
    path, _, line = location.rpartition(":")
    assert path == "/work/scenarios/torchrun_job.py"
    return int(line)


def compile_of(summary: dict, rank: int, compile_id: str) -> dict:
    entry = next(r for r in summary["ranks"] if r["rank"] == rank)
    return next(c for c in entry["summary"]["compiles"] if c["id"] == compile_id)


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_the_first_divergence_is_the_graph_break_only_rank_1_has(tmp_path):
    landing, out = landing_of(tmp_path, DDP)
    summary = read_json(out / "summary.json")
    found = landing.comparison
    [brk] = compile_of(summary, 1, "[4/0]")["graph_breaks"]
    assert brk["user_source"] == 'print("mean activation", h.mean())'
    printed = line_of(brk["user_location"])
    assert compile_of(summary, 0, "[4/0]")["graph_breaks"] == []

    # rank 1's [4/0] restarted at the break: its graph is in [4/0_1], compared with rank 0's [4/0]
    [row] = found.content
    assert (row.compile_id, row.reference, row.attempts) == ("[4/0]", [0], {0: "[4/0]", 1: "[4/0_1]"})
    assert compile_of(summary, 1, "[4/0]")["attempts"] == ["[4/0]", "[4/0_1]"]
    [departure] = row.departures
    view = departure.side_by_side
    assert view is not None and view.what == "Dynamo graph"
    left_no, left, right_no, right = view.rows[0]
    assert (left_no, right_no) == (2, 2)  # the signatures: rank 1's graph stops before fc2
    assert left.strip().startswith("def forward(") and right.strip().startswith("def forward(")
    assert "fc2" in left and "fc2" not in right

    # the verdicts, the root first: the break, the resume function it made, then the recompiles
    assert [(d.kind, d.compile_id, d.ranks, d.cause.kind if d.cause else None, d.cause.compile_id if d.cause else None)
            for d in found.divergences] == [
        ("compile_content", "[4/0]", [1], "graph_break", "[4/0]"),
        ("compile_ids", "[5/0]", [1], "graph_break", "[4/0]"),
        ("compile_ids", "[0/1]", [1], "recompile", "[0/1]"),
    ]
    first = found.first
    assert first is found.divergences[0] and first.cause is not None
    assert first.cause.text == (f'rank 1 broke the graph in [4/0] at torchrun_job.py:{printed} '
                                f'(print("mean activation", h.mean()): {brk["reason"]}) where rank 0 did not')
    assert (first.cause.ranks, first.cause.others, first.cause.user_location, first.cause.reason) == ([1], [0], brk["user_location"], brk["reason"])
    assert first.detail.startswith("rank 1's graph is in its attempt [4/0_1], rank 0's in [4/0]: Dynamo graph")
    assert "first difference in the Dynamo graph, line 2:" in first.detail and "''" not in first.detail
    assert first.line == f"[4/0]: {first.cause.text}"
    resumed = compile_of(summary, 1, "[5/0]")
    assert resumed["cause"] == "first" and resumed["user_location"] == brk["user_location"]  # the resume function after the break

    # the recompiles only rank 1 made, one cause, each with the guard that failed
    recompiles = [c for c in next(r for r in summary["ranks"] if r["rank"] == 1)["summary"]["compiles"] if c["cause"] == "recompile"]
    assert [c["id"] for c in recompiles] == ["[0/1]", "[4/1]", "[5/1]"]
    cause = found.divergences[2].cause
    assert cause is not None and found.divergences[2].detail == "missing nothing; extra [0/1], [4/1], [5/1]"
    assert cause.text.startswith("rank 1 recompiled [0/1] (") and cause.text.endswith(" where rank 0 did not")
    forward = line_of(compile_of(summary, 1, "[4/1]")["user_location"])
    assert f"[4/1] (forward at torchrun_job.py:{forward}; guard: x.shape[0] changed 8→5)" in cause.text
    assert "[5/1] (resume in forward at " in cause.text
    assert all(re.search(r"expected 8, actual 5", c["recompile_reasons"][0]) for c in recompiles)

    # summary.json holds the typed verdicts, and is valid against its schema
    assert summary["divergences"] == msgspec.to_builtins(found.divergences)
    assert summary["divergences"][0]["cause"]["kind"] == "graph_break"
    jsonschema.validate(summary, SCHEMA)


def test_the_landing_and_summary_md_name_the_first_cause_first(tmp_path):
    landing, out = landing_of(tmp_path, DDP)
    first = landing.comparison.first
    assert first is not None and first.cause is not None
    index = (out / "index.html").read_text()
    shown = first.cause.text.replace('"', "&#34;")
    verdict = index.split('id="divergence"')[1]
    assert 'id="first-cause"><strong>First cause:</strong> ' + shown in verdict
    assert verdict.index("First cause:") < verdict.index("What differs")
    assert "compared where each holds its graph: rank 0's attempt <code>[4/0]</code>, rank 1's <code>[4/0_1]</code>" in index
    assert "<strong>why:</strong> rank 1 recompiled [0/1]" in index
    assert broken_links(out) == []
    markdown = (out / "summary.md").read_text()
    assert "- compile\\_content \\[4/0\\]: rank 1 broke the graph in \\[4/0\\] at torchrun\\_job.py:" in markdown


def test_the_command_ends_with_the_divergence_and_the_totals_over_ranks(tmp_path):
    out = tmp_path / "out"
    result = cli(DDP, "-o", out, "--no-browser")
    assert result.exit_code == 0, result.stderr
    summary = read_json(out / "summary.json")
    *_, diverge, totals = result.stderr.splitlines()
    cause = summary["divergences"][0]["cause"]["text"]
    assert diverge == f"Ranks diverge, first at [4/0]: {cause} (and 2 more: {out / 'index.html'}#divergence)"
    low, high = sorted(len(r["summary"]["compiles"]) for r in summary["ranks"])
    assert totals.startswith(f"Report: {out / 'index.html'}: compiles {low}–{high} per rank, ")
    misses = sum(lookup["result"] == "miss" for r in summary["ranks"] for c in r["summary"]["compiles"] for lookup in c["cache"])
    assert ", failed 0, " in totals and f"cache hit / miss / bypass 0 / {misses} / 0 (" in totals
    records = sum(r["summary"]["stats"]["ok"] for r in summary["ranks"])
    assert re.search(rf" \(2 ranks, {records} records, [\d.]+ s\)$", totals)


def test_fail_on_names_the_rank_that_breaks_the_condition_first(tmp_path):
    out = tmp_path / "out"
    result = cli(DDP, "-o", out, "--no-browser", "--fail-on", "compiles>5,cache.miss>3,compile_time_s>0")
    assert result.exit_code == 3
    summary = read_json(out / "summary.json")
    lines = {m[1]: m[2] for m in re.finditer(r"^--fail-on (\S+?): (.*)$", result.stderr, re.M)}
    # rank 0 has exactly 5 compiles: not over the limit, not an offender; rank 1's compiles come first, only theirs
    ids = [c["id"] for c in next(r for r in summary["ranks"] if r["rank"] == 1)["summary"]["compiles"]]
    assert lines["compiles>5"].startswith(f"compiles is {len(ids)} on the rank with the most; it holds on rank 1 ({len(ids)}) (compiles: "
                                          f"rank 1 {ids[0]}, rank 1 {ids[1]}")
    assert "rank 0" not in lines["compiles>5"] and f"+{len(ids) - 8} more" in lines["compiles>5"]
    # summed over ranks: each rank adds to it, the most first
    misses = {r["rank"]: sum(c["result"] == "miss" for c2 in r["summary"]["compiles"] for c in c2["cache"]) for r in summary["ranks"]}
    assert misses[1] > misses[0] > 0
    assert lines["cache.miss>3"].startswith(f"cache.miss is {misses[0] + misses[1]} summed over ranks; from rank 1 ({misses[1]}), rank 0 ({misses[0]})")
    # the slowest rank: both exceed 0 s, the slowest named first
    assert re.match(r"compile_time_s is [\d.]+ on the slowest rank; it holds on rank \d \([^)]*\), rank \d ", lines["compile_time_s>0"])


def test_a_rank_killed_mid_compile_is_the_cause_not_an_empty_graph(tmp_path):
    landing, out = landing_of(tmp_path, TRACES / "torchrun_rank_killed")
    summary = read_json(out / "summary.json")
    assert compile_of(summary, 1, "[4/0]")["status"] == "missing" and compile_of(summary, 0, "[4/0]")["status"] == "ok"
    first = landing.comparison.first
    assert first is not None and first.cause is not None
    assert (first.compile_id, first.cause.kind, first.cause.ranks, first.cause.others) == ("[4/0]", "unfinished", [1], [0])
    assert first.cause.text.startswith("rank 1 never finished compiling [4/0] (") and first.cause.text.endswith(" where rank 0 did")


def test_fsdp2_a_recompile_only_rank_1_made_is_the_cause(tmp_path):
    """FSDP2 (`fully_shard`): rank 1's last batch has 5 rows; its recompiles, each with its guard, are the
    first cause, and the ranks' other compiles agree."""
    landing, out = landing_of(tmp_path, TRACES / "torchrun_fsdp2")
    summary = read_json(out / "summary.json")
    jsonschema.validate(summary, SCHEMA)
    ids = {rank: [c["id"] for c in next(r for r in summary["ranks"] if r["rank"] == rank)["summary"]["compiles"]] for rank in (0, 1)}
    extra = [i for i in ids[1] if i not in ids[0]]
    assert extra and all(compile_of(summary, 1, i)["cause"] == "recompile" for i in extra) and set(ids[0]) <= set(ids[1])
    first = landing.comparison.first
    assert first is not None and first.cause is not None
    assert (first.compile_id, first.cause.kind, first.cause.ranks, first.cause.others) == (extra[0], "recompile", [1], [0])
    for label in extra:
        reason = compile_of(summary, 1, label)["recompile_reasons"][0]
        assert "size mismatch at index 0. expected 8, actual 5" in reason  # torch's words; the cause says it shorter
        assert label in first.cause.text
    assert "changed 8→5" in first.cause.text and first.cause.text.endswith("where rank 0 did not")


def test_a_rank_whose_compile_raised_is_the_cause(tmp_path):
    """`fullgraph=True` and a debug print only rank 1 runs: rank 1's compile raised (the job then stopped
    rank 0 mid-compile); the cause is rank 1's failure at the print's line, not a graph that differs."""
    landing, out = landing_of(tmp_path, TRACES / "torchrun_rank_fails")
    summary = read_json(out / "summary.json")
    failed = compile_of(summary, 1, "[0/0]")
    assert failed["status"] == "error" and compile_of(summary, 0, "[0/0]")["status"] == "missing"
    first = landing.comparison.first
    assert first is not None and first.cause is not None
    assert (first.compile_id, first.cause.kind, first.cause.ranks) == ("[0/0]", "failure", [1])
    assert first.cause.user_location == failed["failure"]["user_location"]
    assert line_of(first.cause.user_location) == line_of(failed["failure"]["user_location"])
    assert first.cause.text.startswith(f"rank 1 failed to compile [0/0] at torchrun_job.py:{line_of(failed['failure']['user_location'])} (")
