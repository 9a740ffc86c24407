"""Multi-rank reports at scale: N synthetic ranks, built by the local process pool and by a Dask cluster.

    python benchmarks/ranks.py [--ranks 256] [--workers 2] [--work /tmp/tlparse-ranks] [--json results.json]

Makes N rank logs from the fixtures' real two-rank traces (tests/fixtures/traces/collectives and
distributed, decompressed, taken in turn, renamed `dedicated_log_torch_trace_rank_<N>_x.log`) in
a work folder, then runs the whole CLI on that folder with `--all-ranks-html`:

  (a) with the local process pool (the default),
  (b) with `--dask-scheduler` against a `LocalCluster` of `--workers` single-threaded worker
      processes that this script starts (needs `pip install 'tlparse-py[dask]'`).

For each: wall time, and peak memory as PSS summed over process trees (`tree_rss_kb` from
benchmarks/run.py): the CLI's own tree and, for (b), the cluster's (this script, which hosts the
scheduler, and the nanny and worker processes below it), sampled together. Also the output's size
and whether the two reports' landing pages and summary.json agree byte for byte.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRACES = HERE.parent / "tests" / "fixtures" / "traces"
sys.path.insert(0, str(HERE))
from run import quiet_disk, tree_rss_kb  # noqa: E402


def make_ranks(count: int, folder: Path) -> int:
    """`count` rank logs in `folder` (made anew when the count differs); their total bytes."""
    sources = sorted((TRACES / "collectives").glob("*.log")) + sorted((TRACES / "distributed").glob("*.log.gz"))
    texts = [gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes() for p in sources]
    existing = sorted(folder.glob("dedicated_log_torch_trace_rank_*_x.log")) if folder.is_dir() else []
    if len(existing) != count:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for rank in range(count):
            (folder / f"dedicated_log_torch_trace_rank_{rank}_x.log").write_bytes(texts[rank % len(texts)])
    return sum(p.stat().st_size for p in folder.iterdir())


def measure(command: list[str], out: Path, also: int | None = None) -> dict[str, float]:
    """Run the CLI; peak PSS of its tree, and of the tree of `also` (sampled at the same moments)."""
    shutil.rmtree(out, ignore_errors=True)
    quiet_disk()
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak_cli = peak_cluster = peak_total = 0
    while proc.poll() is None:
        cli = tree_rss_kb(proc.pid)
        # the CLI is a child of this script too; the same /proc scans in both modes (they cost CPU)
        cluster = tree_rss_kb(os.getpid() if also is None else also) - cli
        cluster = cluster if also is not None else 0
        peak_cli, peak_cluster, peak_total = max(peak_cli, cli), max(peak_cluster, cluster), max(peak_total, cli + cluster)
        time.sleep(0.05)
    seconds = time.perf_counter() - started
    stderr = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    files = [p for p in out.rglob("*") if p.is_file()] if out.exists() else []
    return {
        "exit": proc.returncode,
        "seconds": round(seconds, 2),
        "peak_pss_mb_cli": round(peak_cli / 1024, 1),
        "peak_pss_mb_cluster": round(peak_cluster / 1024, 1),
        "peak_pss_mb_total": round(peak_total / 1024, 1),
        "output_mb": round(sum(p.stat().st_size for p in files) / 1e6, 1),
        "files": len(files),
        "error": "" if proc.returncode == 0 else stderr.strip().splitlines()[-1:],
    }


def same_reports(a: Path, b: Path) -> bool:
    """The landing page, its summary.json and every rank's summary.json, byte for byte."""
    names = ["index.html", "summary.json"] + sorted(p.relative_to(a).as_posix() for p in a.glob("rank_*/summary.json"))
    return all((b / n).is_file() and (a / n).read_bytes() == (b / n).read_bytes() for n in names)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2, help="Dask worker processes (one thread each)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/tlparse-ranks"))
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the reports")
    args = parser.parse_args()
    work = args.work.absolute()
    logs = work / f"ranks_{args.ranks}"
    size = make_ranks(args.ranks, logs)
    print(f"{args.ranks} rank logs, {size / 1e6:.1f} MB, in {logs}; {os.cpu_count()} cores", flush=True)
    cli = [sys.executable, "-m", "tlparse_py", str(logs), "--all-ranks-html", "--no-browser", "--overwrite"]
    results = []

    out_local = work / "out_local"
    row = {"mode": "local process pool", "ranks": args.ranks, **measure([*cli, "-o", str(out_local)], out_local)}
    results.append(row)
    print(f"local: {row}", flush=True)

    try:
        from distributed import LocalCluster
    except ImportError:
        print("distributed is not installed (pip install 'tlparse-py[dask]'): the local pool alone", file=sys.stderr)
        cluster = None
    else:
        logging.getLogger("distributed").setLevel(logging.ERROR)  # the cluster's own start/stop chatter
        started = time.perf_counter()
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0")
        startup = round(time.perf_counter() - started, 2)
        out_dask = work / "out_dask"
        row = {"mode": f"Dask LocalCluster ({args.workers} workers)", "ranks": args.ranks, "cluster_start_s": startup,
               **measure([*cli, "-o", str(out_dask), "--dask-scheduler", cluster.scheduler_address], out_dask, also=os.getpid())}
        row["same_as_local"] = same_reports(out_local, out_dask)
        results.append(row)
        print(f"dask: {row}", flush=True)
        cluster.close()

    print()
    print(f"{'mode':32} {'ranks':>6} {'wall s':>8} {'PSS MB cli':>11} {'PSS MB cluster':>15} {'PSS MB total':>13} {'out MB':>8} {'files':>7}")
    for r in results:
        print(f"{r['mode']:32} {r['ranks']:>6} {r['seconds']:8.2f} {r['peak_pss_mb_cli']:11.1f} {r['peak_pss_mb_cluster']:15.1f} "
              f"{r['peak_pss_mb_total']:13.1f} {r['output_mb']:8.1f} {r['files']:7d}")
    if cluster is not None:
        print(f"Dask cluster start (not in the wall time): {results[-1]['cluster_start_s']} s; "
              f"same landing and summaries as the local pool: {results[-1]['same_as_local']}")
    if args.json:
        args.json.write_text(json.dumps({"cores": os.cpu_count(), "log_mb": round(size / 1e6, 1), "results": results}, indent=2))
    if not args.keep:
        for r in ("out_local", "out_dask"):
            shutil.rmtree(work / r, ignore_errors=True)
    return 0 if all(r["exit"] == 0 for r in results) and all(r.get("same_as_local", True) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
