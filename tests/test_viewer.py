"""The report as a viewer: small screens, the sortable and filterable compiles table, Perfetto, no emoji.

Driven in headless Debian chromium from file:// URLs, like test_browser.py.
"""

from __future__ import annotations

import json

import re
import shutil
from pathlib import Path

import pytest

from conftest import TRACES
from tlparse_py.pipeline import Options, write_report

# Emoji and pictographs: a page says what it means in words (CSS colours them), never with these.
EMOJI = re.compile("[\U0001F300-\U0001FAFF\u2600-\u27BF\u2B00-\u2BFF\u2705\u274C\u2753\uFE0F]")
NARROW = {"width": 800, "height": 900}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    from tlparse_py import multirank

    base = tmp_path_factory.mktemp("viewer")
    for name in ("graph_break", "cache", "failure", "recompile"):
        write_report(next((TRACES / name).glob("dedicated_log*")), base / name)
    multirank.write_all_ranks(TRACES / "distributed", base / "distributed", False, Options())
    return base


def test_no_emoji_in_any_page(reports):
    pages = sorted(reports.rglob("*.html"))
    assert len(pages) > 30
    for page in pages:
        text = page.read_text(encoding="utf-8")
        found = EMOJI.findall(text)
        assert not found, f"{page.relative_to(reports)}: {found[:5]}"
    # compile_directory.json keeps tlparse's marks (parity); the pages show them as words
    directory = (reports / "cache" / "compile_directory.json").read_text(encoding="utf-8")
    index = (reports / "cache" / "index.html").read_text(encoding="utf-8")
    assert "\u2705" in directory or "\u274c" in directory
    assert re.search(r'<span class="cache cache-(hit|miss|bypass)">cache (hit|miss|bypass)</span>', index)


# --- in chromium -------------------------------------------------------------------------------

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
browser_only = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("chromium is not installed")
    with playwright_api.sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield instance
        instance.close()


class Page:
    """A page plus every console error, failed request and uncaught exception it produced."""

    def __init__(self, browser, javascript=True, viewport=None):
        self.context = browser.new_context(java_script_enabled=javascript, viewport=viewport or NARROW)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: m.type in ("error", "warning") and self.errors.append(f"console {m.type}: {m.text}"))
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("requestfailed", lambda r: self.errors.append(f"requestfailed: {r.url}"))

    def open(self, path: Path):
        self.page.goto(path.as_uri())
        self.page.wait_for_load_state("load")
        return self.page

    def close(self):
        self.context.close()


def pages_of(reports: Path) -> dict[str, Path]:
    graph_break = reports / "graph_break"
    return {
        "index": graph_break / "index.html",
        "compile": graph_break / "-_2_0_1" / "index.html",
        "code": sorted(graph_break.glob("*/inductor_output_code*.html"))[0],
        "failures": reports / "failure" / "failures_and_restarts.html",
        "landing": reports / "distributed" / "index.html",
        "cache": reports / "cache" / "index.html",
        "recompile": reports / "recompile" / "index.html",
    }


@browser_only
@pytest.mark.browser
@pytest.mark.parametrize("javascript", [True, False])
def test_no_page_scrolls_sideways_at_800px(browser, reports, javascript):
    view = Page(browser, javascript=javascript)
    for name, path in pages_of(reports).items():
        page = view.open(path)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 800, f"{name} is {width} px wide"
        # long code lines wrap inside their block: nothing is cut off or hidden past its right edge
        clipped = page.evaluate("""Array.from(document.querySelectorAll('pre.code'))
            .filter(pre => pre.offsetParent !== null && pre.scrollWidth > pre.clientWidth + 1).length""")
        assert clipped == 0, name
    assert view.errors == []
    view.close()


@browser_only
@pytest.mark.browser
def test_wide_tables_scroll_in_their_own_box(browser, reports):
    view = Page(browser)
    page = view.open(reports / "graph_break" / "index.html")
    box = page.locator("#compiles-table").locator("xpath=..")
    assert box.get_attribute("class") == "scroll"
    if box.evaluate("b => b.scrollWidth > b.clientWidth"):  # reachable and scrollable from the keyboard
        assert box.get_attribute("tabindex") == "0" and box.get_attribute("role") == "region"
    view.close()


def time_column(page) -> list[float | None]:
    return page.evaluate("""Array.from(document.querySelectorAll('#compiles-table tbody tr')).map(tr => {
        const v = tr.cells[3].getAttribute('data-sort-value'); return v === '' ? null : parseFloat(v); })""")


