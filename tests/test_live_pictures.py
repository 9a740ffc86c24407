"""A live report's pictures (issue 49): the index of a log still being read shows the run timeline and
the compile time by frame, grown by every update to what a full run over the bytes read so far draws,
and an update builds the pictures' data of the compiles that changed only (`LiveTimeline`): the
live analysis never builds `Analysis.timeline()` over every compile.

Checked on real traces read in pieces, and on small hand-written logs for what real traces do not
show (records logged out of order, enough compiles to count what an update builds).
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from logs import line, metrics, start
from test_live import fixture_bytes
from test_live_cost import compile_records, follow
from test_live_totals import new_log, read_in_pieces
from tlparse_py.analysis import timeline as timeline_data
from tlparse_py.analysis import compiles as compiles_module
from tlparse_py.analysis.compiles import vllm_run
from tlparse_py.analysis.timeline import Timeline
from tlparse_py.live import LiveReport
from tlparse_py.options import Options
from tlparse_py.pipeline import analyze_logs, write_report
from tlparse_py.report.views.common import VLLM_USUAL_INDEX
from tlparse_py.report.html.timeline_svg import frames_figure, timeline_figure

# real traces whose pictures move as they are read: many frames (more than the chart shows),
# recompiles, frames again after reset(), a compile killed before its end, backward compiles that
# come after their compile, a compile at the limit, compiled autograd, vLLM's pieces, long gaps
TRACES_READ = ["many_small", "recompile", "reset_phases", "killed_midcompile", "dynamic_backward", "recompile_limit",
               "compiled_autograd", "vllm_piecewise", "training", "ddp_cache_race"]
PICTURES = re.compile(r'<h2 id="timeline">.*?<h2 id="time-by-frame">.*?(?:</figure>|</p>)\n', re.S)  # as html.index_page places them


def full_run(data: bytes, folder: Path, live: bool = False) -> Timeline | None:
    """The pictures' data a one-shot run over `data` draws (None: no compile, no picture); `live`: as a
    live report draws it, each compile started and not ended (`open_compiles`) under way, until the
    last record read."""
    folder.mkdir(exist_ok=True)
    log = folder / "dedicated_log_torch_trace_x.log"
    log.write_bytes(data)
    analysis = analyze_logs([log])
    if not analysis.compiles():
        return None
    found = analysis.timeline()
    open_ = {(c.id, c.generation) for c, _ in analysis.open_compiles()}
    if not live or not open_:
        return found
    origin, last = timeline_data.run_origin(analysis), timeline_data.glog_seconds(analysis.last_timestamp or "")
    last_s = last - origin if last is not None and origin is not None else None
    spans = [timeline_data.under_way(s, last_s) if (s.id, s.generation) in open_ else s for s in found.spans]
    return timeline_data.timeline_of(analysis, spans, found.frames, found.frames_with_time, len(analysis.processes.pids))


def data_of(timeline: Timeline | None) -> object:
    return msgspec.to_builtins(timeline) if timeline is not None else None


def drawn_pictures(page: str) -> list[str]:
    return PICTURES.findall(page)


def pictures_of(timeline: Timeline | None) -> list[str]:
    """The pictures the index shows for `timeline` (none without a compile)."""
    if timeline is None:
        return []
    return [f'<h2 id="timeline">Run timeline</h2>\n{timeline_figure(timeline)}\n'
            f'<h2 id="time-by-frame">Compile time by frame</h2>\n{frames_figure(timeline)}\n']


def no_whole_timeline(monkeypatch, live: LiveReport) -> list[int]:
    """Timelines built whole (`timeline.timeline`) for the live analysis: a live update must build
    none (it would build every compile's span again); the index and its summary() ask the kept one."""
    calls: list[int] = []
    whole = compiles_module.timeline

    def counted(store, *args):
        if store is live.analysis:
            calls.append(1)
        return whole(store, *args)

    monkeypatch.setattr(compiles_module, "timeline", counted)
    return calls


@pytest.mark.parametrize("name", TRACES_READ)
def test_the_live_pictures_are_the_full_runs_after_every_piece(tmp_path, monkeypatch, name):
    data = fixture_bytes(name)
    log = new_log(tmp_path)
    live = LiveReport(log, tmp_path / "live", Options())
    made = follow(live)
    whole = no_whole_timeline(monkeypatch, live)
    checked: list[tuple[int, float]] = []  # (compiles drawn, seconds of the run) after each update
    compiling: list[str] = []  # the compiles drawn under way, update after update

    def check() -> None:
        expected = full_run(data[: live.bytes_read], tmp_path / "full", live=True)
        compiling.extend(s.id for s in (expected.drawn_spans() if expected else []) if s.outcome == timeline_data.UNDER_WAY)
        assert data_of(made[-1].timeline) == data_of(expected), f"after {live.bytes_read} bytes"
        index = VLLM_USUAL_INDEX if vllm_run(live.analysis) is not None else "index.html"
        page = (tmp_path / "live" / index).read_text()
        assert drawn_pictures(page) == pictures_of(expected)
        checked.append((expected.drawn_count, expected.axis.end_s) if expected else (0, 0.0))

    updates = read_in_pieces(live, log, data, seed=7, each=check)
    assert updates > 4 and whole == []
    assert checked[0] < checked[-1] and checked == sorted(checked), "the pictures grew as the log did"
    if name in ("killed_midcompile", "training"):  # a piece ends inside a compile: it is drawn under way
        assert compiling
    live.finish()
    live.close()
    write_report(log, tmp_path / "one_shot")
    index = VLLM_USUAL_INDEX if vllm_run(live.analysis) is not None else "index.html"
    final, one_shot = ((tmp_path / folder / index).read_text() for folder in ("live", "one_shot"))
    assert drawn_pictures(final) == drawn_pictures(one_shot) == pictures_of(live.analysis.timeline())
    assert final.count('<figure class="picture') == 2


def test_more_compiles_than_bars_are_bucketed_live_as_in_a_full_run(tmp_path, monkeypatch):
    monkeypatch.setattr(timeline_data, "MAX_BARS", 6)
    data = fixture_bytes("many_small")
    log = new_log(tmp_path)
    live = LiveReport(log, tmp_path / "live", Options())
    made = follow(live)
    shapes: set[bool] = set()

    def check() -> None:
        expected = full_run(data[: live.bytes_read], tmp_path / "full", live=True)
        assert data_of(made[-1].timeline) == data_of(expected)
        shapes.add(expected is not None and expected.buckets is not None)

    read_in_pieces(live, log, data, seed=2, each=check)
    live.close()
    assert shapes == {False, True}, "bars first, then buckets"


def stamped(text: str, clock: str) -> str:
    """Records written by `logs.line` (all at 12:14:23.064000), at another glog time."""
    return text.replace("12:14:23.064000", clock)


def test_a_record_logged_before_the_first_read_moves_every_span(tmp_path):
    """Threads may log a little out of order: the run's first record can come in a later piece, and
    every compile's span is measured from it again."""
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    pieces = [
        stamped(line({"str": ["model.py", 0]}), "12:14:25.000000") + stamped("".join(compile_records(0, 1)), "12:14:25.500000")
        + stamped("".join(compile_records(1, 2)), "12:14:26.000000"),
        stamped(line({"str": ["other.py", 1]}), "12:14:24.000000")
        + stamped("".join(compile_records(2, 3)), "12:14:27.000000"),
        stamped("".join(compile_records(3, 4)), "12:14:28.000000"),
    ]
    log.write_text("")
    live = LiveReport(log, tmp_path / "live", Options())
    made = follow(live)
    built = []
    for piece in pieces:
        with open(log, "a") as handle:
            handle.write(piece)
        live.update("next", live.read())
        built.append(live.rendered["timeline spans"])
        assert data_of(made[-1].timeline) == data_of(full_run(log.read_bytes(), tmp_path / "full"))
    live.close()
    assert made[-1].timeline is not None and made[-1].timeline.spans[0].start_s == 1.5
    assert built == [2, 3, 1], "all again when the first record moved, else the new compile's only"


def grown_by_one_compile(tmp_path: Path, compiles: int) -> dict[str, int]:
    """The spans each update builds after records of one compile id are appended to a log of
    `compiles` compiles, one tenth of a second apart (its pictures checked against a full run)."""
    log = tmp_path / f"n{compiles}" / "dedicated_log_torch_trace_x.log"
    log.parent.mkdir()
    clock = lambda n: f"12:{14 + n // 600:02d}:{n % 600 / 10:09.6f}"  # noqa: E731
    log.write_text(line({"str": ["model.py", 0]}) + "".join(stamped(r, clock(frame)) for frame in range(compiles)
                                                           for r in compile_records(frame, frame)))
    live = LiveReport(log, log.parent / "out", Options())
    made = follow(live)
    live.update("first", live.read())
    counts = {"first": live.rendered["timeline spans"]}
    records = compile_records(compiles, 7) + [start(compiles // 2, 1) + metrics(compiles // 2, 1, co_name="again")]
    for step, record in enumerate(records):
        with open(log, "a") as handle:
            handle.write(stamped(record, clock(compiles)))
        live.update("next", live.read())
        counts[f"step {step}"] = live.rendered["timeline spans"]
        assert data_of(made[-1].timeline) == data_of(full_run(log.read_bytes(), log.parent / "full", live=True))
    live.close()
    return counts


def test_an_update_builds_the_spans_of_what_changed_however_many_compiles_the_run_holds(tmp_path):
    few, many = grown_by_one_compile(tmp_path, 40), grown_by_one_compile(tmp_path, 400)
    assert few["first"] == 40 and many["first"] == 400
    # the new compile's span, as it starts, gets its graph and ends; then a compile of a frame in
    # the middle: the recompile only (its frame's first compile is what it was: nothing a later
    # compile logs changes an earlier one)
    assert {k: v for k, v in few.items() if k != "first"} == {k: v for k, v in many.items() if k != "first"} \
        == {"step 0": 1, "step 1": 1, "step 2": 1, "step 3": 1}


def test_a_compile_whose_unusual_settings_moved_keeps_its_span(tmp_path):
    """When the run's usual settings move, the compiles whose unusual settings read differently are
    replaced (their rows say so), but a span or a section reads no setting: none is built again for them."""
    usual, odd = '{"capture_scalar_outputs": false}', '{"capture_scalar_outputs": true}'
    one = lambda frame, config: (start(frame, fn=f"f{frame}") + metrics(frame, co_name=f"f{frame}", dynamo_config=config))  # noqa: E731
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text(line({"str": ["model.py", 0]}) + one(0, odd) + one(1, usual) + one(2, usual))
    live = LiveReport(log, tmp_path / "live", Options())
    made = follow(live)
    live.update("first", live.read())
    assert [u.usual_compiles for u in live.analysis.compiles()[0].config_unusual] == [2]
    with open(log, "a") as handle:
        handle.write(one(3, usual))
    live.update("next", live.read())
    assert [u.usual_compiles for u in live.analysis.compiles()[0].config_unusual] == [3]  # "false in 3 of the run's 4 compiles"
    assert live.rendered["rows"] == 2 and live.rendered["timeline spans"] == 1  # the new compile's span only
    assert live.rendered["section entries"] == 1  # and its "Files by compile id" section only: a section reads no setting
    assert data_of(made[-1].timeline) == data_of(full_run(log.read_bytes(), tmp_path / "full"))
    live.close()
