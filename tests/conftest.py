from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tlparse_py.build import Options, write_report

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
TRACES = FIXTURES / "traces"
SHARED = Path(os.environ.get("TLPARSE_SHARED", HERE.parent.parent / "shared"))


def read_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture
def report_of(tmp_path):
    """report_of(log, **options) → (report model, output folder)."""
    counter = iter(range(1000))

    def run(log: Path, **options):
        out = tmp_path / f"out{next(counter)}"
        report = write_report(log, out, options=Options(**options))
        return report, out

    return run
