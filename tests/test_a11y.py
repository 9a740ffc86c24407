"""Accessibility: axe-core finds no serious or critical violation on the report's main pages, and
collapsible sections and table controls work from the keyboard. Headless Debian chromium, file:// URLs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TRACES
from tlparse_py.pipeline import Options, write_report

pytestmark = pytest.mark.browser
playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
axe_api = pytest.importorskip("axe_playwright_python.sync_playwright", reason="axe-playwright-python is not installed (pip install -e '.[test]')")
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
def reports(tmp_path_factory):
    from tlparse_py import multirank

    base = tmp_path_factory.mktemp("a11y")
    for name in ("graph_break", "failure"):
        write_report(next((TRACES / name).glob("dedicated_log*")), base / name)
    multirank.write_all_ranks(TRACES / "distributed", base / "distributed", False, Options())
    done = subprocess.run([sys.executable, "-m", "tlparse_py", "diff", str(TRACES / "edit_base"), str(TRACES / "edit_newbreak"),
                           "-o", str(base / "diff"), "--no-browser"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return base


def page_path(reports: Path, name: str) -> Path:
    graph_break = reports / "graph_break"
    return {
        "index": graph_break / "index.html",
        "compile": graph_break / "-_2_0_1" / "index.html",
        "code": sorted(graph_break.glob("*/inductor_output_code*.html"))[0],
        "metrics": sorted(graph_break.glob("*/compilation_metrics*.html"))[0],
        "failures": reports / "failure" / "failures_and_restarts.html",
        "landing": reports / "distributed" / "index.html",
        "diff": reports / "diff" / "index.html",
    }[name]


def serious(results) -> list[str]:
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes'][:3]]}"
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("name", ["index", "compile", "code", "metrics", "failures", "landing", "diff"])
def test_no_serious_axe_violations(browser, reports, name, scheme):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    page.goto(page_path(reports, name).as_uri())
    page.wait_for_load_state("load")
    if name == "compile":  # look inside the collapsed sections too
        page.click("button[data-toggle-all=open]")
        page.evaluate("new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    assert serious(axe_api.Axe().run(page)) == []
    context.close()


@pytest.mark.parametrize("name", ["index", "landing", "diff"])
def test_no_serious_axe_violations_on_a_small_screen(browser, reports, name):
    context = browser.new_context(viewport={"width": 800, "height": 900})
    page = context.new_page()
    page.goto(page_path(reports, name).as_uri())
    page.wait_for_load_state("load")
    assert serious(axe_api.Axe().run(page)) == []
    context.close()


def focused(page) -> str:
    return page.evaluate("document.activeElement.outerHTML.slice(0, 120)")


def tab_to(page, selector: str, limit: int = 400) -> None:
    """Press Tab until the element matching selector has focus (the keyboard path a reader takes)."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate("(s) => document.activeElement && document.activeElement.matches(s)", selector):
            return
    raise AssertionError(f"{selector} never got keyboard focus (last: {focused(page)})")


def test_collapsible_sections_and_buttons_work_from_the_keyboard(browser, reports):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(page_path(reports, "compile").as_uri())
    page.wait_for_load_state("load")
    # every custom toggle is a real, focusable button
    assert page.evaluate("Array.from(document.querySelectorAll('[data-toggle-all]')).every(b => b.tagName === 'BUTTON' && b.tabIndex === 0)")
    tab_to(page, "details#stack > summary")
    assert page.evaluate("document.getElementById('stack').open") is True
    page.keyboard.press("Enter")
    assert page.evaluate("document.getElementById('stack').open") is False
    page.keyboard.press("Space")
    assert page.evaluate("document.getElementById('stack').open") is True
    # no summary holds a link or a button (a control inside a control cannot be reached reliably)
    assert page.evaluate("document.querySelectorAll('summary a, summary button, summary input').length") == 0
    tab_to(page, "button[data-toggle-all=close]")
    page.keyboard.press("Enter")
    assert page.evaluate("document.querySelectorAll('main details[open]').length") == 0
    context.close()


def test_sorting_and_filtering_from_the_keyboard(browser, reports):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(page_path(reports, "index").as_uri())
    page.wait_for_load_state("load")
    tab_to(page, "#compiles-filter")
    page.keyboard.type("[3/0]")
    assert page.evaluate("Array.from(document.querySelectorAll('#compiles-table tbody tr')).filter(tr => !tr.hidden).length") == 1
    page.keyboard.press("Control+a")
    page.keyboard.press("Backspace")
    tab_to(page, "#compiles-table th:nth-child(4) button")
    page.keyboard.press("Enter")
    assert page.get_attribute("#compiles-table th:nth-child(4)", "aria-sort") == "ascending"
    # the trie's branches fold from the keyboard too
    tab_to(page, "ul.trie details.branch > summary")
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.parentElement.open") is False
    context.close()
