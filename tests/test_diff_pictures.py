"""The diff page's picture (issue 49): compile time by frame, BASE against NEW, on real harness traces.

Its data (`Comparison.frame_times`, diff.json's `frame_times`) is checked against the comparison's own
rows (each frame's times, its pairs' verdicts, the graph break rows placed by their compile ids) and
against each run's own report (the index's "compile time by frame" parts); the SVG against its data;
the page in headless Chromium (no console error, the rows reachable from the keyboard).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

import tlparse_py
from linkcheck import broken_links
from tlparse_py.analysis import comparison as compare
from tlparse_py.analysis import paired_times
from tlparse_py.analysis.compared import COMPARED, NOT_COMPARED, ONE_RUN
from tlparse_py.analysis.summary_load import load_summary
from tlparse_py.cli import main
from tlparse_py.diff.output import diff_json
from tlparse_py.units import format_seconds

TRACES = Path(__file__).parent / "fixtures" / "traces"
SCHEMA = Path(tlparse_py.__file__).parent / "diff.schema.json"
SVG = "{http://www.w3.org/2000/svg}"
COLD = TRACES / "train_warm" / "dedicated_log_torch_trace_7nvvy7q4.log.gz"
WARM = TRACES / "train_warm" / "dedicated_log_torch_trace_pnf633u3.log"
# real pairs with something to draw: a new graph break and frames only in NEW; a graph break fixed (gone) and
# frames gone; two cache states (not compared); a frame no longer compiled; a reset program against another
PAIRS = {
    "newbreak": (TRACES / "edit_base", TRACES / "edit_newbreak"),
    "fixed": (TRACES / "edit_base", TRACES / "edit_fixed"),
    "cache": (COLD, WARM),
    "eager": (TRACES / "skip_base", TRACES / "skip_nan"),
    "reset": (TRACES / "reset_phases", TRACES / "reset_reuse"),
}


def run(*args):
    return CliRunner().invoke(main, ["diff", *[str(a) for a in args], "--no-browser"], catch_exceptions=False)


@pytest.fixture(scope="module")
def diffs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("diff-pictures")
    for name, (a, b) in PAIRS.items():
        result = run(a, b, "-o", base / name)
        assert result.exit_code == 0, result.output
    return {name: base / name for name in PAIRS}


def _data(out: Path) -> dict:
    return json.loads((out / "diff.json").read_text())


def _figure(out: Path, prefix: str = "") -> str:
    html = (out / "index.html").read_text(encoding="utf-8")
    start = html.index(f'id="{prefix}diff-frames-figure"')
    return html[start: html.index("</figure>", start)]


def _svg(out: Path, prefix: str = "") -> ET.Element:
    part = _figure(out, prefix)
    return ET.fromstring(part[part.index("<svg"): part.index("</svg>") + len("</svg>")])


def _rows(svg: ET.Element) -> list[ET.Element]:
    """A frame's row: the <g> that holds its link (or its shapes) and its words."""
    return [g for g in svg.findall(f"{SVG}g")]


def _independent_verdict(pair: dict) -> str:
    """How diff.json's frame row says a pair's time counted, read from its fields alone."""
    if pair["time_comparable"]:
        return COMPARED
    if pair["base"] is None or pair["new"] is None or pair["time_apart"] == compare.EAGER:
        return ONE_RUN
    return NOT_COMPARED


# -- the data is the comparison's ---------------------------------------------------------------------


