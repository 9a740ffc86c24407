"""The docs' tables of totals and diff gates are their declarations (`tools/doc_tables.py` writes them).

Nothing here lists a total or a gate: the expected rows come from `TOTALS` and `DIFF_GATES`
(`tlparse_py/analysis/totals.py`), so a total added, renamed or reworded there fails this test
until `python tools/doc_tables.py` has rewritten the tables.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from tlparse_py.analysis.totals import DIFF_GATES, TOTALS, Total, per_rank

ROOT = Path(__file__).resolve().parents[1]


def load_tool():
    spec = importlib.util.spec_from_file_location("doc_tables", ROOT / "tools" / "doc_tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def table_rows(text: str) -> list[list[str]]:
    """The body rows of the first Markdown table in `text`, as cells (`\\|` kept inside a cell)."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]] for line in lines[2:]]


def test_every_table_in_the_docs_is_what_the_declarations_make():
    tool = load_tool()
    assert tool.main(["--check"]) == 0, "run: python tools/doc_tables.py"


def test_each_table_is_shown_and_each_shown_table_is_whole():
    """Each table appears somewhere (a marker deleted would otherwise leave nothing to check), and
    every marked copy of it holds one row per declaration, in declaration order."""
    tool = load_tool()
    shown: dict[str, list[str]] = {name: [] for name in tool.TABLES}
    for path in tool.documents():
        for name, copies in tool.regions(path.read_text(encoding="utf-8")).items():
            shown[name] += copies
    assert all(shown.values()), {name: len(copies) for name, copies in shown.items()}
    for copy in shown["totals"]:
        assert [row[0] for row in table_rows(copy)] == [f"`{t.name}`" for t in TOTALS]
        assert [row[2] for row in table_rows(copy)] == [t.over_ranks.__name__.replace("_", " ") for t in TOTALS]
    for copy in shown["diff-gates"]:
        assert [row[0] for row in table_rows(copy)] == [f"`{g.name}`" for g in DIFF_GATES]
        assert [row[2] for row in table_rows(copy)] == [f"as `{g.total}`" for g in DIFF_GATES]


def test_a_new_declaration_is_a_new_row_with_no_other_edit(monkeypatch):
    """The tables are made from the declarations as they are at the time: a total declared in a
    future version (here, one added for the test) is a row of its own, with its words."""
    tool = load_tool()
    added = Total("example_total", "examples", "examples", "an example | with a bar", compute=len, involved=lambda cs: [],
                  over_ranks=per_rank)
    monkeypatch.setattr(tool, "TOTALS", (*TOTALS, added))
    last = table_rows(tool.totals_table())[-1]
    assert last == ["`example_total`", "an example \\| with a bar", "per rank", ""]


def test_every_over_ranks_rule_a_total_uses_is_explained_under_the_table():
    tool = load_tool()
    table = tool.totals_table()
    for rule in {t.over_ranks for t in TOTALS}:
        assert f"- **{rule.__name__.replace('_', ' ')}**: " in table
