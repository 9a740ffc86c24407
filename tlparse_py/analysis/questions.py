"""Questions asked of the store while a compile's summary is built: its name and user location, why
it failed, restarted or recompiled, which ids get a page, and the verdict of an export; and one
log's collectives parity (its scheduler's collectives against its generated code's).

Pure functions of `store.Store` (the parity: of the log's `store.DistributedFacts`); `compiles.Analysis`
asks them, and every view reads its answers.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any, NamedTuple

from msgspec import Struct

from ..patterns import lazy
from ..model import CompileId, display_key
from .export_shapes import inferred_failure
from .export_trace import trace_failure
from .facts import normalise_collective
from .stacks import Frame, simplify_filename
from .store import DistributedFacts, Store
from .library import call_line, started_in_library
from .guard_words import dynamo_names, notes_on_dynamo_names
from .summary import Failure, LibraryFrame, first_line, over_recompile_limit
from .wrapper import called_as_model, forward_of, is_wrapper, started_in_wrapper, wrapper_frame


def is_compile(key: CompileId | None) -> bool:
    """A bucket that is a compilation: a frame compile (`[0/1]`, `[!0/1/0]` inside compiled autograd),
    not `[-/-]`, `(unknown)` or a compiled-autograd capture (`[!0/-/-]`, `is_capture`)."""
    return key is not None and key.frame_id is not None


def is_capture(key: CompileId | None) -> bool:
    """Compiled autograd's capture of a backward graph: a compiled-autograd id with no frame (`[!0/-/-]`).
    Its records belong to compiled-autograd graph 0, which is compiled as its frames (`[!0/1/0]`)."""
    return key is not None and key.frame_id is None and key.compiled_autograd_id is not None


def captures(report: Store) -> list[CompileId]:
    """The compile ids of compiled autograd's captures, in log order (`is_capture`)."""
    return [key for key in report.directory if key is not None and is_capture(key)]


def capture_of(report: Store, graph: CompileId) -> CompileId | None:
    """The capture of the compiled-autograd graph `graph` names, in its process (None when none was
    logged, or for no graph); asked per compile page, so indexed once."""
    if graph.compiled_autograd_id is None:
        return None
    by_graph = report.index_by("captures", captures(report), lambda key: (key.process, key.compiled_autograd_id))
    found: list[CompileId] = by_graph.get((graph.process, graph.compiled_autograd_id), [])
    return found[0] if found else None


def start_only(report: Store, key: CompileId | None) -> bool:
    """A compile id that logged nothing but one `dynamo_start`: no files, no metrics, nothing else."""
    counts = report.kinds.get(key)
    if key is None or counts is None or counts.keys() != {"dynamo_start"} or counts["dynamo_start"] != 1:
        return False
    return is_compile(key) and not report.directory.get(key) and not report.metrics.get(key.frame_key())


def pageless_keys(report: Store, paged: int) -> set[CompileId | None]:
    """The start-only compile ids beyond the first `paged` of them (log order): listed without a page."""
    extra: set[CompileId | None] = set()
    seen = 0
    for key in report.directory:
        if start_only(report, key):
            seen += 1
            if seen > paged:
                extra.add(key)
    return extra


def seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value else None


def _name_from_pool(report: Store, key: CompileId, generation: int) -> str:
    """The frame's name from any compile of the same frame in the same generation (a failed
    recompile may not log one; after reset() the frame id names another function)."""
    for entry in report.metrics.get(key.frame_key(), []):
        if entry.generation == generation and entry.get("co_name"):
            return str(entry.get("co_name"))
    # the frame's other compiles' entries, through the keys the store keeps per frame (a scan of all
    # metrics per compile was quadratic on logs with 100,000s of compiles)
    for frame_key in report.metric_keys_by_frame.of(key):
        for entry in report.metrics[frame_key]:
            if entry.generation == generation and entry.get("co_name"):
                return str(entry.get("co_name"))
    return ""


def headline(report: Store, key: CompileId, fields: Mapping[str, Any], generation: int | None = None, skipped: bool = False) -> str:
    """Why a compile failed, restarted or recompiled, in one line, each that holds in the order it
    happened ("" when nothing went wrong): the guard that failed, when it is a recompile ("recompiled:
    ..."), then the exception it failed with (torch ran the frame eagerly when `skipped`), or why
    Dynamo restarted it ("restarted: ..."). The compile over the recompile limit is no recompile: its
    guard failure is the limit problem's, not its headline's."""
    fail_type, fail_reason = fields.get("fail_type"), fields.get("fail_reason")
    parts = []
    reasons = report.recompile_reasons_of(key, generation)
    if reasons and not over_recompile_limit(str(fail_type or ""), str(fail_reason or "")):
        parts.append(f"recompiled: {first_line(reasons[0])}")
    if fail_type:
        outcome = Failure(str(fail_type), str(fail_reason) if fail_reason is not None else None).headline
    else:
        outcome = f"restarted: {first_line(fields['restart_reasons'][0])}" if fields.get("restart_reasons") else ""
    parts.append(f"ran eagerly, as torch chose: {outcome}".rstrip(": ") if skipped else outcome)
    return "; ".join(filter(None, parts))


