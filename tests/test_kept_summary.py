"""A report's own writers read its summary as the analysis keeps it: its compiles from their scratch
file (past `compile_memo.SPOOLED_FROM`), its timeline made item by item (`Analysis.summary(kept=True)`),
and what several pages ask of them computed once per summary (`summary.once`). What they write must
be what the lists say: the same summary, the same answers, the same report byte for byte; and the
metrics pages kept while reading (msgpack, pickle for what msgpack cannot hold) read back equal."""

from __future__ import annotations

import pickle
from pathlib import Path

import msgspec
import pytest

from test_cache import files_of
from tlparse_py.analysis import compile_groups as groups
from tlparse_py.analysis import compile_memo
from tlparse_py.analysis.spools import Reading, Spool
from tlparse_py.analysis.totals import totals_of
from tlparse_py.model import CompileId
from tlparse_py.pipeline import analyze_logs, write_report
from tlparse_py.report.outputs import PageSpool
from tlparse_py.report.summary_json import summary_json
from tlparse_py.report.views.pages import PendingPage

TRACES = Path(__file__).parent / "fixtures" / "traces"
SCENARIOS = ["recompile_limit", "graph_break", "failure", "many_small", "processes", "retry_fullgraph"]


def logs_of(name: str) -> list[Path]:
    return sorted(p for p in (TRACES / name).iterdir() if p.name.startswith("dedicated_log"))


@pytest.fixture
def spooled(monkeypatch):
    """Every log's compiles kept in a scratch file, and its summary read through it, however few."""
    monkeypatch.setattr(compile_memo, "SPOOLED_FROM", 1)
    monkeypatch.setattr(compile_memo, "READ_THROUGH_FROM", 1)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_kept_summary_says_what_the_lists_say(scenario, spooled):
    analysis = analyze_logs(logs_of(scenario))
    plain, kept = analysis.summary(), analysis.summary(kept=True)
    assert isinstance(kept.compiles, Reading) and plain.compiles
    assert list(kept.compiles) == plain.compiles and list(kept.timeline) == plain.timeline
    assert isinstance(analysis.timeline().spans, Spool)  # the spans of compiles read through are spooled too
    assert b"".join(summary_json(kept)) == b"".join(summary_json(plain))
    assert totals_of(kept.compiles) == totals_of(plain.compiles)
    for name in ("graph_break_groups", "recompiled_frames", "failed_compiles", "limit_hits"):
        asked = getattr(groups, name)
        assert asked(kept.compiles) == asked(plain.compiles) == asked(iter(plain.compiles)), name
        assert asked(kept.compiles) is not asked(kept.compiles)  # a new list each time: a caller may change it
    assert groups.slowest(kept.compiles, 3) == sorted((c for c in plain.compiles if c.compile_time_s.total is not None),
                                                       key=lambda c: -(c.compile_time_s.total or 0.0))[:3]


def test_an_analysis_with_spooled_spans_pickles_them_as_a_list(spooled):
    analysis = analyze_logs(logs_of("many_small"))
    spans = analysis.timeline().spans
    assert isinstance(spans, Spool)
    copy = pickle.loads(pickle.dumps(analysis))
    assert copy.timeline() == analysis.timeline() and copy.timeline().spans == list(spans)


def test_what_is_computed_once_goes_with_the_summary_that_asked(spooled):
    analysis = analyze_logs(logs_of("recompile_limit"))
    first, second = analysis.summary(kept=True), analysis.summary(kept=True)
    totals_of(first.compiles)
    assert ("totals", len(first.compiles)) in first.compiles.memo and not second.compiles.memo
    assert first.compiles.spool is second.compiles.spool  # one scratch file, read by both


