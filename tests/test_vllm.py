"""vLLM's piecewise compiles: upstream tlparse's own test input, and the ways a vLLM log goes wrong.

Expectations come from the raw log (its payload lines, its record order), never from the tool.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from conftest import SHARED
from logs import cid, line, write_log

import tlparse_py
from linkcheck import broken_links

UPSTREAM = SHARED / "corpus" / "tlparse-upstream"
POST_GRAD_LOG = UPSTREAM / "vllm_post_grad_diff.log"
SCHEMA = json.loads((Path(tlparse_py.__file__).parent / "summary.schema.json").read_text())
needs_upstream = pytest.mark.skipif(not POST_GRAD_LOG.is_file(), reason="../shared/corpus/tlparse-upstream not present")


def raw_records(log: Path) -> list[tuple[dict, str]]:
    """(envelope, payload text) of each record, read from the log's lines."""
    records: list[tuple[dict, list[str]]] = []
    for text in log.read_text().splitlines():
        if text.startswith("\t") and records:
            records[-1][1].append(text[1:])
        elif "] {" in text:
            records.append((json.loads(text[text.index("] {") + 2:]), []))
    return [(meta, "\n".join(lines)) for meta, lines in records]


def line_changes(before: str, after: str) -> tuple[int, int]:
    """Lines only the graph after a pass has, and lines only the graph before it has (distinct lines)."""
    old, new = set(before.splitlines()), set(after.splitlines())
    return len(new - old), len(old - new)


@pytest.fixture(scope="module")
def post_grad(tmp_path_factory):
    out = tmp_path_factory.mktemp("vllm") / "out"
    tlparse_py.build(POST_GRAD_LOG, out)
    return out


@needs_upstream
def test_upstreams_files_are_there_by_upstreams_names(post_grad):
    """The files upstream tlparse writes for its own test input, and its front page."""
    folder = post_grad / "-_0_0_0"
    for name in ("vllm_patterns.FusionPass_0.py", "before_post_grad_graph_1.txt", "vllm_post_grad.0.FusionPass_2.txt",
                 "vllm_post_grad.0.FusionPass.diff.html", "vllm_post_grad.1.ReshapePass_4.txt", "vllm_post_grad.1.ReshapePass.diff.html"):
        assert (folder / name).is_file(), name
    assert "vLLM Compilation Summary" in (post_grad / "index.html").read_text()
    usual = (post_grad / "tlparse_index.html").read_text()
    assert "tlparse-py report" in usual and "[0/0]" in usual
    assert broken_links(post_grad) == []


@needs_upstream
def test_each_pass_is_diffed_against_the_graph_before_it(post_grad):
    records = {meta.get("graph_dump", meta.get("artifact", {})).get("name"): text for meta, text in raw_records(POST_GRAD_LOG)}
    before, fusion, reshape = records["before_post_grad_graph"], records["vllm_post_grad.0.FusionPass"], records["vllm_post_grad.1.ReshapePass"]
    folder = post_grad / "-_0_0_0"
    for name, old, new in (("0.FusionPass", before, fusion), ("1.ReshapePass", fusion, reshape)):
        page = (folder / f"vllm_post_grad.{name}.diff.html").read_text()
        assert f"Pass Diff: {name}" in page
        added = re.findall(r'<td class="code-cell diff-add">(.*?)</td>', page)
        removed = re.findall(r'<td class="code-cell diff-del">(.*?)</td>', page)
        assert (len(added), len(removed)) == line_changes(old, new)
        for text in added:
            assert text.strip() and text.strip() in new
    summary = json.loads((post_grad / "summary.json").read_text())
    jsonschema.Draft202012Validator(SCHEMA).validate(summary)
    passes = summary["vllm"]["calls"][0]["passes"]
    assert [(p["name"], p["baseline"], p["added"], p["removed"], p["changed"]) for p in passes] == [
        ("0.FusionPass", "before_post_grad_graph", *line_changes(before, fusion), True),
        ("1.ReshapePass", "vllm_post_grad.0.FusionPass", *line_changes(fusion, reshape), True),
    ]
    # the patterns are a .py file of their own, and the summary lists it
    assert summary["vllm"]["calls"][0]["patterns"] == [{"name": "vllm_patterns.FusionPass.py", "url": "-_0_0_0/vllm_patterns.FusionPass_0.py"}]


# -- bad input ---------------------------------------------------------------------------------

CONFIG = {"model": "tiny", "prefix": "model", "mode": "VLLM_COMPILE", "backend": "inductor", "compile_sizes": "[1, 4]"}


