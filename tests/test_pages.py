"""Whole reports: links resolve, log text is escaped everywhere, names never leave the report."""

from __future__ import annotations

import json
import re

import pytest

from conftest import SHARED
from linkcheck import broken_links, parse
from logs import cid, line, metrics, start, write_log

XSS = "<script>alert(1)</script>"
CORPUS = SHARED / "corpus" / "tlparse"


def hostile_log(path):
    """Script-bearing text in every field that reaches a page, and traversal in every name that becomes a path."""
    frame = {"line": 3, "name": XSS, "filename": 0, "loc": XSS}
    return write_log(
        path,
        [
            line({"str": [f"/home/{XSS}/m.py", 0]}),
            line({"dynamo_start": {"stack": [frame, {"line": 4, "name": "f", "filename": f"<eval_with_key>.1{XSS}"}]}, **cid()}),
            line({"dynamo_output_graph": {}, **cid()}, f"graph {XSS}"),
            line({"dynamo_guards": {}, **cid()}, json.dumps([{"code": XSS}])),
            line({"inductor_output_code": {"filename": f"/tmp/../../{XSS}.py"}, **cid()}, f"# {XSS}\nx = '{XSS}'"),
            line({"artifact": {"name": f"../../{XSS}", "encoding": "string"}, **cid()}, XSS),
            line({"artifact": {"name": "/etc/passwd", "encoding": "json"}, **cid()}, json.dumps({XSS: XSS})),
            line({"graph_dump": {"name": "a/../../x"}, **cid()}, XSS),
            line({"optimize_ddp_split_child": {"name": ".."}, **cid()}, XSS),
            line({"dump_file": {"name": f"../../{XSS}"}}, XSS),
            line({"dump_file": {"name": "/abs/path"}}, XSS),
            line({"link": {"name": XSS, "url": "javascript:alert(1)"}, **cid()}),
            line({"link": {"name": XSS, "url": f"https://x.org/{XSS}"}, **cid()}),
            line({"chromium_event": {}, **cid()}, json.dumps({"name": XSS, "ph": "i", "ts": 1, "args": {"compile_id": XSS}})),
            line({"symbolic_shape_specialization": {"symbol": XSS, "sources": [XSS], "value": XSS, "user_stack": [frame], "stack": []}, **cid()}),
            line({"guard_added_fast": {"expr": XSS, "user_stack": [frame], "stack": [frame]}, **cid()}),
            line({"create_symbol": {"symbol": XSS, "source": XSS}, "subgraph_name": XSS, **cid()}),
            line({XSS: {XSS: XSS}, **cid()}, XSS),
            line({"describe_tensor": {"id": 0, "dtype": XSS}, **cid()}),
            line({"bwd_compilation_metrics": {"fail_type": XSS, "fail_reason": XSS}, **cid()}),
            line({"stack": [frame], "graph_dump": {"name": "aoti"}}, XSS),
            metrics(0, 0, 0, co_name=XSS, co_filename=XSS, fail_type=XSS, fail_reason=XSS, restart_reasons=[XSS], fail_user_frame_filename=XSS),
            f"V1202 12:14:23.064000 1 torch/x.py:1] {{{XSS}\n",
        ],
    )


def test_log_text_is_escaped_in_every_page(tmp_path, report_of):
    report, out = report_of(hostile_log(tmp_path / "h.log"), custom_header_html="<i>mine</i>")
    pages = list(out.rglob("*.html"))
    assert len(pages) > 8
    for page in pages:
        text = page.read_text()
        assert "<script>alert" not in text, page
        collected = parse(page)
        assert not [link for link in collected.links if "javascript:" in link.lower()], page
        for script in collected.scripts:
            assert re.fullmatch(r"(\.\./)*static/[\w.-]+\.js", script.get("src") or ""), page  # the report's own scripts only
    assert "<i>mine</i>" in (out / "index.html").read_text()  # the user's own header is trusted


def test_names_from_the_log_never_leave_the_report(tmp_path, report_of):
    report, out = report_of(hostile_log(tmp_path / "h.log"))
    outside = {p.name for p in tmp_path.iterdir()}
    assert outside == {"h.log", "out0"}
    for path in out.rglob("*"):
        assert out.resolve() in path.resolve().parents
        assert "<" not in path.name and ">" not in path.name
    urls = [a.url for artifacts in report.directory.values() for a in artifacts if not a.is_link]
    assert all(".." not in u.split("/") and not u.startswith("/") for u in urls)
    assert len(urls) == len(set(urls))


