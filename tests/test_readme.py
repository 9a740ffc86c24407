"""The README's examples are complete: its CI workflow parses, uses commands and flags that exist, and runs as written."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from conftest import read_json
from tlparse_py.cli import main

README = Path(__file__).resolve().parents[1] / "README.md"


def yaml_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", README.read_text(), re.S)


def test_the_ci_workflow_parses_and_runs_every_step_it_needs():
    (block,) = yaml_blocks()
    workflow = yaml.safe_load(block)
    steps = workflow["jobs"]["tlparse"]["steps"]
    commands = " ".join(step.get("run", "") for step in steps)
    assert "tlparse-py run" in commands and "--fail-on" in commands and '--markdown "$GITHUB_STEP_SUMMARY"' in commands
    assert "tlparse-py diff" in commands
    assert any(step.get("uses", "").startswith("actions/upload-artifact") for step in steps)


def test_the_ci_workflow_installs_tlparse_py_from_its_own_checkout():
    """tlparse-py is not on PyPI: `pip install tlparse-py` would find nothing. The job installs the
    folder a checkout step put it in."""
    (block,) = yaml_blocks()
    steps = yaml.safe_load(block)["jobs"]["tlparse"]["steps"]
    checkouts = [s["with"]["path"] for s in steps if s.get("uses", "").startswith("actions/checkout") and "repository" in s.get("with", {})]
    (install,) = [s["run"] for s in steps if s.get("run", "").startswith("pip install")]
    assert len(checkouts) == 1 and f"pip install ./{checkouts[0]} " in install
    assert not any(re.fullmatch(r"tlparse-py([\[=<>~!].*)?", arg) for arg in shlex.split(install)), "a name PyPI does not hold"


def test_each_run_of_the_ci_workflow_has_a_cold_inductor_cache_and_no_absolute_gate():
    """The base run follows the pull request's on one runner: with a shared Inductor cache it would
    reuse what that run stored, and its compile times would not compare. An absolute gate on the
    pull request's own report fails every pull request once the base carries an accepted break:
    only the diff gates."""
    (block,) = yaml_blocks()
    runs = [s["run"] for s in yaml.safe_load(block)["jobs"]["tlparse"]["steps"] if "tlparse-py run" in s.get("run", "")]
    assert len(runs) == 2
    for run in runs:
        assert 'TORCHINDUCTOR_CACHE_DIR="$(mktemp -d)" tlparse-py run' in run
        assert "--fail-on" not in run


def test_the_workflow_uses_only_options_the_commands_have():
    (block,) = yaml_blocks()
    for command in ("run", "diff"):
        assert command in main.list_commands(None)
        help_text = CliRunner().invoke(main, [command, "--help"]).output
        for call in re.findall(rf"tlparse-py {command}\b(.*?)(?:-- |$)", block.replace("\n", " "), re.S):
            for flag in re.findall(r"(--[a-z-]+)", call):
                assert flag in help_text, (command, flag)


# -- the "Use in CI" workflow, run as written ---------------------------------------------------------

# The program the workflow runs: a small model, compiled; the pull request adds a print to its
# forward (a graph break) and nothing else. `--steps N` as the workflow passes it.
TRAIN = '''import argparse

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = self.linear(x).relu()
        return y.sum()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1)
    steps = parser.parse_args().steps
    model = torch.compile(Model(), backend="aot_eager")
    for _ in range(steps):
        model(torch.randn(4, 8)).backward()


if __name__ == "__main__":
    main()
'''
GRAPH_BREAK = "        y = self.linear(x).relu()\n"
WHAT_CHANGED = "What changed (fails on new graph breaks, new failures or slower compiles)"


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", "-c", "user.name=ci", "-c", "user.email=ci@example.com", *args], cwd=cwd, check=True, capture_output=True)


def checkout_of_a_pull_request(tmp_path: Path) -> Path:
    """GitHub's checkout of a pull request: `origin/main` is the base, the working tree adds a graph break."""
    origin = tmp_path / "origin.git"
    git("init", "-q", "--bare", "-b", "main", str(origin), cwd=tmp_path)
    workspace = tmp_path / "workspace"
    git("clone", "-q", str(origin), str(workspace), cwd=tmp_path)
    (workspace / "train.py").write_text(TRAIN)
    (workspace / "requirements.txt").write_text("")
    git("add", ".", cwd=workspace)
    git("commit", "-q", "-m", "base", cwd=workspace)
    git("push", "-q", "origin", "HEAD:main", cwd=workspace)
    git("checkout", "-q", "-b", "pull-request", cwd=workspace)
    (workspace / "train.py").write_text(TRAIN.replace(GRAPH_BREAK, GRAPH_BREAK + '        print("step")  # the pull request\'s change\n'))
    git("commit", "-q", "-am", "a print in forward", cwd=workspace)
    return workspace


@pytest.mark.torch
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_the_ci_workflow_runs_as_the_readme_shows(tmp_path):
    """Every tlparse-py step of the README's workflow, taken from the README verbatim, run in a checkout of a
    pull request that adds a graph break: each exit code and file the README promises. (`actions/*` steps
    are GitHub's; the pip step installs what this test environment already has.)"""
    (block,) = yaml_blocks()
    steps = [s for s in yaml.safe_load(block)["jobs"]["tlparse"]["steps"] if re.search(r"tlparse-py (run|diff)\b", s.get("run", ""))]
    assert [s["name"] for s in steps] == ["Report of this branch", "Report of the base branch", WHAT_CHANGED]
    workspace = checkout_of_a_pull_request(tmp_path)
    temp = tmp_path / "runner-temp"  # where `mktemp -d` makes each run's Inductor cache
    temp.mkdir()
    env = {**os.environ, "GITHUB_WORKSPACE": str(workspace), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "TMPDIR": str(temp)}
    results = {}
    for step in steps:
        summary = tmp_path / f"summary-{len(results)}.md"
        env["GITHUB_STEP_SUMMARY"] = str(summary)
        command = step["run"].replace("${{ github.base_ref }}", "main")
        done = subprocess.run(["bash", "-e", "-c", command], cwd=workspace, env=env, capture_output=True, text=True, timeout=600)
        results[step["name"]] = (done, summary)
    branch, branch_md = results["Report of this branch"]
    assert branch.returncode == 0, branch.stderr  # no absolute gate: the diff says what is worse
    assert read_json(workspace / "tl_out" / "summary.json")["totals"]["graph_breaks"] == 1
    assert (workspace / "tl_out" / "index.html").is_file() and (workspace / "tl_out" / "trace").is_dir()
    header, report_md = branch_md.read_text().split("\n\n", 1)  # --markdown appended below the step's own header
    assert header == "## Compile report" and report_md.startswith("### torch.compile report")
    assert "Gate failed" not in report_md and "train.py:" in report_md and str(workspace) not in report_md
    base, _ = results["Report of the base branch"]
    assert base.returncode == 0, base.stderr
    assert read_json(workspace / "tl_base" / "summary.json")["totals"]["graph_breaks"] == 0
    assert len([p for p in temp.glob("tmp.*") if p.is_dir()]) == 2, "mktemp -d: a fresh Inductor cache folder per run"
    changed, changed_md = results[WHAT_CHANGED]
    assert changed.returncode == 3, changed.stderr
    assert "new graph break" in changed.stderr and "train.py" in changed.stderr
    diff = read_json(workspace / "tl_diff" / "diff.json")
    assert diff["metrics"]["new_graph_breaks"] == 1 and diff["metrics"]["new_recompiles"] == 0
    assert "New graph breaks (1)" in changed_md.read_text()
