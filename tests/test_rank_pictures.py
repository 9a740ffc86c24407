"""The multi-rank landing page's picture (issue 49): every rank's compiles on one time axis.

Its data (`analysis.rank_timeline`) is checked against what each rank's own report wrote (its
summary.json's `timeline`, `run` and `totals`), shifted by the common origin computed here from the
glog times alone; the SVG against its data (one link per compile, each to a page that exists, or
buckets whose counts add up); the page in headless Chromium (no console error, a bar reachable from
the keyboard), with a screenshot left in /tmp/rank_pictures_<scheme>.png to look at.
"""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime
from html import unescape
from pathlib import Path

import pytest

from conftest import SHARED, TRACES
from logs import cid, line, metrics, start, write_log
from tlparse_py import multirank
from tlparse_py.analysis import rank_timeline as rank_timeline_module
from tlparse_py.analysis import timeline as timeline_data
from tlparse_py.analysis.rank_timeline import RankRun, rank_timeline
from tlparse_py.options import Options
from tlparse_py.report.html.ranks_svg import ranks_figure

FIGURE = re.compile(r'<figure class="picture timeline" id="rank-timeline-figure">.*?</figure>', re.S)


@pytest.fixture(scope="module")
def ddp(tmp_path_factory) -> tuple[multirank.Landing, Path]:
    """The landing of a real two-rank torchrun run (DDP, ranks that diverge)."""
    out = tmp_path_factory.mktemp("rank_pictures") / "ddp"
    landing, _ = multirank.write_all_ranks(TRACES / "torchrun_ddp", out, False, Options())
    return landing, out


def _rank_summaries(out: Path) -> dict[int, dict]:
    return {int(p.parent.name.split("_")[1]): json.loads(p.read_text()) for p in out.glob("rank_[0-9]*/summary.json")}


