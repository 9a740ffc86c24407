"""Command line of the compile harness: `python -m tlparse_py.harness ...`.

    python -m tlparse_py.harness --out DIR [--device cpu|cuda|auto] [--timeout S] [SCENARIO ...]
    python -m tlparse_py.harness --list
    python -m tlparse_py.harness --fixtures tests/fixtures/traces [SCENARIO ...]

Exit status: 0 when every requested scenario succeeded, 1 when any failed (or was asked
for by name but cannot run on the device), 2 for usage errors and a missing torch.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .registry import BY_NAME, SCENARIOS, Scenario
from .runner import ScenarioResult, cleanup, run_scenario

TORCH_MISSING = "torch is not installed: pip install -e '.[harness]' (or pip install torch==2.13.0)"
DEFAULT_TIMEOUT = 600.0
# Column width for scenario names in --list and the status lines.
NAME_WIDTH = max(len(s.name) for s in SCENARIOS)
PROBE = "import json, torch; print(json.dumps([torch.__version__, torch.cuda.is_available()]))"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser."""
    parser = argparse.ArgumentParser(
        prog="python -m tlparse_py.harness",
        description="Run small torch programs under TORCH_TRACE to make real trace logs.",
    )
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                        help="scenarios to run (default: all that suit the device)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="write each scenario's logs to DIR/<scenario>/")
    parser.add_argument("--device", choices=("cpu", "cuda", "auto"), default=None,
                        help="auto (default) = cuda if torch sees a GPU, else cpu; "
                             "with --fixtures the default is cpu")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"limit for each scenario process (default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument("--fixtures", type=Path, metavar="DIR",
                        help="run the scenarios and write normalised logs + README.md to DIR")
    parser.add_argument("--keep-temp", action="store_true",
                        help="keep each scenario's Inductor cache and temp dir (for debugging)")
    return parser


def print_list() -> None:
    """One line per scenario: name, CUDA need, description."""
    for s in SCENARIOS:
        need = "needs CUDA" if s.needs_cuda else "cpu ok"
        print(f"{s.name:<{NAME_WIDTH}} {need:<10}  {s.description}")


def probe_torch() -> tuple[str, bool]:
    """(torch version, CUDA available), asked of a subprocess so this one stays torch-free."""
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=300)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-10:])
        raise RuntimeError(f"importing torch failed:\n{tail}")
    version, cuda = json.loads(proc.stdout.strip().splitlines()[-1])
    return version, bool(cuda)


def resolve_device(requested: str | None, fixtures: bool) -> str:
    """Turn --device into "cpu" or "cuda", probing torch for "auto"."""
    requested = requested or ("cpu" if fixtures else "auto")
    if requested != "auto":
        return requested
    version, cuda = probe_torch()
    device = "cuda" if cuda else "cpu"
    print(f"torch {version}; CUDA {'available' if cuda else 'not available'}: device {device}")
    return device


def select(names: list[str], device: str) -> tuple[list[Scenario], list[Scenario], bool]:
    """(to run, to skip, whether a skip counts as a failure).

    With no names every scenario that runs on the device is selected and the CUDA-only
    ones are skipped quietly; a scenario asked for by name that cannot run is a failure.
    """
    chosen = [BY_NAME[n] for n in dict.fromkeys(names)] if names else list(SCENARIOS)
    run = [s for s in chosen if s.runs_on(device)]
    skip = [s for s in chosen if not s.runs_on(device)]
    return run, skip, bool(names)


def status_line(result: ScenarioResult) -> str:
    """name, ok/FAILED, seconds, number of logs, bytes."""
    n = len(result.logs)
    return (f"{result.scenario.name:<{NAME_WIDTH}} {result.status:<7} {result.seconds:7.1f}s "
            f"{n:3d} log{'s' if n != 1 else ' '} {result.total_bytes:>12,} bytes")


def report(result: ScenarioResult) -> None:
    """Print the result line and, for a failure, why and the tail of its output."""
    print(status_line(result), flush=True)
    if result.ok:
        return
    print(f"    {result.problem}")
    if result.logs:
        print(f"    partial logs kept in {result.trace_dir}")
    for line in result.tail:
        print(f"    | {line}")
    sys.stdout.flush()


def write_fixture_files(results: list[ScenarioResult], fixtures_dir: Path) -> None:
    """Normalise the successful scenarios' logs into the fixtures directory."""
    from .fixtures import FIXTURES_BUDGET_BYTES, fixtures_size, write_fixtures

    for result in results:
        if not result.ok:
            print(f"  {result.scenario.name}: failed, its existing fixtures are left as they were")
    rows = write_fixtures(results, fixtures_dir)
    for row in rows:
        print(f"  wrote {fixtures_dir / row.scenario / row.file} ({row.bytes:,} bytes)")
    size = fixtures_size(fixtures_dir)
    print(f"fixtures: {len(rows)} files written, {size:,} bytes in {fixtures_dir}; "
          f"README: {fixtures_dir / 'README.md'}")
    if size > FIXTURES_BUDGET_BYTES:
        print(f"WARNING: fixtures exceed {FIXTURES_BUDGET_BYTES:,} bytes; shrink the scenarios")


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list:
        print_list()
        return 0
    unknown = [n for n in args.scenarios if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)} (see --list)")
    if args.out is None and args.fixtures is None:
        parser.error("--out DIR (or --fixtures DIR) is required")
    if importlib.util.find_spec("torch") is None:
        print(TORCH_MISSING, file=sys.stderr)
        return 2
    try:
        device = resolve_device(args.device, fixtures=args.fixtures is not None)
    except (RuntimeError, subprocess.SubprocessError) as exc:
        print(f"cannot use torch: {exc}", file=sys.stderr)
        return 2
    return run_command(args, device)


def run_command(args: argparse.Namespace, device: str) -> int:
    """Run the selected scenarios (and write fixtures); return the exit status."""
    scenarios, skipped, skip_fails = select(args.scenarios, device)
    for s in skipped:
        print(f"{s.name:<{NAME_WIDTH}} skipped (needs CUDA; device is {device})")
    own_out = args.out is None
    out_dir = Path(tempfile.mkdtemp(prefix="tlparse_harness_out_")) if own_out else args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    results: list[ScenarioResult] = []
    try:
        # One after another, carrying on past failures. The fixture normaliser needs only
        # the temp roots' paths, not their contents, so they can go right away.
        for scenario in scenarios:
            results.append(run_scenario(scenario, out_dir.resolve(), device, args.timeout))
            report(results[-1])
            if not args.keep_temp:
                cleanup(results[-1])
        if args.fixtures is not None:
            write_fixture_files(results, args.fixtures)
    finally:
        if own_out and all(r.ok for r in results):
            shutil.rmtree(out_dir, ignore_errors=True)
    failed = [r for r in results if not r.ok]
    kept = "" if own_out and not failed else f"; logs in {out_dir}"
    print(f"{len(results) - len(failed)} ok, {len(failed)} failed, {len(skipped)} skipped "
          f"in {time.monotonic() - start:.1f}s{kept}")
    return 1 if failed or (skipped and skip_fails) else 0
