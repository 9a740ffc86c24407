"""One door: every view says what the analysis says.

The headline numbers of every fixture are read back from each place a reader or a CI job meets
them (the index page, summary.md, summary.json) and from `analyze()`, and must be equal; a
compile id reused after `torch._dynamo.reset()` is one compile per generation on its page and in
summary.json alike; pages are built from view models whose facts are the analysis' own.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import TRACES
from logs import cid, line, metrics, start, write_log
import tlparse_py
from tlparse_py.analysis.compile_groups import graph_break_groups
from tlparse_py.analysis.summary_load import load_summary
from tlparse_py.analysis.totals import TOTALS, columns, nested, totals_of, value_at
from tlparse_py.units import format_seconds
from tlparse_py.pipeline import write_report
from tlparse_py.report.views.common import Inputs
from tlparse_py.report.views.compile import page_refs
from tlparse_py.report.views.index import index_page, singular

FIXTURE_LOGS = sorted(p for p in TRACES.rglob("dedicated_log_torch_trace*") if p.is_file())


class _Headline(HTMLParser):
    """The index's headline cards: `<ul class="cards"><li>... <span class="n">N</span><span class="t">WORDS</span></li>`."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[tuple[str, str]] = []
        self._in_list = False
        self._field: str | None = None
        self._number = ""
        self._words = ""

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if tag == "ul" and "cards" in classes:
            self._in_list = True
        elif self._in_list and tag == "span" and ("n" in classes or "t" in classes):
            self._field = "n" if "n" in classes else "t"

    def handle_endtag(self, tag):
        if tag == "span":
            self._field = None
        elif tag == "li" and self._in_list:
            self.items.append((self._number.strip(), " ".join(self._words.split())))
            self._number = self._words = ""
        elif tag == "ul":
            self._in_list = False

    def handle_data(self, data):
        if self._field == "n":
            self._number += data
        elif self._field == "t":
            self._words += data


def index_headline(page: str) -> dict[str, str]:
    parser = _Headline()
    parser.feed(page)
    return {words: number for number, words in parser.items}


def markdown_totals(text: str) -> dict[str, str]:
    """The totals table of summary.md: column heading → cell."""
    rows = [row for row in text.splitlines() if row.startswith("|")]
    head = [cell.strip() for cell in rows[0].strip("|").split("|")]
    cells = [cell.strip() for cell in rows[2].strip("|").split("|")]
    return dict(zip(head, cells, strict=True))


@pytest.mark.parametrize("log", FIXTURE_LOGS, ids=lambda p: f"{p.parent.name}/{p.name[-16:]}")
def test_headline_numbers_agree_everywhere(tmp_path, log):
    out = tmp_path / "out"
    write_report(log, out)
    summary_json = json.loads((out / "summary.json").read_text())
    totals = summary_json["totals"]
    # the analysis, read again through the public API, and summary.json loaded back as typed objects
    assert tlparse_py.analyze(log).to_dict()["totals"] == totals
    assert nested(totals_of(load_summary(summary_json).compiles)) == totals
    # the index page's headline: a card per declared total (totals sharing a column share one, "a / b"),
    # each number shown as the declaration shows it (so "unknown", never 0, when it is not known)
    usual = out / "tlparse_index.html" if summary_json.get("vllm") else out / "index.html"  # a vLLM log's front page is vLLM's summary
    headline = index_headline(usual.read_text())
    groups = graph_break_groups(load_summary(summary_json).compiles)
    for _, shared in columns():
        shown = " / ".join(total.show(value_at(totals, total.name)) for total in shared)
        value = value_at(totals, shared[0].name)
        first = singular(shared[0].label) if value == 1 and not shared[0].seconds else shared[0].label
        # a card's words start with its total's label, and not with a longer label that starts the same
        # ("recompile limit hit" is not the "recompile" card)
        longer = [w for t in TOTALS for w in (t.label, singular(t.label)) if len(w) > len(first) and w.startswith(first)]
        cards = [words for words, number in headline.items()
                 if words.startswith(first) and not any(words.startswith(w) for w in longer) and number == shown]
        assert len(cards) == 1, (shared[0].name, shown, headline)
    distinct = sum(1 for g in groups if not g.torch_break)  # the user's kinds: torch's own breaks have their own card
    assert headline[f"graph break{'' if totals['graph_breaks'] == 1 else 's'} ({distinct} distinct)"] == str(totals["graph_breaks"])
    assert headline["compile time (forward + backward)"] == (format_seconds(totals["compile_time_s"]) if totals["compile_time_s"] is not None else "unknown")
    # summary.md's totals table shows every declared total, as the declaration shows it
    table = markdown_totals((out / "summary.md").read_text())
    for total in TOTALS:
        column = table[total.column].split(" / ")
        position = [t.name for t in TOTALS if t.column == total.column].index(total.name)
        assert column[position] == total.show(value_at(totals, total.name)), total.name
    assert headline["compile time (forward + backward)"] == table["compile time"]


# -- a compile id reused after torch._dynamo.reset() ---------------------------------------------

BREAK = (
    "Graph break in user code at /work/prog.py:12\n"
    "Graph Break Reason: Call to `torch._dynamo.graph_break()`\n"
    "  Explanation: User-inserted graph break.\n"
)


def reset_log(path: Path) -> Path:
    """[0/0] breaks at prog.py:12 and finishes; reset(); [0/0] again breaks at the same line."""
    generation = [
        start(0, 0, 0, filename="/work/prog.py", fn="f", lineno=12),
        line({"artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"}, **cid(0, 0, 0)}, BREAK),
        metrics(0, 0, 0, restart_reasons=["Call to `torch._dynamo.graph_break()`"]),
    ]
    return write_log(path, generation + generation)


