"""Generations after torch._dynamo.reset(): every compile of a process after a reset is in the new
generation, and every list of compiles is in log order (issue 43, items 2 and 3).

The truth is read here off the raw log text (`truth`), never through tlparse_py's reader: per
process, a `dynamo_start` of a frame compile id the process already started since its last reset
begins the next generation, and each `dynamo_start` is a compile, in the order of the log. The
report's summary.json, index tables, compile pages and live updates must say the same.
"""

from __future__ import annotations

import gzip
import html
import json
import random
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from conftest import TRACES, read_json
from logs import cid, line, log_text, write_log
from test_live import tree
from test_live_cost import as_built_whole, follow
from test_truth import report, text_of
from tlparse_py.live import LiveReport
from tlparse_py.options import Options
from tlparse_py.pipeline import write_report

FIXTURE = next((TRACES / "reset_phases").glob("dedicated_log*"))
HEADER = re.compile(r"^[VIWEC]\d{4} \d\d:\d\d:\d\d\.\d+ +(\d+) [^\]]+\] (\{.*\})$")
BREAK = "dynamo_graph_break_reason"


# -- the truth, from the log text ------------------------------------------------------------------


def envelopes(text: str) -> list[tuple[int, dict[str, Any]]]:
    """(glog pid, envelope) of every record line, in log order (payload lines skipped)."""
    found = []
    for text_line in text.split("\n"):
        match = HEADER.match(text_line)
        if match:
            found.append((int(match.group(1)), json.loads(match.group(2))))
    return found


def truth(text: str) -> list[dict[str, Any]]:
    """Every compile of the log, in the order of its dynamo_start: its id as written (`[0/0]`, a
    later process's `[p1:0/0]`), generation, process, compiled function (its metrics' co_name), why it
    happened (its function's first compile in the generation, or a recompile), its graph breaks."""
    processes: dict[int, int] = {}  # pid → process number, in the order first read
    generation: dict[int, int] = {}
    started: dict[int, set[tuple]] = {}  # pid → the frame compile ids started in its generation
    latest: dict[tuple, dict[str, Any]] = {}  # frame compile id → its latest compile
    compiles: list[dict[str, Any]] = []
    for pid, envelope in envelopes(text):
        process = processes.setdefault(pid, len(processes))
        ident = (pid, envelope.get("compiled_autograd_id"), envelope.get("frame_id"), envelope.get("frame_compile_id"))
        if "dynamo_start" in envelope:
            if ident in started.setdefault(pid, set()):
                generation[pid] = generation.get(pid, 0) + 1
                started[pid] = set()
            started[pid].add(ident)
            ca = "" if ident[1] is None else f"!{ident[1]}/"
            label = f"[{f'p{process}:' if process else ''}{ca}{ident[2]}/{ident[3]}]"
            latest[ident] = {"id": label, "generation": generation.get(pid, 0), "process": process, "frame": None, "breaks": 0,
                             "function": (pid, ident[1], ident[2])}
            compiles.append(latest[ident])
        elif ident in latest and "compilation_metrics" in envelope:
            latest[ident]["frame"] = envelope["compilation_metrics"]["co_name"]
            if envelope["compilation_metrics"].get("restart_reasons") and envelope.get("attempt"):
                latest[ident]["restarted"] = latest[ident]["id"][:-1] + f"_{envelope['attempt']}]"  # the attempt that logged it
        elif ident in latest and envelope.get("artifact", {}).get("name") == BREAK:
            latest[ident]["breaks"] += 1
    seen: set[tuple] = set()
    for compile_ in compiles:
        function = (*compile_["function"], compile_["generation"])
        compile_["cause"] = "recompile" if function in seen else "first"
        seen.add(function)
    return compiles


def marked(compile_: dict[str, Any]) -> str:
    """How every view shows a compile: its id, and its generation after the first."""
    return compile_["id"] + (f" (generation {compile_['generation']})" if compile_["generation"] else "")


def fixture_text() -> str:
    return log_text(FIXTURE)


