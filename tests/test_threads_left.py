"""A process that writes report after report (a notebook, a test session, `serve`, `watch`) keeps no
thread of each: the thread that writes files beside the reading (`report.behind`) ends once its
report is written, or abandoned."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from tlparse_py.cli import main
from tlparse_py import pipeline
from tlparse_py.pipeline import write_report

TRACES = Path(__file__).parent / "fixtures" / "traces"


def logs_of(name: str) -> list[Path]:
    return sorted(p for p in (TRACES / name).iterdir() if p.name.startswith("dedicated_log"))


def writer_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "tlparse-py-writes"}


@pytest.fixture
def before():
    """The writer threads alive before the test (other tests' writers, abandoned unfinished on purpose)."""
    return writer_threads()


def test_reports_written_one_after_another_leave_no_thread(tmp_path, before):
    for n, trace in enumerate(["recompile", "graph_break", "many_small", "recompile"]):
        write_report(logs_of(trace), tmp_path / f"out{n}")
        assert writer_threads() - before == set(), trace


def test_a_multi_rank_report_leaves_no_thread(tmp_path, before):
    result = CliRunner().invoke(main, [str(TRACES / "distributed"), "--all-ranks-html", "-o", str(tmp_path / "ranks"), "--no-browser"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "ranks" / "rank_0" / "index.html").is_file()
    assert writer_threads() - before == set()


def test_a_report_that_fails_while_its_pages_are_made_leaves_no_thread(tmp_path, monkeypatch, before):
    def broken(*_args, **_kwargs):
        raise RuntimeError("a bug while writing the pages")

    monkeypatch.setattr(pipeline, "write_compile_directory", broken)
    with pytest.raises(RuntimeError):
        write_report(logs_of("recompile"), tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert writer_threads() - before == set()
