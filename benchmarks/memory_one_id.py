"""Peak memory of a whole `tlparse-py` run on a log of N records under ONE compile id (issue 34 item 16).

A guard or tensor description logged in a loop puts millions of records under one compile id; the
report must then cost the same memory however many there are. This script writes such a log (by
code: a `dynamo_start`, then N `describe_tensor` records with the envelope torch writes, every
`--artifact-every`th of them an `artifact` with a payload), runs the `tlparse-py` command on it in
a child process and reports the peak resident set size of the run: the largest of the command's
process and the processes it started (`os.wait4`'s `ru_maxrss`), per size, and the growth per
record between the sizes.

    python benchmarks/memory_one_id.py                      # 10^5 and 10^6 records
    python benchmarks/memory_one_id.py --huge               # and 10^7 (a 2 GB log; minutes)
    python benchmarks/memory_one_id.py --sizes 20000 200000 --json /tmp/mem.json

Logs are written under --work (default: a temporary folder, removed at the end).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PREFIX = "V1202 12:14:23.064000 4242 torch/_subclasses/meta_utils.py:514] "
COMPILE_ID = '"frame_id": 0, "frame_compile_id": 0, "attempt": 0'


def write_log(path: Path, records: int, artifact_every: int = 0) -> Path:
    """A log of `records` records under compile id [0/0] (plus its dynamo_start), as torch writes them.

    With `artifact_every` > 0, every such record is an `artifact` with a distinct one-line payload
    (each gets a numbered file and a directory entry); the others are `describe_tensor` records.
    """
    with open(path, "w", encoding="utf-8", buffering=1 << 20) as out:
        out.write(f'V1202 12:14:23.064000 4242 torch/_dynamo/convert_frame.py:1000] {{"dynamo_start": {{"stack": []}}, {COMPILE_ID}}}\n')
        for i in range(records):
            if artifact_every and i % artifact_every == artifact_every - 1:
                payload = f"payload {i}"
                md5 = hashlib.md5(payload.encode()).hexdigest()
                out.write(f'{PREFIX}{{"artifact": {{"name": "thing", "encoding": "string"}}, {COMPILE_ID}, "has_payload": "{md5}"}}\n\t{payload}\n')
            else:
                out.write(
                    f'{PREFIX}{{"describe_tensor": {{"id": {i}, "ndim": 1, "dtype": "torch.float32", "device": "device(type=\'cpu\')", '
                    f'"size": [{i}], "is_leaf": true, "stride": [1], "storage": {i}, "describer_id": 0}}, {COMPILE_ID}}}\n'
                )
    return path


def peak_rss(command: list[str]) -> tuple[int, float, int]:
    """(the largest resident set of the command's process tree in bytes, wall seconds, exit status)."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert child.stderr is not None
    child.stderr.read()  # drained, so a chatty run cannot block on a full pipe
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss * 1024, time.perf_counter() - start, child.returncode


def measure(work: Path, records: int, artifact_every: int) -> dict[str, float]:
    log = write_log(work / f"dedicated_log_torch_trace_one_id_{records}.log", records, artifact_every)
    out = work / f"out_{records}"
    command = [sys.executable, "-m", "tlparse_py", str(log), "-o", str(out), "--overwrite", "--no-browser"]
    rss, wall, status = peak_rss(command)
    if status != 0:
        raise SystemExit(f"tlparse-py exited {status} on {records:,} records")
    result = {"records": records, "log_mb": round(log.stat().st_size / 1e6, 1), "peak_rss_mb": round(rss / 1e6, 1), "wall_s": round(wall, 1)}
    log.unlink()
    shutil.rmtree(out, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10**5, 10**6], help="records under the one compile id")
    parser.add_argument("--huge", action="store_true", help="also 10^7 records (a 2 GB log)")
    parser.add_argument("--artifact-every", type=int, default=0, help="every Nth record an artifact with a payload (0: none)")
    parser.add_argument("--work", type=Path, help="where the logs and reports go (default: a temporary folder)")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    sizes = sorted(set(args.sizes + ([10**7] if args.huge else [])))
    work = args.work or Path(tempfile.mkdtemp(prefix="tlparse-mem-"))
    work.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for records in sizes:
            result = measure(work, records, args.artifact_every)
            results.append(result)
            print(f"{records:>10,} records  log {result['log_mb']:>8,.1f} MB  peak RSS {result['peak_rss_mb']:>7,.1f} MB  {result['wall_s']:>6.1f} s",
                  flush=True)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    if len(results) > 1:
        first, last = results[0], results[-1]
        per_record = (last["peak_rss_mb"] - first["peak_rss_mb"]) * 1e6 / (last["records"] - first["records"])
        print(f"growth: {per_record:,.1f} bytes of peak RSS per record ({first['records']:,} -> {last['records']:,})")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