@pytest.fixture(scope="module")
def reset_report(tmp_path_factory) -> Path:
    return report(tmp_path_factory.mktemp("reset"), str(FIXTURE))


# -- the fixture --------------------------------------------------------------------------------


def test_the_fixture_holds_what_its_scenario_says():
    compiles = truth(fixture_text())
    assert [(c["id"], c["generation"]) for c in compiles] == [
        ("[0/0]", 0), ("[1/0]", 0), ("[2/0]", 0), ("[3/0]", 0),
        ("[0/0]", 1), ("[1/0]", 1), ("[2/0]", 1), ("[3/0]", 1), ("[2/1]", 1), ("[3/1]", 1),
    ]
    frames = [c["frame"] for c in compiles]
    assert frames[0] == frames[6] == frames[8] == "first_fn" and frames[2] == frames[4] == "second_fn"
    assert all(frames[i].startswith("torch_dynamo_resume_in_first_fn") for i in (1, 7, 9))
    assert all(frames[i].startswith("torch_dynamo_resume_in_second_fn") for i in (3, 5))
    assert [c["id"] for c in compiles if c["breaks"]] == ["[0/0]", "[2/0]", "[0/0]", "[2/0]", "[2/1]"]
    # the graph breaks restarted the analysis: attempt 1 logged under the same frame compile, no new id
    attempts = {(e["frame_id"], e["frame_compile_id"], e["attempt"]) for _, e in envelopes(fixture_text()) if "compilation_metrics" in e}
    assert (0, 0, 1) in attempts and (2, 1, 1) in attempts


# -- summary.json -------------------------------------------------------------------------------


def test_summary_json_puts_every_compile_after_the_reset_in_generation_1_in_log_order(reset_report):
    summary = read_json(reset_report / "summary.json")
    expected = truth(fixture_text())
    got = [(c["id"], c["generation"], c["frame"], c["cause"]) for c in summary["compiles"]]
    assert got == [(c["id"], c["generation"], c["frame"], c["cause"]) for c in expected]
    # [2/1] recompiles first_fn, the generation-1 [2/0]: not generation 0's [2/0], which was second_fn
    recompile = next(c for c in summary["compiles"] if c["id"] == "[2/1]")
    assert recompile["generation"] == 1 and recompile["frame"] == "first_fn" and recompile["cause"] == "recompile"
    assert recompile["recompile_reasons"] and recompile["recompile_reasons"][0].startswith("2/0: ")
    assert [bool(c["graph_breaks"]) for c in summary["compiles"]] == [c["breaks"] > 0 for c in expected]
    assert summary["compiles"][0]["attempts"] == ["[0/0]", "[0/0_1]"]  # a restart is an attempt, not a reuse
    functions = {(*c["function"], c["generation"]) for c in expected}
    assert summary["totals"]["compiles"] == len(expected) and summary["totals"]["frames"] == len(functions)
    assert summary["totals"]["recompiles"] == sum(c["cause"] == "recompile" for c in expected)
    urls = [c["url"] for c in summary["compiles"]]
    assert len(set(urls)) == len(urls) and all((reset_report / url).is_file() for url in urls)


# -- the index ----------------------------------------------------------------------------------


