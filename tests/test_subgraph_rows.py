"""Files grouped by `subgraph_name` (upstream tlparse after 0.4.3): a record's envelope may name the
subgraph its files belong to; the analysis keeps it on each directory entry (`Artifact.subgraph`),
and the index's list of a compile id's files puts a row "Subgraph Name: <name>" before each group."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import SHARED
from logs import cid, line, metrics, start, write_log
from tlparse_py.model import Artifact
from tlparse_py.pipeline import write_report
from tlparse_py.report.views.common import artifact_view
from tlparse_py.report.views.sections import artifact_rows

SUBGRAPH_LOG = SHARED / "corpus" / "tlparse-upstream" / "subgraph_name.log"


class ArtifactLists(HTMLParser):
    """The items of every `<ul class="artifacts">` in a page, as text, by the id of the section holding it."""

    def __init__(self) -> None:
        super().__init__()
        self.lists: dict[str, list[str]] = {}
        self.section = ""
        self.depth = 0  # inside a <ul class="artifacts">
        self.item: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "section" and found.get("id"):
            self.section = found["id"] or ""
        if tag == "ul" and "artifacts" in (found.get("class") or "").split():
            self.depth = 1
            self.lists.setdefault(self.section, [])
        elif tag == "li" and self.depth:
            self.item = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "li" and self.item is not None:
            self.lists[self.section].append(" ".join("".join(self.item).split()))
            self.item = None
        elif tag == "ul" and self.depth:
            self.depth = 0

    def handle_data(self, data: str) -> None:
        if self.item is not None:
            self.item.append(data)


def artifact_lists(page: Path) -> dict[str, list[str]]:
    parser = ArtifactLists()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.lists


def test_rows_open_a_group_at_each_change_of_subgraph():
    names = [None, "a", "a", "b", "a", None, None, "b"]
    rows = artifact_rows([Artifact(url=f"x/f_{i}.txt", name=f"f_{i}.txt", number=i, subgraph=s) for i, s in enumerate(names)], artifact_view)
    assert [(r["opens_group"], r["subgraph"]) for r in rows] == [
        (False, None), (True, "a"), (False, "a"), (True, "b"), (True, "a"), (True, None), (False, None), (True, "b"),
    ]


@pytest.mark.skipif(not SUBGRAPH_LOG.is_file(), reason="../shared/corpus/tlparse-upstream/subgraph_name.log not present")
def test_upstream_subgraph_name_log(tmp_path):
    out = tmp_path / "report"
    analysis = write_report(SUBGRAPH_LOG, out)
    (key,) = analysis.directory
    assert str(key) == "[0/0]"
    entries = analysis.directory[key]
    assert [(a.url, a.subgraph) for a in entries] == [
        ("-_0_0_0/dynamo_output_graph_0.txt", None),
        ("-_0_0_0/fx_graph_runnable_1.txt", "repeated_subgraph0"),
        ("-_0_0_0/fx_graph_runnable_2.txt", "partitioned_bw_subgraph_1_0"),
    ]
    # the index, as upstream lists them: a row before each change of group
    assert artifact_lists(out / "index.html")["cid-" + key.dirname] == [
        "dynamo_output_graph_0.txt (0) · 1 line · 24 B",  # a graph file shows its size
        "Subgraph Name: repeated_subgraph0",
        "fx_graph_runnable_1.txt (1)",
        "Subgraph Name: partitioned_bw_subgraph_1_0",
        "fx_graph_runnable_2.txt (2)",
    ]
    # raw.jsonl keeps the envelope's subgraph_name; compile_directory.json keeps tlparse's schema
    records = [json.loads(text) for text in (out / "raw.jsonl").read_text().splitlines()[1:]]
    assert [r.get("subgraph_name") for r in records] == [None, "repeated_subgraph0", "partitioned_bw_subgraph_1_0"]
    directory = json.loads((out / "compile_directory.json").read_text())
    assert all(set(a) == {"name", "number", "readable_url", "suffix", "url"} for a in directory["[0/0]"]["artifacts"])


def _artifact(name: str, subgraph: str | None = None, **compile_id: int) -> str:
    meta = {"artifact": {"name": name, "encoding": "string"}, **cid(**compile_id)}
    if subgraph is not None:
        meta["subgraph_name"] = subgraph
    return line(meta, f"payload of {name}")


def test_several_changes_of_subgraph(tmp_path):
    """Same name again after another opens a new group; back outside any subgraph is said; the next
    compile id starts outside any subgraph; names are escaped."""
    log = write_log(tmp_path / "trace.log", [
        start(),
        _artifact("first"),
        _artifact("a_one", "sub_a"),
        _artifact("a_two", "sub_a"),
        _artifact("b_one", "<b>sub_b</b>"),
        _artifact("a_again", "sub_a"),
        _artifact("outside"),
        _artifact("b_again", "<b>sub_b</b>"),
        metrics(),
        start(frame=1),
        _artifact("next_compile", frame=1),
        _artifact("next_sub", "sub_a", frame=1),
    ])
    out = tmp_path / "report"
    analysis = write_report(log, out)
    lists = artifact_lists(out / "index.html")
    assert lists["cid-" + "-_0_0_0"] == [
        "first_0.txt (0)",
        "Subgraph Name: sub_a", "a_one_1.txt (1)", "a_two_2.txt (2)",
        "Subgraph Name: <b>sub_b</b>", "b_one_3.txt (3)",
        "Subgraph Name: sub_a", "a_again_4.txt (4)",
        "Outside any subgraph", "outside_5.txt (5)",
        "Subgraph Name: <b>sub_b</b>", "b_again_6.txt (6)",
        "Outside any subgraph", "compilation_metrics_7.html (7)",  # the metrics record names no subgraph
    ]
    assert lists["cid-" + "-_1_0_0"] == ["next_compile_8.txt (8)", "Subgraph Name: sub_a", "next_sub_9.txt (9)"]
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "Subgraph Name: &lt;b&gt;sub_b&lt;/b&gt;" in index and "<b>sub_b</b>" not in index
    # the metrics page lists its compile id's files the same way
    page = next((out / "-_0_0_0").glob("compilation_metrics_*.html"))
    assert artifact_lists(page)[""] == lists["cid--_0_0_0"]
    # a fact of the analysis, not of the page
    key = next(k for k in analysis.directory if k is not None and k.frame_id == 0)
    assert [a.subgraph for a in analysis.directory[key]] == [None, "sub_a", "sub_a", "<b>sub_b</b>", "sub_a", None, "<b>sub_b</b>", None]


def test_odd_subgraph_names(tmp_path):
    """An empty name is no subgraph; a name that is not a string is shown as text, never dropped."""
    log = write_log(tmp_path / "trace.log", [
        start(),
        _artifact("empty", ""),
        line({"artifact": {"name": "number", "encoding": "string"}, "subgraph_name": 3, **cid()}, "x"),
    ])
    analysis = write_report(log, tmp_path / "report")
    (entries,) = [v for k, v in analysis.directory.items() if k is not None]
    assert [a.subgraph for a in entries] == [None, "3"]
