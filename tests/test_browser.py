"""The report in a real browser: Debian's chromium, headless, driven by Playwright from file:// URLs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import TRACES

pytestmark = pytest.mark.browser
playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("chromium is not installed (apt-get install chromium)", allow_module_level=True)

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield instance
        instance.close()


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    from tlparse_py.pipeline import write_report

    out = tmp_path_factory.mktemp("browser") / "report"
    write_report(next((TRACES / "graph_break").glob("dedicated_log*")), out)
    return out


class Page:
    """A page plus every console error, failed request and uncaught exception it produced."""

    def __init__(self, browser, javascript=True):
        self.context = browser.new_context(java_script_enabled=javascript)
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


def open_details(page) -> tuple[int, int]:
    return tuple(page.evaluate("[document.querySelectorAll('details[open]').length, document.querySelectorAll('details').length]"))


def test_index_loads_without_errors_and_trie_toggles(browser, report_dir):
    view = Page(browser)
    page = view.open(report_dir / "index.html")
    assert page.title().startswith("tlparse-py report")
    branch = page.locator("ul.trie details").first
    assert branch.evaluate("d => d.open") is True
    branch.locator("summary").first.click()
    assert branch.evaluate("d => d.open") is False
    branch.locator("summary").first.click()
    assert branch.evaluate("d => d.open") is True
    assert view.errors == []
    view.close()


def test_every_link_on_the_index_opens_a_page(browser, report_dir):
    view = Page(browser)
    page = view.open(report_dir / "index.html")
    # an SVG link's href is an SVGAnimatedString: its baseVal, resolved against the page
    hrefs = page.evaluate("Array.from(document.querySelectorAll('a[href]')).map(a => typeof a.href === 'string' ? a.href"
                          " : new URL(a.href.baseVal, document.baseURI).href)")
    local = sorted({h.split("#")[0] for h in hrefs if h.startswith("file:")})
    assert len(local) > 20
    for href in local:
        response = page.goto(href)
        assert response is None or response.ok, href
        assert page.evaluate("document.body !== null && document.body.innerText.length > 0"), href
    assert view.errors == []
    view.close()


def test_compile_page_expand_collapse_and_anchor_reveal(browser, report_dir):
    view = Page(browser)
    compile_page = report_dir / "-_2_0_1" / "index.html"
    page = view.open(compile_page)
    opened, total = open_details(page)
    assert 0 < opened < total
    page.click("button[data-toggle-all=open]")
    assert open_details(page) == (total, total)
    page.click("button[data-toggle-all=close]")
    assert open_details(page)[0] == 0
    # a line anchor inside a collapsed section is revealed when the page is opened at it
    line_id = page.evaluate("document.querySelector('#pipeline pre.code > span').id")
    page = view.open(compile_page, f"#{line_id}")
    assert page.evaluate(f"document.getElementById('{line_id}').closest('details').open") is True
    assert view.errors == []
    view.close()


def test_pages_are_readable_with_scripts_off(browser, report_dir):
    view = Page(browser, javascript=False)
    page = view.open(report_dir / "-_2_0_1" / "index.html")
    text = page.evaluate("document.body.textContent")
    for heading in ("Stack that triggered the compile", "Graphs, in pipeline order", "Generated code", "All records"):
        assert heading in text
    assert page.locator("button[data-toggle-all]").first.is_hidden()  # our buttons only appear with scripts
    view.close()


def test_highlighted_output_code_page(browser, report_dir):
    view = Page(browser)
    code_page = next((report_dir / "-_3_0_0").glob("inductor_output_code_*.html"))
    page = view.open(code_page, "#L3")
    assert page.evaluate("document.querySelectorAll('pre.code > span').length") > 10
    assert page.evaluate("getComputedStyle(document.getElementById('L3')).backgroundColor") != "rgba(0, 0, 0, 0)"
    assert view.errors == []
    view.close()


def test_plain_python_past_the_budget_is_coloured_by_the_page(browser, tmp_path):
    from logs import cid, line, write_log
    from tlparse_py.pipeline import Options, write_report

    code = "def call(args):\n    x = 'a<b>' + 1  # note\n    return None"
    log = write_log(tmp_path / "a.log", [line({"inductor_output_code": {"filename": "/t/cx.py"}, **cid()}, code)])
    out = tmp_path / "out"
    write_report(log, out, options=Options(highlight_mb=0))
    page_path = out / "-_0_0_0" / "inductor_output_code_cx_0.html"
    assert 'data-colour="python"' in page_path.read_text()
    view = Page(browser)
    page = view.open(page_path)
    assert page.evaluate("document.querySelector('pre.code span.k').textContent") == "def"
    assert page.evaluate("document.querySelector('pre.code span.s2').textContent") == "'a<b>'"
    assert page.evaluate("document.querySelector('#L2').textContent") == "    x = 'a<b>' + 1  # note"
    assert page.evaluate("document.querySelectorAll('pre.code script, pre.code b').length") == 0
    assert view.errors == []
    view.close()


# Token classes both colourers give (the page's script marks fewer kinds of token than Pygments).
SHARED_CLASSES = {"k": "keyword", "kc": "constant", "kt": "type", "c1": "comment", "cm": "comment", "cp": "comment",
                  "s1": "string", "s2": "string", "sd": "string", "s": "string", "sc": "string", "nt": "key",
                  "gi": "added", "gd": "removed", "gu": "hunk"}
TOKENS_BY_LINE = """pre => Array.from(pre.children).map(line => Array.from(line.querySelectorAll('span'))
    .map(s => [s.className, s.textContent]))"""


@pytest.mark.parametrize("scenario", ["training", "inference"])
def test_the_page_colours_a_section_when_it_is_opened_as_pygments_would(browser, tmp_path, scenario):
    """The default report leaves colouring to the page: each section is plain text until it is
    opened, then coloured; its text is exactly what the Pygments-highlighted report shows, and
    every token the page colours has the class Pygments gives it."""
    from tlparse_py.pipeline import Options, write_report

    log = next((TRACES / scenario).glob("dedicated_log*"))
    lazy, served = tmp_path / "lazy", tmp_path / "served"
    write_report(log, lazy)
    write_report(log, served, options=Options(highlight_mb=64))  # everything highlighted by Pygments
    page_name = "-_0_0_0/index.html"
    assert 'data-colour="python"' in (lazy / page_name).read_text()
    assert "data-colour" not in (served / page_name).read_text()

    view = Page(browser)
    page = view.open(served / page_name)
    expected = {pre.get_attribute("data-id"): pre.evaluate(TOKENS_BY_LINE)
                for pre in _sections(page)}
    page = view.open(lazy / page_name)
    blocks = _sections(page)
    assert len(blocks) == len(expected) > 10
    closed = [pre for pre in blocks if not pre.is_visible()]
    assert closed and all(pre.evaluate("p => p.querySelectorAll('span span').length") == 0 for pre in closed)
    page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
    page.wait_for_function("document.querySelectorAll('pre.code[data-colour]:not([data-coloured])').length === 0")
    compared = 0
    for pre in blocks:
        ours, theirs = pre.evaluate(TOKENS_BY_LINE), expected[pre.get_attribute("data-id")]
        lines = pre.evaluate("p => Array.from(p.children).map(l => l.textContent)")
        assert len(ours) == len(theirs) == len(lines)
        for number, (mine, pygments) in enumerate(zip(ours, theirs, strict=True), start=1):
            theirs_by_text = {}
            for name, text in pygments:
                theirs_by_text.setdefault(text, set()).add(SHARED_CLASSES.get(name, name))
            for name, text in mine:
                if name in SHARED_CLASSES and text.strip() and text in theirs_by_text:
                    assert SHARED_CLASSES[name] in theirs_by_text[text], (pre.get_attribute("data-id"), number, name, text)
                    compared += 1
    assert compared > 100
    texts = {pre.get_attribute("data-id"): pre.evaluate("p => p.textContent") for pre in blocks}
    page = view.open(served / page_name)
    assert {pre.get_attribute("data-id"): pre.evaluate("p => p.textContent") for pre in _sections(page)} == texts
    assert view.errors == []
    view.close()


def _sections(page):
    """The code blocks of a compile page, each tagged with its first line's id (the same in both reports)."""
    page.evaluate("document.querySelectorAll('pre.code').forEach(p => p.setAttribute('data-id', p.firstElementChild ? p.firstElementChild.id : ''))")
    return page.locator("pre.code").all()
