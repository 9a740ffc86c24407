"""The metrics page's "Other Metrics" table (upstream tlparse after 0.4.3): every field of a metrics
record with no place of its own on the page, in log order, its value as JSON text; nulls are named."""

from __future__ import annotations

import gzip
import json
import re
from html.parser import HTMLParser
from pathlib import Path

from logs import metrics, start, write_log
from tlparse_py.analysis.kinds.builtin import METRICS_SHOWN
from tlparse_py.pipeline import write_report
from tlparse_py.report.views.pages import OTHER_METRIC_CHARS

ROOT = Path(__file__).resolve().parent.parent
TRAINING = ROOT / "tests" / "fixtures" / "traces" / "training"


def template_fields() -> set[str]:
    """The metrics fields the page shows in a place of their own (report/html/metrics_page.py)."""
    from tlparse_py.report.html.metrics_page import FIELDS_SHOWN

    return set(FIELDS_SHOWN)


class OtherMetrics(HTMLParser):
    """(name, value text) of each row of the page's "Other Metrics" table; a collapsed value's whole
    text is its <pre>; `collapsed`: the names of those."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, str]] = []
        self.collapsed: list[str] = []
        self.inside = False
        self.cells: list[str] = []
        self.cell: list[str] | None = None
        self.pre: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table" and dict(attrs).get("class") == "other-metrics":
            self.inside = True
        elif self.inside and tag == "td":
            self.cell = []
        elif self.inside and tag == "pre":
            self.pre = []

    def handle_endtag(self, tag: str) -> None:
        if not self.inside:
            return
        if tag == "table":
            self.inside = False
        elif tag == "pre" and self.pre is not None:
            self.cell = self.pre
            self.pre = None
            self.collapsed.append(self.cells[0])
        elif tag == "td" and self.cell is not None:
            self.cells.append("".join(self.cell))
            self.cell = None
        elif tag == "tr" and self.cells:
            self.rows.append((self.cells[0], self.cells[1]))
            self.cells = []

    def handle_data(self, data: str) -> None:
        if self.pre is not None:
            self.pre.append(data)
        elif self.cell is not None:
            self.cell.append(data)


def other_metrics(page: Path) -> OtherMetrics:
    parser = OtherMetrics()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def test_the_declared_fields_are_the_ones_the_page_shows():
    """One list of the fields with a place of their own (the metrics kinds' declaration), held equal
    to the fields the template names: a field the page stops showing goes to Other Metrics."""
    assert template_fields() == set(METRICS_SHOWN)


def test_training_fixture(tmp_path):
    (log,) = TRAINING.glob("*.log*")
    records = [json.loads(text[text.index("{"):]) for text in gzip.open(log, "rt", encoding="utf-8") if '"compilation_metrics"' in text]
    (logged,) = [r["compilation_metrics"] for r in records]
    shown = template_fields()
    expected = [(name, value) for name, value in logged.items() if name not in shown and value is not None]
    nulls = [name for name, value in logged.items() if name not in shown and value is None]
    assert len(expected) > 30 and nulls  # the fixture's record has many fields of both

    out = tmp_path / "report"
    write_report(log, out)
    page = next((out / "-_0_0_0").glob("compilation_metrics_*.html"))
    table = other_metrics(page)
    assert [name for name, _ in table.rows] == [name for name, _ in expected]  # log order
    cut = []
    for (name, text), (_, value) in zip(table.rows, expected):
        whole = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        if len(whole) <= OTHER_METRIC_CHARS:
            assert json.loads(text) == value, name  # each value as JSON text
        else:  # the start of it, and where the rest is
            cut.append(name)
            assert text.startswith(whole[:OTHER_METRIC_CHARS]) and text.endswith("raw.jsonl holds the whole record)"), name
    assert cut == ["inductor_config"]  # 26 kB of JSON
    long = [name for name, value in expected if len(json.dumps(value, separators=(",", ":"))) > 120]
    assert long and table.collapsed == long  # long values are collapsed, short ones are not
    html = page.read_text(encoding="utf-8")
    assert '<h2 id="other-metrics">Other Metrics</h2>' in html
    logged_as_null = html[html.index("Logged as null:"):].split("</p>", 1)[0]
    assert re.findall(r"<code>(\w+)</code>", logged_as_null) == nulls
    assert not {name for name, _ in table.rows} & shown  # a field shown in its own place is not repeated


def test_values_are_escaped_and_long_ones_cut(tmp_path):
    hostile = "</code></td><script>alert(1)</script>"
    huge = {"key": "v" * (OTHER_METRIC_CHARS * 2)}
    log = write_log(tmp_path / "trace.log", [start(), metrics(odd_field=hostile, huge_field=huge, nested={"a": [1, None]}, nothing=None)])
    out = tmp_path / "report"
    write_report(log, out)
    page = next((out / "-_0_0_0").glob("compilation_metrics_*.html"))
    html = page.read_text(encoding="utf-8")
    assert "<script>alert(1)</script>" not in html
    table = other_metrics(page)
    rows = dict(table.rows)
    assert list(rows) == ["odd_field", "huge_field", "nested"]
    assert json.loads(rows["odd_field"]) == hostile and json.loads(rows["nested"]) == {"a": [1, None]}
    assert table.collapsed == ["huge_field"]
    assert len(rows["huge_field"]) < OTHER_METRIC_CHARS + 200 and "raw.jsonl holds the whole record" in rows["huge_field"]
    assert "Logged as null: <code>nothing</code>." in html


def test_no_table_without_other_fields(tmp_path):
    log = write_log(tmp_path / "trace.log", [start(), metrics()])  # co_name, graph_op_count, restart_reasons, a time
    out = tmp_path / "report"
    write_report(log, out)
    html = next((out / "-_0_0_0").glob("compilation_metrics_*.html")).read_text(encoding="utf-8")
    assert "Other Metrics" not in html
