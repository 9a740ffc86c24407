"""The compile harness: its command line, and (marker `torch`) a live run reported end to end."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tlparse_py.harness import cli as harness_cli
from tlparse_py.harness.registry import SCENARIO_DIR, SCENARIOS

HAS_TORCH = importlib.util.find_spec("torch") is not None


def test_list_names_every_scenario():
    """`--list` names each declared scenario once, and every program in the scenarios folder is a
    declared scenario or a program a declared one runs (by its file name): none is forgotten."""
    proc = subprocess.run([sys.executable, "-m", "tlparse_py.harness", "--list"], capture_output=True, text=True)
    assert proc.returncode == 0
    listed = [row.split()[0] for row in proc.stdout.splitlines() if row.strip()]
    assert sorted(listed) == sorted(s.name for s in SCENARIOS)
    assert all(s.script.is_file() for s in SCENARIOS)
    declared = {s.script.name for s in SCENARIOS}
    scripts = " ".join(s.script.read_text() for s in SCENARIOS)
    for program in SCENARIO_DIR.glob("*.py"):
        if program.name != "__init__.py" and program.name not in declared:
            assert program.name in scripts, f"{program.name} is neither a scenario nor run by one"


def test_missing_torch_is_said_clearly(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(harness_cli.importlib.util, "find_spec", lambda name: None)
    assert harness_cli.main(["--out", str(tmp_path), "inference"]) == 2
    assert "pip install" in capsys.readouterr().err


def test_the_report_never_imports_torch():
    code = "import sys, tlparse_py.cli, tlparse_py.pipeline, tlparse_py.harness.cli; print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == "False"


@pytest.mark.torch
@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (pip install torch==2.13.0)")
def test_live_inference_scenario_reports_cleanly(tmp_path, report_of):
    proc = subprocess.run(
        [sys.executable, "-m", "tlparse_py.harness", "--out", str(tmp_path / "traces"), "--device", "cpu", "inference"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    logs = sorted((tmp_path / "traces" / "inference").glob("*.log"))
    assert len(logs) == 1
    report, out = report_of(logs[0])
    assert report.stats.strict_failures() == 0 and report.stats["unknown"] == 0
    assert "[0/0]" in {str(k) for k in report.directory}
    names = [a.name for artifacts in report.directory.values() for a in artifacts]
    assert any(n.startswith("inductor_output_code_") and n.endswith(".html") for n in names)
    assert report.status_of(next(k for k in report.directory if str(k) == "[0/0]")) == "ok"
