"""The documentation's tables of totals and diff gates, made from their declarations.

The totals and the diff's gates are declared once, in `tlparse_py/analysis/totals.py` (`TOTALS`,
`DIFF_GATES`); what a total means in `summary.json` is in `tlparse_py/summary.schema.json`. The
tables README.md and docs/*.md show of them are written from there, between markers:

    <!-- totals:start -->
    ...
    <!-- totals:end -->

`python tools/doc_tables.py` rewrites every marked table; `python tools/doc_tables.py --check`
changes nothing and exits 1 naming each table that differs from its declarations (the tests run it:
a total or gate added, renamed or reworded shows in the docs, or the tests fail).
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from tlparse_py.analysis.totals import DIFF_GATES, TOTALS  # noqa: E402

SCHEMA = ROOT / "tlparse_py" / "summary.schema.json"


def documents(root: Path = ROOT) -> list[Path]:
    """The files whose tables are kept: the README and every page under docs/."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def _cell(text: str) -> str:
    """One table cell: whitespace as one space, a `|` escaped so it does not end the cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _rule_name(rule: Callable[..., object]) -> str:
    """How a table names an over-ranks rule: its function's name in words (`per_rank` → "per rank")."""
    return rule.__name__.replace("_", " ")


def _schema_totals() -> dict[str, dict]:
    """summary.json's `totals` object, from the schema shipped in the package."""
    return json.loads(SCHEMA.read_text(encoding="utf-8"))["$defs"]["totals"]


def _schema_note(name: str) -> str:
    """What summary.json's schema says of a total (since which version it counts what it does), if anything;
    a dotted name nests (`cache.hit` is `totals.cache.hit`)."""
    node: dict = _schema_totals()
    for part in name.split("."):
        node = node.get("properties", {}).get(part, {})
    return str(node.get("description", ""))


def totals_table() -> str:
    """Every total, in declaration order: its `--fail-on` name, what it counts, how it combines over
    ranks and what summary.json's schema notes of it; then each over-ranks rule the totals use, in its
    own words (its docstring)."""
    rows = ["| total (`--fail-on` name) | what it counts | over ranks | `summary.json` schema's note |", "|---|---|---|---|"]
    rows += [f"| `{t.name}` | {_cell(t.description)} | {_rule_name(t.over_ranks)} | {_cell(_schema_note(t.name))} |" for t in TOTALS]
    rules = list(dict.fromkeys(t.over_ranks for t in TOTALS))
    legend = [f"- **{_rule_name(rule)}**: {_cell(inspect.getdoc(rule) or '')}" for rule in rules]
    return "\n".join([*rows, "", "Over ranks, each total is combined by its rule:", "", *legend])


def diff_gates_table() -> str:
    """Every diff gate, in declaration order: its `diff --fail-on` name, what it measures, and the total
    whose over-ranks rule combines it."""
    rows = ["| gate | what it measures | over ranks |", "|---|---|---|"]
    rows += [f"| `{g.name}` | {_cell(g.description)} | as `{g.total}` |" for g in DIFF_GATES]
    return "\n".join(rows)


TABLES: dict[str, Callable[[], str]] = {"totals": totals_table, "diff-gates": diff_gates_table}


def _region(name: str) -> re.Pattern[str]:
    """A marked table: its start marker's line, what stands between, its end marker (each on a line of its own)."""
    return re.compile(rf"(^<!-- {re.escape(name)}:start -->\n)(.*?)(^<!-- {re.escape(name)}:end -->$)", re.S | re.M)


def regions(text: str) -> dict[str, list[str]]:
    """Each marked table of a document as it stands, by name (a table may be shown more than once)."""
    return {name: [m.group(2).removesuffix("\n") for m in _region(name).finditer(text)] for name in TABLES}


def rewritten(text: str, tables: dict[str, str]) -> str:
    """The document with every marked table replaced by its generated text."""
    for name, table in tables.items():
        text = _region(name).sub(_replacement(table), text)
    return text


def _replacement(table: str) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        return match.group(1) + table + "\n" + match.group(3)

    return replace


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table differs from the declarations")
    args = parser.parse_args(argv)
    tables = {name: make() for name, make in TABLES.items()}
    stale = []
    for path in documents():
        text = path.read_text(encoding="utf-8")
        new = rewritten(text, tables)
        if new != text:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(new, encoding="utf-8")
    if args.check and stale:
        print(f"tables differ from their declarations in: {', '.join(map(str, stale))} (run: python tools/doc_tables.py)",
              file=sys.stderr)
        return 1
    for path in stale:
        print(f"rewrote the tables of {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
