"""The README's examples are complete: its CI workflow parses, uses commands and flags that exist, and runs as written."""

from __future__ import annotations

import importlib.util
import os
import re
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
    assert [s["name"] for s in steps] == ["Report of this branch (fails on graph breaks or slow compiles)", "Report of the base branch", "What changed"]
    workspace = checkout_of_a_pull_request(tmp_path)
    env = {**os.environ, "GITHUB_WORKSPACE": str(workspace), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    results = {}
    for step in steps:
        summary = tmp_path / f"summary-{len(results)}.md"
        env["GITHUB_STEP_SUMMARY"] = str(summary)
        command = step["run"].replace("${{ github.base_ref }}", "main")
        done = subprocess.run(["bash", "-e", "-c", command], cwd=workspace, env=env, capture_output=True, text=True, timeout=600)
        results[step["name"]] = (done, summary)
    branch, branch_md = results["Report of this branch (fails on graph breaks or slow compiles)"]
    assert branch.returncode == 3, branch.stderr  # the pull request's graph break fails the job, as the README says
    assert "--fail-on graph_breaks>0: graph_breaks is 1" in branch.stderr
    assert (workspace / "tl_out" / "index.html").is_file() and (workspace / "tl_out" / "trace").is_dir()
    assert "Gate failed" in branch_md.read_text()
    base, _ = results["Report of the base branch"]
    assert base.returncode == 0, base.stderr
    assert read_json(workspace / "tl_base" / "summary.json")["totals"]["graph_breaks"] == 0
    changed, changed_md = results["What changed"]
    assert changed.returncode == 3, changed.stderr
    assert "new graph break" in changed.stderr and "train.py" in changed.stderr
    diff = read_json(workspace / "tl_diff" / "diff.json")
    assert diff["metrics"]["new_graph_breaks"] == 1 and diff["metrics"]["new_recompiles"] == 0
    assert "New graph breaks (1)" in changed_md.read_text()