@pytest.mark.parametrize("scenario", [*SCENARIOS, "config_patch", "reset_reuse", "compiled_autograd", "recompile_restart"])
def test_compiles_built_straight_into_their_spool_are_those_built_as_a_list(scenario, monkeypatch):
    """Past SPOOLED_FROM a report's compiles are built into their scratch file as they come (each after
    its frame's previous one, which is kept as `Followed`), their unusual settings given as they are
    read back: the compiles a list of them all holds, each where the list has it."""
    listed = [msgspec.to_builtins(c) for c in analyze_logs(logs_of(scenario)).compiles()]
    monkeypatch.setattr(compile_memo, "SPOOLED_FROM", 1)
    analysis = analyze_logs(logs_of(scenario))
    kept = analysis.kept_compiles()
    assert isinstance(analysis.memo.kept, Spool) and analysis.memo.places is not None  # built into the spool, where each is noted
    assert [msgspec.to_builtins(c) for c in kept] == listed == [msgspec.to_builtins(c) for c in analysis.compiles()]
    assert [msgspec.to_builtins(analysis.compile_of(c.key, c.generation)) for c in kept] == listed
    if scenario == "config_patch":
        assert any(c["config_unusual"] for c in listed) and any(c["config_changes"] for c in listed)


@pytest.mark.parametrize("scenario", ["recompile_limit", "many_small", "config_patch"])
def test_a_report_written_from_the_kept_summary_is_byte_identical(scenario, tmp_path, monkeypatch):
    write_report(logs_of(scenario), tmp_path / "lists")
    monkeypatch.setattr(compile_memo, "SPOOLED_FROM", 1)
    monkeypatch.setattr(compile_memo, "READ_THROUGH_FROM", 1)
    write_report(logs_of(scenario), tmp_path / "kept")
    assert files_of(tmp_path / "kept") == files_of(tmp_path / "lists")


@pytest.mark.parametrize("data, kept_as", [
    ({"meta": {"a": 1.5, "b": [None, True, "x"], "c": {"d": -3}}, "title": "t", "other": ["a"], "null": []}, b"m"),
    ({"meta": {"big": 2**70}}, b"p"),  # past 64 bits: pickled
    ({"meta": {"odd": "\ud800"}}, b"p"),  # a lone surrogate: pickled
])
def test_a_pending_page_reads_back_equal(tmp_path, data, kept_as):
    with open(tmp_path / "spool", "w+b") as handle:
        pages = PageSpool(handle)
        page = PendingPage("a/b_1.html", "metrics", data, CompileId(None, 0, 1, 0), "compilation_metrics", 7, None)
        pages.add(page)
        pages.add(page)
        assert pages.get(1) == page and pages.get(0) == page
        pages.flush()
        handle.seek(0)
        assert handle.read(1) == kept_as


def test_below_read_through_from_the_summary_reads_its_compiles_back_once(monkeypatch):
    """A pass over a list costs a fifth of one over the spool: fewer compiles than READ_THROUGH_FROM
    (at most about 30 MB of them) are read back whole, once, even when kept in a scratch file."""
    monkeypatch.setattr(compile_memo, "SPOOLED_FROM", 1)
    analysis = analyze_logs(logs_of("many_small"))
    kept = analysis.summary(kept=True)
    assert isinstance(analysis.memo.kept, compile_memo.Spool)
    assert type(kept.compiles) is not Reading and list(kept.compiles) == analysis.summary().compiles


def test_spooled_compiles_hand_out_the_compile_read_last_and_marked_once_marked(tmp_path):
    """A page asks for its compile several times: the spool decodes it once (the same object, as a
    list of compiles hands out); once the spool is marked (the run's unusual settings), a compile
    read before is read again, marked."""
    from msgspec.structs import replace

    from tlparse_py.analysis.spools import SpooledCompiles

    log = sorted((Path(__file__).parent / "fixtures" / "traces" / "recompile").glob("dedicated_log*"))[0]
    compiles = analyze_logs([log]).compiles()
    spool = SpooledCompiles(compiles)
    first = spool[0]
    assert spool[0] is first and spool[1] is not first and spool[0] is not first  # the last one only
    again = spool[0]
    spool.marked = lambda read: read.__setitem__(0, replace(read[0], frame="marked"))
    assert spool[0] is not again and spool[0].frame == "marked"
