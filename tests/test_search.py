"""Search across the whole report: the index (tlparse_py/search.py) and the box of every page (search.js),
in a real browser from file:// URLs, on real fixtures."""

from __future__ import annotations

import io

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import TRACES

from tlparse_py.report import search
from tlparse_py.pipeline import (
    Options,
    Pipeline,
    new_analysis,
    read_logs,
    source_of,
    write_report,
)
from tlparse_py.report.views.sections import PageBuilder
from tlparse_py.report.folder_writer import FolderWriter

LOG = next((TRACES / "graph_break").glob("dedicated_log*"))
NODE = shutil.which("node")


def shard_entries(body: bytes) -> tuple[int, list[list]]:
    text = body.decode("utf-8")
    assert text.startswith("window.TLPARSE_SEARCH = window.TLPARSE_SEARCH || [];\nTLPARSE_SEARCH.push([")
    return tuple(json.loads(text[text.index("push(") + 5 : text.rindex(");")]))


def manifest_of(body: bytes) -> dict:
    text = body.decode("utf-8")
    assert text.startswith("window.TLPARSE_SEARCH_INDEX = ")
    return json.loads(text[len("window.TLPARSE_SEARCH_INDEX = ") :].rstrip().rstrip(";"))


def run_as_script(files: list[tuple[str, bytes]], tmp_path: Path) -> int:
    """Load the files as a page would (in node, with a `window`); the number of entries they pushed."""
    paths = []
    for name, body in files:
        path = tmp_path / name.replace("/", "_")
        path.write_bytes(body)
        paths.append(str(path))
    script = "global.window = global; for (const f of process.argv.slice(1)) require(f);" \
             "let n = 0; for (const [, e] of (window.TLPARSE_SEARCH || [])) n += e.length;" \
             "if (n !== window.TLPARSE_SEARCH_INDEX.entries) throw new Error('count ' + n); console.log(n);"
    done = subprocess.run([NODE, "-e", script, *paths], check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


@pytest.fixture(scope="module")
def read_pipeline(tmp_path_factory):
    """A pipeline that has read the graph_break fixture (what Pipeline.finish builds the index from)."""
    options = Options(workers=0)
    pipeline = Pipeline(new_analysis(source_of([LOG]), options), FolderWriter(tmp_path_factory.mktemp("read") / "out"), options)
    read_logs([LOG], pipeline, None, None)
    yield pipeline
    pipeline.highlighter.close()


def build(pipeline: Pipeline, **caps) -> list[tuple[str, bytes]]:
    # no inline budget: every text a compile page can show inline is shown there
    builder = PageBuilder(pipeline.payloads.get, pipeline.highlighter, inline_budget=float("inf"))
    return list(search.build_index(pipeline.analysis, pipeline.spool.records, pipeline.payloads.get, builder, **caps))


def test_index_is_valid_script_and_covers_everything_under_the_cap(read_pipeline, tmp_path):
    files = build(read_pipeline)
    assert files[-1][0] == search.MANIFEST
    manifest = manifest_of(files[-1][1])
    assert manifest["note"] == ""
    assert manifest["shards"] == [name.removeprefix("static/") for name, _ in files[:-1]]
    entries = [e for _, body in files[:-1] for e in shard_entries(body)[1]]
    assert len(entries) == manifest["entries"]
    kinds = {e[0] for e in entries}
    assert {"compile", "frame", "graph break", "guards", "graph", "code", "file"} <= kinds
    texts = "\n".join(e[3] for e in entries)
    for needle in ("torch.ops.aten.mul.Tensor", "cpp_fused_cos_mul_0", "TENSOR_MATCH", "Failed to trace builtin operator"):
        assert needle in texts
    if NODE:
        assert run_as_script(files, tmp_path) == manifest["entries"]


def test_a_tiny_cap_truncates_with_a_note_and_valid_script(read_pipeline, tmp_path):
    full = manifest_of(build(read_pipeline)[-1][1])["entries"]
    files = build(read_pipeline, total_bytes=6000, shard_bytes=2000, text_chars=300)
    manifest = manifest_of(files[-1][1])
    assert "covers the first" in manifest["note"] and "0.006 MB" in manifest["note"]
    assert 0 < manifest["entries"] < full
    assert len(files) > 2  # several shards
    assert sum(len(body) for _, body in files[:-1]) < 6000 + 400 * len(files)
    numbers = [shard_entries(body)[0] for _, body in files[:-1]]
    assert numbers == list(range(len(numbers)))
    if NODE:
        assert run_as_script(files, tmp_path) == manifest["entries"]
    # a text past text_chars is cut at a line end, so line numbers stay right
    files = build(read_pipeline, text_chars=300)
    manifest = manifest_of(files[-1][1])
    assert "indexed in part" in manifest["note"]
    assert all(len(e[3]) <= 300 for _, body in files[:-1] for e in shard_entries(body)[1])


def test_values_that_cannot_be_utf8_are_cleaned():
    assert search.clean("a\ud800b") == "a?b"
    assert search.clean(None) == "" and search.clean(3) == "3"


# -- in a browser ------------------------------------------------------------------------------

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
browser_test = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("chromium is not installed")
    with playwright_api.sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield instance
        instance.close()


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("search") / "report"
    write_report(LOG, out)
    return out


class Page:
    """A page plus every console error, failed request and uncaught exception it produced."""

    def __init__(self, browser):
        self.context = browser.new_context()
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: m.type in ("error", "warning") and self.errors.append(f"console {m.type}: {m.text}"))
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("requestfailed", lambda r: self.errors.append(f"requestfailed: {r.url}"))

    def open(self, path: Path, fragment: str = ""):
        self.page.goto(path.as_uri() + fragment)
        self.page.wait_for_load_state("load")
        return self.page

    def close(self):
        self.context.close()


