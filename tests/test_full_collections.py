"""A report is built with few full garbage collections (`tlparse_py.heap`), and the process's own
thresholds are back once it is written, however it ends.

At 40,000 compile ids the full collections had cost 14.6 s of an 83 s run's CPU and found almost
nothing: what reading keeps is kept to the end."""

from __future__ import annotations

import contextlib
import gc
import threading

import pytest

from logs import metrics, start, write_log
from tlparse_py import heap, pipeline

EAGER = (100, 2, 10)  # thresholds that make the default's full collections frequent on a small log


@pytest.fixture
def eager_thresholds():
    before = gc.get_threshold()
    gc.set_threshold(*EAGER)
    yield
    gc.set_threshold(*before)


@pytest.fixture
def fresh_heap():
    """The collector's counts as a fresh process's: what earlier tests left is frozen, out of its
    reach (a full collection waits until a quarter of the objects it keeps are new, and a long test
    session keeps millions)."""
    gc.freeze()
    gc.collect()
    yield
    gc.unfreeze()


@pytest.fixture
def full_collections():
    """How many full collections ran since the test began."""
    count = [0]

    def counted(phase, info):
        if phase == "stop" and info["generation"] == 2:
            count[0] += 1

    gc.callbacks.append(counted)
    yield count
    gc.callbacks.remove(counted)


def small_compiles_log(folder, count=400):
    return write_log(folder / "small.log", [text for frame in range(count) for text in (start(frame), metrics(frame))])


def test_a_report_runs_few_full_collections(tmp_path, eager_thresholds, fresh_heap, full_collections, monkeypatch):
    log = small_compiles_log(tmp_path)
    full_collections[0] = 0
    analysis = pipeline.write_report(log, tmp_path / "out")
    assert len(analysis.compiles()) == 400
    assert full_collections[0] == 0
    assert gc.get_threshold() == EAGER  # restored
    # the same report with the thresholds left as they are: the test's log does make full collections
    monkeypatch.setattr(pipeline, "few_full_collections", contextlib.nullcontext)
    gc.freeze()  # the first report's objects too
    gc.collect()
    pipeline.write_report(log, tmp_path / "again")
    assert full_collections[0] > 0


def test_the_thresholds_are_raised_while_reading_and_restored_when_it_fails(tmp_path, eager_thresholds):
    log = small_compiles_log(tmp_path, 1100)  # progress is told every 2,000 records
    seen = []

    class Failing:  # a progress callback that sees the thresholds, then stops the report
        def __call__(self, done, records):
            seen.append(gc.get_threshold())
            raise KeyboardInterrupt

        def clear(self):
            pass

    with pytest.raises(KeyboardInterrupt):
        pipeline.write_report(log, tmp_path / "out", progress=Failing())
    assert seen and seen[0] == (EAGER[0], EAGER[1], heap.FULL_EVERY)
    assert gc.get_threshold() == EAGER
    assert not (tmp_path / "out").exists()


def test_nested_and_concurrent_builds_restore_the_thresholds_once_the_last_ends(eager_thresholds):
    raised = (EAGER[0], EAGER[1], heap.FULL_EVERY)
    with heap.few_full_collections():
        with heap.few_full_collections():
            assert gc.get_threshold() == raised
        assert gc.get_threshold() == raised  # the outer build still runs
    assert gc.get_threshold() == EAGER

    entered, leave = threading.Event(), threading.Event()

    def other_build():
        with heap.few_full_collections():
            entered.set()
            leave.wait(10)

    thread = threading.Thread(target=other_build)
    thread.start()
    entered.wait(10)
    with heap.few_full_collections():
        pass
    assert gc.get_threshold() == raised  # the other thread's build has not ended
    leave.set()
    thread.join(10)
    assert gc.get_threshold() == EAGER


def test_a_process_that_asked_for_rarer_full_collections_keeps_its_own(tmp_path):
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 5000)
    try:
        with heap.few_full_collections():
            assert gc.get_threshold() == (700, 10, 5000)
        assert gc.get_threshold() == (700, 10, 5000)
    finally:
        gc.set_threshold(*before)


def test_a_live_update_raises_the_thresholds_while_it_writes_and_restores_them(tmp_path, eager_thresholds, monkeypatch):
    """An update renders pages from the report kept in memory: a full collection during it would walk
    all of it (a fifth of an update's time on a 200 MB log) and find nothing."""
    from tlparse_py.live import LiveReport
    from tlparse_py.options import Options

    log = small_compiles_log(tmp_path, count=20)
    live = LiveReport(log, tmp_path / "live", Options())
    during = []
    write_pages = LiveReport._write_compile_pages
    monkeypatch.setattr(LiveReport, "_write_compile_pages", lambda self, *args: during.append(gc.get_threshold()) or write_pages(self, *args))
    live.update("first", live.read())
    live.close()
    assert during and during[0][2] >= heap.FULL_EVERY
    assert gc.get_threshold() == EAGER