@pytest.mark.parametrize("name", list(PAIRS))
def test_each_drawn_frame_is_its_comparison_row(diffs, name):
    """Each frame drawn is the frame row it points at: its name, place and times; its pairs' times and
    verdicts are the row's pairs' (compared ⇔ in the ratio; one run only ⇔ a compile only one run has, or
    one NEW no longer compiles); its parts add up to each run's time; its recompiles are the row's."""
    data = _data(diffs[name])
    comparison = data["comparison"]
    drawn = comparison["frame_times"]
    assert drawn["frames"], name
    for f in drawn["frames"]:
        row = comparison["frames"][f["index"]]
        assert (f["frame"], f["where"], f["inside"], f["presence"], f["regression"]) == \
               (row["frame"], row["where"], row["inside"], row["presence"], row["regression"])
        assert f["compile_time_s"] == row["compile_time_s"] and f["recompiles"] == row["recompiles"]
        assert f["base"]["seconds"] == row["compile_time_s"]["base"] and f["new"]["seconds"] == row["compile_time_s"]["new"]
        for side in ("base", "new"):
            seconds = f[side]["seconds"]
            assert sum(f[side]["parts"].values()) == pytest.approx(seconds or 0.0, abs=1e-5), (name, f["frame"], side)
            assert list(f[side]["parts"]) == [k for k in ("dynamo", "aot", "backend", "inductor", "codegen", "unsplit", "backward")
                                              if k in f[side]["parts"]]
        assert len(f["pairs"]) == len(row["pairs"])
        for drawn_pair, pair in zip(f["pairs"], row["pairs"]):
            assert (drawn_pair["base"], drawn_pair["new"]) == (pair["compile_time_s"]["base"], pair["compile_time_s"]["new"])
            assert drawn_pair["verdict"] == _independent_verdict(pair) and drawn_pair["why"] == pair["time_apart"]
        assert f["new_recompile_reasons"] == len(row["new_recompile_reasons"])


@pytest.mark.parametrize("name", list(PAIRS))
def test_the_frames_drawn_are_the_heaviest_in_either_run(diffs, name):
    """The frames drawn are the TOP_FRAMES with the most compile time in either run, most first (ties in
    frame order), counted among every frame that has a time."""
    comparison = _data(diffs[name])["comparison"]
    drawn = comparison["frame_times"]
    timed = [(i, max(r["compile_time_s"]["base"] or 0.0, r["compile_time_s"]["new"] or 0.0)) for i, r in enumerate(comparison["frames"])
             if r["compile_time_s"]["base"] is not None or r["compile_time_s"]["new"] is not None]
    expected = sorted(timed, key=lambda t: (-t[1], t[0]))[: paired_times.TOP_FRAMES]
    assert [f["index"] for f in drawn["frames"]] == [i for i, _ in expected]
    assert drawn["with_time"] == len(timed) and drawn["cap"] == paired_times.TOP_FRAMES


def _compiles(row: dict, side: str) -> set[tuple[str, int]]:
    """A frame row's compiles of one run, as (id, generation): the same id compiles again after a reset()."""
    return {(p[side]["id"], p[side]["generation"]) for p in row["pairs"] if p[side] is not None}


def _logged(summary: dict, brk: dict) -> set[tuple[str, int]]:
    """The compiles of a run's summary.json that logged this graph break (its reason, at its line)."""
    return {(c["id"], c["generation"]) for c in summary["compiles"]
            if any(b["reason"] == brk["reason"] and b["user_location"] == brk["user_location"] for b in c["graph_breaks"])}


@pytest.mark.parametrize("name", list(PAIRS))
def test_new_and_gone_graph_breaks_are_marked_where_the_comparison_says(diffs, name):
    """A frame is marked with a graph break new in NEW exactly when one of its NEW compiles logged it (a
    gone one: one of its BASE compiles), as each run's own summary.json says; the SVG marks the same count."""
    data = _data(diffs[name])
    comparison = data["comparison"]
    breaks = comparison["graph_breaks"]
    sides = [tlparse_py.analyze(path).to_dict() for path in PAIRS[name]]
    new_at = [_logged(sides[1], b) for b in breaks["new"]]
    gone_at = [_logged(sides[0], b) for b in breaks["gone"]]
    assert all(new_at) and all(gone_at)
    svg_rows = _rows(_svg(diffs[name]))
    for f, g in zip(comparison["frame_times"]["frames"], svg_rows, strict=True):
        row = comparison["frames"][f["index"]]
        new = [i for i, at in enumerate(new_at) if at & _compiles(row, "new")]
        gone = [i for i, at in enumerate(gone_at) if at & _compiles(row, "base")]
        assert f["new_graph_breaks"] == new and f["gone_graph_breaks"] == gone, (name, f["frame"])
        marks = [t.text for t in g.iter(f"{SVG}text") if t.text and re.fullmatch(r"[+−]\d+ breaks?", t.text)]
        expected = ([f"−{len(gone)} break{'s' if len(gone) != 1 else ''}"] if gone else []) + \
                   ([f"+{len(new)} break{'s' if len(new) != 1 else ''}"] if new else [])
        assert marks == expected
        assert len([p for p in g.iter(f"{SVG}path") if p.get("class") == "tl-break"]) == bool(new)
        assert len([p for p in g.iter(f"{SVG}path") if p.get("class") == "tl-ok"]) == bool(gone)