def test_a_reused_compile_id_page_and_summary_agree(tmp_path):
    out = tmp_path / "out"
    analysis = write_report(reset_log(tmp_path / "reset.log"), out)
    summary = json.loads((out / "summary.json").read_text())
    # independently of the tool: the log holds two graph-break records, one per generation
    raw = (tmp_path / "reset.log").read_text()
    assert raw.count("dynamo_graph_break_reason") == 2
    assert [(c["id"], c["generation"]) for c in summary["compiles"]] == [("[0/0]", 0), ("[0/0]", 1)]
    for compile_ in summary["compiles"]:
        [brk] = compile_["graph_breaks"]
        assert (brk["reason"], brk["user_location"]) == ("Call to `torch._dynamo.graph_break()`", "/work/prog.py:12")
    assert summary["totals"]["graph_breaks"] == 2
    for page in (out / "-_0_0_0" / "index.html", out / "-_0_0_0" / "generation_1.html"):
        text = page.read_text()
        assert "Graph breaks (1)" in text, page
        assert text.count("/work/prog.py:12</code></td>") == 1, page
    # the views asked the same analysis: the index's headline
    model = index_page(Inputs(analysis))
    assert model.totals["graph_breaks"] == 2 and model.distinct_graph_breaks == 1
    assert [r["label"] for r in model.compile_rows] == ["[0/0]", "[0/0] (generation 1)"]


def test_compile_page_models_say_what_summary_json_says(tmp_path, report_of):
    """Every compile page's model lists its compile's graph breaks as summary.json does."""
    log = next((TRACES / "graph_break").glob("dedicated_log*"))
    analysis, out = report_of(log)
    summary = {(c["id"], c["generation"]): c for c in json.loads((out / "summary.json").read_text())["compiles"]}
    from tlparse_py.report.views.compile import compile_outline
    from tlparse_py.report.views.sections import PageBuilder

    builder = PageBuilder(lambda path: None, None, inline_budget=0)  # type: ignore[arg-type]  # texts not read
    checked = 0
    for page in page_refs(analysis):
        compile_ = analysis.compile_of(page.key, page.generation) if page.key is not None else None
        if compile_ is None:
            continue
        outline = compile_outline(analysis, page, [], builder)
        expected = summary[(compile_.id, compile_.generation)]["graph_breaks"]
        assert [b.to_dict() for b in outline.graph_breaks] == expected, page.label
        checked += 1
    assert checked == sum(len(c["attempts"]) for c in summary.values())  # every attempt's page


def test_the_index_model_is_the_analysis_totals(report_of):
    log = next((TRACES / "recompile").glob("dedicated_log*"))
    analysis, _ = report_of(log)
    model = index_page(Inputs(analysis))
    assert model.totals == nested(analysis.totals())
    assert [f["frame"] for f in model.recompiles] == ["1", "0"]
    # each frame's compiles: the times it compiled, and its compile over the recompile limit
    assert sum(len(f["compiled"]) + bool(f["over_limit"]) for f in model.recompiles) == len([c for c in analysis.compiles() if c.frame_identity])
    assert re.fullmatch(r"\d+", str(model.records))


# -- graph breaks explained: what torch wrote about each, carried to summary.json -----------------

def raw_break_payloads(log: Path) -> list[str]:
    """Independently of the tool: the text of every dynamo_graph_break_reason record of the log."""
    import gzip

    data = log.read_bytes()
    lines = (gzip.decompress(data) if log.suffix == ".gz" else data).decode("utf-8", "replace").split("\n")
    payloads = []
    for i, text in enumerate(lines):
        if '"name": "dynamo_graph_break_reason"' in text:
            block = []
            for more in lines[i + 1:]:
                if not more.startswith("\t"):
                    break
                block.append(more[1:])
            payloads.append("\n".join(block))
    return payloads


def nearest_user_line(payload, logged):
    """The break's line in the user's code: torch's own when it is one, else the innermost user frame
    of the user code traceback (the harness writes library paths as /site-packages/ and /stdlib/)."""
    def library(path):
        return path.startswith(("/site-packages/", "/stdlib/", "<"))
    if not library(logged):
        return logged
    traceback = payload.split("User code traceback:", 1)[1].split("Traceback (most recent call last)", 1)[0]
    frames = [(f, n) for f, n in re.findall(r'File "([^"]+)", line (\d+)', traceback) if not library(f)]
    return f"{frames[-1][0]}:{frames[-1][1]}"


@pytest.mark.parametrize("log", [p for p in FIXTURE_LOGS if raw_break_payloads(p)], ids=lambda p: p.parent.name)
def test_every_explained_graph_break_carries_its_registry_id_hints_and_page(log):
    explained = {}
    for payload in raw_break_payloads(log):
        where = re.search(r"Graph break in user code at (\S+:\d+)", payload)
        page = re.search(r"(https://meta-pytorch\.github\.io/compile-graph-break-site/gb/(gb\d+)\.html)", payload)
        if where and page:
            head = payload.split("User code traceback:", 1)[0].split("*** While handling", 1)[0]  # not a chained break's hints
            hints = [line.strip()[len("Hint:"):].strip() for line in head.splitlines() if line.strip().startswith("Hint:")]
            explained[nearest_user_line(payload, where.group(1))] = (page.group(2).upper(), hints, page.group(1))
    assert explained, "the fixture's breaks carry torch's registry page"
    summary = tlparse_py.analyze(log).to_dict()
    shown = {(b["user_location"], b["registry_id"], tuple(b["hints"]), b["doc_url"]) for c in summary["compiles"] for b in c["graph_breaks"]}
    for location, (registry_id, hints, url) in explained.items():
        assert (location, registry_id, tuple(hints), url) in shown, location