@browser_only
@pytest.mark.browser
def test_compiles_table_sorts_by_time_and_filters(browser, reports):
    view = Page(browser, viewport={"width": 1280, "height": 900})
    page = view.open(reports / "graph_break" / "index.html")
    ids_before = page.evaluate("Array.from(document.querySelectorAll('#compiles-table tbody tr td:first-child a')).map(a => a.textContent)")
    times = time_column(page)
    assert len(times) >= 4 and times != sorted(times)  # the fixture's log order is not time order

    header = page.locator("#compiles-table th", has_text="Compile time")
    header.locator("button").click()
    assert header.get_attribute("aria-sort") == "ascending"
    shown = page.evaluate("Array.from(document.querySelectorAll('#compiles-table tbody tr td:nth-child(4)')).map(td => td.textContent.trim())")
    assert time_column(page) == sorted(times)
    seconds = [float(s[:-2]) / 1000 if s.endswith("ms") else float(s[:-1]) for s in shown]  # "855.8 ms", "13.99 s"
    assert seconds == sorted(seconds)  # numeric, not text order ("13.99 s" < "655 ms" as text)
    header.locator("button").click()
    assert header.get_attribute("aria-sort") == "descending"
    assert time_column(page) == sorted(times, reverse=True)

    # the other sortable columns: status, frame, cache (and id, which restores log order)
    for name in ("Status", "Frame", "Cache"):
        page.locator("#compiles-table th", has_text=name).locator("button").click()
        assert page.locator("#compiles-table th", has_text=name).get_attribute("aria-sort") == "ascending"
    frames = page.evaluate("Array.from(document.querySelectorAll('#compiles-table tbody tr td:nth-child(3)')).map(td => td.textContent.trim().toLowerCase())")
    page.locator("#compiles-table th", has_text="Frame").locator("button").click()  # sorted by cache now: frame again starts ascending
    assert page.evaluate("Array.from(document.querySelectorAll('#compiles-table tbody tr td:nth-child(3)')).map(td => td.textContent.trim().toLowerCase())") == sorted(frames)
    page.locator("#compiles-table th", has_text="Compile id").locator("button").click()
    assert page.evaluate("Array.from(document.querySelectorAll('#compiles-table tbody tr td:first-child a')).map(a => a.textContent)") == ids_before

    # the filter box hides rows that do not match
    box = page.locator("#compiles-filter")
    assert box.is_visible()
    box.fill("resume_in_helper")
    visible = page.evaluate("Array.from(document.querySelectorAll('#compiles-table tbody tr')).filter(tr => !tr.hidden).map(tr => tr.cells[2].textContent)")
    assert visible and all("resume_in_helper" in v for v in visible) and len(visible) < len(times)
    assert page.locator(".filter [role=status]").text_content() == f"{len(visible)} of {len(times)} shown"
    box.fill("no such compile")
    assert page.evaluate("Array.from(document.querySelectorAll('#compiles-table tbody tr')).every(tr => tr.hidden)")
    box.fill("")
    assert page.evaluate("Array.from(document.querySelectorAll('#compiles-table tbody tr')).every(tr => !tr.hidden)")
    assert view.errors == []
    view.close()


@browser_only
@pytest.mark.browser
def test_compiles_table_without_scripts(browser, reports):
    view = Page(browser, javascript=False)
    page = view.open(reports / "graph_break" / "index.html")
    assert page.locator("#compiles-filter").is_hidden()  # a control that would do nothing stays hidden
    assert page.locator("#compiles-table tbody tr").count() >= 4
    assert page.locator("#compiles-table th button").count() == 0
    assert page.locator("[data-perfetto]").is_hidden()
    assert "Open trace file" in page.locator("#chromium").locator("xpath=following-sibling::p[1]").text_content()
    view.close()


@browser_only
@pytest.mark.browser
@pytest.mark.parametrize("report", ["graph_break", "distributed"])
def test_perfetto_button_offline_says_how_to_load_by_hand(browser, reports, report):
    view = Page(browser)
    page = view.open(reports / report / "index.html")
    button = page.get_by_role("button", name="Open in Perfetto")
    assert button.is_visible()
    view.context.set_offline(True)
    button.click()
    status = page.locator(".perfetto-status")
    assert "offline" in status.text_content()
    assert "Open trace file" in status.text_content() and "chromium_events.json" in status.text_content()
    assert len(view.context.pages) == 1  # no window was opened
    view.close()


@browser_only
@pytest.mark.browser
def test_perfetto_handshake_sends_the_report_events(browser, reports):
    """Online: one click opens Perfetto, waits for its PONG, and posts the report's own events.

    ui.perfetto.dev is stood in for by a page served by Playwright's router (nothing leaves the
    machine): it answers PING with PONG and shows the size of the trace it was sent.
    """
    view = Page(browser)
    stand_in = """<!doctype html><title>waiting</title><script>
      addEventListener('message', e => {
        if (e.data === 'PING') e.source.postMessage('PONG', '*');
        else if (e.data && e.data.perfetto) document.title = 'got ' + JSON.parse(new TextDecoder().decode(e.data.perfetto.buffer)).length + ' ' + e.data.perfetto.fileName;
      });</script>"""
    view.context.route("https://ui.perfetto.dev/**", lambda route: route.fulfill(status=200, content_type="text/html", body=stand_in))
    page = view.open(reports / "graph_break" / "index.html")
    with view.context.expect_page() as opened:
        page.get_by_role("button", name="Open in Perfetto").click()
    perfetto = opened.value
    perfetto.wait_for_function("document.title.startsWith('got ')", timeout=20000)
    events = json.loads((reports / "graph_break" / "chromium_events.json").read_text())
    assert perfetto.title() == f"got {len(events)} chromium_events.json"  # every event of the report
    assert "Sent chromium_events.json" in page.locator(".perfetto-status").text_content()
    view.close()

