"""tlparse 0.4.3 parity on the shared corpus (../shared), when it is present beside the project."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import HERE, SHARED

TOOL = SHARED / "tools" / "conformance.py"
SINGLE_RANK_CASES = [
    "artifacts",
    "autotune_with_compile_id",
    "cache_hit_miss",
    "chromium_events",
    "comp_failure",
    "comp_metrics",
    "links",
    "simple",
    "simple_corrupted_json",
]


@pytest.mark.skipif(not TOOL.is_file(), reason="../shared/tools/conformance.py not present")
def test_single_rank_cases_match_tlparse():
    proc = subprocess.run(
        [sys.executable, str(TOOL), "--cmd", f"{sys.executable} -m tlparse_py", *SINGLE_RANK_CASES],
        capture_output=True,
        text=True,
        cwd=HERE.parent,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(SINGLE_RANK_CASES)}/{len(SINGLE_RANK_CASES)} cases match" in proc.stdout
