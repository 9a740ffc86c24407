"""Regenerate sample.log: `python examples/tlparse_py_example_kinds/make_sample.py` from the repository root.

Uses the test suite's log writer (tests/logs.py), so the envelope, compile id and payload md5 are
exactly what torch writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "tests"))

from logs import cid, line, metrics, start, write_log  # noqa: E402  (needs the path above)

REPORT = """\
pass: fuse_rmsnorm_matmul (my_team.passes v3)
matched 2 pattern(s), rewrote 6 node(s)
  rewrite 1: rms_norm + mm -> my_team.fused_rmsnorm_mm (layer 0)
  rewrite 2: rms_norm + mm -> my_team.fused_rmsnorm_mm (layer 1)
skipped: 1 candidate (dynamic shape on dim 0)"""


def sample_lines() -> list[str]:
    meta = {"my_team_pass_report": {"pass_name": "fuse_rmsnorm_matmul", "rewrites": 2}, **cid(0, 0, 0)}
    # torch interns file names once per log; the dynamo_start stack refers to this one as 0
    source = line({"str": ["/home/me/project/model.py", 0]})
    return [source, start(fn="forward", lineno=42), line(meta, REPORT, path="my_team/passes.py", lineno=88), metrics(co_name="forward")]


if __name__ == "__main__":
    write_log(HERE / "sample.log", sample_lines())
