"""What one update of a live report costs, against a full run on the same log.

    python benchmarks/live.py [--size-mb 200] [--append-mb 1] [--appends 3] [--json live.json]

Builds a log of `size-mb` from the harness fixtures (make_logs.py) plus `appends` more pieces of
`append-mb` each (whole records, new compile ids). A live report (`tlparse_py.live.LiveReport`, what
`tlparse-py watch` runs) reads the first `size-mb`; then each piece is appended to the log and one
update is timed: reading the new bytes and rewriting the pages they changed. A full run is
`tlparse-py LOG` on the first `size-mb`, a whole process, timed `--runs` times. The figure is the
median update over the median full run (the goal: at most 5%). The load average is recorded before
and after, as in run.py.
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


def record_cut(data: bytes, near: int) -> int:
    """The first record start at or after `near` (a line that is not payload)."""
    position = near
    while True:
        newline = data.index(b"\n", position)
        if data[newline + 1 : newline + 2] not in (b"\t", b"\n"):
            return newline + 1
        position = newline + 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=200)
    parser.add_argument("--append-mb", type=float, default=1)
    parser.add_argument("--appends", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    from tlparse_py.live import LiveReport
    from tlparse_py.options import Options

    work = args.work or Path(tempfile.mkdtemp(prefix="tlparse-live-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    source = work / "source.log"
    build(args.size_mb + args.append_mb * args.appends + 1, source)
    data = source.read_bytes()
    cuts = [record_cut(data, int(args.size_mb * 1e6))]
    for _ in range(args.appends):
        cuts.append(record_cut(data, cuts[-1] + int(args.append_mb * 1e6)))
    full = work / "full" / "dedicated_log_torch_trace_full.log"
    full.parent.mkdir(exist_ok=True)
    full.write_bytes(data[: cuts[0]])
    watched = work / "watched" / "dedicated_log_torch_trace_watched.log"
    watched.parent.mkdir(exist_ok=True)
    watched.write_bytes(data[: cuts[0]])
    del data

    load_before = os.getloadavg()[0]
    full_runs = []
    for run in range(args.runs):
        out = work / f"full_out{run}"
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "tlparse_py", str(full), "-o", str(out), "--no-browser"], check=True, capture_output=True)
        full_runs.append(time.perf_counter() - started)
        shutil.rmtree(out, ignore_errors=True)

    live = LiveReport(watched, work / "live_out", Options())
    started = time.perf_counter()
    live.update("benchmark", live.read())
    initial = time.perf_counter() - started
    updates = []
    with open(source, "rb") as handle:
        for begin, end in zip(cuts, cuts[1:]):
            handle.seek(begin)
            piece = handle.read(end - begin)
            with open(watched, "ab") as log:
                log.write(piece)
            started = time.perf_counter()
            live.update("benchmark", live.read())
            updates.append(time.perf_counter() - started)
    live.close()
    load_after = os.getloadavg()[0]

    full_s, update_s = statistics.median(full_runs), statistics.median(updates)
    result = {
        "log_bytes": cuts[0], "append_bytes": [b - a for a, b in zip(cuts, cuts[1:])],
        "full_run_s": full_runs, "initial_live_read_s": initial, "update_s": updates,
        "update_over_full_run": update_s / full_s,
        "load_average": {"before": load_before, "after": load_after},
    }
    print(f"log {cuts[0] / 1e6:,.0f} MB; full run (whole process, median of {len(full_runs)}) {full_s:.2f} s; "
          f"live: first read {initial:.2f} s")
    print(f"update after appending ~{args.append_mb:g} MB (median of {len(updates)}): {update_s:.3f} s = "
          f"{100 * update_s / full_s:.1f}% of a full run (goal: at most 5%)")
    print(f"load average: {load_before:.2f} before, {load_after:.2f} after")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
