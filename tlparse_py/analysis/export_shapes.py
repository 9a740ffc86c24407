"""A failed non-strict export, inferred from the shape facts it logged.

`torch.export.export` is non-strict by default: it logs no Dynamo compile and, when a shape
constraint fails, no exception either. What it logs is the symbol it created for each dimension
the user declared dynamic (`create_symbol`: its range and its source) and the guards it added
(`guard_added_fast`). A guard that narrows the range of a dimension declared with a named
`Dim("b")` is a constraint violation: torch raises one at the end of the export, and suggests the
range the guard implies (`Dim("b", min=3)`).

The verdict is an inference and says so (`basis: "inferred"`). It needs every part of the evidence:
the symbol, its declared range, the guard and the `Dim` in the export call's text. When a part is
missing the verdict stays unknown, with the evidence it has.
"""

from __future__ import annotations

import math
import re
from typing import Any

from msgspec import Struct, field

from ..patterns import lazy

# How many export symbols and guards are kept (a log outside export holds none of them).
MAX_FACTS = 10_000
EXPORT_PATH = "/torch/export/"  # a stack through torch.export's own files

_SOURCE = lazy(r"^L\['(\w+)'\]\.size\(\)\[(\d+)\]$")
_COMPARE = lazy(r"^(s\d+)\s*(>=|>|<=|<|==)\s*(-?\d+)$")
_COMPARE_FLIPPED = lazy(r"^(-?\d+)\s*(>=|>|<=|<|==)\s*(s\d+)$")
_EQ = lazy(r"^Eq\((s\d+),\s*(-?\d+)\)$")
_FLIP = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "==": "=="}


class ExportSymbol(Struct, frozen=True):
    symbol: str  # "s77"
    range: str  # as logged: "[2, int_oo]"
    source: str  # "L['x'].size()[0]"
    call: str  # the text of the user's export call, as its stack frame logged it
    call_location: str  # "file.py:22"
    line: int  # its line in the log


class ExportGuard(Struct, frozen=True):
    expr: str  # "s77 > 2"
    line: int


class ExportShapes(Struct):
    """The shape facts a non-strict export logged (records outside any compile id)."""

    symbols: dict[str, ExportSymbol] = field(default_factory=dict)
    guards: list[ExportGuard] = field(default_factory=list)

    def note_symbol(self, symbol: ExportSymbol) -> None:
        if len(self.symbols) < MAX_FACTS:
            self.symbols.setdefault(symbol.symbol, symbol)

    def note_guard(self, guard: ExportGuard) -> None:
        if len(self.guards) < MAX_FACTS:
            self.guards.append(guard)


def export_entry(frames: list[tuple[str, int, str]]) -> int | None:
    """The place of the first frame in torch.export's own files, in a stack of (file, line, text)
    outermost first; None when the stack does not pass through torch.export or starts in it."""
    for index, (file, _, _) in enumerate(frames):
        if EXPORT_PATH in "/" + file.replace("\\", "/").lstrip("/"):
            return index or None
    return None


def export_call(frames: list[tuple[str, int, str]]) -> tuple[str, str] | None:
    """(call text, `file:line`) of the user's frame that called into torch.export, from a stack of
    (file, line, text) outermost first; None when the stack does not pass through torch.export."""
    index = export_entry(frames)
    if index is None:
        return None
    caller_file, caller_line, caller_text = frames[index - 1]
    return caller_text, f"{caller_file}:{caller_line}"


def _bounds(text: str) -> tuple[float, float] | None:
    """A logged value range, "[2, int_oo]", as numbers."""
    match = re.fullmatch(r"\[\s*(-?\w+)\s*,\s*(-?\w+)\s*\]", text.strip())
    if match is None:
        return None
    values = []
    for part in match.groups():
        if part.lstrip("-") in ("int_oo", "oo"):
            values.append(-math.inf if part.startswith("-") else math.inf)
        elif part.lstrip("-").isdigit():
            values.append(float(int(part)))
        else:
            return None
    return values[0], values[1]


def _comparison(expr: str) -> tuple[str, str, int] | None:
    """(symbol, operator, constant) of a guard comparing one symbol with a constant; None otherwise."""
    text = expr.strip()
    if match := _COMPARE.match(text):
        return match.group(1), match.group(2), int(match.group(3))
    if match := _COMPARE_FLIPPED.match(text):
        return match.group(3), _FLIP[match.group(2)], int(match.group(1))
    if match := _EQ.match(text):
        return match.group(1), "==", int(match.group(2))
    return None


