"""A non-strict export whose trace failed: the partial graph torch logged, and what it failed on.

When the trace of `make_fx` raises, torch logs the graph traced until then (the `make_fx_fail_partial`
artifact) and raises on; a non-strict export (torch.export's default) logs no exception of its own.
So that artifact, logged outside any compile with its stack through torch.export, is the log's record
of a failed export: the export called at the stack's user line raised. Only the export's own trace
counts: a trace nested in the user's code (a higher-order op tracing a branch) may be caught, so
from the user's export call on the stack must pass through no user code; and draft_export catches a
failed export to try again, so a stack through it does not count either.

What it failed on is named in two cases, else left unknown:
- logged (`basis: "logged"`): under TORCH_DTRACE torch logs the guard on a data-dependent expression
  it raises GuardOnDataDependentSymNode for (`guard_on_data_dependent_error`); when that is the record
  right before the partial graph, it is what the trace failed on, at its stack's innermost user line.
- inferred (`basis: "inferred"`): the user's code asked the truth value of a tensor (`if h.mean() > 0:`,
  `while t:`, `bool(t)`). Export makes that value an unbacked symbol, through `aten.is_nonzero`, and
  must at once guard on it, which it cannot. So when the last unbacked symbol created before the
  failure was made so, the failure is that data-dependent branch, at the symbol's user line. A symbol
  made by `.item()` is not enough: the failure may come lines later, or from something else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from msgspec import Struct, field

from ..model import CompileId
from .export_shapes import export_entry
from .stacks import is_user_code

MAX_FACTS = 10_000  # unbacked symbols, data-dependent errors and partial graphs kept (a log outside export holds none)

# The frame through which torch asks a tensor's truth value under tracing: proxy_tensor.py's
# `proxy_call` answers `aten.is_nonzero` with `(args[0] != 0).item()`, an unbacked bool.
TRUTH_VALUE_FILE = "/torch/fx/experimental/proxy_tensor.py"
TRUTH_VALUE_CALL = ("proxy_call", "return (args[0] != 0).item()")
DRAFT_EXPORT_FILE = "/torch/export/_draft_export.py"

DATA_DEPENDENT_BRANCH = "data_dependent_branch"  # inferred: a tensor's truth value
DATA_DEPENDENT_GUARD = "data_dependent_guard"  # logged: the guard torch could not decide
BRANCH_HINT = ("export traces one path and cannot branch on a value computed from tensor data: write the branch "
               "with torch.cond, or compute the condition outside the exported module")
GUARD_HINT = ("export cannot decide a condition on a value computed from tensor data: state it with torch._check(...) "
              "before this line when it always holds, or write the branch with torch.cond")

StackFrame = tuple[str, int, str, str]  # (file, line, function, text), outermost first
Place = tuple[int, int]  # (its order among the records read, its line in its log): lines restart in a second log


class UserLine(Struct, frozen=True):
    location: str  # "file.py:20"
    source: str  # the line's text
    function: str


class UnbackedSymbol(Struct, frozen=True):
    """An unbacked symbol (a value computed from tensor data) created outside any compile."""

    symbol: str  # "u0"
    range: str  # as logged: "[0, 1]"
    order: int
    line: int
    user: UserLine | None  # the innermost user frame of its user stack
    truth_value: bool  # made for a tensor's truth value (`aten.is_nonzero`)


class GuardError(Struct, frozen=True):
    """A guard on a data-dependent expression that raised, logged outside any compile (TORCH_DTRACE)."""

    expr: str  # "u0 > 2"
    order: int
    line: int
    user: UserLine | None  # the innermost user frame of its stack


class PartialGraph(Struct, frozen=True):
    """The graph an export's own trace had when it failed (`make_fx_fail_partial`)."""

    order: int
    line: int
    key: CompileId | None  # the compile id it was logged under (`[-/-]`)
    url: str  # its file; "" where it has none (export mode numbers only export outputs)
    call: str  # the text of the user's export call
    call_location: str  # "file.py:28"


class ExportTrace(Struct):
    """What a non-strict export logged of its trace, in the order read."""

    symbols: list[UnbackedSymbol] = field(default_factory=list)
    guard_errors: list[GuardError] = field(default_factory=list)
    partial_graphs: list[PartialGraph] = field(default_factory=list)

    def note_symbol(self, symbol: UnbackedSymbol) -> None:
        if len(self.symbols) < MAX_FACTS:
            self.symbols.append(symbol)

    def note_guard_error(self, error: GuardError) -> None:
        if len(self.guard_errors) < MAX_FACTS:
            self.guard_errors.append(error)

    def note_partial_graph(self, graph: PartialGraph) -> None:
        if len(self.partial_graphs) < MAX_FACTS:
            self.partial_graphs.append(graph)


