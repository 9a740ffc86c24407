"""Pages written while reading, one per record: code, metrics, guards, guard details, kernel stack traces.

`PAGE_VIEWS` maps the view a kind's `Output` names to its template and context function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...model import CompileId, Record
from ...analysis.stacks import frames_from_json
from ...analysis.store import Store
from .common import artifact_view, format_value, frame_view, key_of, pretty_value

def metrics_context(report: Store, record: Record, meta: dict[str, Any], title: str) -> dict[str, Any]:
    key = key_of(record.compile_id)
    stack = report.start_stacks.get(record.compile_id.frame_key()) if record.compile_id is not None else None
    return {
        "title": title,
        "fields": pretty_value(meta),
        "meta": meta,
        "stack": [frame_view(f, report) for f in stack or []],
        "outputs": [artifact_view(a) for a in report.directory.get(key, [])],
        "specializations": shape_fact_views(report, "symbolic_shape_specialization", record.compile_id),
        "guards_added": shape_fact_views(report, "guard_added_fast", record.compile_id),
        "restart_reasons": meta.get("restart_reasons") if isinstance(meta.get("restart_reasons"), list) else [],
    }


def shape_fact_views(report: Store, kind: str, compile_id: CompileId | None) -> list[dict[str, Any]]:
    """Specialisations / fast guards of a frame compile (every attempt), with readable stacks."""
    views = []
    for fact in report.shape_facts_for(kind, compile_id):
        sources = fact.get("sources")
        views.append(
            {
                "symbol": format_value(fact.get("symbol")) if fact.get("symbol") is not None else "",
                "sources": [str(s) for s in sources] if isinstance(sources, list) else [],
                "value": format_value(fact.get("value")) if fact.get("value") is not None else "",
                "reason": format_value(fact.get("reason")) if fact.get("reason") is not None else "",
                "expr": format_value(fact.get("expr")) if fact.get("expr") is not None else "",
                "user_stack": [frame_view(f, report) for f in frames_from_json(fact.get("user_stack")) or []],
                "stack": [frame_view(f, report) for f in frames_from_json(fact.get("stack")) or []],
            }
        )
    return views


MAX_PROVENANCE_NODES = 500


def guard_context(report: Store, meta: dict[str, Any]) -> dict[str, Any]:
    """A symbolic_guard_information page: the guard, where it came from, locals, provenance."""
    frame_locals = meta.get("frame_locals") if isinstance(meta.get("frame_locals"), dict) else {}
    return {
        "title": "Symbolic shapes information",
        "expr": format_value(meta.get("expr")),
        "result": format_value(meta.get("result")) if meta.get("result") is not None else None,
        "user_stack": [frame_view(f, report) for f in frames_from_json(meta.get("user_stack")) or []],
        "stack": [frame_view(f, report) for f in frames_from_json(meta.get("stack")) or []],
        "locals": _named_values(frame_locals.get("locals")),
        "symbols": _named_values(frame_locals.get("symbols")),
        "sources": _named_values(meta.get("symbol_to_sources")),
        "provenance": expression_tree(report, meta.get("expr_node_id")),
    }


def _named_values(value: Any) -> list[tuple[str, str]]:
    """`{name: value}` where torch 2.13 may give a value as a list (tlparse rejects those)."""
    if not isinstance(value, dict):
        return []
    rows = []
    for name, item in value.items():
        if item is None:
            continue
        text = ", ".join(map(str, item)) if isinstance(item, list) else format_value(item)
        rows.append((str(name), text))
    return rows


def expression_tree(report: Store, root: Any) -> list[dict[str, Any]]:
    """Depth-first walk of the expressions behind a guard (each node once), flattened with depths."""
    nodes: list[dict[str, Any]] = []
    if not isinstance(root, int) or isinstance(root, bool):
        return nodes
    seen: set[int] = set()
    work = [(root, 0)]
    while work and len(nodes) < MAX_PROVENANCE_NODES:
        node_id, depth = work.pop()
        if node_id in seen or node_id not in report.expressions:
            continue
        seen.add(node_id)
        meta = report.expressions[node_id]
        arguments = meta.get("arguments") if isinstance(meta.get("arguments"), list) else []
        nodes.append(
            {
                "depth": min(depth, 12),
                "result": format_value(meta.get("result")),
                "method": format_value(meta.get("method")),
                "arguments": ", ".join(map(str, arguments)),
                "user_stack": [frame_view(f, report) for f in frames_from_json(meta.get("user_stack")) or []],
                "stack": [frame_view(f, report) for f in frames_from_json(meta.get("stack")) or []],
            }
        )
        children = meta.get("argument_ids") if isinstance(meta.get("argument_ids"), list) else []
        work.extend((child, depth + 1) for child in reversed(children) if isinstance(child, int))
    return nodes


def stack_traces_context(traces: dict[str, Any]) -> dict[str, Any]:
    """Kernel → stack traces, with the escaped `\\n` sequences torch writes turned into real lines."""
    kernels = []
    for kernel, items in traces.items():
        texts = items if isinstance(items, list) else [items]
        kernels.append((kernel, [str(t).replace("\\n", "\n").rstrip("\n") for t in texts]))
    return {"title": "Kernel stack traces", "kernels": kernels}



def code_context(analysis: Store, record: Record, data: dict[str, Any]) -> dict[str, Any]:
    """A code page's context before its lines are highlighted (the pipeline adds `lines`)."""
    return {"title": data["title"], "lines": None, "lang": data["lang"]}


def metrics_page(analysis: Store, record: Record, data: dict[str, Any]) -> dict[str, Any]:
    return metrics_context(analysis, record, data["meta"], data["title"])


def guards_page(analysis: Store, record: Record, data: dict[str, Any]) -> dict[str, Any]:
    return {"guards": data["guards"]}


def guard_info_page(analysis: Store, record: Record, data: dict[str, Any]) -> dict[str, Any]:
    return guard_context(analysis, data["meta"])


PageView = Callable[[Store, Record, dict[str, Any]], dict[str, Any]]
# view name (Output.view) → (template, context)
PAGE_VIEWS: dict[str, tuple[str, PageView]] = {
    "code": ("code.html.j2", code_context),
    "metrics": ("metrics.html.j2", metrics_page),
    "guards": ("guards.html.j2", guards_page),
    "guard_info": ("guard_info.html.j2", guard_info_page),
}
