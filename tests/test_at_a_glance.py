"""At a glance (issue 49): each graph's size beside its link (pytorch#134301), the torch version and
commit that wrote the trace, and a record kind logged hundreds of times under one compile id
summarised on the index by a row linking its own list, not hundreds of links (pytorch#192090).

Expectations are read from the raw log by this file's own small reader (a glog header, its JSON
envelope, the TAB lines after it), never through the tool's reading."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import TRACES
from linkcheck import broken_links
from logs import cid, line, metrics, start, write_log

from tlparse_py import limits
from tlparse_py.pipeline import write_report
from tlparse_py.report.html.parts import byte_size

HEADER = re.compile(rb"^[VIWEC]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [^:\]]+:\d+\] (\{.*)$")
# a listed file: its link, a cache mark perhaps, then `(number)` and, for a graph or code, its size
LISTED = re.compile(r'<li><a href="([^"]+)">([^<]*)</a>(?: <span class="cache[^"]*">[^<]*</span>)? '
                    r'<span class="number">\((\d+)\)(?: · ([^<]*))?</span></li>')
# the files that are graphs or generated code, by the names torch gives them
GRAPH_FILE = re.compile(r"^(dynamo_output_graph|aot_(forward|backward|inference|joint)_graph|inductor_post_grad_graph)_\d+\.txt$"
                        r"|^inductor_output_code_\w+_\d+\.html$")
SCENARIOS = ("graph_break", "training", "recompile")


def raw_records(log: Path) -> list[tuple[dict, bytes | None]]:
    """(envelope, payload bytes or None) of every record of the log, in log order."""
    data = log.read_bytes()
    lines = (gzip.decompress(data) if log.suffix == ".gz" else data).split(b"\n")
    found = []
    for at, text in enumerate(lines):
        header = HEADER.match(text)
        if header is None:
            continue
        envelope = json.loads(header[1])
        end = at + 1
        while end < len(lines) and lines[end].startswith(b"\t"):
            end += 1
        payload = b"\n".join(part[1:] for part in lines[at + 1:end]) if "has_payload" in envelope else None
        if payload is not None:
            assert hashlib.md5(payload).hexdigest() == envelope["has_payload"]  # this reader reads what torch wrote
        found.append((envelope, payload))
    return found


def lines_of(text: bytes) -> int:
    """Lines as an editor shows them: one per newline, and a last one when the text does not end with one."""
    return len(text.split(b"\n")) - (1 if text.endswith(b"\n") else 0) if text else 0


def size_words(text: bytes) -> str:
    count = lines_of(text)
    return f"{count:,} {'line' if count == 1 else 'lines'} · {byte_size(len(text))}" if text else "empty"


def listed_files(html: str) -> list[tuple[str, str, int, str | None]]:
    """(url as linked, name, number, size words or None) of every file a page lists."""
    return [(url, name, int(number), size or None) for url, name, number, size in LISTED.findall(html)]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    made = {}
    for scenario in SCENARIOS:
        log = next((TRACES / scenario).glob("dedicated_log*"))
        out = tmp_path_factory.mktemp(scenario) / "report"
        made[scenario] = (log, out, write_report(log, out))
    return made


def expected_text(out: Path, url: str, records: list[tuple[dict, bytes | None]]) -> bytes:
    """The logged text behind a listed graph or code file, found in the raw log: a .txt file holds
    a payload (the log's record with its md5); an output-code page is named after the file torch wrote."""
    if url.endswith(".txt"):
        held = (out / url).read_bytes()
        logged = {envelope["has_payload"]: payload for envelope, payload in records if payload is not None}
        assert hashlib.md5(held).hexdigest() in logged, url
        return logged[hashlib.md5(held).hexdigest()]
    matches = [payload for envelope, payload in records if payload is not None and "inductor_output_code" in envelope
               and Path(envelope["inductor_output_code"]["filename"]).stem in url]
    assert len(matches) == 1, url
    return matches[0]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_graph_shows_the_lines_and_bytes_torch_logged(reports, scenario):
    log, out, analysis = reports[scenario]
    records = raw_records(log)
    index = listed_files((out / "index.html").read_text(encoding="utf-8"))
    pages = [f for page in out.glob("*/index.html") for f in listed_files(page.read_text(encoding="utf-8"))]
    graphs = [f for f in index if GRAPH_FILE.match(f[1])]
    assert len(graphs) >= 5
    for url, name, number, size in graphs:
        text = expected_text(out, url, records)
        assert size == size_words(text), (url, size)
        assert analysis.file_sizes.of(number) == (lines_of(text), len(text))  # the fact both lists show, exact
    # the compile pages list the same files with the same sizes (links there are relative to their folder)
    assert {(url.removeprefix("../"), size) for url, _, _, size in pages} == {(url, size) for url, _, _, size in index}
    # a size is shown beside graphs and code only, not beside metrics pages, configs or links
    assert all(size is None for _, name, _, size in index if not GRAPH_FILE.match(name) and "graph" not in name)


def test_the_index_names_the_torch_version_and_commit_the_log_names(reports):
    for log, out, analysis in reports.values():
        (build,) = [json.loads(payload or b"") for envelope, payload in raw_records(log)
                    if envelope.get("artifact", {}).get("name") == "torch_version"]
        summary = json.loads((out / "summary.json").read_text())
        assert summary["run"]["torch_version"] == build["pytorch_version"] == analysis.torch_version
        assert summary["run"]["torch_commit"] == build["commit"] == analysis.torch_commit
        run = re.search(r'<p class="muted run" id="run">(.*?)</p>', (out / "index.html").read_text(encoding="utf-8"))[1]
        assert run.startswith(f"torch <code>{build['pytorch_version']}</code> (commit <code>{build['commit']}</code>) · ")


def test_a_log_without_a_torch_version_record_names_no_commit(tmp_path):
    bare = write_log(tmp_path / "dedicated_log_torch_trace_bare.log", [start(), metrics()])
    named = write_log(tmp_path / "dedicated_log_torch_trace_named.log", [start(), metrics(pytorch_version="2.9.0")])
    for log, version in ((bare, None), (named, "2.9.0")):
        out = tmp_path / log.stem
        write_report(log, out)
        run = json.loads((out / "summary.json").read_text())["run"]
        assert run["torch_version"] == version and run["torch_commit"] is None
        words = re.search(r'id="run">(.*?)</p>', (out / "index.html").read_text(encoding="utf-8"))[1]
        assert "commit" not in words and "<code></code>" not in words
        assert words.startswith("torch version not logged · " if version is None else f"torch <code>{version}</code> · ")


LOOPED = 1000  # one kind logged this many times under one compile id
GRAPH = 'class GraphModule(torch.nn.Module):\n    def forward(self, L_x_: "f32[8]"):\n        return (L_x_ * 2,)\n'


def looped_log(path: Path) -> Path:
    graph = GRAPH
    things = [line({"artifact": {"name": "thing", "encoding": "string"}, **cid(0, 0, 0)}, f"payload {i}") for i in range(LOOPED)]
    return write_log(path, [start(), line({"dynamo_output_graph": {"sizes": {}}, **cid(0, 0, 0)}, graph), *things, metrics()])


@pytest.fixture(scope="module")
def looped(tmp_path_factory):
    folder = tmp_path_factory.mktemp("looped")
    out = folder / "report"
    write_report(looped_log(folder / "dedicated_log_torch_trace_looped.log"), out)
    return out


def part(html: str, anchor: str, end: str) -> str:
    """The page from the element of id `anchor` to the first `end` after it."""
    begin = html.index(f'id="{anchor}"')
    return html[begin:html.index(end, begin)]


def test_a_kind_logged_a_thousand_times_is_one_row_on_the_index(looped):
    index = (looped / "index.html").read_text(encoding="utf-8")
    files = part(index, "cid--_0_0_0", "</section>")
    things = [f for f in listed_files(files) if f[1].startswith("thing_")]
    assert len(things) == limits.INDEX_FILES_PER_KIND < LOOPED
    assert [f[2] for f in things] == sorted(f[2] for f in things)  # the first of them, in their order
    row = re.search(r'<tr><td><span class="kind"[^>]*>artifact</span></td><td class="num">([\d,]+)</td><td class="num">([\d,]+)</td>'
                    r'<td><a href="([^"]+)">all ([\d,]+) on the compile page</a></td></tr>', files)
    assert row is not None
    assert row.groups() == (f"{LOOPED:,}", f"{LOOPED:,}", "-_0_0_0/index.html#files-kind-1", f"{LOOPED:,}")
    # the graph beside them is listed, with its size, and the index stays small
    (graph,) = [f for f in listed_files(files) if f[1].startswith("dynamo_output_graph")]
    assert graph[3] == f"3 lines · {len(GRAPH.encode())} B"
    assert index.count('href="-_0_0_0/thing_') == limits.INDEX_FILES_PER_KIND


def test_the_row_links_a_list_of_every_file_of_the_kind(looped):
    assert broken_links(looped) == []  # the row's link and its anchor resolve, as every other link
    page = (looped / "-_0_0_0" / "index.html").read_text(encoding="utf-8")
    listed = listed_files(part(page, "files-kind-1", "</details>"))
    assert len(listed) == LOOPED and all(name.startswith("thing_") for _, name, _, _ in listed)
    assert all((looped / "-_0_0_0" / url).is_file() for url, _, _, _ in listed)
    rest = page[page.index('id="files"'):page.index('id="files-kind-1"')]
    assert not any(name.startswith("thing_") for _, name, _, _ in listed_files(rest))  # listed once, in their own list
    assert any(name.startswith("dynamo_output_graph") for _, name, _, _ in listed_files(rest))


def test_a_compile_id_below_the_bound_gets_no_row(reports):
    for _, out, _ in reports.values():
        assert "files-kind-" not in (out / "index.html").read_text(encoding="utf-8")


@pytest.mark.parametrize(("count", "words"), [(0, "0 B"), (999, "999 B"), (1000, "1.0 KB"), (9949, "9.9 KB"), (9950, "10 KB"),
                                              (999_499, "999 KB"), (999_500, "1.0 MB"), (12_345_678, "12 MB")])
def test_bytes_are_written_in_three_figures_at_most(count, words):
    assert byte_size(count) == words


def test_the_pages_render_in_chromium(looped, reports):
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed")
    errors: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.on("console", lambda m: m.type in ("error", "warning") and errors.append(m.text))
        page.on("pageerror", lambda e: errors.append(str(e)))
        for path in (looped / "index.html", reports["graph_break"][1] / "index.html", reports["graph_break"][1] / "-_0_0_1" / "index.html"):
            page.goto(path.as_uri())
            page.wait_for_load_state("load")
        page.goto((looped / "index.html").as_uri())
        page.click('a[href="-_0_0_0/index.html#files-kind-1"]')
        page.wait_for_load_state("load")
        # the list the row links is shown (its section opened), with every file of the kind
        assert page.evaluate("document.getElementById('files-kind-1').closest('#files').open") is True
        assert page.locator("#files-kind-1 li").count() == LOOPED
        browser.close()
    assert errors == []
