"""The single-file report: `tlparse-py report --single-file FILE.html` and `tlparse-py pack DIR FILE.html`.

One HTML file that needs nothing but itself: no relative or external src/href (only #anchors),
its CSP allowing only its own hashed style and script; navigation between its pages works in a
real browser with the network off (and with scripts off)."""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import TRACES

from tlparse_py.cli import main
from tlparse_py.report.pack import pack_report

GRAPH_BREAK = next((TRACES / "graph_break").glob("dedicated_log*"))


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """(report folder, its --single-file, the `pack` of the same folder)."""
    root = tmp_path_factory.mktemp("pack")
    out, single = root / "report", root / "report.html"
    result = cli(GRAPH_BREAK, "-o", out, "--no-browser", "--single-file", single)
    assert result.exit_code == 0, result.output
    assert "Single file:" in result.output
    again = root / "again.html"
    result = cli("pack", out, again)
    assert result.exit_code == 0, result.output
    return out, single, again


class Document(HTMLParser):
    """Every reference, id, element and the inline style/script texts of a page."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.references: list[tuple[str, str, str]] = []
        self.ids: list[str] = []
        self.tags: set[str] = set()
        self.csp = ""
        self.inline: dict[str, list[str]] = {"style": [], "script": []}
        self.styled: list[str] = []
        self.data_blocks = 0
        self._in: str | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        values = dict(attrs)
        for name, value in attrs:
            if name in ("href", "src", "srcset", "action", "formaction", "poster", "data", "xlink:href") and value is not None:
                self.references.append((tag, name, value))
            if name == "id":
                self.ids.append(value)
            if name == "style" or name.startswith("on"):
                self.styled.append(f"{tag} {name}")
        if tag == "meta" and (values.get("http-equiv") or "").lower() == "content-security-policy":
            self.csp = values["content"]
        if tag == "script" and (values.get("type") or "").lower() not in ("", "text/javascript", "module"):
            self.data_blocks += 1  # JSON data, never run (the CSP does not apply to it)
        elif tag in self.inline:
            self._in = tag
            self.inline[tag].append("")

    def handle_endtag(self, tag):
        if tag == self._in:
            self._in = None

    def handle_data(self, data):
        if self._in:
            self.inline[self._in][-1] += data


def sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def check_self_contained(path: Path) -> Document:
    doc = Document(path.read_text(encoding="utf-8"))
    outside = [r for r in doc.references if not r[2].startswith("#")]
    assert outside == [], outside[:10]
    assert not doc.tags & {"link", "img", "iframe", "object", "embed", "base"}
    assert doc.styled == []
    ids = set(doc.ids)
    assert len(ids) == len(doc.ids), "ids are unique across the packed pages"
    dangling = [r for r in doc.references if r[2][1:] and r[2][1:] not in ids]
    assert dangling == [], dangling[:10]
    # the CSP allows exactly its own (single) style and script, by hash, and nothing else
    assert len(doc.inline["style"]) == 1 and len(doc.inline["script"]) == 1
    policy = dict(d.strip().split(" ", 1) for d in doc.csp.split(";") if d.strip())
    assert policy["default-src"] == "'none'"
    assert policy["style-src"] == sha256(doc.inline["style"][0])
    assert policy["script-src"] == sha256(doc.inline["script"][0])
    return doc


def test_single_file_is_self_contained(packed):
    out, single, _ = packed
    doc = check_self_contained(single)
    compile_pages = sorted(p.parent.name for p in out.glob("*/index.html"))
    sections = {i for i in doc.ids if i.startswith("page-") and "~" not in i}
    for name in compile_pages:
        assert f"page-{name}/index.html" in sections
    assert "page-index.html" in sections and "page-failures_and_restarts.html" in sections
    assert any(re.fullmatch(r"page-.*/compilation_metrics_\d+\.html", s) for s in sections)
    assert any(s.endswith("dynamo_output_graph_58.txt") for s in sections)  # a graph, under the budget
    assert "pygments" not in single.read_text() or ".code .k" in single.read_text()  # pygments CSS is inlined


def test_pack_of_the_folder_is_the_same_file(packed):
    _, single, again = packed
    check_self_contained(again)
    assert again.read_bytes() == single.read_bytes()


def test_budget_leaves_files_out_as_plain_text(packed, tmp_path):
    out, _, _ = packed
    target = tmp_path / "small.html"
    result = pack_report(out, target, budget_mb=0.05)
    assert result.left_out
    doc = check_self_contained(target)
    text = target.read_text()
    sections = {i for i in doc.ids if i.startswith("page-") and "~" not in i}
    for page in out.glob("*/index.html"):  # the pages are always there, whatever the budget
        assert f"page-{page.parent.name}/index.html" in sections
    assert 'id="page-left-out"' in text
    gone = [item for item in result.left_out if item.why.startswith("past")]
    assert gone and all(f"page-{item.rel}" not in sections for item in gone)
    assert f"<code>{gone[0].rel}</code>" in text  # the left-out page names it
    assert 'class="tlp-gone"' in text and "left out of this single file" in text


@pytest.mark.parametrize("make", ["empty", "files", "index_only", "missing"])
def test_pack_of_a_folder_that_is_not_a_report_exits_2(tmp_path, make):
    folder = tmp_path / "folder"
    if make != "missing":
        folder.mkdir()
    if make == "files":
        (folder / "notes.txt").write_text("hello")
    if make == "index_only":
        (folder / "index.html").write_text("<!doctype html><title>mine</title>")
    target = tmp_path / "out.html"
    result = cli("pack", folder, target)
    assert result.exit_code == 2, result.output
    assert "not a tlparse-py report" in result.output
    assert not target.exists()


def test_single_file_target_must_be_a_file_in_an_existing_folder(tmp_path):
    out = tmp_path / "report"
    result = cli(GRAPH_BREAK, "-o", out, "--no-browser", "--single-file", tmp_path / "nope" / "r.html")
    assert result.exit_code == 2 and "does not exist" in result.output
    result = cli(GRAPH_BREAK, "-o", out, "--no-browser", "--single-file", tmp_path)
    assert result.exit_code == 2
    assert not out.exists()
    result = cli("pack", tmp_path, tmp_path)
    assert result.exit_code == 2


# -- in a browser, offline ---------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
needs_browser = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")


@pytest.fixture(scope="module")
def browser():
    playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    with playwright_api.sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield instance
        instance.close()


class OfflinePage:
    """The single file in a context with the network off, every request but the file itself
    refused, and every console error, refused request and uncaught exception recorded."""

    def __init__(self, browser, path: Path, javascript: bool = True):
        self.url = path.as_uri()
        self.context = browser.new_context(offline=True, java_script_enabled=javascript)
        self.errors: list[str] = []
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", lambda m: m.type in ("error", "warning") and self.errors.append(f"console {m.type}: {m.text}"))
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("requestfailed", lambda r: self.errors.append(f"requestfailed: {r.url}"))

    def _route(self, route):
        if route.request.url.split("#")[0] == self.url:
            route.continue_()
        else:
            self.errors.append(f"refused: {route.request.url}")
            route.abort()

    def open(self, fragment: str = ""):
        self.page.goto(self.url + fragment)
        self.page.wait_for_load_state("load")
        return self.page

    def shown(self) -> list[str]:
        return self.page.evaluate(
            "Array.from(document.querySelectorAll('.tlp-page')).filter(s => getComputedStyle(s).display !== 'none').map(s => s.id)")

    def close(self):
        self.context.close()


def navigate(view: OfflinePage, javascript: bool) -> None:
    page = view.open()
    assert view.shown() == ["page-index.html"]
    if javascript:
        assert page.title().startswith("tlparse-py report")
    # index → a compile page
    page.locator('section.tlp-home table.compiles a[href="#page--_3_0_0/index.html"]').first.click()
    assert view.shown() == ["page--_3_0_0/index.html"]
    section = page.locator('[id="page--_3_0_0/index.html"]')
    assert "Graphs, in pipeline order" in section.inner_text()
    if javascript:
        assert page.title().startswith("Compile [3/0]")
    # → its graph section (the list of graphs in pipeline order links each)
    link = section.locator('ol.pipeline a[href="#page--_3_0_0/index.html~s7"]')
    link.click()
    assert page.evaluate("window.location.hash") == "#page--_3_0_0/index.html~s7"
    assert view.shown() == ["page--_3_0_0/index.html"]
    graph = page.locator('[id="page--_3_0_0/index.html~s7"]')
    assert graph.is_visible() and "Before pre-grad passes" in graph.inner_text()
    if javascript:  # report.js opens the section an address points into
        assert "GraphModule" in graph.inner_text()
    # → the graph's own file, packed as a page, and back to the compile page
    section.locator('a[href="#page--_3_0_0/dynamo_output_graph_58.txt"]:visible').first.click()
    assert view.shown() == ["page--_3_0_0/dynamo_output_graph_58.txt"]
    assert "class GraphModule" in page.locator('[id="page--_3_0_0/dynamo_output_graph_58.txt"] pre').inner_text()
    page.locator('[id="page--_3_0_0/dynamo_output_graph_58.txt"] nav a[href="#page--_3_0_0/index.html"]').click()
    assert view.shown() == ["page--_3_0_0/index.html"]
    page.go_back()
    page.go_back()
    assert view.shown() == ["page--_3_0_0/index.html"]


@needs_browser
def test_single_file_navigates_offline_without_errors(browser, packed):
    _, single, again = packed
    for path in (single, again):
        view = OfflinePage(browser, path)
        navigate(view, javascript=True)
        assert view.errors == []
        view.close()


@needs_browser
def test_single_file_navigates_with_scripts_off(browser, packed):
    view = OfflinePage(browser, packed[1], javascript=False)
    navigate(view, javascript=False)
    assert view.errors == []
    view.close()


@needs_browser
def test_single_file_expand_all_stays_on_its_page(browser, packed):
    view = OfflinePage(browser, packed[1])
    page = view.open("#page--_2_0_1/index.html")
    section = page.locator('[id="page--_2_0_1/index.html"]')
    section.locator("button[data-toggle-all=open]").click()
    counts = section.evaluate("s => [s.querySelectorAll('details[open]').length, s.querySelectorAll('details').length]")
    assert counts[0] == counts[1] > 0
    index_open = page.evaluate("document.querySelector('.tlp-home').querySelectorAll('details[open]').length")
    section.locator("button[data-toggle-all=close]").click()
    assert section.evaluate("s => s.querySelectorAll('details[open]').length") == 0
    assert page.evaluate("document.querySelector('.tlp-home').querySelectorAll('details[open]').length") == index_open
    assert view.errors == []
    view.close()


def test_custom_header_references_do_not_survive(tmp_path):
    """Whatever --custom-header-html holds (trusted, but the single file allows nothing but
    itself): external links become text with their url, images, scripts and inline styles go."""
    header = ('<a href="https://example.com/runbook">runbook</a> <img src="https://example.com/x.png" alt="x"> '
              '<script>document.title = "x"</script><style>body{}</style>'
              '<span style="color: red" onclick="alert(1)">styled</span> <a href="../../outside.html">up</a> '
              '<a href="//example.com/">protocol-relative</a>')
    out, single = tmp_path / "r", tmp_path / "r.html"
    result = cli(GRAPH_BREAK, "-o", out, "--no-browser", "--custom-header-html", header, "--single-file", single)
    assert result.exit_code == 0, result.output
    check_self_contained(single)
    text = single.read_text()
    assert 'runbook</span> <span class="tlp-note">(https://example.com/runbook)</span>' in text
    assert "styled" in text and "alert(1)" not in text and 'document.title = "x"' not in text


def test_multi_rank_report_packs_every_rank(tmp_path):
    out, single = tmp_path / "r", tmp_path / "r.html"
    result = cli(TRACES / "distributed", "-o", out, "--no-browser", "--all-ranks-html", "--single-file", single)
    assert result.exit_code == 0, result.output
    doc = check_self_contained(single)
    sections = {i for i in doc.ids if i.startswith("page-") and "~" not in i}
    ranks = sorted(p.parent.name for p in out.glob("rank_*/index.html"))
    assert len(ranks) >= 2
    for rank in ranks:
        assert f"page-{rank}/index.html" in sections
        for page in (out / rank).glob("*/index.html"):
            assert f"page-{rank}/{page.parent.name}/index.html" in sections
