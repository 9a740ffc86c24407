"""Peak memory of a whole `tlparse-py` run on logs of N small compiles, one compile id each (issue 46).

A job that compiles many small frames puts tens of thousands of compile ids in one log; what the
run keeps per compile id must then be a compact row, not a tree of objects. This script builds such
logs with `make_logs.build_small` (copies of the real `many_small` trace, each with new frame ids;
`--lean`: no torch configs in the metrics, no chromium events, unless `--full`), runs the
`tlparse-py` command on each in a child process and reports the peak resident set size of the run:
the largest of the command's process and the processes it forked (`os.wait4`'s `ru_maxrss`), per
size, and the growth per compile id between consecutive sizes.

    python benchmarks/memory_compile_ids.py                          # 10,000, 40,000 and 100,000 compile ids
    python benchmarks/memory_compile_ids.py --sizes 2000 8000 --json /tmp/mem.json
    python benchmarks/memory_compile_ids.py --work /tmp/u46 --out /dev/shm/mem   # logs on disk, reports in RAM

Logs go under --work, reports under --out (both default to a temporary folder); each log and
report is removed once measured unless --keep.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_logs import build_small  # noqa: E402
from memory_one_id import peak_rss  # noqa: E402  (a sibling script, not a package)


def measure(work: Path, out_root: Path, compiles: int, lean: bool, keep: bool) -> dict[str, float]:
    log = work / f"dedicated_log_torch_trace_compile_ids_{compiles}.log"
    if not log.exists():
        build_small(compiles, log, lean)
    out = out_root / f"out_{compiles}"
    command = [sys.executable, "-m", "tlparse_py", str(log), "-o", str(out), "--overwrite", "--no-browser"]
    rss, wall, status = peak_rss(command)
    if status != 0:
        raise SystemExit(f"tlparse-py exited {status} on {compiles:,} compile ids")
    result = {"compile_ids": compiles, "log_mb": round(log.stat().st_size / 1e6, 1),
              "peak_rss_mb": round(rss / 1e6, 1), "wall_s": round(wall, 1)}
    if not keep:
        log.unlink()
    shutil.rmtree(out, ignore_errors=True)
    return result


def growth_per_id(first: dict[str, float], last: dict[str, float]) -> float:
    """Bytes of peak RSS each compile id adds between two sizes."""
    return (last["peak_rss_mb"] - first["peak_rss_mb"]) * 1e6 / (last["compile_ids"] - first["compile_ids"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 40_000, 100_000], help="compile ids per log")
    parser.add_argument("--full", action="store_true", help="logs as torch writes them (configs in every metrics record; ~40x larger)")
    parser.add_argument("--work", type=Path, help="where the logs go (default: a temporary folder)")
    parser.add_argument("--out", type=Path, help="where the reports go (default: the --work folder)")
    parser.add_argument("--keep", action="store_true", help="keep the logs (a later run with the same --work reuses them)")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="tlparse-mem-ids-"))
    work.mkdir(parents=True, exist_ok=True)
    out_root = args.out or work
    out_root.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for compiles in sorted(set(args.sizes)):
            result = measure(work, out_root, compiles, lean=not args.full, keep=args.keep)
            results.append(result)
            print(f"{result['compile_ids']:>9,} compile ids  log {result['log_mb']:>8,.1f} MB  "
                  f"peak RSS {result['peak_rss_mb']:>7,.1f} MB  {result['wall_s']:>6.1f} s", flush=True)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    growth = []
    for first, last in zip(results, results[1:]):
        per_id = growth_per_id(first, last)
        growth.append({"from": first["compile_ids"], "to": last["compile_ids"], "bytes_per_compile_id": round(per_id)})
        print(f"growth: {per_id:,.0f} bytes of peak RSS per compile id ({first['compile_ids']:,} -> {last['compile_ids']:,})")
    if args.json:
        args.json.write_text(json.dumps({"runs": results, "growth": growth}, indent=2) + "\n")


if __name__ == "__main__":
    main()
