"""What a compile id costs: system calls, files, bytes and CPU per compile, ours beside tlparse's.

    python benchmarks/profile_compiles.py [--compiles 2000 10000 40000] [--lean] [--json F] [--markdown F]

For each size it builds a log of that many small compiles (make_logs.build_small: the real
`many_small` harness trace, copied with new frame ids), runs each tool on it once under
`strace -f -c` (every process and thread of the run) and once plainly (wall, user and system CPU,
peak RSS of the process tree from `os.wait4`), and reports each figure per compile id: the system
calls by name (the counts, which do not depend on how busy the machine is; strace's times do, and
are left out), the files the report holds, its bytes. The counts tell where a compile id's cost
goes beside the Python profile: a thread hand-over is a `futex`, a file written or read back an
`openat`, a spool read a `pread64`.

tlparse is used when it is on PATH (`pip install tlparse==0.4.3`); strace when installed.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_logs import build_small  # noqa: E402
from run import load_average, machine, our_command  # noqa: E402

CALLS = ("openat", "close", "read", "write", "pread64", "lseek", "newfstatat", "futex", "mkdir", "rename")


def syscall_counts(command: list[str], out: Path) -> dict[str, int]:
    """{system call: how many times} over the whole run (`strace -f -c`)."""
    shutil.rmtree(out, ignore_errors=True)
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as table:
        subprocess.run(["strace", "-f", "-c", "-o", table.name, *command], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)
        counts: dict[str, int] = {}
        for line in table.read().splitlines():
            fields = line.split()
            # "% time  seconds  usecs/call  calls  [errors]  syscall": the calls are the 4th field
            if len(fields) >= 5 and fields[3].isdigit() and not fields[-1].startswith("-"):
                counts[fields[-1]] = int(fields[3])
    return counts


def timed(command: list[str], out: Path) -> dict[str, float]:
    """Wall, user and system seconds and peak RSS (MB) of one whole run, and its output."""
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    files = [p for p in out.rglob("*") if p.is_file()] if out.exists() else []
    return {"seconds": round(wall, 3), "user_s": round(usage.ru_utime, 3), "system_s": round(usage.ru_stime, 3),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "files": len(files),
            "output_mb": round(sum(p.stat().st_size for p in files) / 1e6, 1), "exit": os.waitstatus_to_exitcode(status)}


def profile(tools: dict[str, list[str]], sizes: list[int], lean: bool, work: Path, out_root: Path) -> list[dict]:
    rows = []
    for compiles in sizes:
        log = work / f"compiles_{compiles}{'_lean' if lean else ''}.log"
        built = build_small(compiles, log, lean)
        for name, command in tools.items():
            out = out_root / f"out_{name.split()[0]}"
            run = [*command, str(log), "-o", str(out), "--overwrite", "--no-browser"]
            row = {"compiles": built["compiles"], "log_mb": round(built["bytes"] / 1e6, 1), "tool": name, "load_before": load_average()}
            row.update(timed(run, out))
            if shutil.which("strace"):
                counts = syscall_counts(run, out)
                row["syscalls"] = sum(counts.values())
                row["per_compile"] = {call: round(counts.get(call, 0) / built["compiles"], 2) for call in CALLS}
                row["per_compile"]["all"] = round(row["syscalls"] / built["compiles"], 1)
            row["per_compile_ms"] = round(1000 * row["seconds"] / built["compiles"], 3)
            row["files_per_compile"] = round(row["files"] / built["compiles"], 2)
            rows.append(row)
            shutil.rmtree(out, ignore_errors=True)
            print(json.dumps(row), flush=True)
        log.unlink()
    return rows


def markdown(rows: list[dict]) -> str:
    calls = [c for c in CALLS if any(c in r.get("per_compile", {}) for r in rows)]
    head = ["compiles", "tool", "wall s", "user s", "sys s", "RSS MB", "files/compile", "syscalls/compile", *calls]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        per = r.get("per_compile", {})
        lines.append("| " + " | ".join(str(x) for x in [r["compiles"], r["tool"], r["seconds"], r["user_s"], r["system_s"], r["peak_rss_mb"],
                                                           r["files_per_compile"], per.get("all", ""), *(per.get(c, "") for c in calls)]) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compiles", type=int, nargs="+", default=[2000, 10000, 40000])
    parser.add_argument("--lean", action="store_true", help="no torch configs in the metrics, no chromium events (make_logs --lean)")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "tlparse-compiles")
    parser.add_argument("--out-root", type=Path, default=None, help="where the reports go (default: --work); /dev/shm: a tmpfs")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    out_root = args.out_root or args.work
    out_root.mkdir(parents=True, exist_ok=True)
    tools = {"tlparse-py": our_command()}
    if shutil.which("tlparse"):
        tools["tlparse 0.4.3"] = [shutil.which("tlparse") or "tlparse"]
    rows = profile(tools, args.compiles, args.lean, args.work, out_root)
    table = markdown(rows)
    print(table)
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "lean": args.lean, "rows": rows}, indent=2))
    if args.markdown:
        args.markdown.write_text(f"# A compile id's cost ({machine()})\n\n{table}")
    return 0 if all(r["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
