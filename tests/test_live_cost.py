"""Live updates cost what changed (issue 35): an update builds and renders only the compiles, index
rows, sections, stack-trie nodes and pages whose compile ids logged something, and what it shows is
what building everything again shows.

Counted, never timed: `LiveReport.rendered` says what the last update built and rendered.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logs import cid, line, metrics, start
from test_live import fixture_bytes
from tlparse_py import limits
from tlparse_py.analysis.compiles import forget_compiles, keep_compiles
from tlparse_py.analysis.stacks import Frame, StackTrie
from tlparse_py.analysis.store import Reuse
from tlparse_py.live import LiveReport
from tlparse_py.model import CompileId
from tlparse_py.options import Options
from tlparse_py.pipeline import new_analysis, source_of
from tlparse_py.report.render import render_macro, render_page
from tlparse_py.report.highlight import Highlighter
from tlparse_py.report.views.common import Inputs
from tlparse_py.report.views.compile import compile_page, page_refs
from tlparse_py.report.views.index import failures_page, index_page, trie_rows
from tlparse_py.report.views.live import LiveMark
from tlparse_py.report.views import live_index
from tlparse_py.report.views.live_index import LiveTrie
from tlparse_py.report.views.pages import PAGE_VIEWS, Builder


def follow(live: LiveReport) -> list:
    """Keep the index model each update makes (to render it again beside one built whole)."""
    made: list = []
    make = live._index_page
    live._index_page = lambda changes, touched: made.append(make(changes, touched)) or made[-1]  # type: ignore[method-assign]
    return made


def as_built_whole(live: LiveReport, model) -> None:
    """The compiles and the index of the last update are those of an analysis built whole."""
    analysis = live.analysis
    kept = analysis.compiles()
    forget_compiles(analysis)
    whole = analysis.compiles()
    assert [msgspec.to_builtins(c) for c in kept] == [msgspec.to_builtins(c) for c in whole]
    assert model.fragments, "the live index is assembled from its parts"
    mark = LiveMark("index.html", "", None, live.compiling)
    assert render_page(model, mark) == render_page(index_page(live.pipeline.inputs), mark)
    # the failures page says the totals the live index tallied: those computed over every compile
    assert live.index.totals is not None
    assert render_page(failures_page(live.pipeline.inputs, totals=live.index.totals)) == render_page(failures_page(live.pipeline.inputs))
    keep_compiles(analysis, live.compiles.compiles, live.compiles.index)


VERSION = re.compile(rb' data-version="[0-9a-f]*"')  # a live page's version: what live.js lists, a digest of the page


def pages_as_built_again(live: LiveReport) -> None:
    """Every compile page and record page the live report wrote holds what building it again from
    the analysis as it stands holds (its neighbours as the one-shot report links them): an update
    writes again the pages whose content changed, not only those of the compile ids that logged
    something (a restart's metrics end the compile every attempt's page shows, a capture's page
    says what became of the compiles of its graph, a metrics page lists the files its compile id
    wrote after it, vLLM's summary becoming the front page moves every page's link to the index)."""
    inputs, out = live.pipeline.inputs, live.writer.out
    written = {}
    pages = page_refs(live.analysis)
    for position, page in enumerate(pages):
        model = compile_page(inputs, pages, position, live.pipeline.spool.records(page.key), live.inline.builder)
        written[page.url] = render_page(model, LiveMark(page.url, "", None, live.compiling))
    build = Builder(inputs, live.pipeline.payloads.get, Highlighter(live.pipeline.highlighter.spool))
    for pending in live.pipeline.outputs.pending:
        written[pending.url] = render_page(PAGE_VIEWS[pending.view](build, pending), LiveMark(pending.url, "", None, live.compiling))
    for url, html in written.items():
        assert VERSION.sub(b"", (out / url).read_bytes()) == VERSION.sub(b"", html.encode("utf-8", "surrogatepass")), url


@pytest.mark.parametrize("name", ["recompile", "compiled_autograd", "reset_reuse", "export", "processes", "recompile_limit",
                                  "failure", "killed_midcompile", "training", "vllm_piecewise", "ddp_cache_race", "dynamic_backward",
                                  "config_patch"])
def test_each_update_shows_what_building_everything_again_shows(tmp_path, name):
    data = fixture_bytes(name)
    log = tmp_path / "trace" / "dedicated_log_torch_trace_x.log"
    log.parent.mkdir()
    log.write_bytes(b"")
    live = LiveReport(log, tmp_path / "live", Options())
    made = follow(live)
    pieces, position, updates = random.Random(3), 0, 0
    while position < len(data):
        size = pieces.choice([max(500, len(data) // n) for n in (60, 20, 6)])  # pieces of every size, a dozen updates or more
        with open(log, "ab") as handle:
            handle.write(data[position : position + size])
        position += size
        live.update("test", live.read())
        as_built_whole(live, made[-1])
        pages_as_built_again(live)
        updates += 1
    assert updates > 6
    live.close()


def compile_records(frame: int, stack_line: int) -> list[str]:
    """A whole compile of frame `frame`: its start (a stack of its own), a graph and its metrics."""
    stack = [{"line": 10, "name": "<module>", "filename": 0}, {"line": stack_line, "name": f"f{frame}", "filename": 0}]
    return [
        line({"dynamo_start": {"stack": stack}, **cid(frame)}),
        line({"dynamo_output_graph": {"sizes": {}}, **cid(frame)}, f"graph of frame {frame}\nreturn (x,)"),
        metrics(frame, co_name=f"f{frame}"),
    ]


def update_after_one_compile_id(tmp_path: Path, compiles: int) -> dict[str, int]:
    """What an update renders after records of one compile id are appended to a log of `compiles` compiles."""
    log = tmp_path / f"n{compiles}" / "dedicated_log_torch_trace_x.log"
    log.parent.mkdir()
    log.write_text(line({"str": ["model.py", 0]}) + "".join(r for frame in range(compiles) for r in compile_records(frame, frame)))
    live = LiveReport(log, log.parent / "out", Options())
    made = follow(live)
    live.update("first", live.read())
    assert made[-1].bounds["compiles"] == compiles
    counts = {}
    # a new compile, in three updates: its start, its graph, its end
    for step, record in enumerate(compile_records(compiles, 7)):
        with open(log, "a") as handle:
            handle.write(record)
        live.update("next", live.read())
        counts.update({f"new compile {step} {what}": n for what, n in live.rendered.items()})
    # a compile in the middle of the log logs again: a recompile reason of its frame's next compile
    with open(log, "a") as handle:
        handle.write(start(compiles // 2, 1) + metrics(compiles // 2, 1, co_name="again"))
    live.update("again", live.read())
    counts.update({f"recompile {what}": n for what, n in live.rendered.items()})
    as_built_whole(live, made[-1])
    live.close()
    return counts


def test_an_update_renders_what_changed_however_many_compiles_the_report_holds(tmp_path):
    few, many = update_after_one_compile_id(tmp_path, 50), update_after_one_compile_id(tmp_path, 500)
    assert few == many
    assert few["new compile 2 compiles"] == 1 and few["new compile 2 rows"] == 1 and few["new compile 2 sections"] == 1
    assert few["new compile 0 trie links"] == 1 and few["new compile 0 trie frames"] == 1  # its new frame, once
    assert few["new compile 0 compile pages"] == 2  # its page, and the one before it (its "next" link is new)
    assert few["new compile 1 compile pages"] == few["new compile 2 compile pages"] == 1  # the one before links to it already
    assert "new compile 1 failures page" not in few and few.get("new compile 1 trie frames", 0) == 0
    assert all(n <= 3 for n in few.values()), few


def test_the_page_before_a_new_compile_links_to_it_from_its_first_record_on(tmp_path):
    """The compile before a new one is written again once, when the new one's first record comes:
    its "next" link then stays right while the new compile logs the rest."""
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text(line({"str": ["model.py", 0]}) + "".join(r for frame in range(3) for r in compile_records(frame, frame)))
    out = tmp_path / "out"
    live = LiveReport(log, out, Options())
    live.update("first", live.read())
    written = []
    for record in compile_records(3, 7):
        with open(log, "a") as handle:
            handle.write(record)
        live.update("next", live.read())
        before, new = live.pages.plain[-2], live.pages.plain[-1]
        assert f'href="../{new.url}">{new.label}</a> →' in (out / before.url).read_text()
        assert f'← <a href="../{before.url}">{before.label}</a>' in (out / new.url).read_text()
        written.append(live.rendered["compile pages"])
    live.close()
    assert written == [2, 1, 1]


def test_the_first_update_renders_every_part_once(tmp_path):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text(line({"str": ["model.py", 0]}) + "".join(r for frame in range(40) for r in compile_records(frame, frame)))
    live = LiveReport(log, tmp_path / "out", Options())
    live.update("first", live.read())
    counts = dict(live.rendered)
    live.close()
    assert counts["compiles"] == counts["rows"] == counts["sections"] == counts["trie links"] == 40
    assert counts["trie frames"] == 41  # <module>, then each compile's own frame


def random_trie(seed: int, inserts: int, trie: StackTrie) -> list[tuple[list[Frame], object]]:
    pick = random.Random(seed)
    frames = [Frame(0, line, name, "") for line in range(4) for name in ("f", "g")]
    stacks = []
    for n in range(inserts):
        depth = pick.randint(0, 5)
        terminal = pick.choice([None, CompileId(frame_id=n, frame_compile_id=0), Reuse(CompileId(frame_id=n % 3, frame_compile_id=0), 1)])
        stacks.append(([pick.choice(frames) for _ in range(depth)], terminal))
    return stacks


@pytest.mark.parametrize("seed", range(6))
def test_the_trie_kept_per_node_is_the_trie_the_macro_writes(tmp_path, seed, monkeypatch):
    monkeypatch.setattr(limits, "INDEX_ROWS", 3)  # nodes with more ids than listed too
    monkeypatch.setattr(live_index, "PIECE", [0, 64, 16_384][seed % 3])  # subtrees kept in pieces, or joined
    log = tmp_path / "log"
    log.write_text("")
    analysis = new_analysis(source_of([log]), Options(), None)
    inputs = Inputs(analysis)
    trie = StackTrie()
    kept = LiveTrie(inputs, trie, rendered=Counter())
    stacks = random_trie(seed, 60, trie)
    cut = random.Random(seed)
    while stacks:
        batch = cut.randint(1, 12)
        for frames, terminal in stacks[:batch]:
            trie.insert(frames, terminal)
        del stacks[:batch]
        html = kept.html(set())
        rows = trie_rows(inputs, trie)
        assert ("".join(html) if html is not None else None) == (render_macro("trie", rows, "") if rows else None)
    if html is not None and live_index.PIECE == 64:  # kept in pieces, handed out again as the same strings when nothing changed
        again = kept.html(set())
        assert again is not None and len(html) > 3 and [id(piece) for piece in again] == [id(piece) for piece in html]


PIECES = st.lists(st.text(st.sampled_from("ab<é\ud800\U0001f600"), max_size=5), max_size=8)


@settings(max_examples=200, deadline=None)
@given(PIECES, PIECES, PIECES)
def test_an_index_written_again_is_encoded_and_versioned_as_if_written_first(before, page, other):
    """The index's pieces kept from its last version (`KeptPieces`) are not encoded and hashed
    again: a page's bytes and version are those it has when nothing was kept, the same pieces give
    the same version, and other content another."""
    from tlparse_py.live import KeptPieces

    kept = KeptPieces()
    kept.encoded(before)
    again, version = kept.encoded(page)
    fresh, fresh_version = KeptPieces().encoded(page)
    assert again == fresh == [piece.encode("utf-8", "surrogatepass") for piece in page]
    assert version == fresh_version == kept.encoded(page)[1]
    if [piece.encode("utf-8", "surrogatepass") for piece in other] != fresh:
        assert KeptPieces().encoded(other)[1] != version
