"""Hostile input on the newer surfaces (issue 26): log text that reaches a CI system.

A log can hold any text in a failure type, a graph-break reason or a frame name. Printed on a
terminal it must never start a line of its own (a CI system reads `::error ...` at the start of a
line); written into Markdown it must never make HTML, an image, a link or a mention. The Markdown is
rendered with GitHub's own parser (cmark-gfm, its autolink extension on) to check.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from urllib.parse import urlparse

import cmarkgfm
import pytest
from click.testing import CliRunner

from logs import metrics, start, write_log
from tlparse_py.cli import main

FORGED = "Boom\n::error title=forged::owned\n::add-mask::x"
LINKY = ("see http://evil.example/p <img src=http://evil.example/pixel.png> ![i](http://evil.example/i.png) "
         "[click](http://evil.example/l) <http://evil.example/a> @octocat www.evil.example me@evil.example")


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def logs(tmp_path: Path) -> tuple[Path, Path]:
    base = write_log(tmp_path / "base.log", [start(0, 0), metrics(0, 0, 0)])
    new = write_log(tmp_path / "new.log", [start(0, 0, fn="f\n::error::fn"), metrics(0, 0, 0, fail_type=FORGED, fail_reason=LINKY)])
    return base, new


def no_forged_line(output: str) -> None:
    assert not [line for line in output.splitlines() if line.startswith("::")], output


def test_log_text_never_starts_a_line_on_the_terminal(tmp_path, logs):
    base, new = logs
    result = run(new, "-o", tmp_path / "report", "--no-browser", "--fail-on", "failed>0")
    assert result.exit_code == 3 and "Boom\\x0a::error" in result.stderr
    no_forged_line(result.stdout + result.stderr)
    result = run("diff", base, new, "-o", tmp_path / "diff", "--no-browser", "--fail-on", "new_failures>0")
    assert result.exit_code == 3 and "Boom\\x0a::error" in result.stderr
    no_forged_line(result.stdout + result.stderr)


def rendered(markdown: Path) -> str:
    return cmarkgfm.github_flavored_markdown_to_html(markdown.read_text())


def assert_inert(html: str) -> None:
    """No image or HTML made from the log, every link one of ours, no live mention or address."""
    assert "<img" not in html
    links = re.findall(r'<a href="([^"]*)"', html)
    assert all("evil" not in href for href in links), links
    assert "@octocat" not in html and "me@evil" not in html  # a zero-width space follows each "@"


def test_log_text_makes_no_markup_link_or_mention_in_markdown(tmp_path, logs):
    base, new = logs
    result = run(new, "-o", tmp_path / "report", "--no-browser", "--markdown", tmp_path / "report.md", "--fail-on", "failed>0")
    assert result.exit_code == 3, result.output
    for markdown in (tmp_path / "report.md", tmp_path / "report" / "summary.md"):
        assert_inert(rendered(markdown))
    assert "Boom ::error title=forged::owned" in rendered(tmp_path / "report.md")  # the gate line, on one line
    result = run("diff", base, new, "-o", tmp_path / "diff", "--no-browser", "--markdown", tmp_path / "diff.md")
    assert result.exit_code == 0, result.output
    html = rendered(tmp_path / "diff.md")
    assert_inert(html)
    assert "Boom ::error title=forged::owned" in html  # one line, as it reads


# -- output files never replace an input, and never write through a link --------------------------


@pytest.mark.parametrize("option", ["--markdown", "--single-file"])
def test_an_output_file_naming_the_input_is_refused_before_anything_is_written(tmp_path, logs, option):
    _, new = logs
    before = new.read_bytes()
    result = run(new, "-o", tmp_path / "out", "--no-browser", option, new)
    assert result.exit_code == 2 and "is the input log" in result.stderr
    assert new.read_bytes() == before and not (tmp_path / "out").exists()
    result = run(tmp_path, "-o", tmp_path / "report", "--no-browser")  # -o into the trace folder
    assert result.exit_code == 2 and "-o" in result.stderr and "inside the input folder" in result.stderr
    assert not (tmp_path / "report").exists()
    result = run(tmp_path, "-o", tmp_path.parent / f"{tmp_path.name}-out", "--no-browser", option, tmp_path / "summary.x")
    assert result.exit_code == 2 and "inside the input folder" in result.stderr
    assert not (tmp_path / "summary.x").exists()


def test_markdown_replaces_a_symlink_instead_of_writing_through_it(tmp_path, logs):
    _, new = logs
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    link = tmp_path / "out.md"
    link.symlink_to(target)
    result = run(new, "-o", tmp_path / "out", "--no-browser", "--markdown", link)
    assert result.exit_code == 0, result.output
    assert target.read_text() == "keep me"
    assert not link.is_symlink() and link.read_text().startswith("### torch.compile report")


@pytest.mark.parametrize("option", ["--max-raw-log-mb", "--max-line-mb", "--max-gunzip-ratio", "--highlight-mb", "--inline-mb"])
@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
def test_sizes_must_be_finite_numbers(tmp_path, logs, option, value):
    _, new = logs
    result = run(new, "-o", tmp_path / "out", "--no-browser", option, value)
    assert result.exit_code == 2 and option in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["inf", "nan"])
def test_pack_budget_must_be_a_finite_number(tmp_path, logs, value):
    _, new = logs
    assert run(new, "-o", tmp_path / "out", "--no-browser").exit_code == 0
    result = run("pack", tmp_path / "out", tmp_path / "one.html", "--budget-mb", value)
    assert result.exit_code == 2 and "--budget-mb" in result.stderr and not (tmp_path / "one.html").exists()


def test_a_logged_path_with_dotdot_never_links_outside_the_repository(tmp_path):
    log = write_log(tmp_path / "dots.log", [start(0, 0, filename="/repo/../../attacker/evil/x.py"), metrics(0, 0, 0),
                                            start(1, 0, filename="../../attacker/evil/y.py"), metrics(1, 0, 0)])
    url = "https://github.com/me/repo/blob/main/{path}#L{line}"
    for extra in ([], ["--source-root", "/repo"]):
        out = tmp_path / f"out{len(extra)}"
        result = run(log, "-o", out, "--no-browser", "--source-url", url, *extra, "--markdown", tmp_path / f"r{len(extra)}.md")
        assert result.exit_code == 0, result.output
        pages = [p.read_text() for p in out.rglob("*.html")] + [(tmp_path / f"r{len(extra)}.md").read_text()]
        assert any("attacker/evil" in page for page in pages)  # the location is still shown
        links = [href for page in pages for href in re.findall(r'href="(https://github\.com[^"]*)"|\]\((https://github\.com[^)]*)\)', page)]
        resolved = [posixpath.normpath(urlparse(a or b).path) for a, b in links]
        assert all(path.startswith("/me/repo/blob/main/") for path in resolved), resolved
        assert bool(resolved) == (not extra)  # with the root, both paths lie outside it: no link at all


def test_pack_never_embeds_a_file_from_outside_the_report(tmp_path, logs):
    _, new = logs
    out = tmp_path / "out"
    assert run(new, "-o", out, "--no-browser").exit_code == 0
    secret = tmp_path / "secret.html"
    secret.write_text("<html><body><main><p>SECRET-OUTSIDE</p></main></body></html>")
    (out / "index.html").unlink()
    (out / "index.html").symlink_to(secret)
    result = run("pack", out, tmp_path / "one.html")
    assert "Traceback" not in result.output
    packed = tmp_path / "one.html"
    assert not packed.exists() or "SECRET-OUTSIDE" not in packed.read_text()
