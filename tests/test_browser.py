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
    hrefs = page.evaluate("Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
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
