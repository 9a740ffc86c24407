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
    # the load average after a figure counts the benchmark's own processes: not judged
    quiet = {"name": "200 MB tlparse-py", "load_before": 0.1, "load_after": 1.4, "other_cores": 0.05}
    busy_at_start = {"name": "200 MB tlparse 0.4.3", "load_before": 0.7, "load_after": 1.7, "other_cores": 0.1}
    others_busy = {"name": "small set", "load_before": 0.2, "load_after": 0.9, "other_cores": 0.8}
    assert bench.busy([quiet]) == []
    assert bench.busy([quiet, busy_at_start, others_busy]) == [
        "200 MB tlparse 0.4.3: load 0.7 → 1.7, other processes 0.1 cores",
        "small set: load 0.2 → 0.9, other processes 0.8 cores",
    ]


def test_other_processes_cpu_is_the_machines_busy_time_less_the_benchmarks_own(monkeypatch):
    bench = load_bench()
    import subprocess

    others = bench.OtherLoad()
    subprocess.run([sys.executable, "-c", "sum(range(3_000_000))"], check=True)  # our own child: not "other"
    spinner = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 1.5\nwhile time.time() < end: pass"],
                               start_new_session=True)
    try:
        import time as clock

        clock.sleep(1.5)  # a process that is not our child (not yet reaped) keeps a core busy meanwhile
        assert others.cores() > 0.4
    finally:
        spinner.wait()


def test_the_quiet_check_waits_for_the_load_to_fall(monkeypatch):
    bench = load_bench()
    readings = iter([1.2, 0.9, 0.3])
    monkeypatch.setattr(bench, "load_average", lambda: next(readings))
    monkeypatch.setattr(bench.time, "sleep", lambda s: None)
    assert bench.wait_for_quiet() == 0.3


def test_each_figure_names_the_filesystem_its_reports_were_written_to(tmp_path, monkeypatch):
    bench = load_bench()
    mounts = tmp_path / "mounts"
    mounts.write_text("/dev/vda / ext4 rw 0 0\ntmpfs /dev/shm tmpfs rw 0 0\nproc /proc proc rw 0 0\n")
    real_path = bench.Path

    class Mounts(type(real_path())):
        def read_text(self, *args, **kwargs):
            return mounts.read_text() if str(self) == "/proc/mounts" else super().read_text(*args, **kwargs)

    monkeypatch.setattr(bench, "Path", Mounts)
    assert bench.filesystem(real_path("/dev/shm/tlb")) == "tmpfs"
    assert bench.filesystem(real_path("/dev/shmem")) == "ext4"  # a longer name is not inside /dev/shm
    assert bench.filesystem(real_path("/tmp/tlparse-bench")) == "ext4"


def test_the_readme_profile_command_splits_a_small_run_into_parts_that_add_up():
    """`python benchmarks/profile_small.py`, as the README shows it: every part of a whole-process
    run on the smallest fixture logs, measured (the report's phases inside the run are timed by
    wrapping the functions that do them: a renamed one would break the split, and this test)."""
    import re
    import subprocess

    readme = (BENCH.parent.parent / "README.md").read_text()
    command = re.search(r"`(python benchmarks/profile_small\.py)`", readme).group(1)
    done = subprocess.run(command.replace("python", sys.executable, 1).split(), cwd=BENCH.parent.parent,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    rows = {line.split("|")[1].strip(): [float(v) for v in line.split("|")[2:-1]]
            for line in done.stdout.splitlines() if line.startswith("| ") and not line.startswith("| part")}
    assert len(rows["whole process"]) == 6  # five logs and their mean
    for part in ("interpreter", "stack imports", "own imports", "reading and analysis", "pages", "search index", "static files",
                 "output folder: staging", "output folder: commit", "summary lines and checks"):
        assert all(v > 0 for v in rows[part]), part
    parts = [name for name in rows if not name.startswith("of which") and name != "whole process" and not name.endswith(", mean")]
    assert rows["interpreter, mean"] and rows["whole process, mean"]  # the bare interpreter beside the run, as means too
    for column in range(5):
        # the parts account for the whole (each is a median of its own, so not to the millisecond)
        assert 0.8 * rows["whole process"][column] <= sum(rows[name][column] for name in parts) <= 1.2 * rows["whole process"][column]
