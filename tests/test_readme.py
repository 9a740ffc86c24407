"""The README's examples are complete: its CI workflow parses, and uses commands and flags that exist."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from click.testing import CliRunner

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
