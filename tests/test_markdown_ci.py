"""`--markdown FILE` in CI: appended as `>>` does (a job summary keeps what earlier steps wrote), and
user files named relative to `--source-root` or to the run's common folder, never by the runner's
absolute paths. On real harness traces (tests/fixtures/traces)."""

from __future__ import annotations

import json
import posixpath
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tlparse_py.analysis.stacks import inside_folder, is_user_code, split_location, user_folder
from tlparse_py.cli import main

TRACES = Path(__file__).resolve().parent / "fixtures" / "traces"
REPORT_HEAD = "### torch.compile report: "
DIFF_HEAD = "### torch.compile diff: "
# A program for `tlparse-py run` that "traces" by writing a real harness trace where TORCH_TRACE says
# Its records name the replaying process's pid, as a real program's do: `run` waits while a process the
# trace names runs, and the harness's old pid may be a live process of this machine now.
REPLAY = """
import gzip, os, re
with gzip.open({log!r}) as source, open(os.path.join(os.environ["TORCH_TRACE"], "dedicated_log_torch_trace_replay.log"), "wb") as f:
    f.write(re.sub(rb"(?m)^([A-Z]\\d{{4}} [0-9:.]+ +)\\d+ ", lambda m: m.group(1) + b"%d " % os.getpid(), source.read()))
"""


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def report(tmp_path: Path, scenario: str, *args, out: str = "out"):
    result = run(TRACES / scenario, "-o", tmp_path / out, "--no-browser", *args)
    assert result.exit_code == 0, result.output
    return tmp_path / out


def diff(tmp_path: Path, *args, out: str = "diff"):
    result = run("diff", TRACES / "gb_base", TRACES / "gb_extra", "-o", tmp_path / out, "--no-browser", *args)
    assert result.exit_code == 0, result.output


def plain(markdown: str) -> str:
    """Markdown as it reads: the escapes `report.markdown.text` adds (`graph\\_break.py`) removed."""
    return markdown.replace("\\", "")


# -- appended, as `>>` does --------------------------------------------------------------------------


@pytest.mark.parametrize("earlier", ["## Job", "## Job\n", "## Job\n\n", "## Job\n\n\n"])
def test_report_markdown_keeps_what_the_file_held_and_parts_it_by_a_blank_line(tmp_path, earlier):
    """`echo "## Job" >> $GITHUB_STEP_SUMMARY`, then `--markdown $GITHUB_STEP_SUMMARY`: the header stays."""
    summary = tmp_path / "step_summary.md"
    summary.write_text(earlier)
    report(tmp_path, "graph_break", "--markdown", summary)
    text = summary.read_text(encoding="utf-8")
    kept = earlier if earlier.endswith("\n\n") else earlier.rstrip("\n") + "\n\n"
    assert text.startswith(kept + REPORT_HEAD)


def test_report_markdown_twice_keeps_both_summaries(tmp_path):
    """Two steps of one job (say two programs) each add their summary to the same file."""
    summary = tmp_path / "step_summary.md"
    report(tmp_path, "graph_break", "--markdown", summary, out="one")
    first = summary.read_text(encoding="utf-8")
    report(tmp_path, "recompile", "--markdown", summary, out="two")
    text = summary.read_text(encoding="utf-8")
    assert text.startswith(first + "\n" + REPORT_HEAD)
    assert text.count(REPORT_HEAD) == 2 and "](two/index.html)" in text and "](one/index.html)" in text


def test_diff_markdown_keeps_what_the_file_held(tmp_path):
    summary = tmp_path / "step_summary.md"
    summary.write_text("## Job\n")
    diff(tmp_path, "--markdown", summary)
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## Job\n\n" + DIFF_HEAD) and "New graph breaks (1)" in text


def test_report_then_diff_in_one_step_summary(tmp_path):
    """The README's workflow: the report's summary, then the diff's, in one job summary."""
    summary = tmp_path / "step_summary.md"
    summary.write_text("## Job\n")
    report(tmp_path, "gb_extra", "--markdown", summary)
    diff(tmp_path, "--markdown", summary)
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## Job\n\n" + REPORT_HEAD)
    assert text.index(REPORT_HEAD) < text.index("\n\n" + DIFF_HEAD)


