"""The notebook summary's pictures (issue 49): the run timeline and the compile time by frame, drawn by
the index's own functions from the analysis' timeline, each drawn compile and frame linking to its
page of the report (from the notebook's folder), coloured by the summary's own scoped styles (a
notebook's output has no report.css), light and dark, in a real browser with no console error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tlparse_py
from conftest import TRACES
from tlparse_py.analysis.timeline import Timeline
from tlparse_py.notebook import summary_html
from tlparse_py.report.html.timeline_svg import frames_figure, timeline_figure

# traces with every outcome colour a small run shows: graph breaks and recompiles after reset(),
# a failed compile and one at the recompile limit, more frames than the chart shows
NAMES = ["reset_phases", "backend_raises", "many_small"]
FIGURE = re.compile(r'<figure class="picture (timeline|frames)".*?</figure>', re.S)
HREF = re.compile(r'<a target="_blank" href="([^"]*)">')


def figures(html: str) -> dict[str, str]:
    return {m[1]: m[0] for m in FIGURE.finditer(html)}


def svg_of(figure: str) -> str:
    return figure[figure.index("<svg") : figure.index("</svg>")]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, tuple[Path, object]]:
    """Each trace's report, written under a folder that the notebook (its kernel) runs in."""
    found = {}
    for name in NAMES:
        folder = tmp_path_factory.mktemp(name)
        found[name] = (folder, tlparse_py.build(TRACES / name, folder / "report"))
    return found


@pytest.mark.parametrize("name", NAMES)
def test_the_summary_draws_the_indexs_pictures_with_a_link_per_drawn_compile(built, name, monkeypatch):
    folder, analysis = built[name]
    monkeypatch.chdir(folder)  # where the notebook runs: its links are relative to it
    html = analysis._repr_html_()
    timeline: Timeline = analysis.timeline()
    shown = figures(html)
    assert sorted(shown) == ["frames", "timeline"]
    # the same pictures the index draws, but for the links (opened beside the notebook, from its
    # folder) and the ids (its own in a page of many outputs)
    scope = re.search(r'<figure class="picture timeline" id="timeline-figure-([0-9a-f]{8})">', html)[1]
    for kind, drawn in (("timeline", timeline_figure(timeline)), ("frames", frames_figure(timeline))):
        unscoped = shown[kind].replace(f"-{scope}", "")
        assert unscoped.replace('<a target="_blank" href="report/', '<a href="') == drawn
    bars = HREF.findall(svg_of(shown["timeline"]))
    assert bars == [f"report/{span.url}" for span in timeline.drawn_spans()] and len(bars) == timeline.drawn_count > 0
    assert len(bars) == len(analysis.compiles()), "every compile of these runs logged its times"
    frames = HREF.findall(svg_of(shown["frames"]))
    assert frames == [f"report/{frame.url}" for frame in timeline.frames]
    assert all((folder / url).is_file() for url in bars + frames)
    assert "<a href=" not in shown["timeline"] + shown["frames"], "every link opens beside the notebook"


def test_without_a_report_the_pictures_link_nowhere(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    analysis = tlparse_py.analyze(TRACES / "reset_phases")
    shown = figures(summary_html(analysis))
    assert sorted(shown) == ["frames", "timeline"] and all("<a " not in figure for figure in shown.values())
    assert svg_of(shown["timeline"]).count('<rect class="tl-bar') == analysis.timeline().drawn_count


def test_a_compile_with_no_time_is_said_not_drawn():
    analysis = tlparse_py.analyze(TRACES / "export")  # torch.export: its one compile logs no dynamo_start nor metrics
    assert analysis.compiles() and not analysis.timeline().drawn_count
    html = summary_html(analysis)
    assert "<svg" not in html and "<h4>Run timeline</h4>" in html and "No compile logged a time the timeline could place" in html


def test_two_summaries_on_one_page_name_their_own_titles(built):
    page = "".join(summary_html(analysis) for _, analysis in built.values())
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids)) == 6 * len(built)  # each picture's figure, title and description
    for labels in re.findall(r'aria-labelledby="([^"]+)"', page):
        assert all(name in ids for name in labels.split())


# -- in a browser --------------------------------------------------------------------------------

OKABE_ITO = {"tl-ok": ("rgb(0, 158, 115)", "rgb(44, 199, 154)"), "tl-error": ("rgb(213, 94, 0)", "rgb(255, 123, 61)"),
             "tl-break": ("rgb(230, 159, 0)", "rgb(245, 184, 46)"), "tl-limit": ("rgb(204, 121, 167)", "rgb(226, 154, 196)")}
NOTEBOOK = {  # the output area of a light notebook, and of a dark JupyterLab theme
    "light": '<body style="background:#fff;color:#111">',
    "dark": '<body data-jp-theme-light="false" style="background:#111;color:#ddd">',
}


@pytest.mark.browser
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_pictures_are_coloured_in_a_notebook_page_with_no_console_error(built, tmp_path, monkeypatch, theme):
    sync_api = pytest.importorskip("playwright.sync_api")
    import shutil

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed")
    folder, analysis = built["backend_raises"]
    monkeypatch.chdir(folder)
    page_file = folder / f"notebook_{theme}.html"
    page_file.write_text(f"<!doctype html><html><head><meta charset=utf-8><title>notebook</title></head>{NOTEBOOK[theme]}"
                         f"{analysis._repr_html_()}</body></html>")
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_context(color_scheme="light").new_page()  # the theme, not the system, is dark
        page.on("console", lambda m: m.type in ("error", "warning") and errors.append(m.text))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("requestfailed", lambda r: errors.append(f"requestfailed: {r.url}"))
        page.goto(page_file.as_uri())
        fills = page.evaluate("Object.fromEntries([...document.querySelectorAll('svg.pic rect.tl-bar')]"
                              ".map(r => [[...r.classList].find(c => c.startsWith('tl-') && c !== 'tl-bar' && c !== 'tl-recompile'),"
                              " getComputedStyle(r).fill]))")
        text = page.evaluate("getComputedStyle(document.querySelector('svg.pic text')).fill")
        body = page.evaluate("getComputedStyle(document.body).color")
        phase = page.evaluate("getComputedStyle(document.querySelector('svg.pic rect.phase-dynamo')).fill")
        swatch = page.evaluate("getComputedStyle(document.querySelector('.legend-line .swatch.tl-ok')).backgroundColor")
        size = page.evaluate("(() => { const b = document.querySelector('svg.pic').getBoundingClientRect(); return [b.width, b.height]; })()")
        browser.close()
    dark = theme == "dark"
    assert {outcome: fill for outcome, fill in fills.items() if outcome in OKABE_ITO} == \
        {outcome: colours[dark] for outcome, colours in OKABE_ITO.items() if outcome in fills}
    assert {"tl-ok", "tl-error", "tl-limit"} <= set(fills)
    assert text == body, "the pictures' words are in the notebook's own colour"
    assert phase == "rgb(78, 121, 167)" and swatch == OKABE_ITO["tl-ok"][dark]
    assert size[0] > 500 and size[1] > 20
    assert errors == []
