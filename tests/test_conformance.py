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
def test_every_corpus_case_matches_tlparse():
    """Single-rank, export, provenance and multi-rank cases: same files, compile_directory.json urls and stats."""
    proc = subprocess.run(
        [sys.executable, str(TOOL), "--cmd", f"{sys.executable} -m tlparse_py"],
        capture_output=True,
        text=True,
        cwd=HERE.parent,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cases = len(list((SHARED / "corpus" / "reference").iterdir()))
    assert f"{cases}/{cases} cases match" in proc.stdout and set(SINGLE_RANK_CASES) <= set(proc.stdout.split())


CORPUS = SHARED / "corpus" / "tlparse"


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared corpus not present")
@pytest.mark.parametrize("case, lines", [("simple", 15), ("simple_corrupted_json", 15), ("comp_metrics", 13)])
def test_raw_jsonl_like_tlparse(report_of, case, lines):
    """tlparse's own test anchors: line counts, the string table first, types, payload files that exist."""
    import json

    _, out = report_of(CORPUS / f"{case}.log")
    rows = [json.loads(text) for text in (out / "raw.jsonl").read_text().splitlines()]
    assert len(rows) == lines and list(rows[0]) == ["string_table"]
    for row in rows[1:]:
        assert isinstance(row["timestamp"], str) and isinstance(row["thread"], int)
        assert isinstance(row["pathname"], str) and not row["pathname"].startswith(" ")
        assert isinstance(row["lineno"], int)
        if "payload_filename" in row:
            assert (out / row["payload_filename"]).is_file()


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared corpus not present")
def test_comp_metrics_payloads_like_tlparse(report_of):
    _, out = report_of(CORPUS / "comp_metrics.log")
    assert {p.stem for p in (out / "payloads").iterdir()} == {
        "11726d08889974e57b12edee2812504e",
        "29e35548d59d0e446f0c8a3f3010cc72",
        "e18e1bcb67140c0a67427a6119556f7a",
    }