def unbacked_symbol(symbol: str, range_: str, place: Place, user_stack: list[StackFrame], stack: list[StackFrame]) -> UnbackedSymbol:
    """An unbacked symbol from its record: where the user's code made it, and whether for a truth value."""
    return UnbackedSymbol(symbol, range_, *place, innermost_user_line(user_stack), any(map(_is_truth_value_call, stack)))


def guard_error(expr: str, place: Place, stack: list[StackFrame]) -> GuardError:
    return GuardError(expr, *place, innermost_user_line(stack))


def innermost_user_line(stack: list[StackFrame]) -> UserLine | None:
    user = next((frame for frame in reversed(stack) if is_user_code(frame[0])), None)
    if user is None:
        return None
    file, number, function, text = user
    return UserLine(f"{file}:{number}", text, function)


def _is_truth_value_call(frame: StackFrame) -> bool:
    file, _, function, text = frame
    return (_normal(file).endswith(TRUTH_VALUE_FILE) and function == TRUTH_VALUE_CALL[0]
            and text.split("#")[0].strip() == TRUTH_VALUE_CALL[1])


def _normal(file: str) -> str:
    return file.replace("\\", "/")


def own_export_call(stack: list[StackFrame]) -> tuple[str, str] | None:
    """(call text, `file:line`) of the export whose own trace logged a record with this stack: one that
    enters torch.export from the user's call and passes through no user code after it, nor through
    draft_export; None otherwise."""
    entry = export_entry([(file, line, text) for file, line, _, text in stack])
    if entry is None or any(is_user_code(file) or _normal(file).endswith(DRAFT_EXPORT_FILE) for file, _, _, _ in stack[entry:]):
        return None
    file, line, _, text = stack[entry - 1]
    return text, f"{file}:{line}"


class _Ordered(Protocol):
    @property
    def order(self) -> int: ...


Fact = TypeVar("Fact", bound=_Ordered)


def _last_before(facts: Sequence[Fact], graph: PartialGraph) -> Fact | None:
    before = [fact for fact in facts if fact.order < graph.order]
    return before[-1] if before else None


def trace_failure(trace: ExportTrace, page_of: Callable[[CompileId | None], str | None]) -> dict[str, Any] | None:
    """The first failed export trace: `{basis, error, facts}` (facts: summary.json's `trace_failure`),
    None when the log holds none. `page_of(key)` is the page of a compile id, which shows a partial
    graph that has no file of its own."""
    if not trace.partial_graphs:
        return None
    graph = trace.partial_graphs[0]
    page = page_of(graph.key)
    facts: dict[str, Any] = {
        "cause": None, "failed_exports": len(trace.partial_graphs),
        "partial_graph": graph.url or (f"{page}#other" if page else None), "partial_graph_line": graph.line,
        "call": graph.call, "call_location": graph.call_location,
        "guard": None, "guard_line": None, "symbol": None, "symbol_range": None, "symbol_line": None,
        "user_location": None, "user_source": None, "user_function": None, "hint": None,
    }
    error, symbol = _last_before(trace.guard_errors, graph), _last_before(trace.symbols, graph)
    if error is not None and error.order == graph.order - 1 and error.user is not None:  # nothing was logged between them
        facts.update(cause=DATA_DEPENDENT_GUARD, guard=error.expr, guard_line=error.line, hint=GUARD_HINT, **_user_facts(error.user))
        return {"basis": "logged", "facts": facts,
                "error": f"GuardOnDataDependentSymNode: could not guard on the data-dependent expression {error.expr} "
                         f"at {error.user.location} ({error.user.source})"}
    if symbol is not None and symbol.truth_value and symbol.user is not None:
        facts.update(cause=DATA_DEPENDENT_BRANCH, symbol=symbol.symbol, symbol_range=symbol.range, symbol_line=symbol.line,
                     hint=BRANCH_HINT, **_user_facts(symbol.user))
        return {"basis": "inferred", "facts": facts,
                "error": f"GuardOnDataDependentSymNode (inferred): a data-dependent branch at {symbol.user.location} "
                         f"({symbol.user.source}): export cannot guard on the truth value of a tensor, the unbacked symbol {symbol.symbol}"}
    return {"basis": "logged", "facts": facts,
            "error": "the export's trace failed: torch logged the graph traced until then, not the exception"}


def _user_facts(user: UserLine) -> dict[str, str]:
    return {"user_location": user.location, "user_source": user.source, "user_function": user.function}
