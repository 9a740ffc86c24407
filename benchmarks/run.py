"""Benchmark tlparse-py against tlparse 0.4.3 on the same logs, side by side, in one run.

    python benchmarks/run.py --sizes 50 200 1000 [--json results.json] [--work /tmp/tlparse-bench]
    python benchmarks/run.py --small [--repeat 5] [--json small.json]
    python benchmarks/run.py --sizes --small-compiles 2000 10000 40000 [--lean] [--repeat 5] [--out-root /dev/shm]
    python benchmarks/run.py --quiet-check ...    refuse to publish a ratio taken on a busy machine

Every figure carries the machine's load average before and after it was taken, and tlparse's own
time beside ours, and how many cores other processes kept busy while it was taken (the machine's
busy time from /proc/stat, hypervisor steal included, less the benchmark's own CPU): a ratio from a
busy stretch shows as one. With `--quiet-check` the script waits up to a minute for the machine to
be quiet before it starts, and exits 3 without writing `--json` when the load average was above
QUIET_LOAD at the start of a figure or other processes used more than QUIET_LOAD cores during it.
(The load average at the end counts the benchmark's own processes, so it is recorded, not judged.)

`--small` is the set people actually open: every harness fixture log (0.01-4 MB, gzipped ones
decompressed first since tlparse reads only plain files), each run as a whole process by both
tools in turn, the median of `--repeat` runs per log and tool; the figure is the sum of medians.
tlparse-py is timed with its cache folder filled by an earlier run (as users run it) and on a
first run ever (an empty cache folder). `install` in the JSON says what was timed: a wheel (its
templates compiled when it was built) or a source checkout. Time what users get: build and install
the wheel in a venv, and run this script with that venv's Python from outside the checkout
(`python -m tlparse_py` run inside it would import the checkout).

`--small-compiles N...` adds the many-small-compiles shape: the real `many_small` harness trace
copied until the log holds N compiles (make_logs.build_small; `--lean` leaves out torch's configs
and the chromium events, ~9 KB a compile). `--sizes` with no value times those alone.

For each size it builds a log from the harness fixtures (benchmarks/make_logs.py), then runs each
tool on it into a fresh folder (after `sync`, so one run's write-back does not slow the next) and
measures wall and CPU time, output size and files; then runs each tool once more for its peak
memory (PSS summed over the process tree, sampled from /proc every 20 ms: sampling is kept out of
the timed runs, where it took CPU from a tool that keeps both cores busy).
tlparse is used when it is on PATH (`pip install tlparse==0.4.3`). Prints a table and the ratios.

`--out-root /dev/shm` writes the reports to a tmpfs. On the 2-core VM these figures come from,
creating the ~8,000 files of a 200 MB report right after the previous run's were deleted costs
both tools seconds that change from run to run (a perf profile put a third of all samples in
ext4's inode allocator, `recently_deleted`), so a figure on disk mixes the tools' speed with the
disk's state; on tmpfs it is the tools alone. Each figure records its filesystem.
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import tempfile
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_logs import build, build_small  # noqa: E402


def tree_rss_kb(root_pid: int) -> int:
    """Memory of a process and all its descendants (kB), from /proc.

    Each process counts its proportional set size (PSS): pages shared between processes (a fork
    shares its parent's memory) are split between them instead of counted once per process, so a
    tree's total is the memory it really holds. For a single process PSS is its RSS less shared
    library pages.
    """
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            ppid, pages = int(fields[1]), int(fields[21])
        except (OSError, IndexError, ValueError):
            continue
        pid = int(entry)
        children.setdefault(ppid, []).append(pid)
        rss[pid] = _pss_kb(pid, pages * os.sysconf("SC_PAGE_SIZE") // 1024)
    total, stack = 0, [root_pid]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


def quiet_disk() -> None:
    """Start each run from the same state: nothing left to write back, and (as root) a cold cache."""
    subprocess.run(["sync"], check=False)
    if os.geteuid() == 0:
        try:
            Path("/proc/sys/vm/drop_caches").write_text("3\n")
        except OSError:
            pass


def _pss_kb(pid: int, fallback: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return fallback


QUIET_LOAD = 0.5  # the 1-minute load average above which a machine is busy (2 cores: a quarter of one in use)


def load_average() -> float:
    """The 1-minute load average (0.0 where the OS does not tell)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return 0.0


def wait_for_quiet(limit_s: float = 60.0) -> float:
    """Wait until the load average is at most QUIET_LOAD (or `limit_s` passed); the last reading."""
    deadline = time.monotonic() + limit_s
    load = load_average()
    while load > QUIET_LOAD and time.monotonic() < deadline:
        time.sleep(5)
        load = load_average()
    return load


def machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy since boot, all cores (`/proc/stat`; time the
    hypervisor gave other guests, "steal", counts as busy: a noisy neighbour slows a figure too)."""
    try:
        with open("/proc/stat") as handle:
            fields = [int(x) for x in handle.readline().split()[1:9]]
    except (OSError, ValueError):
        return 0.0
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class OtherLoad:
    """How many cores other processes kept busy while a figure was taken: the machine's busy time
    less the benchmark's own (its children's and this script's CPU). The load average after a
    figure counts the benchmark itself (two busy processes for ten seconds raise it by 0.3), so
    it is recorded but not what decides; this is."""

    def __init__(self) -> None:
        self.busy, self.times, self.started = machine_busy_s(), os.times(), time.perf_counter()

    def cores(self) -> float:
        times, wall = os.times(), max(time.perf_counter() - self.started, 1e-9)
        ours = sum(getattr(times, f) - getattr(self.times, f) for f in ("user", "system", "children_user", "children_system"))
        return round(max(0.0, machine_busy_s() - self.busy - ours) / wall, 2)


def busy(figures: list[dict]) -> list[str]:
    """The figures taken on a busy machine, named: a load average above QUIET_LOAD when they
    started, or other processes using more than QUIET_LOAD cores while they ran."""
    return [f"{f.get('name', '?')}: load {f['load_before']} → {f['load_after']}, other processes {f.get('other_cores', 0.0)} cores"
            for f in figures if f["load_before"] > QUIET_LOAD or f.get("other_cores", 0.0) > QUIET_LOAD]


def measure(command: list[str], out: Path, sample_memory: bool = False) -> dict[str, float]:
    """One run of `command` into a fresh `out`, from a cold page cache: wall and CPU time, output
    size; with `sample_memory`, the peak memory of its process tree, sampled from /proc every 20 ms.

    Timed runs do not sample: reading /proc every 20 ms takes CPU from a process tree that keeps
    both cores busy (0.5-1 s of a 6 s run of ours, measured), and less from one that uses one.
    """
    if out.exists():
        shutil.rmtree(out)
    quiet_disk()
    before = os.times()
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while sample_memory and proc.poll() is None:
        peak = max(peak, tree_rss_kb(proc.pid))
        time.sleep(0.02)
    stderr_bytes = proc.stderr.read() if proc.stderr else b""  # read before waiting: a full pipe would block it
    proc.wait()
    seconds = time.perf_counter() - started
    after = os.times()  # the child is reaped by poll(), so its CPU time is in children_*
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    stderr = stderr_bytes.decode("utf-8", "replace")
    files = [p for p in out.rglob("*") if p.is_file()] if out.exists() else []
    return {
        "exit": proc.returncode,
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "peak_rss_mb": round(peak / 1024, 1),
        "output_mb": round(sum(p.stat().st_size for p in files) / 1e6, 1),
        "files": len(files),
        "stats": next((line for line in stderr.splitlines() if line.startswith("Stats")), ""),
    }


FIXTURES = HERE.parent / "tests" / "fixtures" / "traces"


def small_logs(work: Path) -> list[Path]:
    """Every fixture log as a plain file under work/small (decompressed where gzipped)."""
    folder = work / "small"
    folder.mkdir(parents=True, exist_ok=True)
    logs = []
    for source in sorted(FIXTURES.rglob("dedicated_log_torch_trace_*")):
        name = f"{source.parent.name}__{source.name.removesuffix('.gz')}"
        target = folder / name
        if not target.exists():
            data = gzip.decompress(source.read_bytes()) if source.suffix == ".gz" else source.read_bytes()
            target.write_bytes(data)
        logs.append(target)
    return logs


def timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """Wall and CPU seconds (children included) of one whole process, and its exit status."""
    before = os.times()
    started = time.perf_counter()
    code = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False).returncode
    wall = time.perf_counter() - started
    after = os.times()
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system), code


def run_small(tools: dict[str, list[str]], work: Path, repeat: int) -> dict:
    """Each fixture log, each tool in turn, `repeat` times; medians per log, summed.

    A wheel-installed tlparse-py carries its templates compiled; a source checkout compiles them
    on its first run and keeps them in its cache folder (like Python's own .pyc files). So it is
    timed as users run it, with that folder filled by an earlier run on another log, and also on a
    first run ever (an empty cache folder each time). Run it from the Python of the install to time.
    """
    logs = small_logs(work)
    load_before = load_average()
    others = OtherLoad()
    out = work / "small_out"
    first_run = "tlparse-py (first run, empty cache)"
    variants = {**tools, first_run: tools["tlparse-py"]}
    steady_cache = Path(tempfile.mkdtemp(prefix="tlparse-bench-cache-"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # .pyc as after pip install
    timed([*tools["tlparse-py"], str(logs[0]), "-o", str(out), "--overwrite", "--no-browser"], {**env, "TLPARSE_PY_CACHE_DIR": str(steady_cache)})
    rows = []
    for log in logs:
        row: dict = {"log": log.name, "log_mb": round(log.stat().st_size / 1e6, 3)}
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
        for _ in range(repeat):
            for name, command in variants.items():
                empty = Path(tempfile.mkdtemp(prefix="tlparse-bench-cache-"))
                cache = empty if name == first_run else steady_cache
                wall, cpu, code = timed([*command, str(log), "-o", str(out), "--overwrite", "--no-browser"],
                                        {**env, "TLPARSE_PY_CACHE_DIR": str(cache)})
                shutil.rmtree(empty, ignore_errors=True)
                if code not in (0, 1):
                    print(f"{name} exited {code} on {log.name}", file=sys.stderr)
                samples[name].append((wall, cpu))
        for name, measured in samples.items():
            row[name] = {"wall": round(statistics.median(w for w, _ in measured), 4),
                         "cpu": round(statistics.median(c for _, c in measured), 4)}
        rows.append(row)
        print(f"{row['log_mb']:8.3f} MB  " + "  ".join(f"{n}: {row[n]['wall']:.3f} s" for n in variants) + f"  {log.name}", flush=True)
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(steady_cache, ignore_errors=True)
    totals = {name: {"wall": round(sum(r[name]["wall"] for r in rows), 3), "cpu": round(sum(r[name]["cpu"] for r in rows), 3)}
              for name in variants}
    print()
    for name, total in totals.items():
        print(f"{name:36s} summed median wall {total['wall']:7.2f} s   cpu {total['cpu']:7.2f} s")
    ratios = {}
    if "tlparse 0.4.3" in totals:
        theirs = totals["tlparse 0.4.3"]
        for name in ("tlparse-py", first_run):
            ratios[name] = {"wall": round(totals[name]["wall"] / theirs["wall"], 3), "cpu": round(totals[name]["cpu"] / theirs["cpu"], 3)}
            print(f"{name} / tlparse: wall {ratios[name]['wall']:.2f}x, cpu {ratios[name]['cpu']:.2f}x")
        big = [r for r in rows if r["log_mb"] >= 1.0]
        if big:
            ours, tl = sum(r["tlparse-py"]["wall"] for r in big), sum(r["tlparse 0.4.3"]["wall"] for r in big)
            ratios["logs of 1 MB and more"] = {"logs": len(big), "wall": round(ours / tl, 3)}
            print(f"logs of 1 MB and more ({len(big)}): tlparse-py / tlparse wall {ours / tl:.2f}x")
    floor = [timed([sys.executable, "-c", "import click, orjson, markupsafe, msgspec"], env)[0] for _ in range(repeat)]
    load_after = load_average()
    print(f"Python start-up with click, orjson, markupsafe and msgspec imported (a report imports no Jinja): {statistics.median(floor):.3f} s per process")
    other_cores = others.cores()
    print(f"load average: {load_before} before, {load_after} after; other processes used {other_cores} cores meanwhile")
    return {"machine": machine(), "install": install(), "logs": len(rows), "repeat": repeat, "rows": rows,
            "totals": totals, "ratios": ratios, "python_floor_s": round(statistics.median(floor), 4),
            "load_before": load_before, "load_after": load_after, "other_cores": other_cores, "name": "small set"}


def filesystem(path: Path) -> str:
    """The type of the filesystem holding `path` (from /proc/mounts; "unknown" elsewhere)."""
    try:
        mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return "unknown"
    target = str(path.resolve())
    best = max((m for m in mounts if len(m) > 2 and (target == m[1] or target.startswith(m[1].rstrip("/") + "/"))),
               key=lambda m: len(m[1]), default=None)
    return best[2] if best else "unknown"


def our_command() -> list[str]:
    """tlparse-py as users run it: the install's `tlparse-py` script beside this Python (`-m`
    would add runpy's imports), or `python -m tlparse_py` where there is none (a source checkout)."""
    script = Path(sys.executable).parent / "tlparse-py"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "tlparse_py"]


def install() -> str:
    """How the timed tlparse-py was installed: a wheel carries its templates compiled, a source
    checkout (or `pip install -e`) compiles them on its first run and keeps them in its cache."""
    probe = ("from tlparse_py.report import render; print(type(render.environment().loader).__name__ == 'ModuleLoader', render.HERE)")
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False).stdout.split()
    if not found:
        return "unknown"
    kind = "wheel, templates compiled at build" if found[0] == "True" else "source checkout, templates compiled on first run"
    return f"{kind} ({found[1]})"


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown cpu") if Path("/proc/cpuinfo").exists() else "unknown cpu"
    return f"{os.cpu_count()} cores, {model}, Python {sys.version.split()[0]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=float, nargs="*", default=[50, 200])
    parser.add_argument("--small-compiles", type=int, nargs="*", default=[], help="logs of this many small compiles (the many_small trace)")
    parser.add_argument("--lean", action="store_true", help="with --small-compiles: no torch configs in the metrics, no chromium events")
    parser.add_argument("--work", type=Path, default=Path("/tmp/tlparse-bench"))
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the generated logs and reports")
    parser.add_argument("--out-root", type=Path, default=None,
                        help="where the reports of --sizes are written (default: --work); /dev/shm, a tmpfs, takes the disk out of the figure")
    parser.add_argument("--repeat", type=int, default=None, help="runs per tool and size (alternating); the median is reported "
                        "(default 1, or 5 with --small)")
    parser.add_argument("--small", action="store_true", help="the small-log set: every fixture log, whole process, both tools")
    parser.add_argument("--quiet-check", action="store_true", help=f"wait for a quiet machine, and publish nothing (exit 3) when the "
                        f"load average was above {QUIET_LOAD} at the start or end of a figure")
    args = parser.parse_args()
    if args.quiet_check:
        print(f"waiting for a quiet machine (load average ≤ {QUIET_LOAD}): now {wait_for_quiet()}", flush=True)
    args.work.mkdir(parents=True, exist_ok=True)
    tools = {"tlparse-py": our_command()}
    if shutil.which("tlparse"):
        tools["tlparse 0.4.3"] = [shutil.which("tlparse")]
    else:
        print("tlparse is not installed (pip install tlparse==0.4.3): timing tlparse-py alone", file=sys.stderr)
    if args.small:
        print(f"tlparse-py install: {install()}")
        small = run_small(tools, args.work, args.repeat or 5)
        if args.quiet_check and busy([small]):
            print(f"not published: taken on a busy machine ({'; '.join(busy([small]))})", file=sys.stderr)
            return 3
        if args.json:
            args.json.write_text(json.dumps(small, indent=2))
        return 0
    args.repeat = args.repeat or 1
    out_root = args.out_root or args.work
    out_root.mkdir(parents=True, exist_ok=True)
    results = []
    logs = [(f"{size:g} MB", f"bench_{size:g}mb.log", lambda path, size=size: build(size, path)) for size in args.sizes]
    lean = "_lean" if args.lean else ""
    logs += [(f"{n} compiles{lean.replace('_', ' ')}", f"bench_{n}_compiles{lean}.log", lambda path, n=n: build_small(n, path, args.lean))
             for n in args.small_compiles]
    for size, name_of_log, make in logs:
        log = args.work / name_of_log
        if not log.exists():
            make(log)
            if args.quiet_check:  # building the log is itself load: wait again before timing
                print(f"waiting for a quiet machine after building the log: now {wait_for_quiet()}", flush=True)
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in tools}
        load_before = load_average()
        others = OtherLoad()
        for attempt in range(args.repeat):
            for name, command in tools.items():
                out = out_root / f"out_{name_of_log}_{name.split()[0]}"
                run = measure([*command, str(log), "-o", str(out), "--overwrite", "--no-browser"], out)
                runs[name].append(run)
                print(f"{size:>16}  {name:14s} run {attempt + 1}: {run['seconds']:7.2f} s  {run['cpu_seconds']:7.2f} s CPU  "
                      f"{run['output_mb']:8.1f} MB out  {run['files']:6d} files  exit {run['exit']}", flush=True)
                if not args.keep:
                    shutil.rmtree(out, ignore_errors=True)
        peaks = {}
        for name, command in tools.items():  # peak memory: a run of its own, sampled (see `measure`)
            out = out_root / f"out_{name_of_log}_{name.split()[0]}"
            peaks[name] = measure([*command, str(log), "-o", str(out), "--overwrite", "--no-browser"], out, sample_memory=True)["peak_rss_mb"]
            print(f"{size:>16}  {name:14s} memory run: {peaks[name]:8.1f} MB peak PSS", flush=True)
            shutil.rmtree(out, ignore_errors=True)
        for name, measured in runs.items():
            median = sorted(measured, key=lambda r: r["seconds"])[len(measured) // 2]
            row = {"log": size, "size_mb": args.sizes[[label for label, _, _ in logs].index(size)] if size.endswith(" MB") else None, "log_mb": round(log.stat().st_size / 1e6, 1), "tool": name, "runs": len(measured),
                   "all_seconds": [r["seconds"] for r in measured], "all_cpu_seconds": [r["cpu_seconds"] for r in measured]}
            row.update(median)
            row["peak_rss_mb"] = peaks[name]
            row.update(load_before=load_before, load_after=load_average(), other_cores=others.cores(), name=f"{size} {name}",
                       out_filesystem=filesystem(out_root))
            results.append(row)
        if not args.keep:
            log.unlink()
    print()
    print(f"{'log':>16} {'tool':14} {'wall s':>8} {'RSS MB':>8} {'out MB':>8} {'files':>7}")
    for row in results:
        print(f"{row['log']:>16} {row['tool']:14} {row['seconds']:8.2f} {row['peak_rss_mb']:8.1f} {row['output_mb']:8.1f} {row['files']:7d}")
    ratios = []
    for size, _, _ in logs:
        ours = next((r for r in results if r["log"] == size and r["tool"] == "tlparse-py"), None)
        theirs = next((r for r in results if r["log"] == size and r["tool"] == "tlparse 0.4.3"), None)
        if ours and theirs and theirs["seconds"] and theirs["peak_rss_mb"]:
            # each run of ours against the run of theirs right after it (alternating): the median of those ratios
            paired = {kind: statistics.median(a / b for a, b in zip(ours[f"all_{kind}"], theirs[f"all_{kind}"]))
                      for kind in ("seconds", "cpu_seconds")}
            ratio = {"log": size, "size_mb": ours["size_mb"], "wall_ratio": round(ours["seconds"] / theirs["seconds"], 2),
                     "paired_wall_ratio": round(paired["seconds"], 3), "paired_cpu_ratio": round(paired["cpu_seconds"], 3),
                     "rss_ratio": round(ours["peak_rss_mb"] / theirs["peak_rss_mb"], 3)}
            ratios.append(ratio)
            ratio.update(tlparse_seconds=theirs["all_seconds"], load_before=ours["load_before"], load_after=theirs["load_after"],
                         other_cores=theirs["other_cores"])
            print(f"{size:>16}  tlparse-py / tlparse: wall {ratio['wall_ratio']:.2f}x (median of paired runs {ratio['paired_wall_ratio']:.2f}x), "
                  f"CPU {ratio['paired_cpu_ratio']:.2f}x, peak RSS {ratio['rss_ratio']:.3f}x; tlparse took {theirs['all_seconds']} s; "
                  f"load average {ratio['load_before']} → {ratio['load_after']}; other processes used {ratio['other_cores']} cores meanwhile")
    ours_rows = [r for r in results if r["tool"] == "tlparse-py"]
    if len(ours_rows) >= 2:
        first, last = ours_rows[0], ours_rows[-1]
        print(f"tlparse-py from {first['log']} to {last['log']}: RSS x{last['peak_rss_mb'] / first['peak_rss_mb']:.2f}, "
              f"wall x{last['seconds'] / first['seconds']:.2f} (log x{last['log_mb'] / first['log_mb']:.1f})")
    if args.quiet_check and busy(results):
        print(f"not published: taken on a busy machine ({'; '.join(busy(results))})", file=sys.stderr)
        return 3
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "results": results, "ratios": ratios}, indent=2))
    return 0 if all(r["exit"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
