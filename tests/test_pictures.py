"""The index's pictures (issue 49): the run timeline and the compile time by frame.

Their data (`analysis.timeline`, summary.json's `timeline`) is checked against the raw logs of real
traces, read here with nothing but a regular expression and json (when each compile's dynamo_start
and compilation_metrics were logged), and against summary.json's compiles (outcomes, compile
times); the SVG against its data (one link per compile, or buckets whose counts add up to them);
the page in headless Chromium (no console error), with screenshots left in /tmp/h24_*.png to look at.
"""

from __future__ import annotations

import gzip
import json
import re
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path

import pytest

from conftest import TRACES
from tlparse_py.analysis import timeline as timeline_module
from tlparse_py.pipeline import write_report

SCENARIOS = ("recompile", "graph_break", "failure", "cache", "processes", "many_small")
SVG = "{http://www.w3.org/2000/svg}"
_RECORD = re.compile(r"^[VIWEC](\d\d)(\d\d) (\d\d:\d\d:\d\d\.\d{6}) +(\d+) [^\]]*\] (\{.*\})\s*$")


def _logs(scenario: str) -> list[Path]:
    return sorted(p for p in (TRACES / scenario).iterdir() if p.name.startswith("dedicated_log"))


def _input(scenario: str) -> Path | list[Path]:
    """What the report reads: every log of a run of several processes (as the CLI picks them), else its one log."""
    if scenario == "processes":
        from tlparse_py.reading.inputs import choose_input

        return list(choose_input(TRACES / scenario).logs)
    return _logs(scenario)[0]


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("pictures")
    found = {}
    for scenario in SCENARIOS:
        write_report(_input(scenario), base / scenario)
        found[scenario] = base / scenario
    return found


def _summary(report: Path) -> dict:
    return json.loads((report / "summary.json").read_text())


