"""The benchmark script's guard against figures from a busy machine (benchmarks/run.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "run.py"


def load_bench():
    sys.path.insert(0, str(BENCH.parent))
    spec = importlib.util.spec_from_file_location("bench_run", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_figure_from_a_busy_stretch_is_named_as_one():
    bench = load_bench()
    quiet = {"name": "200 MB tlparse-py", "load_before": 0.1, "load_after": 0.4}
    busy_at_end = {"name": "200 MB tlparse 0.4.3", "load_before": 0.2, "load_after": 1.7}
    assert bench.busy([quiet]) == []
    assert bench.busy([quiet, busy_at_end]) == ["200 MB tlparse 0.4.3: load 0.2 → 1.7"]


def test_the_quiet_check_waits_for_the_load_to_fall(monkeypatch):
    bench = load_bench()
    readings = iter([1.2, 0.9, 0.3])
    monkeypatch.setattr(bench, "load_average", lambda: next(readings))
    monkeypatch.setattr(bench.time, "sleep", lambda s: None)
    assert bench.wait_for_quiet() == 0.3
