"""The index, the failures page and the page put in place of one that could not be built are plain
Python (`report.html`), like every page of a single log's report. The index is written in pieces
(`render.render_pieces`, `FolderWriter.write_pieces`), from rows made as they are read
(`views.index.Rows`): at 10,000s of compiles it is 10s of MB, and neither it nor its rows are ever
held whole. The failures and error pages were templates: EXPECTED holds what those wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import TRACES
from logs import cid, line, metrics, start, write_log
from tlparse_py.pipeline import analyze_logs, write_report
from tlparse_py.report import folder_writer, render
from tlparse_py.report.folder_writer import FolderWriter
from tlparse_py.report.html import index_rows, shell
from tlparse_py.report.html.links import SourceLinks
from tlparse_py.report.jobs import ErrorPage
from tlparse_py.report.views import index as index_view
from tlparse_py.report.views.common import Inputs
from tlparse_py.report.views.index import FailuresPage, Rows, index_page

X = "<x&'\">"


def many_compiles(tmp_path: Path, count: int) -> Path:
    """A log of `count` frames compiled once each, every one with a start stack but the last."""
    lines = []
    for frame in range(count):
        if frame < count - 1:
            lines.append(start(frame=frame, fn=f"f{frame}", lineno=frame + 1))
        lines.append(metrics(frame=frame, co_name=f"f{frame}", entire_frame_compile_time_s=0.1 + frame))
    return write_log(tmp_path / "dedicated_log_torch_trace_x.log", lines)


def test_the_index_in_pieces_is_the_page(tmp_path):
    model = index_page(Inputs(analyze_logs([many_compiles(tmp_path, 30)])))
    assert isinstance(model.compile_rows, Rows) and isinstance(model.compiles, Rows) and isinstance(model.trie, Rows)
    assert len(model.compile_rows) == 30 and list(model.compile_rows) == list(model.compile_rows)  # made again when read again
    pieces = list(render.render_pieces(model))
    assert len(pieces) > 3 * 30  # the compiles table, "Files by compile id" and the trie a row at a time
    assert "".join(pieces) == render.render_page(model)
    assert pieces[0] == shell.page_head(model, None) and pieces[-1] == shell.page_foot(model)


def test_the_index_makes_each_row_as_it_writes_it(tmp_path, monkeypatch):
    """The compiles table's rows are made one at a time: when the page writes row k, k rows were made
    (and the rows of the compiles with no start stack, listed below the trie), never all of them."""
    model = index_page(Inputs(analyze_logs([many_compiles(tmp_path, 20)])))
    made: list[dict] = []
    written: list[int] = []
    make_row, write_row = index_view.compile_row, index_rows.compile_row
    monkeypatch.setattr(index_view, "compile_row", lambda c: made.append(make_row(c)) or made[-1])
    monkeypatch.setattr(index_rows, "compile_row", lambda r, index, *rest: written.append(len(made)) or write_row(r, index, *rest))
    html = "".join(render.render_pieces(model))
    assert written == list(range(1, 21))
    assert html.count("<tr><td data-sort-value=") == 20 and len(model.no_stack) == 1


def test_write_pieces_writes_the_text_a_chunk_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr(folder_writer, "WRITE_CHUNK", 10)
    writer = FolderWriter(tmp_path / "out")
    pieces = ["<p>", "é" * 7, "ü𝔸", "", "x" * 25, "</p>\n"]
    chunks: list[int] = []
    write_all = folder_writer.write_all
    monkeypatch.setattr(folder_writer, "write_all", lambda fd, data, path: chunks.append(len(data)) or write_all(fd, data, path))
    writer.write_pieces("sub/page.html", iter(pieces))
    data = "".join(pieces).encode()
    assert (tmp_path / "out" / "sub" / "page.html").read_bytes() == data
    assert writer.bytes_written == len(data) == sum(chunks) and len(chunks) == 3


def test_a_page_that_fails_half_written_leaves_no_file(tmp_path):
    writer = FolderWriter(tmp_path / "out")

    def pieces():
        yield "<p>begun"
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        writer.write_pieces("index.html", pieces())
    assert not (tmp_path / "out" / "index.html").exists()


def test_a_writer_with_its_own_write_gets_the_whole_text(tmp_path):
    """The live report's writer writes a page atomically, and not when unchanged: it gets the page whole."""
    written: list[tuple[str, bytes | str]] = []

    class Own(FolderWriter):
        def write(self, rel: str, data: bytes | str) -> None:
            written.append((rel, data))

    Own(tmp_path / "out").write_pieces("index.html", iter(["a", "b", "c"]))
    assert written == [("index.html", "abc")]


