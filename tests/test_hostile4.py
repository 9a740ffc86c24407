"""Hostile input, round 4 (issue 34): inputs are never outputs (items 8 and 9), contradictory
`--pair`s (12), log text that GitHub would turn into links (13) and a `--report-url` that would
end a Markdown link early (14). Logs are written in the tests (tests/logs.py); Markdown is rendered
by GitHub's own parser, cmark-gfm (the `cmarkgfm` package), with its extensions."""

from __future__ import annotations

import html
import os
import re
import string
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import cmarkgfm
import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from logs import line, metrics, start, write_log
from tlparse_py.cli import main
from tlparse_py.report.markdown import ZERO_WIDTH_SPACE, code, destination, link, text

EXTENSIONS = ["autolink", "table", "strikethrough", "tagfilter"]


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def graph_break_log(path: Path, reason: str = "see _www.evil.example/phish", fn: str = "f") -> Path:
    payload = f"Graph break in user code at /u/prog.py:3\nGraph Break Reason: {reason}\n  Hint: see _www.evil.example/hint"
    artifact = line({"artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"}, "frame_id": 0, "frame_compile_id": 0,
                     "attempt": 0}, payload)
    return write_log(path, [start(0, 0, filename="/u/prog.py", fn=fn), artifact, metrics(0, 0, 0, co_name=fn)])


