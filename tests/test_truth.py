"""What the report concludes on the issue-11 traces, checked against the truth read off the raw log.

The truth is computed here from the log text with the raw-record helper of test_new_scenarios (not
through tlparse_py's reader); the report's `summary.json` and its pages must say the same.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import TRACES, read_json
from linkcheck import broken_links
from test_new_scenarios import Rec, kind, logs, parse
from tlparse_py.cli import main


def report(tmp_path: Path, *args: str) -> Path:
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [*args, "-o", str(out), "--no-browser"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert broken_links(out) == []
    return out


def text_of(page: Path) -> str:
    """A page's visible text, whitespace collapsed."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.read_text()))


def frame_of(recs: list[Rec], label: str) -> str:
    """The compiled function named by the last frame of the compile's dynamo_start stack."""
    start = next(r for r in kind(recs, "dynamo_start") if r.cid == label)
    return start.body["stack"][-1]["name"]


def forward_and_backward(recs: list[Rec]) -> tuple[float, float | None]:
    forward = sum(r.body["entire_frame_compile_time_s"] for r in kind(recs, "compilation_metrics"))
    backward = [r.body["inductor_compile_time_s"] for r in kind(recs, "bwd_compilation_metrics")]
    return forward, (sum(backward) if backward else None)


def test_training_total_includes_the_lazy_backward_compile(tmp_path):
    cold, warm = logs("train_warm")
    forward, backward = forward_and_backward(parse(cold))
    assert backward is not None and backward > 0
    out = report(tmp_path, str(cold))
    summary = read_json(out / "summary.json")
    (compile_,) = summary["compiles"]
    assert compile_["compile_time_s"] == {"forward": pytest.approx(forward), "backward": pytest.approx(backward),
                                          "total": pytest.approx(forward + backward), "backward_in_forward": None}
    assert summary["totals"]["compile_time_s"] == pytest.approx(forward + backward)
    page = text_of(out / "-_0_0_0" / "index.html")
    assert f"lazy backward compile {backward:.2f} s" in page
    index = text_of(out / "index.html")
    assert f"Total {forward + backward:.2f} s" in index


def test_warm_run_hits_the_caches_and_has_no_backward_compile(tmp_path):
    cold, warm = logs("train_warm")
    recs = parse(warm)
    hits = [r for r in kind(recs, "artifact") if r.name.endswith("_cache_hit")]
    forward, backward = forward_and_backward(recs)
    assert backward is None  # the AOTAutograd cache hit brings the compiled backward with it
    summary = read_json(report(tmp_path, str(warm)) / "summary.json")
    assert summary["totals"]["cache"]["hit"] == len(hits) > 0
    assert summary["compiles"][0]["compile_time_s"] == {"forward": pytest.approx(forward), "backward": None,
                                                        "total": pytest.approx(forward), "backward_in_forward": None}


def test_backward_graphs_are_labelled_and_never_diffed_against_the_forward(tmp_path):
    cold, _ = logs("train_warm")
    out = report(tmp_path, str(cold))
    page = (out / "-_0_0_0" / "index.html").read_text()
    titles = re.findall(r'<span class="title">([^<]*)</span>', page)
    assert "Forward · Post-grad graph (after passes)" in titles and "Backward · Post-grad graph (after passes)" in titles
    assert "Forward · Inductor output code" in titles and "Backward · Inductor output code" in titles
    # every diff names its base: a backward step's base is a backward step
    diffs = []
    for block in page.split('<details class="artifact"')[1:]:
        step = re.search(r'<span class="title">([^<]*)</span>', block).group(1)
        base = re.search(r'Diff against <a href="#s\d+">([^<]*)</a>', block.split('<details class="artifact"')[0])
        if base:
            diffs.append((step, base.group(1)))
    assert ("Backward · Post-grad graph (after passes)", "Backward · Before post-grad passes") in diffs
    def lineage(title: str) -> str:
        return title.split(" · ")[0] if " · " in title else ""

    for step, base in diffs:
        assert lineage(step) == lineage(base), (step, base)


def test_a_reused_compile_id_is_two_compiles(tmp_path):
    (log,) = logs("reset_reuse")
    recs = parse(log)
    frames = [r.body["co_name"] for r in kind(recs, "compilation_metrics")]
    times = [r.body["entire_frame_compile_time_s"] for r in kind(recs, "compilation_metrics")]
    assert frames == ["first_fn", "second_fn"]
    out = report(tmp_path, str(log))
    summary = read_json(out / "summary.json")
    got = [(c["id"], c["generation"], c["frame"]) for c in summary["compiles"]]
    assert got == [("[0/0]", 0, "first_fn"), ("[0/0]", 1, "second_fn")]
    assert [c["compile_time_s"]["forward"] for c in summary["compiles"]] == pytest.approx(times)
    assert summary["totals"]["compiles"] == 2 and summary["totals"]["frames"] == 2
    first, second = (text_of(out / c["url"]) for c in summary["compiles"])
    assert "first_fn" in first and "second_fn" not in first
    assert "second_fn" in second and "first_fn" not in second
    assert "names 2 separate compiles" in first and "names 2 separate compiles" in second
    index = (out / "index.html").read_text()
    stack_trie = index.split('id="stack-trie"', 1)[1].split("<h2", 1)[0]
    assert 'href="-_0_0_0/index.html">[0/0]<' in stack_trie and 'href="-_0_0_0/generation_1.html">[0/0] (generation 1)<' in stack_trie