def artifact(name: str, payload: str, encoding: str = "json", **ids: int) -> str:
    return line({"artifact": {"name": name, "encoding": encoding}, **cid(**ids)}, payload)


def dump(name: str, payload: str, **ids: int) -> str:
    return line({"graph_dump": {"name": name}, **cid(**ids)}, payload)


def piece(index: int, submod: str, start: int, end: int, single: bool) -> str:
    data = {"piecewise_index": index, "submod_name": submod, "compile_range_start": start, "compile_range_end": end,
            "is_single_size": single, "is_cudagraph_capture_size": single}
    return artifact("vllm_piecewise_compile_start", json.dumps(data))


def test_damaged_vllm_json_is_counted_and_the_rest_is_summarised(tmp_path):
    log = write_log(tmp_path / "dedicated_log_torch_trace_x.log", [
        artifact("vllm_compilation_config", json.dumps(CONFIG)),
        artifact("vllm_piecewise_compile_start", '{"piecewise_index": 0, "submod_name": "submod_0", '),  # cut
        dump("vllm_submod_0", "graph 0"),
        piece(2, "submod_2", 1, 16, False),
        dump("vllm_submod_2", "graph 2"),
    ])
    out = tmp_path / "out"
    analysis = tlparse_py.build(log, out)
    summary = analysis.to_dict()
    assert summary["stats"]["fail_vllm_json"] == 1 and summary["vllm"]["damaged"] == 1
    [call] = summary["vllm"]["calls"]
    assert call["config"] == CONFIG and [(p["submod"], p["group"]) for p in call["pieces"]] == [("submod_2", "range [1, 16]")]
    page = (out / "index.html").read_text()
    assert "1 vLLM record(s) could not be read" in page and "submod_2" in page
    jsonschema.Draft202012Validator(SCHEMA).validate(summary)


def test_what_is_missing_is_said_and_nothing_is_guessed(tmp_path):
    """A pass dump with no before_post_grad_graph, a compile start with no file after it, and no config."""
    log = write_log(tmp_path / "dedicated_log_torch_trace_y.log", [
        dump("vllm_post_grad.0.NoOpPass", "def forward(x):\n    return x"),
        piece(0, "submod_0", 4, 4, True),
    ])
    summary = tlparse_py.analyze(log).to_dict()
    [call] = summary["vllm"]["calls"]
    [change] = call["passes"]
    assert change["baseline"] is None and change["diff"] is None and change["changed"] is None and change["added"] is None
    assert any("vllm_compilation_config" in m for m in call["missing"])
    assert any("NoOpPass" in m and "not diffed" in m for m in call["missing"])
    assert any("submod_0 (size 4)" in m and "no file after it" in m for m in call["missing"])
    assert call["config"] is None and call["pieces"][0]["group"] == "size 4"


def test_pieces_group_by_range_and_size_in_log_order(tmp_path):
    log = write_log(tmp_path / "dedicated_log_torch_trace_z.log", [
        artifact("vllm_compile_event", json.dumps({"type": "aot_cache_hit"})),
        artifact("vllm_compilation_config", json.dumps(CONFIG)),
        dump("vllm_piecewise_split_graph", "split"),
        piece(0, "submod_0", 1, 16384, False), dump("vllm_submod_0", "g0"),
        piece(2, "submod_2", 1, 16384, False), dump("vllm_submod_2", "g2"),
        piece(0, "submod_0", 8, 8, True), dump("vllm_submod_0", "g0 size 8"),
        artifact("vllm_compilation_config", json.dumps({**CONFIG, "prefix": "drafter"})),
        piece(0, "submod_0", 1, 64, False), dump("vllm_submod_0", "drafter g0"),
    ])
    out = tmp_path / "out"
    summary = tlparse_py.build(log, out).to_dict()
    first, second = summary["vllm"]["calls"]
    assert first["aot_cache_hit"] and not second["aot_cache_hit"] and second["prefix"] == "drafter"
    assert [(p["submod"], p["group"], p["cudagraph"]) for p in first["pieces"]] == [
        ("submod_0", "range [1, 16384]", False), ("submod_2", "range [1, 16384]", False), ("submod_0", "size 8", True)]
    assert all(len(p["files"]) == 1 and p["files"][0]["name"].startswith("vllm_submod_") for p in first["pieces"])
    assert first["split_graph"].endswith(".txt")
    page = (out / "index.html").read_text()
    for text in ("Compile Call 1", "Compile Call 2", "AOT cache hit", "range [1, 16384]", "size 8", "range [1, 64]", "drafter"):
        assert text in page, text
    assert broken_links(out) == []