@pytest.fixture
def reports(tmp_path: Path) -> tuple[Path, Path, Path]:
    """BASE's log, BASE's report and NEW's report."""
    base = write_log(tmp_path / "base.log", [start(0, 0), metrics(0, 0, 0)])
    new = graph_break_log(tmp_path / "new.log")
    for log, out in ((base, "tl_base"), (new, "tl_new")):
        result = run(log, "-o", tmp_path / out, "--no-browser")
        assert result.exit_code == 0, result.output
    return base, tmp_path / "tl_base", tmp_path / "tl_new"


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file under `path` (or `path` itself) with its bytes."""
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def refused(result, *words: str) -> None:
    """Exit 2 and one line saying why."""
    assert result.exit_code == 2, result.output
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and all(w in lines[0] for w in words), result.stderr


# -- 8, 9: inputs are never outputs ----------------------------------------------------------------


def test_diff_refuses_an_output_folder_that_is_an_input_report(tmp_path, reports):
    """`diff tl_base tl_new -o tl_base --overwrite` replaced the BASE report with the diff."""
    _, tl_base, tl_new = reports
    before = snapshot(tl_base)
    for out in (tl_base, tl_new, tl_new / ".." / "tl_base"):
        result = run("diff", tl_base, tl_new, "-o", out, "--overwrite", "--no-browser")
        refused(result, "-o", "nothing was written")
    assert snapshot(tl_base) == before
    link = tmp_path / "link"
    link.symlink_to(tl_base)
    refused(run("diff", link, tl_new, "-o", tl_base, "--overwrite", "--no-browser"), "-o")
    assert snapshot(tl_base) == before


def test_diff_refuses_an_output_folder_holding_an_input(tmp_path, reports):
    """A log inside -o: replacing -o would take the log with it."""
    base, tl_base, tl_new = reports
    inside = tl_base / "base.log"
    inside.write_bytes(base.read_bytes())
    before = snapshot(tl_base)
    refused(run("diff", inside, tl_new, "-o", tl_base, "--overwrite", "--no-browser"), "-o", "holds")
    assert snapshot(tl_base) == before


def test_diff_markdown_never_writes_over_or_into_an_input(tmp_path, reports):
    """`diff base.log tl_new --markdown base.log` appended the summary to BASE's log; naming NEW's
    summary.json appended it there."""
    base, _, tl_new = reports
    hard = tmp_path / "hard.md"
    os.link(base, hard)
    soft = tmp_path / "soft.md"
    soft.symlink_to(base)
    before = snapshot(base), snapshot(tl_new)
    for target in (base, tl_new / ".." / "base.log", hard, soft, tl_new / "summary.json", tl_new / "summary.md",
                   tl_new / "new.md"):
        result = run("diff", base, tl_new, "-o", tmp_path / "d", "--markdown", target, "--no-browser")
        refused(result, "--markdown", "nothing was written")
        assert not (tmp_path / "d").exists()
    # NEW named by its summary.json: its report folder is NEW's too
    result = run("diff", base, tl_new / "summary.json", "-o", tmp_path / "d", "--markdown", tl_new / "index.html", "--no-browser")
    refused(result, "--markdown", "NEW report folder")
    assert (snapshot(base), snapshot(tl_new)) == before
    result = run("diff", base, tl_new, "-o", tmp_path / "d", "--markdown", tmp_path / "ok.md", "--no-browser")
    assert result.exit_code == 0 and (tmp_path / "ok.md").is_file()


def test_report_refuses_an_output_folder_holding_its_input(tmp_path, reports):
    """Rebuilding a report from the trace kept inside it (`run`'s `trace/`) would replace the trace."""
    base, tl_base, _ = reports
    trace = tl_base / "trace"
    trace.mkdir()
    (trace / base.name).write_bytes(base.read_bytes())
    before = snapshot(tl_base)
    refused(run(trace, "-o", tl_base, "--overwrite", "--no-browser"), "-o", "holds the input folder")
    refused(run(trace / base.name, "-o", tl_base, "--overwrite", "--no-browser"), "-o", "holds the input log")
    assert snapshot(tl_base) == before


def test_single_file_never_lands_in_the_report_it_packs(tmp_path, reports):
    base, _, tl_new = reports
    before = snapshot(tl_new)
    refused(run(base, "-o", tl_new, "--overwrite", "--no-browser", "--single-file", tl_new / "index.html"), "--single-file")
    assert snapshot(tl_new) == before


def test_pack_never_writes_into_the_report_folder(tmp_path, reports):
    """`pack tl_new tl_new/index.html` replaced the report's own index with the packed file."""
    _, _, tl_new = reports
    before = snapshot(tl_new)
    for target in (tl_new / "index.html", tl_new / "packed.html", tl_new / ".." / "tl_new" / "summary.json"):
        refused(run("pack", tl_new, target), "FILE.html", "report folder")
    assert snapshot(tl_new) == before
    assert run("pack", tl_new, tmp_path / "packed.html").exit_code == 0


def test_watch_refuses_an_output_folder_holding_its_input(tmp_path, reports):
    base, tl_base, _ = reports
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()  # the writer has exited: an old watch would finish at once, over the folder
    log = tl_base / "trace.log"
    log.write_text(base.read_text().replace(" 4242 ", f" {dead.pid} "))
    before = snapshot(tl_base)
    # in a process of its own with a time limit: a watch that is not refused may wait on its log
    result = subprocess.run([sys.executable, "-m", "tlparse_py", "watch", str(log), "-o", str(tl_base), "--overwrite", "--no-browser",
                             "--quiet-s", "0", "--interval", "0.05"], capture_output=True, text=True, timeout=120)
    result.exit_code = result.returncode  # type: ignore[attr-defined]
    result.output = result.stderr  # type: ignore[attr-defined]
    refused(result, "-o", "holds the input log")
    assert snapshot(tl_base) == before


# -- 12: --pair ------------------------------------------------------------------------------------


@pytest.mark.parametrize("pairs, named", [
    (["a.py=b.py", "a.py=c.py"], ["a.py=b.py", "a.py=c.py"]),  # one BASE file, two NEW files
    (["a.py=c.py", "b.py=c.py"], ["a.py=c.py", "b.py=c.py"]),  # two BASE files, one NEW file
])
def test_contradictory_pairs_are_refused_naming_both(tmp_path, reports, pairs, named):
    base, _, tl_new = reports
    args = [a for p in pairs for a in ("--pair", p)]
    result = run("diff", base, tl_new, "-o", tmp_path / "d", "--no-browser", *args)
    assert result.exit_code == 2 and all(f"--pair {p}" in result.stderr for p in named), result.output
    assert not (tmp_path / "d").exists()


def test_file_map_refuses_contradictory_pairs_too():
    from tlparse_py.analysis.pairing import PairingError, file_map

    with pytest.raises(PairingError, match=r"--pair a\.py=b\.py and --pair a\.py=c\.py"):
        file_map(["a.py"], ["b.py", "c.py"], [("a.py", "b.py"), ("a.py", "c.py")])
    assert file_map(["a.py"], ["b.py"], [("a.py", "b.py"), ("a.py", "b.py")]) == {"a.py": "b.py"}  # the same pair twice


# -- 13: text that becomes links -------------------------------------------------------------------


def render(markdown: str) -> str:
    return cmarkgfm.markdown_to_html_with_extensions(markdown, extensions=EXTENSIONS)


class _Visible(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def visible(rendered: str) -> str:
    """The text a reader sees: tags dropped, entities resolved, zero-width spaces removed."""
    parser = _Visible()
    parser.feed(rendered)
    parser.close()
    return " ".join("".join(parser.parts).replace(ZERO_WIDTH_SPACE, "").split())


# Every GFM autolink (www., http(s)://, ftp://, mailto:, xmpp:, e-mail addresses) and what GitHub
# links on top of them (@mentions, user@sha, issue references).
TRIGGERS = ["www.evil.example/phish", "WWW.evil.example", "http://evil.example/p", "HTTPS://evil.example", "ftp://evil.example/f",
            "mailto:me@evil.example", "xmpp:me@evil.example/res", "me@evil.example", "a.b-c_d+e@evil.example", "@octocat",
            "octocat@a5c3785", "#12", "owner/repo#12", "GH-12"]
# Where log text goes in our Markdown: a paragraph, a list item, a table cell, a link's text, a quote
CONTEXTS = ["{}", "see {}", "- {}", "1. {}", "| a |\n|---|\n| {} |", "[{}](https://ok.example/)", "> {}"]


def assert_shown_as_text(value: str, escaper=text) -> None:
    want = " ".join(value.split())
    for context in CONTEXTS:
        if escaper is code and "|" in context:
            continue  # a code span is never put in a table cell (`code`'s docstring)
        markdown = context.format(escaper(value, 1000))
        rendered = render(markdown)
        assert rendered.count("<a ") == context.count("](https://ok.example/)"), (markdown, rendered)
        expected = " ".join(visible(render(context.format("QQQ"))).replace("QQQ", want).split())
        assert visible(rendered) == expected, (markdown, rendered)


@pytest.mark.parametrize("trigger", TRIGGERS)
def test_no_autolink_after_any_punctuation(trigger):
    """`_www.evil.example` was linked: the zero-width space went in only at `\\bwww`. Each trigger
    after each ASCII punctuation character (which GFM may allow before a link), at the start, after
    a word and doubled, in every context, through `text` and `code`."""
    for p in ["", " ", *string.punctuation]:
        for value in (f"{p}{trigger}", f"x{p}{trigger}{p}", f"{p}{p}{trigger}", f"see {p}{trigger} and {p}{trigger}"):
            assert_shown_as_text(value)
            assert_shown_as_text(value, code)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(TRIGGERS), st.sampled_from(list(string.punctuation)), st.text(string.ascii_letters, max_size=4),
                          st.sampled_from([" ", "`", "``", "\\", "1.", "- ", "é", "|"])), max_size=12))