def _raw_times(log: Path) -> tuple[float, dict[str, float], dict[str, float]]:
    """From a raw log alone: its first record's glog time, and each compile id's (`frame/compile`)
    first dynamo_start and last compilation_metrics glog time (seconds, the year left out)."""
    opener = gzip.open if log.suffix == ".gz" else open
    first = None
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    with opener(log, "rt", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            match = _RECORD.match(line)
            if not match:
                continue
            month, day, clock = match.group(1), match.group(2), match.group(3)
            at = datetime.strptime(f"2000-{month}-{day} {clock}", "%Y-%m-%d %H:%M:%S.%f").timestamp()
            first = at if first is None else min(first, at)
            envelope = json.loads(match.group(5))
            if "frame_id" not in envelope or "compiled_autograd_id" in envelope:
                continue
            key = f"[{envelope['frame_id']}/{envelope['frame_compile_id']}]"
            if "dynamo_start" in envelope:
                starts.setdefault(key, at)
            if "compilation_metrics" in envelope:
                ends[key] = at
    assert first is not None
    return first, starts, ends


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_timeline_is_the_analysis(reports, scenario):
    """Every compile is in the timeline once, in order, with its outcome (its status), its process,
    and its forward phases adding up to its forward compile time."""
    summary = _summary(reports[scenario])
    compiles, timeline = summary["compiles"], summary["timeline"]
    assert [(t["id"], t["generation"], t["process"]) for t in timeline] == [(c["id"], c["generation"], c["process"]) for c in compiles]
    assert [t["outcome"] for t in timeline] == [c["status"] for c in compiles]
    assert [t["cause"] for t in timeline] == [c["cause"] for c in compiles]
    for item, compile_ in zip(timeline, compiles):
        forward = compile_["compile_time_s"]["forward"]
        seconds = [p["seconds"] for p in item["phases"]]
        if forward is not None and seconds and None not in seconds:
            assert sum(seconds) == pytest.approx(forward, abs=1e-5), item["id"]
        if item["start_s"] is not None:
            assert 0 <= item["start_s"] <= item["end_s"]
            assert item["end_s"] - item["start_s"] >= (forward or 0.0) - 1e-5  # a bar holds its phases
            starts = [p["start_s"] for p in item["phases"]]
            assert starts == sorted(starts) and (not starts or starts[0] == item["start_s"])
        else:
            assert item["end_s"] is None and all(p["start_s"] is None for p in item["phases"])


@pytest.mark.parametrize("scenario", ["recompile", "graph_break", "failure", "many_small"])
def test_compiles_begin_and_end_where_the_raw_log_says(reports, scenario):
    """One process, no reset: each compile begins at its dynamo_start's glog time and ends no earlier
    than its compilation_metrics' (seconds from the first record), read from the raw log here."""
    first, starts, ends = _raw_times(_logs(scenario)[0])
    timeline = _summary(reports[scenario])["timeline"]
    assert timeline
    for item in timeline:
        if item["id"] in starts:
            assert item["start_s"] == pytest.approx(starts[item["id"]] - first, abs=1.5e-3), item["id"]
        if item["id"] in ends:
            assert item["end_s"] >= ends[item["id"]] - first - 1.5e-3, item["id"]
        if item["id"] not in starts and item["id"] not in ends:
            assert item["start_s"] is None  # unknown, never 0


def test_one_lane_per_process(reports):
    summary = _summary(reports["processes"])
    assert len(summary["processes"]) > 1
    assert {t["process"] for t in summary["timeline"]} == {p["process"] for p in summary["processes"] if p["compiles"]}
    svg = _svg(reports["processes"] / "index.html", "timeline-figure")
    names = [t.text for t in svg.iter(f"{SVG}text") if t.get("class") == "tl-name"]
    assert names == ["process 0 (first)"] + [f"process p{p['process']}" for p in summary["processes"][1:]]


def _figure(index: Path, figure: str) -> str:
    html = index.read_text(encoding="utf-8")
    start = html.index(f'id="{figure}"')
    return html[start: html.index("</figure>", start)]


def _svg(index: Path, figure: str) -> ET.Element:
    """A picture's <svg>, parsed as XML (it must be well-formed)."""
    part = _figure(index, figure)
    return ET.fromstring(part[part.index("<svg"): part.index("</svg>") + len("</svg>")].replace("&nbsp;", " "))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_bar_and_a_row_per_compile(reports, scenario):
    """The timeline links each compile it can place to its page, its <title> naming it, and the table
    under it lists the same compiles in the same order."""
    summary = _summary(reports[scenario])
    placed = [(t, c) for t, c in zip(summary["timeline"], summary["compiles"]) if t["start_s"] is not None]
    svg = _svg(reports[scenario] / "index.html", "timeline-figure")
    links = list(svg.iter(f"{SVG}a"))
    assert [a.get("href") for a in links] == [c["url"] for _, c in placed if c["url"]]
    assert all(a.find(f"{SVG}title").text.startswith(c["id"]) for a, (_, c) in zip(links, placed))
    assert svg.find(f"{SVG}title") is not None and svg.find(f"{SVG}desc") is not None
    table = _figure(reports[scenario] / "index.html", "timeline-figure").split("<tbody>", 1)[1]
    assert re.findall(r'<tr><td><a href="[^"]*">([^<]*)</a>', table) == [c["id"] for _, c in placed]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_frame_chart_adds_up_to_the_compile_time(reports, scenario):
    """The frames' parts add up to the compile time of their compiles, and the chart shows the
    frames with the most, most first."""
    summary = _summary(reports[scenario])
    from tlparse_py.analysis.summary_load import load_summary

    loaded = load_summary(summary)
    frames = timeline_module.frame_times(loaded.compiles, [_span(t) for t in summary["timeline"]])
    total = sum(c["compile_time_s"]["total"] or 0.0 for c in summary["compiles"])
    assert sum(f.total for f in frames) == pytest.approx(total, abs=1e-4)
    assert [f.total for f in frames] == sorted((f.total for f in frames), reverse=True)
    svg = _svg(reports[scenario] / "index.html", "frames-figure")
    assert len(list(svg.iter(f"{SVG}a"))) == min(len(frames), timeline_module.TOP_FRAMES)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_frames_summed_in_arrays_are_the_frames_summed_one_by_one(reports, scenario):
    """`frame_times` (a frame a place in arrays) against the plain way: a dict of parts a frame, in log
    order, rounded, sorted by total with ties in the order of their first compile."""
    from tlparse_py.analysis.summary_load import load_summary

    summary = _summary(reports[scenario])
    compiles, spans = load_summary(summary).compiles, [_span(t) for t in summary["timeline"]]
    frames: dict = {}
    for compile_, span in zip(compiles, spans):
        frame = frames.setdefault(timeline_module.frame_key(compile_), {"first": compile_, "name": "", "n": 0, "re": 0, "parts": {}})
        frame["n"] += 1
        frame["re"] += compile_.is_recompile
        frame["name"] = frame["name"] or compile_.frame or ""
        for part, seconds in timeline_module.parts(compile_, span):
            frame["parts"][part] = frame["parts"].get(part, 0.0) + seconds
    expected = []
    for f in frames.values():
        if f["parts"]:
            rounded = {part: round(f["parts"][part], 6) for part in timeline_module.PART_NAMES if f["parts"].get(part)}
            expected.append((f["first"].frame_label, f["name"], f["first"].url, f["n"], f["re"], rounded))
    expected.sort(key=lambda f: -sum(f[5].values()))
    found = [(f.frame, f.name, f.url, f.compiles, f.recompiles, f.parts) for f in timeline_module.frame_times(compiles, spans)]
    assert found and found == expected


def _span(item: dict) -> timeline_module.CompileSpan:
    phases = tuple(timeline_module.PhaseSpan(p["name"], {"Dynamo": "dynamo", "AOTAutograd": "aot", "Inductor": "inductor",
                                                          "Code generation": "codegen"}.get(p["name"], "backend"), p["start_s"], p["seconds"])
                   for p in item["phases"])
    return timeline_module.CompileSpan(item["id"], item["generation"], item["process"], item["start_s"], item["end_s"],
                                       item["outcome"], item["cause"], False, phases)


def test_past_max_bars_compiles_are_bucketed_with_their_counts(tmp_path, monkeypatch):
    """Beyond MAX_BARS compiles, the timeline draws buckets: every compile is counted in one, by outcome."""
    monkeypatch.setattr(timeline_module, "MAX_BARS", 5)
    write_report(_input("many_small"), tmp_path / "r")
    summary = _summary(tmp_path / "r")
    svg = _svg(tmp_path / "r" / "index.html", "timeline-figure")
    assert not list(svg.iter(f"{SVG}a"))
    counts = [int(m.group(1).replace(",", "")) for g in svg.iter(f"{SVG}g") if (t := g.find(f"{SVG}title")) is not None
              and (m := re.match(r"([\d,]+) compiles? from", t.text or ""))]
    assert sum(counts) == sum(1 for t in summary["timeline"] if t["start_s"] is not None) == len(summary["compiles"])
    assert len(counts) <= timeline_module.BUCKETS


def test_long_gaps_are_compressed_and_marked():
    spans = [timeline_module.CompileSpan("[0/0]", 0, 0, 0.0, 1.0, "ok", "first", False, ()),
             timeline_module.CompileSpan("[1/0]", 0, 0, 100.0, 101.0, "ok", "first", False, ())]
    axis = timeline_module.compressed_axis(spans, 101.0)
    assert [(g.start_s, g.end_s) for g in axis.gaps] == [(1.0, 100.0)]
    assert axis.at(0.0) == 0.0 and axis.at(1.0) == 1.0
    assert axis.at(100.0) == pytest.approx(1.0 + axis.gap_length)
    assert axis.length == pytest.approx(2.0 + axis.gap_length)
    assert axis.at(50.0) < axis.at(100.0)


def test_the_axis_is_the_same_whatever_order_the_spans_come_in():
    """compressed_axis walks spans as they come while they start in order, and in order of their
    starts otherwise (ranks, processes): a list or a generator, in any order, gives one axis, the one
    the plain way gives (sort every (start, end), then walk them)."""
    import random

    rnd = random.Random(7)
    for _ in range(200):
        count = rnd.randint(0, 12)
        spans = []
        for n in range(count):
            start = rnd.choice([0.0, 1.0, 5.0, 30.0, 60.0, 90.0, float(rnd.randint(0, 100))])
            end = None if rnd.random() < 0.1 else start + rnd.choice([0.0, 0.5, 2.0, 40.0])
            spans.append(timeline_module.CompileSpan(f"[{n}/0]", 0, n % 2, None if end is None and rnd.random() < 0.5 else start,
                                                     end, "ok", "first", False, ()))
        end = max([s.end_s for s in spans if s.end_s is not None] + [100.0])
        timed = sorted((s.start_s, s.end_s) for s in spans if s.start_s is not None and s.end_s is not None)
        threshold = max(timeline_module.GAP_MIN_S, timeline_module.GAP_SHARE * end)
        expected, reached = [], 0.0
        for start, stop in [*timed, (end, end)]:
            if start - reached > threshold:
                expected.append((round(reached, 6), round(start, 6)))
            reached = max(reached, stop)
        in_order = sorted(spans, key=lambda s: s.start_s if s.start_s is not None else -1.0)
        for given in (spans, in_order, iter(spans), (s for s in reversed(spans))):
            axis = timeline_module.compressed_axis(given, end)
            assert [(g.start_s, g.end_s) for g in axis.gaps] == expected


# -- in a real browser -------------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.parametrize("scenario", ["recompile", "processes", "failure"])
def test_the_pictures_render_in_chromium(reports, scenario):
    """No console error; the timeline's first bar is reachable from the keyboard; screenshots of the
    pictures, light and dark, in /tmp/h24_<scenario>_<scheme>.png."""
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    from test_browser import ARGS, CHROMIUM
    from playwright.sync_api import sync_playwright

    if CHROMIUM is None:
        pytest.skip("chromium is not installed")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for scheme in ("light", "dark"):
            context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
            page = context.new_page()
            errors: list[str] = []
            page.on("console", lambda m: m.type in ("error", "warning") and errors.append(m.text))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((reports[scenario] / "index.html").as_uri())
            page.wait_for_load_state("load")
            assert page.locator("#timeline-figure svg a").count() > 0
            assert page.evaluate("document.querySelector('#timeline-figure svg').getBoundingClientRect().height") > 40
            top, bottom = page.evaluate("""() => [document.getElementById('timeline').getBoundingClientRect().top + scrollY,
                document.getElementById('frames-figure').getBoundingClientRect().bottom + scrollY]""")
            page.screenshot(path=f"/tmp/h24_{scenario}_{scheme}.png", full_page=True,
                            clip={"x": 0, "y": top - 5, "width": 1280, "height": bottom - top + 15})
            page.locator("#timeline-figure svg a").first.focus()
            assert page.evaluate("document.activeElement.closest('#timeline-figure') !== null")
            assert errors == []
            context.close()
        browser.close()