def _seconds(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def _figure(out: Path) -> str:
    found = FIGURE.search((out / "index.html").read_text())
    assert found, "the landing page has no rank picture"
    return found.group(0)


def test_lanes_are_each_ranks_timeline_shifted_to_the_first_compile_start(ddp):
    landing, out = ddp
    summaries = _rank_summaries(out)
    starts = {rank: _seconds(s["run"]["first_record"]) + min(t["start_s"] for t in s["timeline"] if t["start_s"] is not None)
              for rank, s in summaries.items()}
    origin = min(starts.values())
    timeline = landing.timeline
    assert timeline.by_clock and [lane.rank for lane in timeline.lanes] == sorted(summaries)
    assert timeline.origin_rank == min(starts, key=starts.get)
    for lane in timeline.lanes:
        summary = summaries[lane.rank]
        offset = _seconds(summary["run"]["first_record"]) - origin
        assert lane.offset_s == pytest.approx(offset, abs=1e-6)
        placed = [t for t in summary["timeline"] if t["start_s"] is not None and t["end_s"] is not None]
        assert [(s.id, s.generation, s.outcome, s.cause) for s in lane.spans] == [(t["id"], t["generation"], t["outcome"], t["cause"]) for t in placed]
        assert [s.start_s for s in lane.spans] == pytest.approx([t["start_s"] + offset for t in placed], abs=2e-6)
        assert [s.end_s for s in lane.spans] == pytest.approx([t["end_s"] + offset for t in placed], abs=2e-6)
        assert lane.last_record_s == pytest.approx(_seconds(summary["run"]["last_record"]) - origin, abs=1e-6)
        assert lane.compiles == len(summary["compiles"])
        assert lane.compile_time_s == pytest.approx(summary["totals"]["compile_time_s"])
    assert min(lane.first_start_s for lane in timeline.lanes) == 0.0


def test_the_slowest_rank_is_the_one_with_the_most_compile_time(ddp):
    landing, out = ddp
    totals = {rank: s["totals"]["compile_time_s"] for rank, s in _rank_summaries(out).items()}
    slowest = max(totals, key=totals.get)
    timeline = landing.timeline
    assert timeline.slowest.rank == slowest and timeline.uneven
    assert timeline.spread_s == pytest.approx(max(totals.values()) - min(totals.values()))
    figure = _figure(out)
    assert f"<strong>Slowest: rank {slowest}</strong>" in figure
    assert f"rank {slowest} · slowest" in figure  # its lane says so too
    # the table: one row per rank, with its compile count, first start, last end and compile time
    rows = re.findall(r"<tr><td><a href=\"(rank_\d+)/index.html\">rank&nbsp;(\d+)</a></td>(.*?)</tr>", figure)
    assert [int(r[1]) for r in rows] == [lane.rank for lane in timeline.lanes]
    for (folder, rank, cells), lane in zip(rows, timeline.lanes):
        values = [unescape(v) for v in re.findall(r"<td[^>]*>(.*?)</td>", cells)]
        assert values[0] == str(lane.compiles) and values[2] == f"{lane.first_start_s:.3f}" and values[3] == f"{lane.last_end_s:.3f}"
        assert ("slowest" in values[-1]) == (lane.rank == slowest)


def test_every_bar_links_to_an_existing_page_of_its_rank(ddp):
    landing, out = ddp
    figure = _figure(out)
    svg = figure[figure.index("<svg"):figure.index("</svg>")]
    bars = re.findall(r'<a href="([^"]+)"><title>rank (\d+) · ([^<]*)</title><rect class="tl-bar ', svg)
    assert len(bars) == landing.timeline.drawn > 0
    for href, rank, title in bars:
        assert href.startswith(f"rank_{rank}/") and (out / href).is_file(), href
        assert re.search(r"\d+\.\d{3} s to \d+\.\d{3} s", title)  # its time on the common axis
    labels = re.findall(r'<a href="([^"]+)"><title>rank \d+: ', svg)
    assert labels and all((out / href).is_file() for href in labels)


def test_ranks_skewed_in_time_show_where_they_are(tmp_path):
    """Two ranks whose first compiles start 5 s apart: the late one's lane starts at 5 s, and it
    finishes compiling last."""
    folder = tmp_path / "trace"
    folder.mkdir()
    for rank, late in ((0, 0.0), (1, 5.0)):
        write_log(folder / f"dedicated_log_torch_trace_rank_{rank}_x.log", _rank_lines(rank, late))
    out = tmp_path / "out"
    landing, _ = multirank.write_all_ranks(folder, out, False, Options())
    lanes = {lane.rank: lane for lane in landing.timeline.lanes}
    assert lanes[0].first_start_s == 0.0 and lanes[1].first_start_s == pytest.approx(5.0)
    assert [s.start_s for s in lanes[1].spans] == pytest.approx([5.0, 7.0])
    assert landing.timeline.straggler is lanes[1] and landing.timeline.late_s == pytest.approx(5.0)
    figure = _figure(out)
    assert "<strong>Rank 1 finishes compiling last</strong>, 5.00 s after rank 0" in figure
    assert "&lt;lambda&gt;" in figure and "<lambda>" not in figure  # a frame name from the log is escaped


def _rank_lines(rank: int, late: float) -> list[str]:
    """A rank's log: two compiles of 1 s, 2 s apart, its first `late` seconds after 12:00:01."""
    out = []
    for frame, at in enumerate((1.0 + late, 3.0 + late)):
        for seconds, text in ((at, start(frame, 0, fn="<lambda>")), (at + 0.01, line({"dynamo_output_graph": {}, **cid(frame, 0, 0)}, "graph")),
                              (at + 1.0, metrics(frame, 0, 0, co_name="<lambda>", entire_frame_compile_time_s=1.0))):
            stamp = f"12:00:{seconds:09.6f}"
            out.append(text.replace("12:14:23.064000", stamp, 1).replace("{", '{"rank": %d, ' % rank, 1))
    return out


def test_ranks_from_different_runs_are_each_drawn_from_their_own_start(tmp_path):
    """Logs whose ranks started days apart (their clocks, or runs, differ): each lane from its own first compile."""
    folder = SHARED / "corpus" / "tlparse" / "multi_rank_logs"
    if not folder.is_dir():
        pytest.skip("the shared corpus is not here")
    out = tmp_path / "out"
    landing, _ = multirank.write_all_ranks(folder, out, False, Options())
    timeline = landing.timeline
    assert not timeline.by_clock and timeline.apart_s > rank_timeline_module.FAR_APART_S
    assert all(lane.first_start_s == 0.0 for lane in timeline.lanes if lane.spans)
    assert "apart by their clocks</strong>" in _figure(out)


def test_many_compiles_are_drawn_in_buckets(ddp, monkeypatch):
    """Past MAX_BARS compiles each lane is buckets, every compile in one, counted by outcome."""
    landing, _ = ddp
    monkeypatch.setattr(rank_timeline_module, "MAX_BARS", 3)
    runs = [RankRun(r.number, r.folder, r.summary) for r in landing.ranks]
    timeline = rank_timeline(runs)
    assert timeline.bucketed
    for lane in timeline.lanes:
        assert lane.buckets is not None and sum(b.count for b in lane.buckets) == len(lane.spans)
        outcomes: dict[str, int] = {}
        for span in lane.spans:
            outcomes[span.outcome] = outcomes.get(span.outcome, 0) + 1
        for bucket in lane.buckets:
            for outcome, n in bucket.outcomes.items():
                outcomes[outcome] -= n
        assert not any(outcomes.values())
    html = ranks_figure(timeline)
    assert html.count("<g><title>rank ") - sum(1 for lane in timeline.lanes if lane.last_record_s is not None) == sum(
        len(lane.buckets or ()) for lane in timeline.lanes)
    assert not re.search(r'<a href="[^"]+"><title>rank \d+ · ', html)  # a bucket links to no one compile


def test_a_rank_without_a_report_has_a_lane_that_says_why(ddp):
    landing, _ = ddp
    runs = [RankRun(r.number, r.folder, r.summary) for r in landing.ranks] + [RankRun(9, "rank_9", None, "OSError: unreadable <log>")]
    timeline = rank_timeline(runs)
    assert timeline.lanes[-1].spans == [] and timeline.lanes[-1].compile_time_s is None
    html = ranks_figure(timeline)
    assert "no report: OSError: unreadable &lt;log&gt;" in html


def test_a_compile_under_way_is_drawn_to_its_ranks_last_record(ddp):
    """A live landing's compile started and not ended: said compiling, not by its status, drawn on
    to what its rank logged last."""
    landing, _ = ddp
    last = {r.number: r.summary.compiles[-1] for r in landing.ranks}
    runs = [RankRun(r.number, r.folder, r.summary, None, frozenset({(last[r.number].id, last[r.number].generation)})) for r in landing.ranks]
    timeline = rank_timeline(runs)
    for lane in timeline.lanes:
        span = lane.spans[-1]
        assert span.outcome == timeline_data.UNDER_WAY and span.end_s == max(lane.last_record_s, landing.timeline.lanes[lane.rank].spans[-1].end_s)
        assert all(s.outcome != timeline_data.UNDER_WAY for s in lane.spans[:-1])
    assert "compiling (under way" in ranks_figure(timeline)


def test_lane_buckets_shrink_with_many_ranks():
    assert rank_timeline_module.lane_buckets(2) == rank_timeline_module.BUCKETS
    assert rank_timeline_module.lane_buckets(1000) == rank_timeline_module.MIN_LANE_BUCKETS
    assert rank_timeline_module.lane_buckets(64) * 64 <= 2 * rank_timeline_module.MAX_BARS


@pytest.mark.browser
def test_the_landing_picture_renders_in_chromium(ddp):
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    from test_browser import ARGS, CHROMIUM
    from playwright.sync_api import sync_playwright

    if CHROMIUM is None or shutil.which(CHROMIUM) is None:
        pytest.skip("chromium is not installed")
    landing, out = ddp
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for scheme in ("light", "dark"):
            context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
            page = context.new_page()
            errors: list[str] = []
            page.on("console", lambda m: m.type in ("error", "warning") and errors.append(m.text))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((out / "index.html").as_uri())
            page.wait_for_load_state("load")
            assert page.locator("#rank-timeline-figure svg a rect.tl-bar").count() == landing.timeline.drawn
            assert page.evaluate("document.querySelector('#rank-timeline-figure svg').getBoundingClientRect().height") > 60
            top, bottom = page.evaluate("""() => [document.getElementById('rank-timeline').getBoundingClientRect().top + scrollY,
                document.getElementById('rank-timeline-figure').getBoundingClientRect().bottom + scrollY]""")
            page.screenshot(path=f"/tmp/rank_pictures_{scheme}.png", full_page=True, clip={"x": 0, "y": top - 5, "width": 1280, "height": bottom - top + 15})
            page.locator("#rank-timeline-figure svg a:has(rect.tl-bar)").first.focus()
            assert page.evaluate("document.activeElement.closest('#rank-timeline-figure') !== null")
            assert errors == []
            context.close()
        browser.close()