@example([']', ':'])  # a code span as a link's text made a link reference definition (`[`]:`](url)`)
def test_fuzzed_text_reads_as_written_and_links_nothing(parts):
    value = "".join(parts)
    assert_shown_as_text(value)
    assert_shown_as_text(value, code)


def test_a_logged_reason_makes_no_link_in_summary_md_or_the_diff(tmp_path, reports):
    base, tl_base, tl_new = reports
    summary = (tl_new / "summary.md").read_text(encoding="utf-8")
    assert "see" in summary and "evil" in summary  # the reason is shown
    rendered = render(summary)
    assert "evil" not in "".join(re.findall(r'href="([^"]*)"', rendered)), rendered
    assert "see _www.evil.example/phish" in visible(rendered)
    result = run("diff", tl_base, tl_new, "-o", tmp_path / "d", "--markdown", tmp_path / "d.md", "--no-browser")
    assert result.exit_code == 0, result.output
    rendered = render((tmp_path / "d.md").read_text(encoding="utf-8"))
    assert "evil" in rendered and "evil" not in "".join(re.findall(r'href="([^"]*)"', rendered)), rendered


# -- 14: --report-url in Markdown ------------------------------------------------------------------


def hrefs(markdown: str) -> list[str]:
    return [html.unescape(h) for h in re.findall(r'<a href="([^"]*)"', render(markdown))]