def _narrowed(low: float, high: float, operator: str, value: int) -> tuple[float, float]:
    if operator == ">":
        return max(low, value + 1), high
    if operator == ">=":
        return max(low, value), high
    if operator == "<":
        return low, min(high, value - 1)
    if operator == "<=":
        return low, min(high, value)
    return max(low, value), min(high, value)  # ==


_DIM_CALL = r"""(?:[A-Za-z_]\w*\.)*Dim\(\s*["'](\w+)["']"""  # Dim("b"), torch.export.Dim("b"), export.Dim('b', min=2)


def declared_dim(call: str, source: str) -> str | None:
    """The name of the `Dim("b")` the export call's text declares for a source `L['x'].size()[0]`,
    in the forms code writes it: `{"x": {0: Dim("b")}}` or `{"x": (Dim("b"), None)}`, the Dim
    qualified or not (`torch.export.Dim`, `export.Dim`); None when the text does not show it (a
    variable, a positional tuple of the arguments, a call cut at its first line): never guessed."""
    match = _SOURCE.match(source)
    if match is None:
        return None
    argument, dim = match.groups()
    by_index = rf"""["']{re.escape(argument)}["']\s*:\s*\{{[^{{}}]*?(?<![\w.]){dim}\s*:\s*{_DIM_CALL}"""
    found = re.search(by_index, call)
    if found:
        return found.group(1)
    return _dim_in_tuple(call, argument, int(dim))


def _dim_in_tuple(call: str, argument: str, dim: int) -> str | None:
    """`{"x": (None, Dim("b"))}`: the dimension's place in the argument's tuple (or list) of Dims."""
    start = re.search(rf"""["']{re.escape(argument)}["']\s*:\s*[(\[]""", call)
    if start is None:
        return None
    items, depth, current = [], 0, ""
    for char in call[start.end():]:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                break
            depth -= 1
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    else:
        return None  # the tuple does not end in the text: the call is cut
    items.append(current)
    if dim >= len(items):
        return None
    found = re.fullmatch(rf"\s*{_DIM_CALL}[^()]*\)\s*", items[dim])
    return found.group(1) if found else None


def _fix(name: str, low: float, high: float) -> str:
    if low == high:
        return f"the dimension is always {int(low)}: declare it static (drop Dim(\"{name}\") for it)"
    parts = [f'"{name}"']
    if low > 2:  # torch's own floor for a dynamic dimension is 2
        parts.append(f"min={int(low)}")
    if high != math.inf:
        parts.append(f"max={int(high)}")
    return f"Dim({', '.join(parts)})"


def _call_is_cut(call: str) -> bool:
    """Whether the call's text ends inside an open bracket: a stack frame's text is the first line of
    its statement only, so a call written over several lines is logged cut after its first."""
    depth, quote = 0, ""
    for char in call:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
    return depth > 0


def _why_no_dim(call: str) -> str:
    if _call_is_cut(call):
        return ("the export call is written over several lines and the log holds only its first, which does not "
                "show a named Dim for this dimension: see the call in the source")
    return "the export call's text does not show a named Dim for this dimension"


def inferred_failure(shapes: ExportShapes) -> dict[str, Any] | None:
    """The first guard that narrows a dimension the user declared dynamic: an inferred constraint
    violation (`status: "failed"`), or `status: "unknown"` with the evidence when the declaration
    cannot be read; None when no logged guard narrows a symbol the export created."""
    for guard in shapes.guards:
        comparison = _comparison(guard.expr)
        if comparison is None:
            continue
        symbol_name, operator, value = comparison
        symbol = shapes.symbols.get(symbol_name)
        bounds = _bounds(symbol.range) if symbol is not None else None
        if symbol is None or bounds is None or symbol.line > guard.line:
            continue
        low, high = _narrowed(*bounds, operator, value)
        if (low, high) == bounds:
            continue
        dim = declared_dim(symbol.call, symbol.source)
        evidence = {
            "symbol": symbol.symbol,
            "source": symbol.source,
            "declared_range": symbol.range,
            "guard": guard.expr,
            "guard_line": guard.line,
            "call": symbol.call,
            "call_location": symbol.call_location,
            "dim": dim,
        }
        if dim is None:
            return {"status": "unknown", "evidence": evidence, "missing": _why_no_dim(symbol.call)}
        return {"status": "failed", "evidence": evidence, "fix": _fix(dim, low, high),
                "error": f"constraint violation: the guard {guard.expr} narrows Dim(\"{dim}\") = {symbol.source}, "
                         f"declared {symbol.range}"}
    return None
