"""Where a whole-process run on a small log spends its time: the split behind the small-set figure.

    python benchmarks/profile_small.py [--logs 5] [--repeat 7] [--quiet-check] [--json F] [--markdown F]

For the smallest fixture logs (run.py's small set), each run is a whole process, as users run it.
The split, medians over `--repeat` runs per log:
- interpreter: `python -c pass` (start-up and exit of a bare interpreter), shown beside the whole
  process's time (medians, and the means below them);
- stack imports: click, orjson, markupsafe and msgspec (what a report run imports of its
  dependencies: the templates run compiled, without Jinja; Pygments is imported only to highlight,
  which a run does not by default);
- own imports: the modules a report run loads, and of them the time spent building dataclasses
  (the per-log Store and Analysis) and compiling regular expressions;
- the report's phases, timed inside the run by wrapping the functions that do them (reading and
  analysis, pages, search index, static files, summary.md, the output folder's staging and
  commit, the summary lines) and "other work" for the rest;
- exit: the whole process's wall time less everything above (the exit hooks, leaving, and
  the process's start and end as the operating system sees them beyond a bare interpreter's).
Time what users get: run it with the Python of an installed wheel, from outside the checkout.
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
from run import QUIET_LOAD, load_average, machine, small_logs, wait_for_quiet  # noqa: E402

# What runs inside one measured process: imports timed piece by piece, then the report command
# with its phases wrapped. Printed as one JSON line.
PROBE = r"""
import sys, time, json
started = time.perf_counter()
import dataclasses, re
import click, orjson, markupsafe, msgspec
stack = time.perf_counter()
def timed(totals, name, fn):  # fn, its time added to totals[name]
    totals.setdefault(name, 0.0)
    def wrapped(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            totals[name] += time.perf_counter() - t
    return wrapped
spent = {}
dataclasses._process_class = timed(spent, "dataclasses", dataclasses._process_class)
re._compile = timed(spent, "regexes", re._compile)
import tlparse_py.cli, tlparse_py.pipeline, tlparse_py.commands.report
imported = time.perf_counter()
own = dict(spent)
from tlparse_py import outcome, pipeline
from tlparse_py.report import jobs, staging
phases = {}
def phase(owner, attr, name):
    setattr(owner, attr, timed(phases, name, getattr(owner, attr)))
phase(pipeline, "read_logs", "reading and analysis")
phase(jobs.PageJobs, "run", "pages")
phase(pipeline.Pipeline, "_write_search_index", "search index")
phase(pipeline, "write_static", "static files")
phase(pipeline, "summary_markdown", "summary.md")
phase(staging.ReportWriter, "__init__", "output folder: staging")
phase(staging.ReportWriter, "commit", "output folder: commit")
phase(outcome, "concluded", "summary lines and checks")
sys.argv = ["tlparse-py", *sys.argv[1:]]
def report():  # an exit hook: the script leaves by os._exit once its hooks have run
    done = time.perf_counter()
    phases["other work"] = (done - imported) - sum(phases.values())
    print(json.dumps({"stack": stack - started, "own": imported - stack, "own_dataclasses": own["dataclasses"],
                      "own_regexes": own["regexes"], "phases": phases, "inside": done - started}), file=sys.__stderr__, flush=True)
import atexit
atexit.register(report)
from tlparse_py.entry import main
main()
"""


def whole(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, check=False)
    return time.perf_counter() - started, proc.stderr


def profile_log(log: Path, repeat: int, env: dict[str, str], work: Path) -> dict:
    """Medians (seconds) of each part of a run on `log`."""
    samples: dict[str, list[float]] = {}

    def add(name: str, seconds: float) -> None:
        samples.setdefault(name, []).append(seconds)

    out = work / "out"
    for _ in range(repeat):
        add("interpreter", whole([sys.executable, "-c", "pass"], env)[0])
        wall, stderr = whole([sys.executable, "-c", PROBE, str(log), "-o", str(out), "--overwrite", "--no-browser"], env)
        probe = json.loads(stderr.strip().splitlines()[-1])
        add("stack imports", probe["stack"])
        add("own imports", probe["own"])
        add("  of which dataclasses built", probe["own_dataclasses"])
        add("  of which regexes compiled", probe["own_regexes"])
        for name, seconds in probe["phases"].items():
            add(name, seconds)
        add("whole process", wall)
        add("exit", max(0.0, wall - probe["inside"] - samples["interpreter"][-1]))
    parts = {name: round(statistics.median(values), 4) for name, values in samples.items()}
    parts["interpreter, mean"] = round(statistics.mean(samples["interpreter"]), 4)
    parts["whole process, mean"] = round(statistics.mean(samples["whole process"]), 4)
    return parts


def markdown(result: dict) -> str:
    logs = result["logs"]
    names = list(logs[0]["parts"])
    head = "| part (ms, median unless said) | " + " | ".join(f"{row['log'].split('__')[0]} ({row['log_kb']} KB)" for row in logs) + " | mean |"
    lines = [f"# Where a small run's time goes ({result['machine']})", "",
             f"Whole-process runs, median of {result['repeat']} per log; load average {result['load_before']} before, "
             f"{result['load_after']} after. tlparse 0.4.3 on the same logs: "
             + ", ".join(f"{row['tlparse_ms']} ms" for row in logs) + ".", "",
             head, "|" + "---|" * (len(logs) + 2)]
    for name in names:
        values = [row["parts"][name] * 1e3 for row in logs]
        lines.append(f"| {name} | " + " | ".join(f"{v:.1f}" for v in values) + f" | {statistics.mean(values):.1f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--logs", type=int, default=5, help="how many of the smallest fixture logs")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--work", type=Path, default=Path("/tmp/tlparse-bench"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--quiet-check", action="store_true", help=f"first wait (up to a minute) for the load average to fall to {QUIET_LOAD}")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # .pyc as after pip install
    env["TLPARSE_PY_CACHE_DIR"] = tempfile.mkdtemp(prefix="tlparse-profile-cache-")
    logs = sorted(small_logs(args.work), key=lambda p: p.stat().st_size)[: args.logs]
    tlparse = shutil.which("tlparse")
    if args.quiet_check:
        print(f"waiting for a quiet machine (load average ≤ {QUIET_LOAD}): now {wait_for_quiet()}", flush=True)
    load_before = load_average()
    rows = []
    for log in logs:
        parts = profile_log(log, args.repeat, env, args.work)
        theirs = [whole([tlparse, str(log), "-o", str(args.work / "out_tl"), "--overwrite", "--no-browser"], env)[0]
                  for _ in range(args.repeat)] if tlparse else [0.0]
        rows.append({"log": log.name, "log_kb": round(log.stat().st_size / 1e3), "parts": parts,
                     "tlparse_ms": round(statistics.median(theirs) * 1e3, 1)})
        print(f"{log.name}: " + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in parts.items()), flush=True)
    result = {"machine": machine(), "repeat": args.repeat, "load_before": load_before, "load_after": load_average(),
              "logs": rows}
    print(markdown(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    if args.markdown:
        args.markdown.write_text(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
