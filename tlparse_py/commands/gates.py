"""`--fail-on` of a report: the conditions parsed at the start, checked once the report is written.

The names are the totals' declarations (`analysis.totals.TOTALS`); the checking is the analysis'
(`analysis.totals.check_report`), on the analysis in memory, and what it comes to (the lines, exit
3) is the report's outcome (`outcome.report_outcome`). A multi-rank report is gated on each
total combined over the ranks as its declaration says (summed, per rank, or the slowest rank).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..analysis.conditions import OPERATOR_LIST
from ..analysis.totals import TOTALS
from .common import CliError

if TYPE_CHECKING:
    from ..analysis.conditions import Condition

NAMES = tuple(total.name for total in TOTALS)
HELP = (
    "Exit 3 (the report still written) when a condition holds, e.g. 'recompiles>2,compile_time_s>120'. "
    f"Names: {', '.join(NAMES)} (over ranks, each combined as the README's totals table says); operators {OPERATOR_LIST}."
)


def parse_gates(texts: tuple[str, ...] | list[str]) -> list[Condition]:
    """The --fail-on conditions (each option may hold several, comma-separated); CliError (exit 2)
    naming the valid names when one is malformed or names something unknown."""
    if not texts:
        return []
    from ..analysis.conditions import ConditionError, parse_conditions

    try:
        return parse_conditions(",".join(texts), NAMES)
    except ConditionError as exc:
        raise CliError(f"--fail-on: {exc}") from None
