"""Threshold conditions on named numbers: the `--fail-on` language of reports and diffs, generic and pure.

A condition list is comma-separated `NAME OP NUMBER` terms, e.g. `"new_graph_breaks>0,
compile_time_ratio>1.2"`; OP is one of `> >= < <= == !=`; spaces are allowed around each part.
The caller says which names exist and supplies their values as a dict of name → number:

    conditions = parse_conditions("new_graph_breaks>0, compile_time_ratio>=1.2", names)
    for v in violated(conditions, {"new_graph_breaks": 1, "compile_time_ratio": None}):
        print(f"{v.condition}: {v.value}")          # new_graph_breaks>0: 1

A condition *holds* (is violated, i.e. fails the gate) when `value OP threshold` is true. A value
that is `None` (unknown) never holds: `unknown()` lists those conditions so the caller can say so.
The operators are declared once, in `OPERATORS`; help texts and messages list them from there.
Nothing here prints, reads files or knows about diffs or reports: the names and their values are
the totals' and the diff gates' declarations (`totals.py`).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping

from msgspec import Struct

from ..patterns import lazy

__all__ = ["OPERATORS", "OPERATOR_LIST", "Condition", "ConditionError", "Violation", "parse_conditions", "unknown", "violated"]

# Every operator, in the order help texts list them. Two-character ones are matched first.
OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
}
OPERATOR_LIST = " ".join(OPERATORS)  # "> >= < <= == !=": for help texts and messages
_OP_PATTERN = "|".join(re.escape(op) for op in sorted(OPERATORS, key=len, reverse=True))
_TERM = lazy(r"^\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*(" + _OP_PATTERN
                   + r")\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*$")


class ConditionError(ValueError):
    """A malformed condition list or an unknown name; the message lists the valid names."""


class Condition(Struct, frozen=True):
    name: str
    op: str
    threshold: float

    def holds(self, value: float | None) -> bool:
        """Whether `value OP threshold`; never for an unknown (None or NaN) value."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return False
        return OPERATORS[self.op](value, self.threshold)

    def __str__(self) -> str:
        threshold = int(self.threshold) if float(self.threshold).is_integer() else self.threshold
        return f"{self.name}{self.op}{threshold}"


class Violation(Struct, frozen=True):
    condition: Condition
    value: float


def parse_conditions(text: str, names: Iterable[str]) -> list[Condition]:
    """`"a>0,b<=1.5"` → [Condition('a', '>', 0), Condition('b', '<=', 1.5)].

    Raises ConditionError for an empty list, a malformed term or a name not in `names`.
    """
    valid = sorted(set(names))
    listing = f"valid names: {', '.join(valid)}; operators: {OPERATOR_LIST}; e.g. {valid[0] if valid else 'name'}>0"
    terms = [t for t in (text or "").split(",")]
    if not any(t.strip() for t in terms):
        raise ConditionError(f"no condition given ({listing})")
    conditions = []
    for term in terms:
        if not term.strip():
            raise ConditionError(f"empty condition in {text!r} ({listing})")
        match = _TERM.match(term)
        if match is None:
            raise ConditionError(f"malformed condition {term.strip()!r}: expected NAME OP NUMBER ({listing})")
        name, op, number = match.groups()
        if name not in valid:
            raise ConditionError(f"unknown name {name!r} in {term.strip()!r} ({listing})")
        threshold = float(number)
        if not math.isfinite(threshold):
            raise ConditionError(f"the threshold of {term.strip()!r} is not a finite number ({listing})")
        conditions.append(Condition(name, op, threshold))
    return conditions


def violated(conditions: Iterable[Condition], values: Mapping[str, float | None]) -> list[Violation]:
    """The conditions that hold for these values, in the order given."""
    return [Violation(c, values[c.name]) for c in conditions if c.holds(values.get(c.name))]  # type: ignore[arg-type]


def unknown(conditions: Iterable[Condition], values: Mapping[str, float | None]) -> list[Condition]:
    """The conditions whose value is unknown (None): they were not checked."""
    out = []
    for c in conditions:
        value = values.get(c.name)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            out.append(c)
    return out