class CompiledFrame(NamedTuple):
    """What a compile compiled: the frame's name, its user-code location (`file:line`), None where
    not logged, and the library frame it started in, when it did (`library.py`)."""

    name: str | None
    location: str | None
    library_frame: LibraryFrame | None = None


def compiled_frame(report: Store, key: CompileId, fields: Mapping[str, Any], generation: int = 0) -> CompiledFrame:
    """The compiled frame of a compile. The start stack's innermost frame is where Dynamo began
    tracing; without it, the frame's first line from the metrics. A stack that ends in library code
    is located at the user's line that led into it, the library frame kept beside (`library.py`); one
    that ends in torch's wrapper also names the model it called (`wrapper.py`): its forward when its
    guards name its class."""
    stack = report.start_stack(key, generation)
    name = fields.get("co_name") or _name_from_pool(report, key, generation) or None
    if stack:
        wrapped = started_in_wrapper(stack, report.resolve_filename)
        if wrapped is not None:
            return _through_wrapper(report, key, generation, stack, wrapped)
        last = stack[-1]
        in_library = started_in_library(stack, report.resolve_filename)
        if in_library is not None:
            library, line = in_library
            return CompiledFrame(str(name or last.name), line, library)
        filename = simplify_filename(report.resolve_filename(last.filename))
        return CompiledFrame(str(name or last.name), f"{filename}:{last.line}")
    if fields.get("co_filename"):
        location = f"{fields['co_filename']}:{fields.get('co_firstlineno')}"
        if name and is_wrapper(str(name), str(fields["co_filename"])):  # no stack: no model, no call line
            return CompiledFrame(str(name), None, wrapper_frame(str(name), location))
        return CompiledFrame((str(name) if name else None), location)  # no stack, no user line: a library's stays
    return CompiledFrame((str(name) if name else None), None)


def _through_wrapper(report: Store, key: CompileId, generation: int, stack: list[Frame], wrapped: LibraryFrame) -> CompiledFrame:
    """A compile that started in torch's wrapper: named after the model it called when this compile's
    guards name its class and the wrapper was called as a model, else torch's name; at the user's call line."""
    noted = report.wrapped.noted(key) if called_as_model(stack, report.resolve_filename) else []
    module = next((module for line, module in reversed(noted) if report.generation_at(key, line) == generation), None)
    where = call_line(stack, report.resolve_filename)
    if module is None:
        return CompiledFrame(wrapped.frame, where, wrapped)
    return CompiledFrame(forward_of(module), where, wrapper_frame(wrapped.frame, wrapped.location, module))


def frame_and_location(report: Store, key: CompileId, fields: Mapping[str, Any], generation: int = 0) -> tuple[str | None, str | None]:
    """The compiled frame's name and where its code is: its user-code location (`compiled_frame`); for a
    library frame other than torch's wrapper, the library's line (the user's line that led into it is
    every break's inside the library too: it names none of them)."""
    found = compiled_frame(report, key, fields, generation)
    library = found.library_frame
    return found.name, (library.location if library is not None and not library.is_torch_wrapper else found.location)


def dynamo_name_notes(report: Store, key: CompileId | None, generation: int = 0) -> list[str]:
    """What the names Dynamo made up (`___stack0`) that a compile's installed guards or recompile
    reasons mention stand for (`summary.notes_on_dynamo_names`), with the graph break that made its
    resume function when the log holds one at the function's line."""
    if key is None:
        return []
    texts = [*report.dynamo_names_of(key, generation), *map(first_line, report.recompile_reasons_of(key, generation))]
    if not any(dynamo_names(text) for text in texts):
        return []
    metrics = [m for m in report.metrics.get(key.frame_key(), []) if m.generation == generation]
    frame, location = frame_and_location(report, key.frame_key(), metrics[-1].fields if metrics else {}, generation)
    breaks = report.index_by("breaks_at", report.graph_breaks, lambda b: b.location).get(location, []) if location else []
    cause = (breaks[0].reason, breaks[0].hints[0] if breaks[0].hints else "") if breaks else None
    return notes_on_dynamo_names(texts, frame or "", location or "", cause)


EXPORT_ONLY_ERRORS = ("ConstraintViolationError",)  # raised only by torch.export's Dim constraints
_GUARD = lazy(r"satisfy the generated guard (.+?)\.?$", re.M)
_FIX = lazy(r"Suggested fixes:\s*\n\s*(.+)")


# The only kinds draft_export's own trace file keeps (export/_draft_export.py's CaptureStructuredTrace)
DRAFT_EXPORT_KINDS = frozenset({"str", "exported_program", "propagate_real_tensors_provenance", "guard_added", "missing_fake_kernel",
                                "mismatched_fake_kernel", "expression_created", "create_unbacked_symbol"})


