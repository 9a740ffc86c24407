"""Many tiny compiles (issue 12, item 11): past `limits.PAGED_START_ONLY`, compile ids that hold
nothing but their dynamo_start get no folder or page; the index says so, caps its lists at
`limits.INDEX_ROWS` and links no missing page; summary.json still lists every compile (url null)."""

from __future__ import annotations

import json
import re

import pytest

import tlparse_py
from linkcheck import broken_links
from logs import cid, line, metrics, start, write_log
from test_summary import validate
from tlparse_py import limits, pipeline

START_ONLY = 3000  # frames 1..3000, one dynamo_start each
INDEX_ROWS = 400  # lowered for the test, so the index caps its lists too


def many_compiles_log(path):
    lines = [start(0), metrics(0)]  # a whole compile first: it keeps its page
    lines += [start(frame) for frame in range(1, START_ONLY + 1)]
    lines.append(start(START_ONLY, 1))  # the last frame recompiled, also start only: a recompile of two pageless ids
    lines.append(line({"dynamo_start": {}, **cid(9000, 0, 0)}))  # start only, without a stack
    lines += [start(9001), metrics(9001)]  # a whole compile after them all
    return write_log(path / "many.log", lines)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("many")
    log = many_compiles_log(root)
    out = root / "out"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(limits, "INDEX_ROWS", INDEX_ROWS)
        analysis = pipeline.write_report(log, out)
    return log, out, analysis


def test_start_only_ids_past_the_threshold_get_no_page(report):
    _log, out, analysis = report
    paged = limits.PAGED_START_ONLY
    pageless = START_ONLY + 2 - paged  # [3000/1] and [9000/0] are start only too
    assert len(analysis.pageless) == pageless
    folders = {p.name for p in out.iterdir() if p.is_dir() and re.fullmatch(r"-_\d+_\d+_\d+", p.name)}
    assert len(folders) == paged + 2  # the first start-only ids, and the two whole compiles
    assert "-_0_0_0" in folders and "-_9001_0_0" in folders
    assert f"-_{paged}_0_0" in folders and f"-_{paged + 1}_0_0" not in folders


def test_index_says_what_it_left_out_and_links_no_missing_page(report):
    _log, out, _analysis = report
    html = (out / "index.html").read_text()
    pageless = START_ONLY + 2 - limits.PAGED_START_ONLY
    assert f"{pageless:,} compile ids logged nothing but their <code>dynamo_start</code>" in html
    assert f"past the first {limits.PAGED_START_ONLY:,} such ids" in html
    total = START_ONLY + 4
    assert f"The first {INDEX_ROWS:,} of {total:,} compiles are listed here" in html
    assert f"The first {INDEX_ROWS:,} of {total:,} compile ids are listed here" in html
    assert html.count('<section class="compile"') == INDEX_ROWS
    assert "more</span>" in html  # the stack trie node all the start-only ids share lists the first ones
    assert 'href="None"' not in html
    assert broken_links(out) == []


def test_summary_lists_every_compile_with_url_null_where_there_is_no_page(report):
    log, out, _analysis = report
    data = json.loads((out / "summary.json").read_text())
    validate(data)
    compiles = {(c["id"], c["generation"]): c for c in data["compiles"]}
    assert len(compiles) == START_ONLY + 4
    assert compiles[("[0/0]", 0)]["url"] == "-_0_0_0/index.html"
    assert compiles[("[9001/0]", 0)]["url"] == "-_9001_0_0/index.html"
    assert compiles[(f"[{limits.PAGED_START_ONLY}/0]", 0)]["url"] is not None
    assert compiles[(f"[{limits.PAGED_START_ONLY + 1}/0]", 0)]["url"] is None
    assert compiles[(f"[{START_ONLY}/1]", 0)]["url"] is None
    assert compiles[("[9000/0]", 0)]["url"] is None
    assert data["totals"]["compiles"] == START_ONLY + 4
    assert data == tlparse_py.analyze(log).to_dict()  # summary.json is the analysis, as always
    markdown = (out / "summary.md").read_text()
    assert "(None)" not in markdown


def test_few_start_only_ids_keep_their_pages(tmp_path):
    log = write_log(tmp_path / "few.log", [start(frame) for frame in range(5)])
    out = tmp_path / "out"
    analysis = pipeline.write_report(log, out)
    assert analysis.pageless == set()
    assert all((out / f"-_{frame}_0_0" / "index.html").is_file() for frame in range(5))
    assert "such ids" not in (out / "index.html").read_text()