def test_the_index_tables_and_the_failures_page_list_compiles_in_log_order_with_their_generation(reset_report):
    index = (reset_report / "index.html").read_text()
    expected = truth(fixture_text())
    table = index.split('id="compiles-table"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r'<tr><td data-sort-value="(\d+)"[^>]*>(?:<a href="[^"]*">)?([^<]+)<', table)
    assert [label for _, label in rows] == [marked(c) for c in expected]
    assert [int(place) for place, _ in rows] == list(range(1, len(expected) + 1))
    breaks = index.split('id="graph-breaks"', 1)[1].split("</table>", 1)[0]
    listed = re.findall(r'<a href="([^"]+)">([^<]+)</a> ', breaks)
    assert [label for _, label in listed] == [marked(c) for c in expected if c["breaks"]]
    for url, label in listed:  # each links to the page of its own compile, which says which it is
        assert f"Compile {label} " in text_of(reset_report / url)
    failures = (reset_report / "failures_and_restarts.html").read_text()
    rows = re.findall(r'<a href="(-_[^"]+/(?:index|generation_\d+)\.html)">([^<]+)</a>', failures)
    assert [label for _, label in rows] == [marked({**c, "id": c["restarted"]}) for c in expected if c.get("restarted")]
    for url, label in rows:
        assert f"<title>Compile {label} · " in (reset_report / url).read_text()
    trie = index.split('id="stack-trie"', 1)[1].split("<h2", 1)[0]
    links = dict((label, url) for url, label in re.findall(r'href="([^"]+)">([^<]+)<', trie))
    assert set(links) == {marked(c) for c in expected}


def test_each_compile_page_is_its_own_compile(reset_report):
    summary = read_json(reset_report / "summary.json")
    for compile_, expected in zip(summary["compiles"], truth(fixture_text()), strict=True):
        html = (reset_report / compile_["url"]).read_text()  # the page of the attempt that logged its metrics
        page = text_of(reset_report / compile_["url"])
        attempt = re.escape(expected["id"][:-1]) + r"(_\d+)?\]"
        marker = re.escape(marked(expected)[len(expected["id"]):])
        assert re.search(f"<title>Compile {attempt}{marker} · ", html), compile_["url"]
        assert f"Frame {expected['frame']} " in page, compile_["url"]
        reused = sum(c["id"] == expected["id"] for c in truth(fixture_text())) > 1
        assert ("names 2 separate compiles" in page) == reused
        assert ("Compiled in generation 1" in page) == (expected["generation"] == 1 and not reused)
    # an id first compiled after the reset has its page where tlparse puts it, its folder's index.html
    assert next(c for c in summary["compiles"] if c["id"] == "[2/1]")["url"].startswith("-_2_1_")
    assert not list(reset_report.glob("-_2_1_*/generation_*.html"))


# -- live -----------------------------------------------------------------------------------------


def metrics_ends(data: bytes) -> list[int]:
    """The byte offset just past each compilation_metrics record (a record line without payload)."""
    ends, at = [], 0
    for text_line in data.split(b"\n"):
        at += len(text_line) + 1
        if b'] {"compilation_metrics": ' in text_line:
            ends.append(at)
    return ends


def test_read_live_each_update_has_the_generations_of_the_log_so_far(tmp_path):
    data = gzip.decompress(FIXTURE.read_bytes())
    log = tmp_path / "trace" / "dedicated_log_torch_trace_x.log"
    log.parent.mkdir()
    log.write_bytes(b"")
    live = LiveReport(log, tmp_path / "live", Options())
    made = follow(live)
    ends = metrics_ends(data)
    cuts = sorted(set(ends) | set(random.Random(5).sample(range(1, len(data)), 12)) | {len(data)})
    position = 0
    for cut in cuts:
        with open(log, "ab") as handle:
            handle.write(data[position:cut])
        position = cut
        live.update("test", live.read())
        as_built_whole(live, made[-1])  # what the update shows is what building it all again shows
        if cut in ends:  # every compile read so far has ended: the truth of the log so far
            assert live.bytes_read == cut
            expected = truth(data[:cut].decode())
            got = [(c.id, c.generation, c.frame, c.cause) for c in live.analysis.compiles()]
            assert got == [(c["id"], c["generation"], c["frame"], c["cause"]) for c in expected]
    live.finish()
    live.close()
    write_report(log, tmp_path / "one_shot")
    final, one_shot = tree(tmp_path / "live"), tree(tmp_path / "one_shot")
    assert sorted(final) == sorted(one_shot)
    assert [path for path in final if final[path] != one_shot[path]] == []


# -- processes, compiled autograd, a compile that never ended ------------------------------------------


def start_of(frame: int, compile: int, *, fn: str, pid: int = 4242, ca: int | None = None) -> str:
    stack = [{"line": 10, "name": "<module>", "filename": 0}, {"line": 3, "name": fn, "filename": 0}]
    return line({"dynamo_start": {"stack": stack}, **cid(frame, compile, 0, ca=ca)}, pid=pid)


def end_of(frame: int, compile: int, *, fn: str, pid: int = 4242, ca: int | None = None) -> str:
    meta = {"co_name": fn, "graph_op_count": 2, "restart_reasons": [], "entire_frame_compile_time_s": 0.5}
    return line({"compilation_metrics": meta, **cid(frame, compile, 0, ca=ca)}, pid=pid)


def compiles_of(path: Path) -> list[tuple[str, int, str | None, str]]:
    summary = msgspec.to_builtins(write_report(path, path.parent / "out").summary())
    return [(c["id"], c["generation"], c["frame"], c["cause"]) for c in summary["compiles"]]


def expected_of(path: Path) -> list[tuple[str, int, str | None, str]]:
    return [(c["id"], c["generation"], c["frame"], c["cause"]) for c in truth(path.read_text())]


def test_a_reset_of_one_process_leaves_the_others_in_their_generation(tmp_path):
    """Process 4242 resets; process 777, whose ids are those 4242 reuses, keeps its generation 0."""
    log = write_log(tmp_path / "two.log", [
        start_of(0, 0, fn="f"), end_of(0, 0, fn="f"),
        start_of(0, 0, fn="g", pid=777), end_of(0, 0, fn="g", pid=777),
        start_of(0, 0, fn="h"), end_of(0, 0, fn="h"),  # 4242 after its reset
        start_of(1, 0, fn="k", pid=777), end_of(1, 0, fn="k", pid=777),
        start_of(1, 0, fn="f"), end_of(1, 0, fn="f"),
        start_of(1, 1, fn="f"), end_of(1, 1, fn="f"),
    ])
    got = compiles_of(log)
    assert got == expected_of(log)
    assert got == [("[0/0]", 0, "f", "first"), ("[p1:0/0]", 0, "g", "first"), ("[0/0]", 1, "h", "first"),
                   ("[p1:1/0]", 0, "k", "first"), ("[1/0]", 1, "f", "first"), ("[1/1]", 1, "f", "recompile")]


def test_a_reused_compiled_autograd_id_begins_the_next_generation(tmp_path):
    log = write_log(tmp_path / "ca.log", [
        start_of(0, 0, fn="f"), end_of(0, 0, fn="f"),
        start_of(1, 0, fn="compiled_autograd", ca=0), end_of(1, 0, fn="compiled_autograd", ca=0),
        start_of(1, 0, fn="compiled_autograd", ca=0), end_of(1, 0, fn="compiled_autograd", ca=0),  # after reset()
        start_of(0, 0, fn="f"), end_of(0, 0, fn="f"),
    ])
    got = compiles_of(log)
    assert got == expected_of(log)
    assert [(id_, generation) for id_, generation, _, _ in got] == [("[0/0]", 0), ("[!0/1/0]", 0), ("[!0/1/0]", 1), ("[0/0]", 1)]


def test_a_compile_that_never_ended_stays_in_its_generation(tmp_path):
    """[1/0] started and never logged its end (its metrics were lost); after reset() [0/0] and [1/0]
    compile again: a new compile each, in generation 1, and the lost one is not under way any more."""
    log = write_log(tmp_path / "lost.log", [
        start_of(0, 0, fn="f"), end_of(0, 0, fn="f"),
        start_of(1, 0, fn="g"),
        start_of(0, 0, fn="g"), end_of(0, 0, fn="g"),
        start_of(1, 0, fn="f"), end_of(1, 0, fn="f"),
    ])
    analysis = write_report(log, tmp_path / "out")
    got = [(c.id, c.generation, c.frame, c.status) for c in analysis.compiles()]
    assert got == [("[0/0]", 0, "f", "ok"), ("[1/0]", 0, "g", "missing"), ("[0/0]", 1, "g", "ok"), ("[1/0]", 1, "f", "ok")]
    assert [(id_, generation) for id_, generation, _, _ in expected_of(log)] == [(c[0], c[1]) for c in got]
    assert analysis.open_compiles() == []


def test_an_id_started_again_before_it_ended_begins_the_next_generation(tmp_path):
    """The compile of [0/0] never logged its end; a start of [0/0] again can only follow a reset()."""
    log = write_log(tmp_path / "again.log", [
        start_of(0, 0, fn="f"),
        start_of(0, 0, fn="g"), end_of(0, 0, fn="g"),
    ])
    analysis = write_report(log, tmp_path / "out")
    assert [(c.id, c.generation, c.frame, c.status) for c in analysis.compiles()] == [
        ("[0/0]", 0, "f", "missing"), ("[0/0]", 1, "g", "ok")]
    assert [(id_, generation) for id_, generation, _, _ in expected_of(log)] == [("[0/0]", 0), ("[0/0]", 1)]


def test_a_log_without_a_reset_is_all_generation_0():
    log = next((TRACES / "recompile").glob("dedicated_log*"))
    assert {c["generation"] for c in truth(log_text(log))} == {0}



def _chain(out: Path) -> list[str]:
    """The compile pages' chain from the index's first compile, following each page's `next` link:
    the labels, in the order a reader paging through them meets them."""
    pages = {}
    for page in out.rglob("*.html"):
        found = re.search(r'<nav class="pagenav".*?</nav>', page.read_text(), re.S)
        if found is not None:
            heading = re.search(r"<h1>Compile (.*?) <", page.read_text())
            nexts = re.findall(r'<span><a href="([^"]+)">[^<]*</a> →</span>', found[0])
            pages[page.resolve()] = (html.unescape(heading[1]) if heading else "", (page.parent / nexts[0]).resolve() if nexts else None)
    firsts = set(pages) - {n for _, n in pages.values() if n is not None}
    (at,) = firsts
    labels = []
    while at is not None:
        label, at = pages[at]
        labels.append(label)
    assert len(labels) == len(pages), "every compile page is on the one chain"
    return labels


def test_compile_pages_page_through_in_log_order_and_a_restart_only_in_its_generation(tmp_path):
    """f [0/0] and g [1/0]; reset(); g [0/0], which restarts ([0/0_1]), and f [1/0]. Paging through
    the compile pages meets them as the log holds them, and the restart's attempt has a page in
    generation 1 only (it was not logged in generation 0)."""
    def start(frame: int, fn: str) -> str:
        stack = [{"line": 1, "name": "<module>", "filename": 0}, {"line": 3 + frame, "name": fn, "filename": 0}]
        return line({"dynamo_start": {"stack": stack}, **cid(frame, 0, 0)})

    def metrics(frame: int, fn: str, attempt: int = 0) -> str:
        fields = {"co_name": fn, "graph_op_count": 1, "restart_reasons": [], "entire_frame_compile_time_s": 0.1}
        return line({"compilation_metrics": fields, **cid(frame, 0, attempt)})

    graph = line({"dynamo_output_graph": {}, **cid(0, 0, 1)}, "class GraphModule(torch.nn.Module):\n    pass")
    log = write_log(tmp_path / "dedicated_log_torch_trace_x.log", [
        line({"str": ["/work/prog.py", 0]}),
        start(0, "f"), metrics(0, "f"), start(1, "g"), metrics(1, "g"),
        start(0, "g"), graph, metrics(0, "g", attempt=1), start(1, "f"), metrics(1, "f"),
    ])
    out = report(tmp_path, str(log))
    assert _chain(out) == ["[0/0]", "[1/0]", "[0/0] (generation 1)", "[0/0_1] (generation 1)", "[1/0] (generation 1)"]
    summary = read_json(out / "summary.json")
    assert [(c["id"], c["generation"], c["attempts"]) for c in summary["compiles"]] == [
        ("[0/0]", 0, ["[0/0]"]), ("[1/0]", 0, ["[1/0]"]), ("[0/0]", 1, ["[0/0]", "[0/0_1]"]), ("[1/0]", 1, ["[1/0]"])]
    assert summary["totals"]["restarts"] == 1