def test_hostile_report_links_resolve(tmp_path, report_of):
    _, out = report_of(hostile_log(tmp_path / "h.log"))
    assert broken_links(out) == []


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared corpus not present")
@pytest.mark.parametrize("case", ["simple", "comp_metrics", "comp_failure", "cache_hit_miss", "links", "artifacts", "chromium_events"])
def test_corpus_reports_have_no_broken_links(tmp_path, report_of, case):
    _, out = report_of(CORPUS / f"{case}.log")
    assert broken_links(out) == []


def test_index_lists_every_compile_id_with_a_page(tmp_path, report_of):
    lines = [line({"dynamo_output_graph": {}, **cid(f, 0, 0)}, "g") for f in range(3)] + [metrics(1, 0, 0)]
    report, out = report_of(write_log(tmp_path / "a.log", lines))
    index = (out / "index.html").read_text()
    for frame in range(3):
        assert f'href="-_{frame}_0_0/index.html"' in index
        assert (out / f"-_{frame}_0_0/index.html").is_file()
    page = (out / "-_1_0_0/index.html").read_text()
    assert 'href="../-_0_0_0/index.html"' in page and 'href="../-_2_0_0/index.html"' in page  # previous / next
    assert re.search(r"status-ok", page)


# -- the index's headline and its times ----------------------------------------------------------


def headline_cards(page: str) -> list[tuple[str, str]]:
    """The index's cards as (number, words), in order."""
    cards = page[page.index('<ul class="cards">'): page.index("</ul>", page.index('<ul class="cards">'))]
    items = re.findall(r'<span class="n">(.*?)</span>.*?<span class="t">(.*?)</span>', cards)
    return [(number, words) for number, words in items]


def test_the_headline_is_the_declared_totals_and_an_unknown_time_reads_unknown(tmp_path, report_of):
    """[0/0] restarts twice (attempts _0, _1, _2); neither it nor [1/0] logs a compile time, so the
    total compile time is unknown: its card says so, never 0. Every declared total has a card,
    restarts included, shown as its declaration shows it."""
    from tlparse_py.analysis.totals import columns

    log = write_log(tmp_path / "t.log", [
        start(0, 0, 0), start(0, 0, 1), start(0, 0, 2),
        metrics(0, 0, 2, entire_frame_compile_time_s=None, graph_op_count=3),
        start(1),
        metrics(1, entire_frame_compile_time_s=None),
    ])
    _, out = report_of(log)
    page = (out / "index.html").read_text()
    cards = headline_cards(page)
    assert len(cards) == len(columns()) + 1  # and the records card
    assert ("2", "compiles") in cards and ("2", "frames") in cards and ("2", "restarts") in cards
    assert ("unknown", "compile time (forward + backward)") in cards
    assert ("0 / 0 / 0", "cache hits / misses / bypasses") in cards
    assert ("0", "skipped frames (ran eagerly)") in cards and ("0", "retries after a failed compile") in cards
    assert not any(number == "0" and "compile time" in words for number, words in cards)


def test_every_time_on_the_index_says_which_time_it_is(tmp_path, report_of):
    """[0/0] compiled its forward in 2 s and, later, its backward lazily in 0.5 s: the compiles table
    and "Files by compile id" both show 2.50 s, each saying it is forward + backward; [1/0] logged
    only its forward, which its section says."""
    log = write_log(tmp_path / "t.log", [
        line({"dynamo_start": {"stack": []}, **cid(0)}),
        metrics(0, entire_frame_compile_time_s=2.0, graph_op_count=3),
        line({"dynamo_start": {"stack": []}, **cid(1)}),
        metrics(1, entire_frame_compile_time_s=0.25, graph_op_count=3),
        line({"bwd_compilation_metrics": {"inductor_compile_time_s": 0.5}, **cid(0)}),
    ])
    _, out = report_of(log)
    page = (out / "index.html").read_text()
    assert page.count("Compile time <span class=\"muted\">(forward + backward)</span></th>") == 2  # the compiles and the slowest
    section = lambda label: re.search(rf'<h3><a href="[^"]+">\[{label}\]</a>.*?</h3>', page).group(0)
    assert '<span class="muted" title="forward 2.00 s + backward 0.50 s">2.50 s forward + backward</span>' in section("0/0")
    assert '<span class="muted">250.0 ms forward</span>' in section("1/0")
    assert 'title="forward 2.00 s + backward 0.50 s">2.50 s</td>' in page  # the compiles table: the same time