def test_run_markdown_appends_too(tmp_path):
    """`tlparse-py run ... --markdown $GITHUB_STEP_SUMMARY` (the README's workflow) keeps the step's header."""
    (log,) = (TRACES / "graph_break").glob("*.log.gz")
    program = tmp_path / "program.py"
    program.write_text(REPLAY.format(log=str(log)))
    summary = tmp_path / "step_summary.md"
    summary.write_text("## Job\n")
    done = subprocess.run([sys.executable, "-m", "tlparse_py", "run", "-o", "out", "--no-browser", "--markdown", str(summary), "--",
                           sys.executable, str(program)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## Job\n\n" + REPORT_HEAD) and "| graph\\_break.py:23 |" in text


def test_markdown_file_is_created_when_missing(tmp_path):
    report_md, diff_md = tmp_path / "report.md", tmp_path / "ci" / "diff.md"  # diff makes its folder
    out = report(tmp_path, "graph_break", "--markdown", report_md)
    diff(tmp_path, "--markdown", diff_md)
    assert report_md.read_text(encoding="utf-8").startswith(REPORT_HEAD)
    assert diff_md.read_text(encoding="utf-8").startswith(DIFF_HEAD)
    # the report's own summary.md is the report's: written afresh, never appended to
    assert (out / "summary.md").read_text(encoding="utf-8").startswith(REPORT_HEAD)


# -- user files relative, never the runner's absolute paths ------------------------------------------


def user_files(out: Path) -> set[str]:
    """The absolute user-code file names the report's summary.json holds (as logged by the harness)."""
    compiles = json.loads((out / "summary.json").read_text(encoding="utf-8"))["compiles"]
    locations = [c["user_location"] for c in compiles] + [b["user_location"] for c in compiles for b in c["graph_breaks"]]
    files = {site[0] for location in locations if (site := split_location(location)) and is_user_code(site[0])}
    assert files and all(f.startswith("/") for f in files), files
    return files


def test_markdown_names_user_files_relative_to_their_common_folder(tmp_path):
    markdown = tmp_path / "step_summary.md"
    out = report(tmp_path, "graph_break", "--markdown", markdown)
    (file,) = user_files(out)  # graph_break.py, in the harness's scenario folder
    for text in (plain(markdown.read_text(encoding="utf-8")), plain((out / "summary.md").read_text(encoding="utf-8"))):
        assert posixpath.dirname(file) not in text
        assert f"| {posixpath.basename(file)}:23 |" in text and f"| {posixpath.basename(file)}:25 |" in text


def test_markdown_names_user_files_relative_to_source_root(tmp_path):
    probe = report(tmp_path, "graph_break", out="probe")
    (file,) = user_files(probe)
    root = posixpath.dirname(posixpath.dirname(file))  # one folder above the file's
    markdown = tmp_path / "step_summary.md"
    report(tmp_path, "graph_break", "--markdown", markdown, "--source-root", root)
    text = plain(markdown.read_text(encoding="utf-8"))
    assert f"| {posixpath.relpath(file, root)}:23 |" in text and root + "/" not in text


def test_a_user_file_outside_source_root_is_named_relative_to_the_common_folder(tmp_path):
    markdown = tmp_path / "step_summary.md"
    out = report(tmp_path, "graph_break", "--markdown", markdown, "--source-root", "/nowhere/else")
    (file,) = user_files(out)
    text = plain(markdown.read_text(encoding="utf-8"))
    assert f"| {posixpath.basename(file)}:23 |" in text and posixpath.dirname(file) not in text


def test_a_run_in_another_checkout_is_named_the_same_way(tmp_path):
    """edit_newbreak ran in another folder (the harness's branch checkout): its file reads the same."""
    out = report(tmp_path, "edit_newbreak")
    (file,) = user_files(out)
    text = plain((out / "summary.md").read_text(encoding="utf-8"))
    assert posixpath.dirname(file) not in text and f"| {posixpath.basename(file)}:" in text


def test_the_common_folder_of_user_files():
    """Several folders share their parent; torch and library files are not the user's; relative names
    name no folder of the runner, so absolute ones decide when both are logged."""
    assert user_folder(["/runner/work/repo/models/a.py", "/runner/work/repo/train.py", "/usr/lib/python3.11/x.py"]) == "/runner/work/repo"
    assert user_folder(["/runner/work/repo/a.py", "b.py", "/venv/site-packages/torch/nn/m.py"]) == "/runner/work/repo"
    assert user_folder(["C:\\work\\repo\\a.py", "C:\\work\\repo\\sub\\b.py"]) == "C:/work/repo"
    assert user_folder(["<eval_with_key>.3", "/venv/site-packages/x.py"]) == ""
    assert inside_folder("/runner/work/repo/models/a.py", "/runner/work/repo") == "models/a.py"
    assert inside_folder("/runner/work/repository/a.py", "/runner/work/repo") is None  # a prefix of the name, not a folder
    assert inside_folder("/a.py", "/") == "a.py" and inside_folder("/a.py", "") is None