def type_query(page, text: str):
    box = page.locator("#search input")
    box.fill(text)
    page.wait_for_function(
        "q => { const p = document.querySelector('#search .search-results');"
        " return !p.hidden && p.getAttribute('data-query') === q && !/Loading/.test(p.querySelector('.search-status').textContent); }",
        arg=text.strip(),
    )
    return page.locator("#search .search-hit")


def follow(page, hits, kind: str) -> str:
    """Click the first hit of a kind; the text of the element its link's anchor names, on the new page."""
    hit = hits.filter(has=page.locator(".search-kind", has_text=re.compile(f"^{kind}$"))).first
    href = hit.locator("a.search-main").get_attribute("href")
    hit.locator("a.search-main").click()
    page.wait_for_load_state("load")
    anchor = href.partition("#")[2]
    assert anchor, href
    assert page.url.endswith("#" + anchor)
    target = page.locator(f"[id='{anchor}']")
    assert target.is_visible()  # its collapsed section was opened
    return target.text_content()


def guard_expression(report: Path) -> str:
    text = next(report.glob("*/dynamo_cpp_guards_str_*.txt")).read_text()
    line = next(line for line in text.splitlines() if "TENSOR_MATCH:" in line)
    return line.split("TENSOR_MATCH:", 1)[1].split("  #", 1)[0].strip()


@browser_test
def test_a_guard_expression_lands_on_its_line(browser, report_dir):
    expression = guard_expression(report_dir)
    view = Page(browser)
    page = view.open(report_dir / "index.html")
    assert page.locator("#search").is_visible()
    hits = type_query(page, expression)
    assert hits.count() >= 1
    assert expression in hits.first.locator(".search-snippet").text_content()
    text = follow(page, hits, "guards")
    assert expression in text
    assert re.search(r"/-_\d+_0_\d/index\.html#s\d+-L\d+$", page.url)
    assert view.errors == []
    view.close()


@browser_test
def test_op_and_kernel_names_from_any_page(browser, report_dir):
    view = Page(browser)
    compile_page = next(report_dir.glob("-_3_0_0/index.html"))
    page = view.open(compile_page)
    hits = type_query(page, "torch.ops.aten.mul.Tensor")
    assert hits.count() >= 2
    assert "torch.ops.aten.mul.Tensor" in follow(page, hits, "graph")
    hits = type_query(page, "cpp_fused_cos_mul_0")
    assert hits.count() >= 1
    assert "cpp_fused_cos_mul_0" in follow(page, hits, "code")
    assert "-_2_0_1/" in page.url  # the compile that made that kernel
    # from a code page (a different root): the same search, links still right
    code_page = next(report_dir.glob("-_1_0_1/inductor_output_code_*.html"))
    page = view.open(code_page)
    hits = type_query(page, "Failed to trace builtin operator")
    follow(page, hits, "graph break")
    assert page.url.endswith("#graph-breaks")
    assert view.errors == []
    view.close()


