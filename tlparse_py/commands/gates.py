"""`--fail-on` of a report: conditions on the report's totals, checked on the analysis in memory.

The names are the totals' declarations (`analysis.totals.TOTALS`), so a new total is a new gate
name, with its help text and the compiles it names when it fails. A multi-rank report is gated on
each total combined over the ranks as its declaration says (summed, per rank, or the slowest rank).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..analysis.summary import CompileSummary, RanksSummary, Summary
from ..analysis.totals import BY_NAME, TOTALS, Value, over_ranks, totals_of
from .common import CliError

if TYPE_CHECKING:
    from ..diff.gates import Condition

MAX_IDS = 8  # compile ids named per violated condition
NAMES = tuple(total.name for total in TOTALS)
HELP = (
    "Exit 3 (the report still written) when a condition holds, e.g. 'graph_breaks>0,recompiles>2,compile_time_s>120'. "
    f"Names: {', '.join(NAMES)} (over ranks, each combined as the README's totals table says); operators > >= < <= == !=."
)


def parse_gates(texts: tuple[str, ...] | list[str]) -> list[Condition]:
    """The --fail-on conditions (each option may hold several, comma-separated); CliError (exit 2)
    naming the valid names when one is malformed or names something unknown."""
    if not texts:
        return []
    from ..diff.gates import ConditionError, parse_conditions  # only with --fail-on: start-up stays short

    try:
        return parse_conditions(",".join(texts), NAMES)
    except ConditionError as exc:
        raise CliError(f"--fail-on: {exc}") from None


def evaluate_gates(conditions: list[Condition], summary: Summary | RanksSummary) -> tuple[list[str], list[str]]:
    """(a line per violated condition, a line per condition left unchecked because its number is unknown)."""
    from ..diff.gates import unknown, violated

    compiles, owner = _compiles(summary)
    values, phrases = _values(summary)
    failed = []
    for violation in violated(conditions, values):
        total = BY_NAME[violation.condition.name]
        ids = [f"{owner.get(id(c), '')}{c.label}" + (f" {detail}" if detail else "") for c, detail in total.involved(compiles)]
        listed = ", ".join(ids[:MAX_IDS]) + (f", +{len(ids) - MAX_IDS} more" if len(ids) > MAX_IDS else "")
        value = violation.value
        shown_value = f"{value:g}" if isinstance(value, float) else str(value)
        failed.append(f"{violation.condition}: {total.name} is {shown_value}{phrases.get(total.name, '')}"
                      + (f" ({total.what}: {listed})" if ids else ""))
    unchecked = [f"{c}: unknown ({c.name} is not known from this log), not checked" for c in unknown(conditions, values)]
    return failed, unchecked


def _values(summary: Summary | RanksSummary) -> tuple[dict[str, Value], dict[str, str]]:
    """Each total's value (over ranks: combined), and what that value is, for the message."""
    if isinstance(summary, Summary):
        return totals_of(summary.compiles), {}
    combined = over_ranks([totals_of(entry.summary.compiles) for entry in summary.read if entry.summary is not None])
    return {name: c.value for name, c in combined.items()}, {name: c.phrase for name, c in combined.items()}


def _compiles(summary: Summary | RanksSummary) -> tuple[list[CompileSummary], dict[int, str]]:
    """Every compile of the report, and (multi-rank) which rank each is from, as a label prefix."""
    if isinstance(summary, Summary):
        return summary.compiles, {}
    compiles: list[CompileSummary] = []
    owner: dict[int, str] = {}
    for entry in summary.read:
        assert entry.summary is not None
        for c in entry.summary.compiles:
            owner[id(c)] = f"{entry.name} "
            compiles.append(c)
    return compiles, owner


def raise_if_gates_fail(failed: list[str], where: str) -> None:
    if failed:
        raise CliError(f"--fail-on: {len(failed)} condition(s) held; the report is in {where}", 3)