def test_a_report_writes_the_index_it_renders(tmp_path):
    log = next((TRACES / "graph_break").glob("dedicated_log*"))
    out = tmp_path / "out"
    write_report(log, out)
    analysis = analyze_logs([log])
    page = (out / "index.html").read_text()
    assert page.startswith("<!doctype html>") and page.endswith("</html>\n") and 'id="compiles-table"' in page
    assert page.count('<section class="compile"') == len(analysis.directory)


def page(**fields):
    base = dict(title="T" + X, root="../", source={"path": "/l/" + X}, source_links=SourceLinks("https://e.com/{path}#L{line}", "/data"))
    return {**base, **fields}


ROWS = [{"label": "[0/0]" + X, "url": "m/" + X, "page": "-_0_0_0/index.html", "type": "E" + X, "description": "line 1\nline 2" + X,
         "source": "/data/a.py:3", "status": "error"},
        {"label": "[1/0]", "url": None, "page": "p", "type": "R", "description": "", "source": None, "status": None}]
MODELS = {
    "failures": FailuresPage(**page(), rows=ROWS, words="1 restart" + X),
    "failures_none": FailuresPage(**page(), rows=[], words=""),
    "error": ErrorPage(**page(), what="w" + X, detail="ValueError: " + X),
}
EXPECTED = {
    'failures': '<h1>Failures and restarts</h1>\n<p>Every restart and every exception a compile logged, in log order (1 restart&lt;x&amp;&#39;&#34;&gt;). The outcome says what became of the compile: a frame torch skipped, or one over the recompile limit, ran eagerly and is no failure.</p>\n<div class="scroll"><table>\n<thead><tr><th>Compile id</th><th>Outcome</th><th>Failure type</th><th>Failure description</th><th>Failure source (compilation failures only)</th></tr></thead>\n<tbody>\n<tr>\n<td><a href="-_0_0_0/index.html">[0/0]&lt;x&amp;&#39;&#34;&gt;</a> · <a href="m/&lt;x&amp;&#39;&#34;&gt;">metrics</a></td>\n<td><span class="status status-error">Error</span></td>\n<td><code>E&lt;x&amp;&#39;&#34;&gt;</code></td>\n<td><pre>line 1\nline 2&lt;x&amp;&#39;&#34;&gt;</pre></td>\n<td><code><a class="source" href="https://e.com/a.py#L3" rel="noopener noreferrer">/data/a.py:3</a></code></td>\n</tr>\n<tr>\n<td><a href="p">[1/0]</a></td>\n<td></td>\n<td><code>R</code></td>\n<td><pre></pre></td>\n<td><span class="muted">not available for restarts</span></td>\n</tr>\n</tbody>\n</table></div>\n',  # noqa: E501
    'failures_none': '<h1>Failures and restarts</h1>\n<p>No restarts and no compilation failures were logged.</p>\n',
    'error': '<h1>T&lt;x&amp;&#39;&#34;&gt;</h1>\n<div class="warning"><p>This page could not be built from the log: <code>ValueError: &lt;x&amp;&#39;&#34;&gt;</code>.</p>\n<p>The records behind it are in <a href="../raw.jsonl">raw.jsonl</a>; please report the problem with the log that caused it.</p></div>\n',  # noqa: E501
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_failures_and_error_pages_write_what_their_templates_wrote(name):
    model = MODELS[name]
    html = render.render_page(model)
    head, foot = shell.page_head(model, None), shell.page_foot(model)
    assert html.startswith(head) and html.endswith(foot)
    assert html[len(head):-len(foot)] == EXPECTED[name]


def test_a_single_log_report_writes_its_failed_pages_without_templates(tmp_path, monkeypatch):
    """A page that cannot be built is replaced by the error page, which is Python too."""
    from tlparse_py import pipeline

    used: list[str] = []
    monkeypatch.setattr(render, "render", lambda template, context: used.append(template))

    def broken(*args, **kwargs):
        raise ValueError("boom " + X)

    monkeypatch.setattr(pipeline, "compile_page", broken)
    out = tmp_path / "out"
    write_report(write_log(tmp_path / "dedicated_log_torch_trace_x.log", [start(), line({"dynamo_output_graph": {}, **cid()}, "g")]), out)
    assert "This page could not be built from the log: <code>ValueError: boom &lt;x&amp;&#39;&#34;&gt;</code>" in (out / "-_0_0_0" / "index.html").read_text()
    assert used == []
