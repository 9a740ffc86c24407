"""Every committed harness trace (real torch 2.13 logs) through the whole report.

The expectations here are computed from the log text independently of the reader (a plain scan
of the envelopes), so a reader bug cannot hide itself.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from conftest import TRACES, read_json
from linkcheck import broken_links

CONTEXT = {"rank", "compiled_autograd_id", "frame_id", "frame_compile_id", "attempt", "has_payload", "stack", "subgraph_name"}
TRACE_LOGS = sorted(p for p in TRACES.rglob("*") if p.name.endswith((".log", ".log.gz")))


def envelopes(log: Path):
    opener = gzip.open if log.name.endswith(".gz") else open
    with opener(log, "rt", encoding="utf-8", errors="replace") as handle:
        for text in handle:
            if text.startswith("\t") or "] {" not in text:
                continue
            yield json.loads(text.split("] ", 1)[1])


def display(env) -> str:
    ca = f"!{env['compiled_autograd_id']}/" if env.get("compiled_autograd_id") is not None else ""
    frame = "-" if env.get("frame_id") is None else env["frame_id"]
    fcid = "-" if env.get("frame_compile_id") is None else env["frame_compile_id"]
    attempt = f"_{env['attempt']}" if env.get("attempt") else ""
    return f"[{ca}{frame}/{fcid}{attempt}]"


def test_fixtures_are_present():
    assert len(TRACE_LOGS) >= 5, "run: python -m tlparse_py.harness --fixtures tests/fixtures/traces"


@pytest.mark.parametrize("log", TRACE_LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_trace_report(tmp_path, report_of, log):
    report, out = report_of(log)
    counts = report.stats.counts
    assert {k: v for k, v in counts.items() if k.startswith("fail_") or k in ("other_rank", "unknown")} == {
        k: 0 for k in counts if k.startswith("fail_") or k in ("other_rank", "unknown")
    }
    records = list(envelopes(log))
    kinds_by_id: dict[str, set[str]] = {}
    for env in records:
        if "str" in env:
            continue
        kinds_by_id.setdefault(display(env), set()).update(k for k in env if k not in CONTEXT)
    assert report.stats["ok"] == sum(1 for env in records if "str" not in env)
    directory = read_json(out / "compile_directory.json")
    assert set(directory) == set(kinds_by_id)
    # every record kind is visible, under its kind name, on the page of its compile id (an id reused
    # after reset() has a page per compile: the kinds are on one of them)
    for key in report.directory:
        page = "".join((out / report.page_url(key, g)).read_text() for g in report.generations_of(key))
        for kind in kinds_by_id[str(key)]:
            assert f">{kind}</span>" in page, (key, kind)
    assert broken_links(out) == []