@browser_test
def test_slash_focuses_the_box_and_results_are_text(browser, report_dir):
    view = Page(browser)
    page = view.open(report_dir / "failures_and_restarts.html")
    assert page.evaluate("document.activeElement.tagName") == "BODY"
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement === document.querySelector('#search input')")
    assert page.locator("#search input").input_value() == ""  # the key only focused it
    page.keyboard.type("<module>")
    page.wait_for_selector("#search .search-hit")
    assert page.locator("#search .search-hit mark").first.text_content() == "<module>"
    assert page.evaluate("document.querySelectorAll('#search module').length") == 0
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.classList.contains('search-main')")
    page.keyboard.press("Escape")
    assert page.locator("#search .search-results").is_hidden()
    hits = type_query(page, "no such text anywhere 1234")
    assert hits.count() == 0
    assert page.locator("#search .search-status").text_content() == "No match."
    assert view.errors == []
    view.close()


@browser_test
def test_the_index_loads_only_when_the_box_is_used(browser, report_dir):
    view = Page(browser)
    page = view.open(report_dir / "index.html")
    assert page.evaluate("typeof window.TLPARSE_SEARCH") == "undefined"
    assert page.evaluate("document.querySelectorAll('script[src*=\"search/index-\"]').length") == 0
    page.locator("#search input").focus()
    page.wait_for_function("() => window.TLPARSE_SEARCH && window.TLPARSE_SEARCH.length === window.TLPARSE_SEARCH_INDEX.shards.length")
    assert view.errors == []
    view.close()


@browser_test
def test_a_capped_index_says_what_it_covers(browser, tmp_path):
    out = tmp_path / "report"
    write_report(LOG, out, options=Options(search_mb=0.02))
    view = Page(browser)
    page = view.open(out / "index.html")
    type_query(page, "compile")
    note = page.locator("#search .search-note").text_content()
    assert "The search index covers" in note and "texts (it stops at 0.02 MB)" in note
    assert view.errors == []
    view.close()


@browser_test
def test_pages_without_an_index_show_no_box(browser, tmp_path):
    out = tmp_path / "static-only"
    (out / "static").mkdir(parents=True)
    from tlparse_py.report.render import STATIC_DIR

    for name in ("search-index.js", "search.js", "report.js"):
        shutil.copy(STATIC_DIR / name, out / "static" / name)
    (out / "page.html").write_text(
        '<!doctype html><meta charset="utf-8"><div class="search" id="search" data-root="" hidden><input>'
        '<div class="search-results" hidden></div></div><script src="static/search-index.js"></script>'
        '<script src="static/search.js"></script>'
    )
    view = Page(browser)
    page = view.open(out / "page.html")
    assert page.locator("#search").is_hidden()
    page.keyboard.press("/")
    assert view.errors == []
    view.close()


def test_a_forked_builders_pieces_reach_its_parent_whole():
    """A page builder's child hands its pieces over as position, length and bytes, one page at a
    time; the parent takes each as the child packed it."""
    from tlparse_py.report.search import IndexParts, PagePieces, _Text

    made = {position: PagePieces([["compile", f"t{position}", "u", None]] * (position % 3),
                                 [_Text(position % 2, position, "graph", "title é", "u#a", "p", None, ["file", "u", None])])
            for position in (0, 5, 7, 300_000)}
    child = IndexParts()
    child.owner = -1  # as in a forked child: kept in memory, to be handed over
    for position, pieces in made.items():
        child.add(position, pieces)
    handed = b"".join(child.encode())  # read back from the child's own scratch file, in chunks
    assert child.handed is not None and not child.spooled.get(0)
    parent = IndexParts()
    parent.add_from(io.BytesIO(handed))
    assert {position: parent.take(position) for position in made} == made
    parent.close()
    cut = IndexParts()
    cut.add_from(io.BytesIO(handed[:-3]))  # a child that died writing them: the whole pages only
    assert [cut.take(position) for position in made] == [made[0], made[5], made[7], None]
    child.close()


def test_the_texts_wait_by_priority_in_log_order_within_one():
    from tlparse_py.report.search import _Text, _Waiting

    waiting = _Waiting()
    for order, priority in enumerate([2, 0, 1, 0, 2, 1]):
        waiting.add(_Text(priority, order, "graph", f"t{order}", "u", "p", None, None))
    assert len(waiting) == 6
    assert [(t.priority, t.order) for t in waiting.in_order()] == [(0, 1), (0, 3), (1, 2), (1, 5), (2, 0), (2, 4)]