def test_a_compile_cut_off_by_a_kill_is_not_a_success_and_names_its_frame(tmp_path):
    (log,) = logs("killed_midcompile")
    recs = parse(log)
    started = [r.cid for r in kind(recs, "dynamo_start")]
    finished = [r.cid for r in kind(recs, "compilation_metrics")]
    (cut,) = [c for c in started if c not in finished]
    summary = read_json(report(tmp_path, str(log)) / "summary.json")
    entry = next(c for c in summary["compiles"] if c["id"] == cut)
    assert entry["status"] == "missing"
    assert entry["frame"] == frame_of(recs, cut)
    assert entry["compile_time_s"] == {"forward": None, "backward": None, "total": None, "backward_in_forward": None}


def test_a_failed_export_is_reported_as_failed(tmp_path):
    (log,) = logs("export_failure")
    recs = parse(log)
    (failure,) = [r.body for r in kind(recs, "compilation_metrics") if r.body.get("fail_type")]
    guard = re.search(r"satisfy the generated guard (.+)", failure["fail_reason"]).group(1).strip().rstrip(".")
    for flags in ((), ("-e",)):
        out = report(tmp_path / "-".join(flags or ("plain",)), str(log), *flags)
        verdict = read_json(out / "summary.json")["export"]
        assert verdict["status"] == "failed"
        assert verdict["error"].startswith(failure["fail_type"] + ":")
        assert verdict["guard"] == guard
        page = text_of(out / "index.html")
        assert "Export failed" in page and "No issues were found" not in page


def test_the_compile_that_hit_the_recompile_limit_is_listed(tmp_path):
    (log,) = logs("recompile_limit")
    recs = parse(log)
    (limited,) = [r.cid for r in kind(recs, "compilation_metrics") if "recompile limit" in str(r.body.get("fail_reason"))]
    out = report(tmp_path, str(log))
    summary = read_json(out / "summary.json")
    entry = next(c for c in summary["compiles"] if c["id"] == limited)
    assert entry["status"] == "limit" and entry["failure"]["type"] == "Unsupported"  # not an error: it runs eagerly (issue 33)
    stack_trie = (out / "index.html").read_text().split('id="stack-trie"', 1)[1].split("<h2", 1)[0]
    assert f">{limited}</a>" in stack_trie


def test_hop_subgraphs_are_listed_and_linked(tmp_path):
    (log,) = logs("hops")
    recs = parse(log)
    out = report(tmp_path, str(log))
    for graph in kind(recs, "dynamo_output_graph"):
        names = re.findall(r"^\s+class (\w+)\(torch\.nn\.Module\):", graph.payload, re.M)
        assert names, graph.cid
        folder = "-_" + graph.cid.strip("[]").replace("/", "_") + "_0"
        page = (out / folder / "index.html").read_text()
        table = page.split("Higher-order-op subgraphs", 1)[1].split("</table>", 1)[0]
        for name in names:
            assert f"<code>{name}</code></a>" in table, (graph.cid, name)


@pytest.mark.parametrize("scenario", ["reset_reuse", "train_warm", "hops", "killed_midcompile", "recompile_limit", "training", "recompile"])
def test_no_highlighted_text_holds_a_pygments_error_token(tmp_path, scenario):
    out = report(tmp_path, str(TRACES / scenario))
    pages = [p for p in out.rglob("*.html") if 'class="err"' in p.read_text()]
    assert pages == []


def _divergent_compiles(tmp_path: Path, scenario: str) -> list[tuple[str, str | None]]:
    summary = read_json(report(tmp_path, str(TRACES / scenario)) / "summary.json")
    return [(d["kind"], d["compile_id"]) for d in summary["divergences"]]


def _graphs_by_rank(scenario: str) -> dict[int, dict[str, str]]:
    """Rank → frame compile → its dynamo graph text, from the rank logs."""
    graphs: dict[int, dict[str, str]] = {}
    for log in sorted((TRACES / scenario).glob("*rank_*")):
        rank = int(re.search(r"rank_(\d+)_", log.name).group(1))
        for r in kind(parse(log), "dynamo_output_graph"):
            graphs.setdefault(rank, {})[re.sub(r"_\d+\]$", "]", r.cid)] = r.payload
    return graphs


def test_ranks_that_exchange_compiler_collectives_and_agree_do_not_diverge(tmp_path):
    graphs = _graphs_by_rank("collectives")
    assert graphs[0].keys() == graphs[1].keys()
    assert _divergent_compiles(tmp_path, "collectives") == []
    summary = read_json(tmp_path / "out" / "summary.json")
    (decision,) = summary["compiler_collectives"]
    assert decision["agreed"] and decision["dynamic_sources"] == ["L['x'].size()[0]"]


def test_ranks_that_compile_different_graphs_under_one_id_diverge_there(tmp_path):
    graphs = _graphs_by_rank("collectives_desync")
    differing = [cid for cid in graphs[0] if "sin" in graphs[0][cid] and "cos" in graphs[1].get(cid, "")]
    assert differing == ["[1/0]"]
    found = _divergent_compiles(tmp_path, "collectives_desync")
    assert ("compile_content", "[1/0]") in found
    assert all(cid == "[1/0]" for _, cid in found)


def test_ranks_with_different_input_shapes_diverge_at_the_first_compile(tmp_path):
    shapes = {}
    for log in sorted((TRACES / "collectives_shapes").glob("*rank_*")):
        (first,) = [r for r in kind(parse(log), "describe_tensor") if r.cid == "[0/0]"][:1]
        shapes[log.name] = first.body["size"]
    assert len(set(map(tuple, shapes.values()))) == 2
    assert _divergent_compiles(tmp_path, "collectives_shapes")[0] == ("compile_content", "[0/0]")