def is_draft_export(report: Store) -> bool:
    """Whether the log comes from torch.export's draft_export: its stacks pass through
    `torch/export/_draft_export.py` (an interned file name), or it is draft_export's capture file,
    whose every record is of a kind that file keeps (a main trace file holds others, such as its
    torch_version artifact)."""
    if any(name.replace("\\", "/").endswith("/torch/export/_draft_export.py") for name in report.strings.strings.values()):
        return True
    seen = report.kinds_seen
    return bool(seen) and seen <= DRAFT_EXPORT_KINDS


def export_error(report: Store) -> dict[str, str | None] | None:
    """The exception that ended an export, when the log holds it: `{type, reason, guard, fix}`.

    torch.export records it in a `compilation_metrics` record logged outside any Dynamo compile id
    (or as a ConstraintViolationError, which only export's shape constraints raise). The guard and
    the suggested fix are read from its reason when torch wrote them.
    """
    # the first in the metrics' own order (the store keeps the failed entries with their places: a
    # live report asks after every update, and a pass over every compile's metrics grew with the run)
    for _, _, entry in sorted(report.failed_metrics, key=lambda failed: failed[:2]):
        fail_type = entry.get("fail_type")
        if fail_type and (entry.compile_id is None or str(fail_type) in EXPORT_ONLY_ERRORS):
            reason = str(entry.get("fail_reason") or "")
            guard, fix = _GUARD.search(reason), _FIX.search(reason)
            return {
                "type": str(fail_type),
                "reason": reason or None,
                "guard": guard.group(1).strip() if guard else None,
                "fix": fix.group(1).strip() if fix else None,
            }
    return None


def export_verdict(report: Store) -> dict[str, Any]:
    """`{status, basis, error, issues, ...}` of an export: "failed" when the log holds the exception
    that ended it, or the partial graph of a failed export trace (`export_trace`: `trace_failure` says
    where, and what it failed on when the log tells: the guard torch logged, or `basis` "inferred" from
    the shape facts); "issues" when
    draft_export found some, "ok" when it produced a program and found none, else "unknown". With none
    of these logged, a failed non-strict export may be inferred from its shape facts (`export_shapes`):
    `basis` is then "inferred", with the evidence."""
    issues = [
        {"type": f.failure_type, "compile_id": display_key(f.compile_id), "line": f.lineno}
        for f in report.export_failures
    ]
    error = export_error(report)
    traced = trace_failure(report.export_trace, report.page_of) if error is None else None
    if error is not None or traced is not None:
        status = "failed"
    else:
        status = "issues" if issues else ("ok" if report.exported_programs else "unknown")
    message = f"{error['type']}: {first_line(error['reason'])}".rstrip(": ") if error else None
    verdict: dict[str, Any] = {"status": status, "basis": "logged", "error": message, "issues": issues,
                               "guard": error["guard"] if error else None, "suggested_fix": error["fix"] if error else None}
    if traced is not None:
        verdict.update(basis=traced["basis"], error=traced["error"], guard=traced["facts"]["guard"], trace_failure=traced["facts"])
    inferred = inferred_failure(report.export_shapes) if status == "unknown" else None
    if inferred is not None:
        verdict["evidence"] = inferred["evidence"]
        if inferred["status"] == "failed":
            verdict.update(status="failed", basis="inferred", error=inferred["error"], guard=inferred["evidence"]["guard"],
                           suggested_fix=inferred["fix"])
        else:
            verdict["missing"] = inferred["missing"]
    return verdict


def export_inferred(report: Store) -> bool:
    """Whether the log's shape facts or a failed export trace say something of an export (a verdict is
    then shown without -e)."""
    return inferred_failure(report.export_shapes) is not None or trace_failure(report.export_trace, report.page_of) is not None


# ------------------------------------------------------------------------------------------------
# one log's collectives: the scheduler's against the generated code's

PARITY_DESCRIPTION = "Difference of # of collectives in scheduler and inductor output code and missing wait collectives"


class ParityGraph(Struct):
    graph: str
    compile_id: str
    offset: int  # collectives whose count differs between the schedule and the code
    missing_waits: int


class CollectivesParity(Struct):
    description: str
    graphs: list[ParityGraph]


def collectives_parity(facts: DistributedFacts) -> CollectivesParity:
    """Scheduler vs generated code, per compile: collectives that differ in count, and waits missing."""
    last_schedule: dict[str, tuple[str, list[str]]] = {}
    for schedule in facts.schedules:
        last_schedule[schedule.compile_id] = (schedule.graph, schedule.ops)
    graphs = []
    for label, (graph, ops) in last_schedule.items():
        if label not in facts.code_collectives:
            continue
        code_counts, waits = facts.code_collectives[label]
        scheduled = Counter(n for n in (normalise_collective(op) for op in ops) if n is not None)
        offset = sum(abs(scheduled.get(op, 0) - code_counts.get(op, 0)) for op in set(scheduled) | set(code_counts))
        missing_waits = max(0, sum(code_counts.values()) - waits)
        if offset or missing_waits:
            graphs.append(ParityGraph(graph, label, offset, missing_waits))
    return CollectivesParity(PARITY_DESCRIPTION, graphs)