def test_the_real_changes_are_marked():
    """The pairs chosen do show what the picture is for: a new break, a gone one, a pair not compared, a frame no longer compiled."""
    found = {}
    for name, (a, b) in PAIRS.items():
        from tlparse_py.diff.load import load

        found[name] = compare.diff(load(a).summary, load(b).summary).comparison.frame_times.frames
    assert any(f.new_graph_breaks for f in found["newbreak"]) and any(f.presence == "new" for f in found["newbreak"])
    assert any(f.gone_graph_breaks for f in found["fixed"]) and any(f.presence == "gone" for f in found["fixed"])
    assert [p.verdict for f in found["cache"] for p in f.pairs] == [NOT_COMPARED]
    assert [p.verdict for f in found["eager"] for p in f.pairs] == [ONE_RUN] and found["eager"][0].regression == compare.EAGER


def test_the_parts_are_the_index_charts(tmp_path):
    """BASE's parts of each frame are what the BASE run's own report stacks in its "compile time by frame" chart."""
    base, new = PAIRS["newbreak"]
    analysis = tlparse_py.analyze(base)
    chart = {f.name: f.parts for f in analysis.timeline().frames}
    comparison = compare.diff(analysis.to_dict(), tlparse_py.analyze(new).to_dict()).comparison
    both = [f for f in comparison.frame_times.frames if f.presence == "both"]
    named = {f.index: comparison.frames[f.index].base_frame for f in both}  # BASE's name (a resume function's line moved)
    assert both and all(named[f.index] in chart for f in both)
    for f in both:
        assert f.base.parts == pytest.approx(chart[named[f.index]], abs=1e-6), f.frame


def test_an_older_summary_without_a_timeline_splits_nothing():
    """A summary.json from before the timeline (4.2) tells no phases: each compile's forward time is one part."""
    base = tlparse_py.analyze(TRACES / "edit_base").to_dict()
    old = json.loads(json.dumps(base))
    del old["timeline"]
    frames = compare.diff(old, old).comparison.frame_times.frames
    assert frames
    for f in frames:
        assert set(f.base.parts) <= {"unsplit", "backward"}
        assert sum(f.base.parts.values()) == pytest.approx(f.base.seconds, abs=1e-5)


def test_past_the_cap_the_figure_says_how_many_it_leaves_out(tmp_path, monkeypatch):
    monkeypatch.setattr(paired_times, "TOP_FRAMES", 3)
    a, b = PAIRS["newbreak"]
    assert run(a, b, "-o", tmp_path / "out").exit_code == 0
    drawn = _data(tmp_path / "out")["comparison"]["frame_times"]
    assert len(drawn["frames"]) == 3 and drawn["cap"] == 3 and drawn["with_time"] == 7
    figure = _figure(tmp_path / "out")
    assert "The 3 frames with the most compile time in either run, of 7 with a compile time (at most 3 are drawn)" in figure
    assert len(_rows(_svg(tmp_path / "out"))) == 3


def test_diff_json_with_the_frames_drawn_is_valid(diffs):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    for name in PAIRS:
        data = _data(diffs[name])
        assert data["schema_version"] == compare.SCHEMA_VERSION == schema["version"] == "4.2"
        jsonschema.Draft202012Validator(schema).validate(data)