def test_diff_pairs_pieces_and_says_when_a_pass_stops_changing_the_graph(tmp_path):
    from click.testing import CliRunner

    from tlparse_py.cli import main

    def run_log(name: str, fused: bool, extra_piece: bool) -> Path:
        graph = "def forward(x):\n    a = torch.sin(x)\n    return a"
        after = "def forward(x):\n    a = torch.ops.fused(x)\n    return a" if fused else graph
        records = [artifact("vllm_compilation_config", json.dumps(CONFIG)),
                   piece(0, "submod_0", 1, 16, False), dump("vllm_submod_0", "g0"),
                   artifact("before_post_grad_graph", graph, encoding="string"), dump("vllm_post_grad.0.FusionPass", after)]
        if extra_piece:
            records += [piece(3, "submod_3", 8, 8, True), dump("vllm_submod_3", "g3")]
        folder = tmp_path / name
        folder.mkdir()
        write_log(folder / "dedicated_log_torch_trace_v.log", records)
        return folder

    base, new = run_log("base", fused=True, extra_piece=False), run_log("new", fused=False, extra_piece=True)
    result = CliRunner().invoke(main, ["diff", str(base), str(new), "-o", str(tmp_path / "d"), "--no-browser",
                                       "--markdown", str(tmp_path / "d.md")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    vllm = json.loads((tmp_path / "d" / "diff.json").read_text())["comparison"]["vllm"]
    assert vllm["new_pieces"] == [{"call": "model", "submod": "submod_3", "group": "size 8"}] and vllm["gone_pieces"] == []
    assert vllm["passes"] == [{"call": "model", "pass": "FusionPass", "base": "changes the graph", "new": "no change"}]
    text = (tmp_path / "d.md").read_text()
    assert "`submod_3` for size 8 (model) is new" in text and "changes the graph → no change" in text
    assert "no change" in (tmp_path / "d" / "index.html").read_text()


# -- the harness scenario that compiles the way vLLM does (tlparse_py/harness/scenarios/vllm_piecewise.py) --

from test_vllm_scenario import compile_groups, log_path, read_records, vllm_records  # noqa: E402


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    out = tmp_path_factory.mktemp("scenario") / "out"
    return out, tlparse_py.build(log_path(), out).to_dict()


def test_every_piece_is_under_its_range_or_size(scenario):
    out, summary = scenario
    jsonschema.Draft202012Validator(SCHEMA).validate(summary)
    [call] = summary["vllm"]["calls"]
    starts = [start.data for start, _ in compile_groups(vllm_records())]
    assert starts, "the scenario logs its compile starts"
    expected = [(s["submod_name"], f"size {s['compile_range_start']}" if s["is_single_size"] else
                 f"range [{s['compile_range_start']}, {s['compile_range_end']}]", s["is_cudagraph_capture_size"]) for s in starts]
    assert [(p["submod"], p["group"], p["cudagraph"]) for p in call["pieces"]] == expected
    config = next(r for r in vllm_records() if r.name == "vllm_compilation_config").data
    assert call["config"] == config and call["event"] == next(r for r in vllm_records() if r.name == "vllm_compile_event").data["type"]
    page = (out / "index.html").read_text()
    groups = re.findall(r"<summary><b>(.*?)</b>", page)
    assert groups == list(dict.fromkeys(group for _, group, _ in expected))
    assert broken_links(out) == []


def test_each_pass_diff_says_whether_the_pass_changed_the_graph(scenario):
    _, summary = scenario
    [call] = summary["vllm"]["calls"]
    for (start, records), piece_ in zip(compile_groups(vllm_records()), call["pieces"], strict=True):
        before = next(r for r in records if r.name == "before_post_grad_graph").payload
        dumps = [r for r in records if (r.name or "").startswith("vllm_post_grad.")]
        expected = []
        for dump_ in dumps:
            expected.append((dump_.name.removeprefix("vllm_post_grad."), dump_.payload != before))
            before = dump_.payload
        assert [(p["name"], p["changed"]) for p in piece_["passes"]] == expected


def test_a_piece_costs_its_inductor_compile_spans(scenario):
    """Each piece's time is the `inductor_compile` spans logged between its compile start and the next one."""
    _, summary = scenario
    spans: list[float] = []
    opened = None
    for record in read_records(log_path()):
        if record.name == "vllm_piecewise_compile_start":
            spans.append(0.0)
        elif record.kind == "chromium_event" and spans:
            event = json.loads(record.payload)
            if event["name"] == "inductor_compile":
                opened = event["ts"] if event["ph"] == "B" else opened
                if event["ph"] == "E":
                    spans[-1] += (event["ts"] - opened) / 1e6
    [call] = summary["vllm"]["calls"]
    assert [p["compile_time_s"] for p in call["pieces"]] == pytest.approx(spans, abs=1e-5)
    assert all(t > 0 for t in spans)


def test_a_live_report_shows_the_pieces_as_they_compile(tmp_path):
    """Grown record by record, the live vLLM summary lists each piece once its compile start is read,
    and ends byte for byte as the one-shot report."""
    import gzip

    from tlparse_py.live import LiveReport
    from tlparse_py.options import Options
    from tlparse_py.pipeline import write_report

    data = gzip.decompress(log_path().read_bytes())
    starts = [i for i, text in enumerate(data.split(b"\n")) if b'"vllm_piecewise_compile_start"' in text]
    lines = data.split(b"\n")
    log = tmp_path / "trace" / "dedicated_log_torch_trace_v.log"
    log.parent.mkdir()
    log.write_bytes(b"")
    live = LiveReport(log, tmp_path / "live", Options())
    shown = []
    for cut in [*starts[1:], len(lines)]:  # each time up to (not including) the next compile start
        log.write_bytes(b"\n".join(lines[:cut]) + (b"\n" if cut < len(lines) else b""))
        live.update("test", live.read())
        page = (tmp_path / "live" / "index.html").read_text()
        shown.append(len(re.findall(r"<tr><td><code>submod_\d+</code></td><td>(?:yes|no)</td>", page)))
        assert 'id="live-banner"' in page and (tmp_path / "live" / "tlparse_index.html").is_file()
    assert shown == list(range(1, len(starts) + 1))
    live.finish()
    live.close()
    write_report(log, tmp_path / "one_shot")
    for name in ("index.html", "tlparse_index.html", "summary.json"):
        assert (tmp_path / "live" / name).read_bytes() == (tmp_path / "one_shot" / name).read_bytes(), name


def test_search_finds_each_piece_and_pass(scenario):
    out, summary = scenario
    index = " ".join(p.read_text() for p in (out / "static" / "search").glob("index-*.js"))
    [call] = summary["vllm"]["calls"]
    for piece_ in call["pieces"]:
        assert f"vLLM call 1 · {piece_['submod']} · {piece_['group']}" in index
    for change in call["pieces"][0]["passes"]:
        assert f"pass {change['name']}" in index


def test_pieces_logged_out_of_order_are_shown_as_logged_and_said(tmp_path):
    log = write_log(tmp_path / "dedicated_log_torch_trace_o.log", [
        artifact("vllm_compilation_config", json.dumps(CONFIG)),
        piece(2, "submod_2", 1, 16, False), dump("vllm_submod_2", "g2"),
        piece(0, "submod_0", 1, 16, False), dump("vllm_submod_0", "g0"),
    ])
    [call] = tlparse_py.analyze(log).to_dict()["vllm"]["calls"]
    assert [p["submod"] for p in call["pieces"]] == ["submod_2", "submod_0"]  # as logged, not sorted
    assert call["missing"] == ["The pieces of range [1, 16] were logged out of order: shown as logged."]


def test_a_pieces_cache_lookups_are_the_ones_logged_while_it_compiled(tmp_path):
    log = write_log(tmp_path / "dedicated_log_torch_trace_c.log", [
        artifact("vllm_compilation_config", json.dumps(CONFIG)),
        piece(0, "submod_0", 1, 16, False), dump("vllm_submod_0", "g0"),
        artifact("fx_graph_cache_miss", json.dumps({"key": "k0", "cache_event_time": 1})),
        piece(0, "submod_0", 8, 8, True), dump("vllm_submod_0", "g0 size 8"),
        artifact("fx_graph_cache_hit", json.dumps({"key": "k1", "cache_event_time": 2})),
        artifact("aotautograd_cache_hit", json.dumps({"key": "k2"})),
    ])
    [call] = json.loads(json.dumps(tlparse_py.analyze(log).to_dict()))["vllm"]["calls"]  # as summary.json holds it
    assert [p["cache"] for p in call["pieces"]] == [[["fx_graph", "miss"]], [["fx_graph", "hit"], ["aotautograd", "hit"]]]