@pytest.mark.parametrize("url, href", [
    ("https://ci.example/runs/fix-1)|2", "https://ci.example/runs/fix-1%29%7C2"),
    ("https://ci.example/a(b)/c`d{e}^f", "https://ci.example/a%28b%29/c%60d%7Be%7D%5Ef"),
    ("https://ci.example/x&copy;y&amp;z", "https://ci.example/x&copy;y&amp;z"),  # no entity is read
    ("https://ci.example/%41/50%/é", "https://ci.example/%41/50%25/%C3%A9"),
    ("https://ci.example/a*b!c$d;e=f,g+h~i@j:k", "https://ci.example/a*b!c$d;e=f,g+h~i@j:k"),
])
def test_a_report_url_is_linked_as_given_in_a_paragraph_and_a_table(url, href):
    for context in ("see {}", "| a |\n|---|\n| {} |"):
        assert hrefs(context.format(link("report", "index.html#x", url + "/"))) == [href + "/index.html#x"]
        assert hrefs(context.format(f"[diff]({destination(url + '/index.html')})")) == [href + "/index.html"]


def test_report_url_reaches_every_markdown_link_whole(tmp_path, reports):
    """`--report-url 'https://ci.example/runs/fix-1)|2'` made every link point to .../fix-1."""
    base, tl_base, tl_new = reports
    url, want = "https://ci.example/runs/fix-1)|2", "https://ci.example/runs/fix-1%29%7C2/"
    result = run(graph_break_log(tmp_path / "gb.log"), "-o", tmp_path / "r", "--no-browser", "--markdown", tmp_path / "r.md", "--report-url", url)
    assert result.exit_code == 0, result.output
    found = hrefs((tmp_path / "r.md").read_text(encoding="utf-8"))
    assert len(found) >= 3 and all(h.startswith(want) for h in found), found
    result = run("diff", tl_base, tl_new, "-o", tmp_path / "d", "--markdown", tmp_path / "d.md", "--no-browser", "--report-url", url)
    assert result.exit_code == 0, result.output
    found = hrefs((tmp_path / "d.md").read_text(encoding="utf-8"))
    assert found and all(h.startswith(want + "index.html") for h in found), found


def test_diff_markdown_links_a_folder_with_markdown_in_its_name(tmp_path, reports):
    """Without --report-url the link is a relative path: a folder `d (1)|x` is linked whole."""
    _, tl_base, tl_new = reports
    result = run("diff", tl_base, tl_new, "-o", tmp_path / "d (1)|x", "--markdown", tmp_path / "d.md", "--no-browser")
    assert result.exit_code == 0, result.output
    found = hrefs((tmp_path / "d.md").read_text(encoding="utf-8"))
    assert found and all(h.startswith("d%20%281%29%7Cx/index.html") for h in found), found


@pytest.mark.parametrize("url", ["http://[::1]:8000/r", "http://[::1", "https://ci.example/r?job=1", "https://ci.example/r#top",
                                 "https://ci.example\\evil.example/r", "https://ci.example/a b", "https://ci.example/\x01"])
def test_a_report_url_markdown_cannot_link_is_refused(tmp_path, reports, url):
    base, tl_base, tl_new = reports
    result = run(base, "-o", tmp_path / "r", "--no-browser", "--report-url", url)
    assert result.exit_code == 2 and "--report-url" in result.stderr and not (tmp_path / "r").exists(), result.output
    result = run("diff", tl_base, tl_new, "-o", tmp_path / "d", "--no-browser", "--report-url", url)
    assert result.exit_code == 2 and "--report-url" in result.stderr and not (tmp_path / "d").exists(), result.output