# -- the SVG is its data --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(PAIRS))
def test_a_row_per_frame_drawn_linking_to_its_table_row(diffs, name):
    """One row per frame drawn, in order, linking to that frame's row of the compile time table (which
    exists: no broken link), each run's value as the pages write it, and a strip piece per compile with
    a time, coloured by its verdict."""
    out = diffs[name]
    drawn = _data(out)["comparison"]["frame_times"]["frames"]
    svg = _svg(out)
    assert svg.find(f"{SVG}title") is not None and svg.find(f"{SVG}desc") is not None
    rows = _rows(svg)
    assert len(rows) == len(drawn)
    html = (out / "index.html").read_text(encoding="utf-8")
    verdict_class = {COMPARED: "tl-ok", NOT_COMPARED: "tl-skipped tl-recompile", ONE_RUN: "tl-empty"}
    for f, g in zip(drawn, rows):
        link = g.find(f"{SVG}a")
        assert link is not None and link.get("href") == f"#time-{f['index']}"
        assert f'<tr id="time-{f["index"]}">' in html
        words = [t.text for t in g.iter(f"{SVG}text")]
        for side in ("base", "new"):
            if f[side]["seconds"] is not None:
                assert any(w and w.startswith(format_seconds(f[side]["seconds"])) for w in words)
        strips = [r.get("class") for r in link.iter(f"{SVG}rect") if r.get("class") in verdict_class.values()]
        expected = [verdict_class[p["verdict"]] for p in f["pairs"] if p["base"]] + [verdict_class[p["verdict"]] for p in f["pairs"] if p["new"]]
        assert strips == expected
        parts = [r.get("class") for r in link.iter(f"{SVG}rect") if (r.get("class") or "").startswith("phase-")]
        assert parts == [f"phase-{k}" for k in f["base"]["parts"]] + [f"phase-{k}" for k in f["new"]["parts"]]
    assert broken_links(out) == []


def test_one_figure_per_rank_with_ids_of_its_own(tmp_path):
    folder = TRACES / "collectives_gloo_fail"
    assert run(folder, folder, "-o", tmp_path / "out").exit_code == 0
    html = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    for rank in ("rank_0", "rank_1"):
        assert f'id="{rank}-diff-frames-figure"' in html and f'id="{rank}-diff-frames-title"' in html
        for g in _rows(_svg(tmp_path / "out", f"{rank}-")):
            link = g.find(f"{SVG}a")
            assert link is None or link.get("href", "").startswith(f"#{rank}-time-")
    ids = re.findall(r'\sid="([^"]+)"', html)
    assert len(ids) == len(set(ids))
    assert broken_links(tmp_path / "out") == []


def test_values_from_the_log_are_escaped():
    """A frame name that is markup stays text in the picture, its title and its table."""
    base = tlparse_py.analyze(TRACES / "edit_base").to_dict()
    hostile = json.loads(json.dumps(base))
    for c in hostile["compiles"]:
        c["frame"] = "<script>alert(1)</script>&" + (c["frame"] or "")
    from tlparse_py.report.html.diff_svg import diff_frames_figure

    figure = diff_frames_figure(compare.compare(load_summary(hostile), load_summary(hostile)))
    assert "<script>" not in figure and "&lt;script&gt;" in figure
    ET.fromstring(figure[figure.index("<svg"): figure.index("</svg>") + len("</svg>")])


def test_diff_json_is_written_as_the_typed_diff():
    a, b = PAIRS["newbreak"]
    from tlparse_py.diff.load import load

    typed = compare.diff(load(a).summary, load(b).summary)
    data = json.loads(diff_json(typed))
    assert len(data["comparison"]["frame_times"]["frames"]) == len(typed.comparison.frame_times.frames)


# -- in a real browser ------------------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.parametrize("name", ["newbreak", "cache"])
def test_the_diff_picture_renders_in_chromium(diffs, name, tmp_path):
    """No console error, light and dark; the picture has its height; its first row is reachable from the
    keyboard and leads to its row of the compile time table."""
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
            page.goto((diffs[name] / "index.html").as_uri())
            page.wait_for_load_state("load")
            figure = page.locator("#diff-frames-figure")
            assert figure.locator("svg a").count() > 0
            assert page.evaluate("document.querySelector('#diff-frames-figure svg').getBoundingClientRect().height") > 40
            figure.screenshot(path=str(tmp_path / f"diff_{name}_{scheme}.png"))
            first = figure.locator("svg a").first
            first.focus()
            assert page.evaluate("document.activeElement.closest('#diff-frames-figure') !== null")
            page.keyboard.press("Enter")
            page.wait_for_function("location.hash.startsWith('#time-')")
            assert page.evaluate("document.getElementById(location.hash.slice(1)).tagName") == "TR"
            assert errors == []
            context.close()
        browser.close()
