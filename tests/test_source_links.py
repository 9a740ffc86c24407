"""--source-url / --source-root: user-code locations link into the user's repository; torch's never do."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import TRACES
from linkcheck import broken_links
from tlparse_py.cli import main
from tlparse_py.pipeline import Options, write_report
from tlparse_py.report.render import SourceLinks, check_source_url, source_link

URL = "https://github.com/org/repo/blob/abc123/{path}#L{line}"
LOG = next((TRACES / "graph_break").glob("dedicated_log*"))


class _Anchors(HTMLParser):
    """(href, rel, class, text) of every <a>, and the text of every element with class `within`."""

    def __init__(self, within: str = "") -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[dict[str, str]] = []
        self.within = within
        self.depth = 0
        self.current: dict[str, str] | None = None

    def handle_starttag(self, tag, attrs):
        attributes = {k: v or "" for k, v in attrs}
        if self.within and self.within in attributes.get("class", "").split():
            self.depth = 1
        elif self.depth:
            self.depth += 1
        if tag == "a" and (not self.within or self.depth):
            self.current = {"href": attributes.get("href", ""), "rel": attributes.get("rel", ""), "class": attributes.get("class", ""), "text": ""}
            self.links.append(self.current)

    def handle_endtag(self, tag):
        if self.depth:
            self.depth -= 1
        if tag == "a":
            self.current = None

    def handle_data(self, data):
        if self.current is not None:
            self.current["text"] += data


def anchors(page: Path, within: str = "") -> list[dict[str, str]]:
    parser = _Anchors(within)
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.links


def source_anchors(page: Path, within: str = "") -> list[dict[str, str]]:
    return [a for a in anchors(page, within) if "source" in a["class"].split()]


@pytest.fixture(scope="module")
def linked(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("links") / "out"
    write_report(LOG, out, options=Options(source_url=URL, source_root="/work"))
    return out


def test_stack_trie_frames_link_to_the_repository(linked):
    trie = source_anchors(linked / "index.html", within="trie")
    assert trie, "the stack trie has user frames"
    for a in trie:
        path, line = re.fullmatch(r"/work/(.+):(\d+)", a["text"]).groups()
        assert a["href"] == f"https://github.com/org/repo/blob/abc123/{path}#L{line}"
        assert a["rel"] == "noopener noreferrer"
    assert any(a["href"].endswith("/scenarios/graph_break.py#L46") for a in trie)


def test_graph_breaks_link_to_the_user_line(linked):
    index = source_anchors(linked / "index.html")
    assert "https://github.com/org/repo/blob/abc123/scenarios/graph_break.py#L23" in {a["href"] for a in index}
    html = (linked / "index.html").read_text()
    row = html[html.index('id="graph-breaks"'):html.index('id="recompiles"')]
    assert 'class="source" href="https://github.com/org/repo/blob/abc123/scenarios/graph_break.py#L23"' in row
    compile_pages = [p for p in linked.glob("*/index.html") if "Graph breaks (" in p.read_text()]
    assert any(
        a["text"] == "/work/scenarios/graph_break.py:23" for page in compile_pages for a in source_anchors(page)
    ), "compile pages link their graph breaks' user lines"


def test_torch_frames_are_never_linked(linked):
    html = (linked / "index.html").read_text()
    assert "/site-packages/torch/_dynamo/eval_frame.py:" in html
    for page in [linked / "index.html", *linked.glob("*/index.html")]:
        for a in source_anchors(page):
            assert "/torch/" not in a["text"] and "site-packages" not in a["text"], a


def test_links_are_safe_and_the_report_still_checks(linked):
    for page in linked.rglob("*.html"):
        for a in source_anchors(page):
            assert a["href"].startswith("https://github.com/org/repo/blob/abc123/") and a["rel"] == "noopener noreferrer"
    assert broken_links(linked) == []


def test_without_the_flags_nothing_links_out_and_source_lines_show(tmp_path):
    out = tmp_path / "out"
    write_report(LOG, out)
    html = (out / "index.html").read_text()
    assert 'class="source"' not in html
    assert '<span class="loc">torch.testing.assert_close(compiled(x), fn(x))</span>' in html  # the line's text from the log
    assert "<code>/work/scenarios/graph_break.py:23</code>" in html


def test_failure_sources_link(tmp_path):
    out = tmp_path / "out"
    write_report(next((TRACES / "failure").glob("dedicated_log*")), out, options=Options(source_url=URL, source_root="/work"))
    failures = source_anchors(out / "failures_and_restarts.html")
    assert [a["href"] for a in failures] == ["https://github.com/org/repo/blob/abc123/scenarios/failure.py#L40"]
    assert "N/A:0" in (out / "failures_and_restarts.html").read_text()  # no location: no link


def test_source_links_rules():
    links = SourceLinks("https://h/r/{path}?plain=1#L{line}", "/home/me/proj/")
    assert links.href("/home/me/proj/src/a b.py", 7) == "https://h/r/src/a%20b.py?plain=1#L7"
    assert links.href("/elsewhere/x.py", 3) is None  # outside the root
    assert links.href("pkg/mod.py", 3) == "https://h/r/pkg/mod.py?plain=1#L3"  # relative: already a repository path
    for library in ("/home/me/proj/.venv/lib/python3.12/site-packages/x/y.py", "/usr/lib/python3.12/runpy.py",
                    "/home/me/proj/torch/_dynamo/eval_frame.py", "<eval_with_key>.3", "(unknown)"):
        assert links.href(library, 3) is None, library
    assert links.href("/home/me/proj/a.py", 0) is None
    assert links.href_of("/home/me/proj/a.py:12") == "https://h/r/a.py?plain=1#L12"
    assert links.href_of("not a location") is None
    assert SourceLinks().href("/home/me/proj/a.py", 1) is None
    assert SourceLinks("https://h/{path}").href("/x/a.py", 1) == "https://h/x/a.py"  # no root, no {line}
    assert str(source_link("/home/me/proj/<b>.py:1", links)) == (
        '<a class="source" href="https://h/r/%3Cb%3E.py?plain=1#L1" rel="noopener noreferrer">/home/me/proj/&lt;b&gt;.py:1</a>'
    )
    assert str(source_link("<b>:x", links)) == "&lt;b&gt;:x"
    assert check_source_url(URL) is None
    assert check_source_url("https://h/blob/main") and check_source_url("javascript:alert('{path}')")


@pytest.mark.parametrize("url", ["https://github.com/org/repo/blob/abc123/#L{line}", "javascript:alert({path})", "file:///{path}"])
def test_a_bad_source_url_is_a_usage_error(tmp_path, url):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [str(LOG), "-o", str(out), "--no-browser", "--source-url", url])
    assert result.exit_code == 2, result.output
    assert "--source-url" in result.output
    assert not out.exists()


def test_the_cli_flags_reach_the_report(tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [str(LOG), "-o", str(out), "--no-browser", "--source-url", URL, "--source-root", "/work/"])
    assert result.exit_code == 0, result.output
    assert any(a["href"].endswith("/scenarios/graph_break.py#L46") for a in source_anchors(out / "index.html", within="trie"))


# -- one warning line when the links cannot be what the user meant ---------------------------------

def warnings_of(tmp_path: Path, *args: str) -> list[str]:
    result = CliRunner().invoke(main, [str(LOG), "-o", str(tmp_path / "out"), "--overwrite", "--no-browser", *args])
    assert result.exit_code == 0, result.output
    return [line for line in result.stderr.splitlines() if line.startswith("warning:")]


def test_a_source_root_that_matches_no_path_says_so_once(tmp_path):
    [line] = warnings_of(tmp_path, "--source-url", URL, "--source-root", "/home/ci/repo")
    assert "--source-root /home/ci/repo is not a prefix of any user file" in line and "/work/scenarios/graph_break.py" in line


def test_absolute_machine_paths_without_a_source_root_say_so_once(tmp_path):
    [line] = warnings_of(tmp_path, "--source-url", URL)
    assert "absolute paths of the machine that ran the program" in line and "--source-root" in line


def test_a_source_root_that_matches_warns_nothing(tmp_path):
    assert warnings_of(tmp_path, "--source-url", URL, "--source-root", "/work") == []
    assert warnings_of(tmp_path) == []  # no links asked for: nothing to warn about


def test_the_report_command_prints_one_line_of_totals(tmp_path):
    result = CliRunner().invoke(main, [str(LOG), "-o", str(tmp_path / "out"), "--no-browser"])
    [line] = [line for line in result.stderr.splitlines() if line.startswith("Report: ")]
    import json

    totals = json.loads((tmp_path / "out" / "summary.json").read_text())["totals"]
    for words in (f"compiles {totals['compiles']}", f"graph breaks {totals['graph_breaks']}", f"recompiles {totals['recompiles']}",
                  f"failed {totals['failed']}", "compile time ", str(tmp_path / "out" / "index.html")):
        assert words in line, words
