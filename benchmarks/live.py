"""What one update of a live report costs, against a full run on the same log, at N and at 10N compiles.

    python benchmarks/live.py [--size-mb 200] [--append-mb 1] [--appends 3] [--factor 10] [--json live.json]

Builds two logs of `size-mb` from the harness fixtures (make_logs.py): the first as make_logs
builds it (N compiles), the second with `factor` times the compiles for nearly the same size (small
whole compiles spread among the copies, `make_logs.py --tiny-compiles`). Then `appends` pieces of
`append-mb` each (whole records of further copies, new compile ids: the same bytes for both logs).

For each log: a live report (`tlparse_py.live.LiveReport`, what `tlparse-py watch` runs) reads the
log; then each piece is appended and one update is timed: reading the new bytes and rewriting the
pages they changed. A full run is `tlparse-py LOG` on the log, a whole process, timed `--runs`
times. The figures: the median update over the median full run (the goal: at most 1%), and the
update at `factor`N compiles over the update at N (the goal: it does not grow with the compiles
already in the report). Each update also counts what it rendered (`LiveReport.rendered`). The load
average is recorded before and after, as in run.py: the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_logs import build  # noqa: E402

APPEND_FIRST_COPY = 100_000  # the appended pieces' copies: frame ids far past both logs'


def record_cut(data: bytes, near: int) -> int:
    """The first record start at or after `near` (a line that is not payload)."""
    position = near
    while True:
        newline = data.index(b"\n", position)
        if data[newline + 1 : newline + 2] not in (b"\t", b"\n"):
            return newline + 1
        position = newline + 1


def full_runs(log: Path, work: Path, runs: int, source: Path) -> list[float]:
    """Seconds of `tlparse-py LOG`, a whole process, `runs` times (the package of the tree `source`)."""
    times = []
    for run in range(runs):
        out = work / f"full_out{run}"
        started = time.perf_counter()
        run_ = subprocess.run([sys.executable, "-m", "tlparse_py", str(log), "-o", str(out), "--no-browser"], capture_output=True, text=True,
                              cwd=source)
        if run_.returncode != 0:
            raise SystemExit(f"tlparse-py {log} exited {run_.returncode}:\n{run_.stderr[-2000:]}")
        times.append(time.perf_counter() - started)
        shutil.rmtree(out, ignore_errors=True)
    return times


def live_updates(log: Path, pieces: list[bytes], work: Path) -> dict:
    """A live report of `log` (a copy of it, which grows), then one timed update per appended piece."""
    from tlparse_py.live import LiveReport
    from tlparse_py.options import Options

    shutil.rmtree(work, ignore_errors=True)  # what an interrupted run left
    watched = work / "watched" / "dedicated_log_torch_trace_watched.log"
    watched.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(log, watched)
    live = LiveReport(watched, work / "live_out", Options())
    started = time.perf_counter()
    live.update("benchmark", live.read())
    initial = time.perf_counter() - started
    compiles = len(live.analysis.compiles())
    updates, rendered = [], []
    for piece in pieces:
        with open(watched, "ab") as handle:
            handle.write(piece)
        started = time.perf_counter()
        live.update("benchmark", live.read())
        updates.append(time.perf_counter() - started)
        rendered.append(dict(getattr(live, "rendered", {})))  # (an older tlparse-py counts nothing)
    live.close()
    return {"compiles": compiles, "initial_live_read_s": initial, "update_s": updates, "rendered": rendered}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=200)
    parser.add_argument("--append-mb", type=float, default=1)
    parser.add_argument("--appends", type=int, default=3)
    parser.add_argument("--factor", type=int, default=10, help="the second log holds this many times the first's compiles")
    parser.add_argument("--runs", type=int, default=2, help="full runs per log")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--full-run-source", type=Path, default=HERE.parent,
                        help="the source tree whose tlparse-py the full runs run (default: this one)")
    args = parser.parse_args()

    work = args.work or Path(tempfile.mkdtemp(prefix="tlparse-live-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    few = work / "few" / "dedicated_log_torch_trace_few.log"
    few.parent.mkdir(exist_ok=True)
    built = build(args.size_mb, few)
    appended = work / "appended.log"
    build(args.append_mb * args.appends + 1, appended, first_copy=APPEND_FIRST_COPY)
    data = appended.read_bytes()
    cuts = [0]
    for _ in range(args.appends):
        cuts.append(record_cut(data, cuts[-1] + int(args.append_mb * 1e6)))
    pieces = [data[begin:end] for begin, end in zip(cuts, cuts[1:])]
    del data

    load_before = os.getloadavg()[0]
    results = {}
    logs = {"N": few}
    for name in ("N", f"{args.factor}N"):
        if name != "N":  # as many more compiles, small ones, for nearly the same size
            tiny = (args.factor - 1) * results["N"]["compiles"]
            many = work / "many" / "dedicated_log_torch_trace_many.log"
            many.parent.mkdir(exist_ok=True)
            built = build(args.size_mb, many, tiny_compiles=tiny)
            logs[name] = many
        log = logs[name]
        result = live_updates(log, pieces, work / f"live_{name}")
        result["log_bytes"] = log.stat().st_size
        result["tiny_compiles"] = built.get("tiny_compiles", 0)
        result["full_run_s"] = full_runs(log, work, args.runs, args.full_run_source)
        result["update_over_full_run"] = statistics.median(result["update_s"]) / statistics.median(result["full_run_s"])
        results[name] = result
        shutil.rmtree(work / f"live_{name}", ignore_errors=True)
    load_after = os.getloadavg()[0]

    print(f"appended {len(pieces)} pieces of ~{args.append_mb:g} MB ({', '.join(f'{len(p):,}' for p in pieces)} bytes)")
    for name, result in results.items():
        full_s, update_s = statistics.median(result["full_run_s"]), statistics.median(result["update_s"])
        print(f"{name}: log {result['log_bytes'] / 1e6:,.0f} MB, {result['compiles']:,} compiles; full run (whole process, median of "
              f"{len(result['full_run_s'])}) {full_s:.2f} s; live: first read {result['initial_live_read_s']:.2f} s; "
              f"update (median of {len(result['update_s'])}) {update_s:.3f} s = {100 * update_s / full_s:.2f}% of a full run "
              f"(goal: at most 1%); rendered per update: {result['rendered']}")
    names = list(results)
    growth = statistics.median(results[names[1]]["update_s"]) / statistics.median(results[names[0]]["update_s"])
    print(f"update at {names[1]} over update at {names[0]} compiles: {growth:.2f}x (goal: no growth with the compiles)")
    print(f"load average: {load_before:.2f} before, {load_after:.2f} after")
    if args.json:
        summary = {"pieces": [len(p) for p in pieces], "results": results, "growth": growth,
                   "load_average": {"before": load_before, "after": load_after}}
        args.json.write_text(json.dumps(summary, indent=2))
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
