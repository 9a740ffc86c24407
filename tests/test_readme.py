"""The README's examples are complete: its CI workflow parses, uses commands and flags that exist, and runs as written.

The README and the reference pages under docs/ are held to the same rules: every command they show
(in a code block or a code span) uses a command, an option, a script, a file, an extra and an
environment variable that exist, and every link to a local file or anchor resolves, relatively."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml
from click.testing import CliRunner

from conftest import read_json
from tlparse_py.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]  # the README and its reference pages


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



# -- README.md and docs/*.md: commands that exist, links that resolve ------------------------------------


class _Page(HTMLParser):
    """A Markdown document rendered as GitHub renders it: its links, its headings' text, its code texts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.headings: list[str] = []
        self.codes: list[str] = []
        self._heading: list[str] | None = None
        self._code: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag in ("a", "img") and (attributes.get("href") or attributes.get("src")) is not None:
            self.links.append(attributes.get("href") or attributes.get("src") or "")
        if re.fullmatch(r"h[1-6]", tag):
            self._heading = []
        if tag == "code":
            self._code = []

    def handle_endtag(self, tag):
        if re.fullmatch(r"h[1-6]", tag) and self._heading is not None:
            self.headings.append("".join(self._heading))
            self._heading = None
        if tag == "code" and self._code is not None:
            self.codes.append("".join(self._code))
            self._code = None

    def handle_data(self, data):
        for part in (self._heading, self._code):
            if part is not None:
                part.append(data)


def rendered(path: Path) -> _Page:
    import cmarkgfm

    page = _Page()
    page.feed(cmarkgfm.github_flavored_markdown_to_html(path.read_text(encoding="utf-8")))
    return page


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a document's headings: lower case, punctuation but `-` and `_` dropped,
    spaces as `-`; a repeated one numbered `-1`, `-2`, ..."""
    seen: dict[str, int] = {}
    out = set()
    for heading in rendered(path).headings:
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return out


def test_the_readme_links_every_page_under_docs():
    linked = {(README.parent / urlsplit(link).path).resolve() for link in rendered(README).links if not urlsplit(link).scheme}
    assert len(DOCUMENTS) > 1 and [p.name for p in DOCUMENTS[1:] if p.resolve() not in linked] == []


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_to_a_local_file_or_anchor_resolves(document):
    """Relative links only (the docs are read on GitHub, in a checkout and in an unpacked sdist alike):
    each names a file or folder of the repository, and each #anchor a heading of the document it names."""
    broken = []
    for link in rendered(document).links:
        parts = urlsplit(link)
        if parts.scheme in ("http", "https", "mailto"):
            continue
        if parts.scheme or parts.netloc or parts.path.startswith("/"):
            broken.append(f"{link} (not relative)")
            continue
        target = (document.parent / unquote(parts.path)).resolve() if parts.path else document
        if ROOT not in target.parents and target != ROOT or not target.exists():
            broken.append(f"{link} (no such file in the repository)")
        elif parts.fragment and (target.suffix != ".md" or unquote(parts.fragment) not in anchors(target)):
            broken.append(f"{link} (no such heading in {target.name})")
    assert broken == []


def shown_code(document: Path) -> list[str]:
    r"""Every code text of a document (blocks and spans), with a command continued over lines (a
    trailing `\`, or a line of options under it, as YAML's folded `run: >`) joined into one line."""
    texts = []
    for code in rendered(document).codes:
        code = re.sub(r"\\\n\s*", " ", code)
        texts.append(re.sub(r"\n\s*(?=--?[A-Za-z])", " ", code))
    return texts


def commands(text: str, program: str) -> list[str]:
    """What follows each call of `program` in a code text, up to the end of its line, `&&`, `;`,
    `|`, a shell comment, or ` -- ` (where `run`'s COMMAND starts)."""
    calls = []
    for match in re.finditer(rf"(?<![\w./\[-]){re.escape(program)}(?=\s|$)([^\n]*)", text):
        calls.append(re.split(r"\s(?:&&|\||;|#|--)(?:\s|$)|;", match.group(1) + " ")[0])
    return calls


