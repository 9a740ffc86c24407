"""Peak memory of `tlparse-py diff` per compile (issue 34 item 17).

Writes two reports' `summary.json` (BASE and NEW, by code: N compiles each, over N/2.5 frames in 50
user files, with recompiles, graph breaks, cache lookups and failures; NEW recompiles some frames
more, lost a graph break here and there, and is 10% slower), runs `tlparse-py diff BASE NEW -o DIR`
on them in a child process per size, and reports the peak resident set size of each run
(`os.wait4`'s `ru_maxrss`) and the growth per compile between the sizes.

    python benchmarks/memory_diff.py                         # 10^4 and 10^5 compiles
    python benchmarks/memory_diff.py --sizes 10000 100000 1000000
    python benchmarks/memory_diff.py --phases --sizes 100000 # where it goes, in this process (tracemalloc)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

HINT = "Avoid calling builtin `print` with argument types ['str']. Consider using an equivalent alternative function/method to `print`."


def compile_record(frame: int, index: int, new: bool) -> dict[str, Any]:
    """The summary.json entry of the `index`-th compile of `frame` in BASE (or NEW)."""
    file, line = f"/work/models/m{frame % 50}.py", 10 + (frame // 50) * 7
    seconds = round((0.25 + (frame % 17) * 0.01 + index * 0.03) * (1.1 if new else 1.0), 6)
    breaks = []
    if index == 0 and frame % 7 == 0 and not (new and frame % 91 == 0):
        breaks.append({
            "reason": "Failed to trace builtin operator", "user_location": f"{file}:{line + 2}",
            "user_source": f'print("step {frame}")', "user_function": f"fn_{frame}", "registry_id": "GB0059",
            "explanation": "Dynamo does not know how to trace builtin operator `print` with argument types ['str'] (has_kwargs False)",
            "hints": [HINT], "doc_url": "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0059.html", "library_location": None,
        })
    failed = frame % 211 == 5 and index == 0 and new
    label = f"[{frame}/{index}]"
    return {
        "id": label, "url": f"-_{frame}_{index}_0/index.html", "generation": 0, "attempts": [label],
        "frame": f"fn_{frame}", "user_location": f"{file}:{line}",
        "status": "failed" if failed else ("break" if breaks else "ok"),
        "cause": "first" if index == 0 else "recompile", "restart_reasons": [],
        "compile_time_s": {"forward": seconds, "backward": None, "total": seconds, "backward_in_forward": None},
        "graph_breaks": breaks,
        "recompile_reasons": [f"tensor 'x' size mismatch at index 0. expected {index + 1}, actual {index + 2}"] if index else [],
        "cache": [{"cache": "aotautograd", "result": "miss", "reason": ""},
                  {"cache": "fx_graph", "result": "hit" if index else "miss", "reason": ""}],
        "graph_op_count": 3 + frame % 5 + (1 if new and frame % 29 == 0 else 0),
        "failure": {"type": "torch._dynamo.exc.Unsupported", "reason": "an unsupported call"} if failed else None,
    }


def compiles_of(count: int, new: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    frame = 0
    while len(out) < count:
        per_frame = 1 + frame % 4 + (1 if new and frame % 10 == 0 else 0)
        out += [compile_record(frame, index, new) for index in range(min(per_frame, count - len(out)))]
        frame += 1
    return out


def write_summary(path: Path, count: int, new: bool = False) -> Path:
    """A report's summary.json (schema 2.x) holding `count` compiles; its totals are left out (the diff
    computes its own from the compiles)."""
    data = {
        "schema_version": "2.1", "generator": {"name": "tlparse-py", "version": "bench"},
        "inputs": [{"path": "/work/trace.log", "bytes": 1, "rank": None}], "torch_version": "2.13.0+cpu", "stats": {"ok": count},
        "compiles": compiles_of(count, new), "run": {"torch_version": "2.13.0+cpu", "rank": None},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))  # laid out as a report writes it
    return path


def peak_rss(command: list[str]) -> tuple[int, float, int]:
    """(the largest resident set of the command's process tree in bytes, wall seconds, exit status)."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert child.stderr is not None
    child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss * 1024, time.perf_counter() - start, child.returncode


def measure(work: Path, count: int) -> dict[str, Any]:
    base, new = work / f"base_{count}" / "summary.json", work / f"new_{count}" / "summary.json"
    # written by a child: a process forked from one that has grown starts with its size as the peak
    # (Linux carries the largest resident set across exec), and writing 10^6 compiles' JSON grows it
    subprocess.run([sys.executable, __file__, "--write", str(base), str(new), str(count)], check=True)
    out = work / f"diff_{count}"
    rss, wall, status = peak_rss([sys.executable, "-m", "tlparse_py", "diff", str(base), str(new), "-o", str(out), "--overwrite", "--no-browser"])
    if status not in (0, 3):
        raise SystemExit(f"tlparse-py diff exited {status} on {count:,} compiles")
    result = {"compiles": count, "summary_mb": round(base.stat().st_size / 1e6, 1), "peak_rss_mb": round(rss / 1e6, 1), "wall_s": round(wall, 1),
              "diff_json_mb": round((out / "diff.json").stat().st_size / 1e6, 1), "page_mb": round((out / "index.html").stat().st_size / 1e6, 1)}
    for folder in (base.parent, new.parent, out):
        shutil.rmtree(folder, ignore_errors=True)
    return result


def phases(work: Path, count: int) -> None:
    """Memory held after each step of a diff, in this process (tracemalloc: Python's allocations only)."""
    import gc
    import tracemalloc

    from tlparse_py.analysis import comparison
    from tlparse_py.analysis.totals import check_diff
    from tlparse_py.diff.load import load
    from tlparse_py.diff.output import write_diff, write_markdown

    base = write_summary(work / "base" / "summary.json", count)
    new = write_summary(work / "new" / "summary.json", count, new=True)
    tracemalloc.start()

    def show(what: str) -> None:
        current, peak = tracemalloc.get_traced_memory()
        print(f"{what:<34} held {current / 1e6:8.1f} MB ({current / count:7,.0f} B a compile)  peak {peak / 1e6:8.1f} MB ({peak / count:7,.0f} B)")
        tracemalloc.reset_peak()

    sides = [load(base, "BASE"), load(new, "NEW")]
    show("both summaries loaded")
    result = comparison.diff(sides[0].summary, sides[1].summary, str(base), str(new))
    show("diff computed")
    del sides
    gc.collect()
    show("summaries dropped")
    check_diff([], result.sections())
    show("gates checked")
    write_diff(result, work / "diff", overwrite=True)
    show(f"diff.json ({(work / 'diff' / 'diff.json').stat().st_size / 1e6:.1f} MB) and page written")
    write_markdown(result, work / "diff.md", work / "diff")
    show("Markdown written")
    del result
    gc.collect()
    show("all dropped")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10**4, 10**5], help="compiles in each summary.json")
    parser.add_argument("--phases", action="store_true", help="memory after each step, in this process, instead")
    parser.add_argument("--work", type=Path, help="where the summaries and diffs go (default: a temporary folder)")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--write", nargs=3, metavar=("BASE", "NEW", "N"), help=argparse.SUPPRESS)  # measure()'s child
    args = parser.parse_args()
    if args.write:
        write_summary(Path(args.write[0]), int(args.write[2]))
        write_summary(Path(args.write[1]), int(args.write[2]), new=True)
        return
    work = args.work or Path(tempfile.mkdtemp(prefix="tlparse-diff-mem-"))
    work.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        if args.phases:
            for count in args.sizes:
                print(f"{count:,} compiles a side:")
                phases(work, count)
            return
        for count in sorted(args.sizes):
            result = measure(work, count)
            results.append(result)
            print(f"{count:>10,} compiles  summary.json {result['summary_mb']:>7,.1f} MB  peak RSS {result['peak_rss_mb']:>8,.1f} MB  "
                  f"{result['wall_s']:>6.1f} s  (diff.json {result['diff_json_mb']:,.1f} MB, page {result['page_mb']:,.1f} MB)", flush=True)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    if len(results) > 1:
        first, last = results[0], results[-1]
        per_compile = (last["peak_rss_mb"] - first["peak_rss_mb"]) * 1e6 / (last["compiles"] - first["compiles"])
        print(f"growth: {per_compile:,.0f} bytes of peak RSS per compile ({first['compiles']:,} -> {last['compiles']:,}); "
              f"10^6 compiles: about {first['peak_rss_mb'] + per_compile * (10**6 - first['compiles']) / 1e6:,.0f} MB")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