def flags(arguments: str) -> list[str]:
    return re.findall(r"(?<![\w/.=-])(--?[A-Za-z][\w-]*)", arguments)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_tlparse_py_command_shown_has_the_options_it_uses(document):
    """`tlparse-py [COMMAND] ...` as the document shows it: the command exists (none: `report`) and
    has every option written after it (`run`'s up to its program: COMMAND's own are the program's)."""
    runner = CliRunner()
    helps = {name: runner.invoke(main, [name, "--help"], terminal_width=10_000).output for name in main.list_commands(None)}
    top = runner.invoke(main, ["--help"], terminal_width=10_000).output
    unknown = []
    for text in shown_code(document):
        for call in commands(text, "tlparse-py"):
            first = call.split()[0] if call.split() else ""
            command = first if first in helps else "report"
            if command == "run":  # COMMAND starts at the first word that is not an option of run's
                call = re.split(r"\s(?:python3?|torchrun|COMMAND)\b", call)[0]
            unknown += [f"tlparse-py {command} {flag}" for flag in flags(call) if flag not in helps[command] + top]
    assert unknown == []


REPOSITORY_FOLDERS = "(?:tests|benchmarks|tlparse_py|docs|examples|fuzz|tools|templates)"  # a path starting so is the repository's


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_script_file_extra_and_variable_shown_exists(document):
    """`python benchmarks/X.py --opt`, `python -m tlparse_py.harness --opt`: the script or module exists
    and declares each option; a path into the repository names a file or folder that exists; `.[extra]`
    is an extra of pyproject.toml; `$TLPARSE_...` is read by the code or the tests (or is the CI
    workflow's repository variable)."""
    import tomllib

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    sources = "\n".join(p.read_text(encoding="utf-8") for folder in ("tlparse_py", "tests") for p in (ROOT / folder).rglob("*.py"))
    codes = shown_code(document)
    missing = []
    for text in codes:
        for call in commands(text, "python") + commands(text, "python3"):
            script = re.match(r"\s*(?:-P\s+)?(?:-m\s+(tlparse_py[\w.]*)|([\w/.-]+\.py))(.*)", call)
            if script is None:
                continue
            module, path, arguments = script.groups()
            if path is not None and not re.match(REPOSITORY_FOLDERS + "/", path):
                continue  # the user's program (`train.py`), or beside the repository (../shared)
            where = ROOT / path if path else ROOT / Path(*module.split("."))
            files = [where] if where.suffix == ".py" else sorted(where.rglob("*.py"))
            if not files or not files[0].exists():
                missing.append(f"{path or module} (no such script or module)")
                continue
            declared = "\n".join(f.read_text(encoding="utf-8") for f in files)
            missing += [f"{path or module} {flag}" for flag in flags(arguments) if flag.startswith("--") and f'"{flag}"' not in declared]
        for path in re.findall(rf"(?<![\w./-])({REPOSITORY_FOLDERS}/[^\s`'\"(),;:\[\]]*)", text):
            if not re.search(r"[<>{}*…]", path) and not (ROOT / path.rstrip(".")).exists():
                missing.append(f"{path} (no such file)")
        missing += [f"[{extra}] (no such extra)" for extra in re.findall(r"(?:^|[\s'\"])(?:\.|tlparse-py)\[(\w+)\]", text) if extra not in extras]
    repository_variables = set(re.findall(r"vars\.(\w+)", "\n".join(codes)))
    for variable in set(re.findall(r"\b(TLPARSE_[A-Z_]+)\b", "\n".join(codes))) - repository_variables:
        if variable not in sources:
            missing.append(f"${variable} (read nowhere)")
    assert missing == []
