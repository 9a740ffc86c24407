"""The pages kinds ask for, one per record: code, metrics, guards, guard details, kernel stack traces.

Numbered while the log is read (tlparse's numbering), each is noted as a `PendingPage` and built
once the analysis is complete, so a metrics page lists every output and fact of its compile, not
those logged before it. `PAGE_VIEWS` maps the view a kind's `Output` names to its model builder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import orjson
from msgspec import Struct, field

from ...analysis.stacks import frames_from_json
from ...analysis.summary import first_line
from ...model import CompileId
from ...paths import compile_page_url
from .. import provenance
from ..highlight import Highlighter, Lines
from .common import (
    MAX_VALUE_CHARS, FrameView, Inputs, Page, artifact_view, format_value, frame_view, key_of, label, page_base, pretty_value,
    usual_index,
)
from .sections import artifact_rows

Reader = Callable[[str], bytes | None]


class PendingPage(Struct):
    """A numbered page a kind asked for, built once the whole log is read."""

    url: str
    view: str  # its PAGE_VIEWS entry
    data: dict[str, Any]  # what the kind gave the view besides the record
    compile_id: CompileId | None
    kind: str
    lineno: int
    payload: str | None  # the record's payload file, read back by pages that show it


class Builder(Struct):
    """What page builders read besides the analysis: payload files and highlighted lines."""

    inputs: Inputs
    read: Reader
    highlighter: Highlighter

    def text(self, path: str | None) -> str:
        data = self.read(path) if path else None
        return (data or b"").decode("utf-8", "replace")


def record_page(inputs: Inputs, pending: PendingPage, title: str) -> dict[str, Any]:
    """The `Page` fields of a page about one record."""
    return {
        "title": title,
        "root": "../" * pending.url.count("/"),
        "source": inputs.analysis.source,
        "source_links": inputs.source_links,
        "compile_id": pending.compile_id,
        "kind": pending.kind,
        "lineno": pending.lineno,
        "compile_page": compile_page_url(pending.compile_id),
        "usual_index": usual_index(inputs),
    }


class CodePage(Page, kw_only=True, eq=False):  # a view model: never compared or printed
    template: ClassVar[str] = ""  # rendered by a function, not a template (render.PYTHON_PAGES)
    lines: Lines
    lang: str
    raw_url: str | None


def code_page(build: Builder, pending: PendingPage) -> CodePage:
    lang = pending.data["lang"]
    lines = build.highlighter.lines(build.text(pending.payload), lang)
    return CodePage(**record_page(build.inputs, pending, pending.data["title"]), lines=lines, lang=lang, raw_url=pending.payload)


class PassDiffPage(Page, kw_only=True, eq=False):  # a view model: never compared or printed
    """One of vLLM's post-grad passes: the graph before it beside the graph after it."""

    template: ClassVar[str] = ""  # rendered by a function, not a template (render.PYTHON_PAGES)
    before: Lines
    after: Lines
    before_url: str
    after_url: str
    baseline: str
    added: int | None
    removed: int | None


def pass_diff_page(build: Builder, pending: PendingPage) -> PassDiffPage:
    data = pending.data
    before_url, after_url = data.get("before") or "", data.get("after") or ""
    return PassDiffPage(
        **record_page(build.inputs, pending, data["title"]),
        before=build.highlighter.lines(build.text(before_url), "python", budgeted=False),
        after=build.highlighter.lines(build.text(after_url), "python", budgeted=False),
        before_url=before_url, after_url=after_url, baseline=data.get("baseline") or "",
        added=data.get("added"), removed=data.get("removed"),
    )


class ShapeFactView(Struct):
    symbol: str
    sources: list[str]
    value: str
    reason: str
    expr: str
    user_stack: list[FrameView]
    stack: list[FrameView]


class MetricView(Struct):
    """A row of the metrics page's "Other Metrics" table: a field and its value as JSON text."""

    name: str
    text: str  # the value as compact JSON (cut at OTHER_METRIC_CHARS)
    preview: str  # its start, shown while a long value is collapsed ("" when it is short)
    chars: int  # the length of the whole JSON text


# "Other Metrics": a value longer than this (or of several lines) is collapsed, and one longer
# than OTHER_METRIC_CHARS cut (raw.jsonl keeps every record whole)
OTHER_METRIC_SHORT = 120
OTHER_METRIC_CHARS = 4 * MAX_VALUE_CHARS


def metric_view(name: str, value: Any) -> MetricView:
    try:
        text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        text = repr(value)
    chars = len(text)
    short = chars <= OTHER_METRIC_SHORT and "\n" not in text
    preview = "" if short else first_line(text[:OTHER_METRIC_SHORT]) + "…"
    return MetricView(name, text[:OTHER_METRIC_CHARS], preview, chars)


class MetricsPage(Page, kw_only=True, eq=False):  # a view model: never compared or printed
    template: ClassVar[str] = ""  # rendered by a function, not a template (render.PYTHON_PAGES)
    fields: str  # every field, as indented JSON
    meta: dict[str, Any]
    stack: list[FrameView]
    outputs: list[dict[str, Any]]
    specializations: list[ShapeFactView] = field(default_factory=list)
    guards_added: list[ShapeFactView] = field(default_factory=list)
    restart_reasons: list[Any] = field(default_factory=list)
    other_metrics: list[MetricView] = field(default_factory=list)  # the fields with no place of their own
    null_metrics: list[str] = field(default_factory=list)  # those of them logged as null
    value_limit: int = OTHER_METRIC_CHARS


def metrics_page(build: Builder, pending: PendingPage) -> MetricsPage:
    inputs, compile_id = build.inputs, pending.compile_id
    meta: dict[str, Any] = pending.data["meta"]
    analysis = inputs.analysis
    stack = analysis.start_stacks.get(compile_id.frame_key()) if compile_id is not None else None
    reasons = meta.get("restart_reasons")
    return MetricsPage(
        **record_page(inputs, pending, pending.data["title"]),
        fields=pretty_value(meta),
        meta=meta,
        stack=[frame_view(f, inputs) for f in stack or []],
        outputs=artifact_rows(analysis.directory.get(key_of(compile_id), []), artifact_view),
        specializations=shape_fact_views(inputs, "specializations", compile_id),
        guards_added=shape_fact_views(inputs, "guards_added", compile_id),
        restart_reasons=reasons if isinstance(reasons, list) else [],
        # which fields have no place of their own is the metrics kinds' word (kinds.builtin.other_metrics)
        other_metrics=[metric_view(name, meta[name]) for name in pending.data.get("other", []) if name in meta],
        null_metrics=list(pending.data.get("null", [])),
    )


def shape_fact_views(inputs: Inputs, role: str, compile_id: CompileId | None) -> list[ShapeFactView]:
    """Specialisations / fast guards of a frame compile (every attempt), with readable stacks."""
    views = []
    for fact in inputs.analysis.shape_facts_for(role, compile_id):
        sources = fact.get("sources")
        user_stack, stack = stacks_of(fact, inputs, compile_id)
        views.append(ShapeFactView(
            symbol=format_value(fact.get("symbol")) if fact.get("symbol") is not None else "",
            sources=[str(s) for s in sources] if isinstance(sources, list) else [],
            value=format_value(fact.get("value")) if fact.get("value") is not None else "",
            reason=format_value(fact.get("reason")) if fact.get("reason") is not None else "",
            expr=format_value(fact.get("expr")) if fact.get("expr") is not None else "",
            user_stack=user_stack,
            stack=stack,
        ))
    return views


def stacks_of(meta: dict[str, Any], inputs: Inputs, key: CompileId | None) -> tuple[list[FrameView], list[FrameView]]:
    """(`user_stack`, `stack`) of a fact logged under `key`, as frames a page shows."""
    process = key.process if key is not None else 0
    user, framework = (frames_from_json(meta.get(name), process) or [] for name in ("user_stack", "stack"))
    return [frame_view(f, inputs) for f in user], [frame_view(f, inputs) for f in framework]


class GuardsPage(Page, kw_only=True, eq=False):  # a view model: never compared or printed
    template: ClassVar[str] = ""  # rendered by a function, not a template (render.PYTHON_PAGES)
    guards: list[str]


def guards_page(build: Builder, pending: PendingPage) -> GuardsPage:
    return GuardsPage(**record_page(build.inputs, pending, pending.kind), guards=pending.data["guards"])


MAX_PROVENANCE_NODES = 500


class ExpressionNode(Struct):
    depth: int
    result: str
    method: str
    arguments: str
    user_stack: list[FrameView]
    stack: list[FrameView]


class GuardInfoPage(Page, kw_only=True, eq=False):  # a view model: never compared or printed
    """A symbolic_guard_information page: the guard, where it came from, locals, provenance."""

    template: ClassVar[str] = ""  # rendered by a function, not a template (render.PYTHON_PAGES)
    expr: str
    result: str | None
    user_stack: list[FrameView]
    stack: list[FrameView]
    locals: list[tuple[str, str]]
    symbols: list[tuple[str, str]]
    sources: list[tuple[str, str]]
    provenance: list[ExpressionNode]


def guard_info_page(build: Builder, pending: PendingPage) -> GuardInfoPage:
    inputs, meta = build.inputs, pending.data["meta"]
    frame_locals = meta.get("frame_locals") if isinstance(meta.get("frame_locals"), dict) else {}
    user_stack, stack = stacks_of(meta, inputs, pending.compile_id)
    return GuardInfoPage(
        **record_page(inputs, pending, "Symbolic shapes information"),
        expr=format_value(meta.get("expr")),
        result=format_value(meta.get("result")) if meta.get("result") is not None else None,
        user_stack=user_stack,
        stack=stack,
        locals=_named_values(frame_locals.get("locals")),
        symbols=_named_values(frame_locals.get("symbols")),
        sources=_named_values(meta.get("symbol_to_sources")),
        provenance=expression_tree(inputs, meta.get("expr_node_id")),
    )


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


def expression_tree(inputs: Inputs, root: Any) -> list[ExpressionNode]:
    """Depth-first walk of the expressions behind a guard (each node once), flattened with depths."""
    nodes: list[ExpressionNode] = []
    if not isinstance(root, int) or isinstance(root, bool):
        return nodes
    expressions = inputs.analysis.expressions
    seen: set[int] = set()
    work = [(root, 0)]
    while work and len(nodes) < MAX_PROVENANCE_NODES:
        node_id, depth = work.pop()
        if node_id in seen or node_id not in expressions:
            continue
        seen.add(node_id)
        meta = expressions[node_id]
        arguments = meta.get("arguments") if isinstance(meta.get("arguments"), list) else []
        user_stack, stack = stacks_of(meta, inputs, None)  # export provenance: the first process's
        nodes.append(ExpressionNode(
            depth=min(depth, 12),
            result=format_value(meta.get("result")),
            method=format_value(meta.get("method")),
            arguments=", ".join(map(str, arguments or [])),
            user_stack=user_stack,
            stack=stack,
        ))
        children = meta.get("argument_ids") if isinstance(meta.get("argument_ids"), list) else []
        work.extend((child, depth + 1) for child in reversed(children or []) if isinstance(child, int))
    return nodes


class StackTracesPage(Page, kw_only=True, eq=False):  # a view model: never compared or printed
    template: ClassVar[str] = ""  # rendered by a function, not a template (render.PYTHON_PAGES)
    kernels: list[tuple[str, list[str]]]


def stack_traces_page(build: Builder, pending: PendingPage) -> StackTracesPage:
    """Kernel → stack traces, with the escaped `\\n` sequences torch writes turned into real lines."""
    kernels = []
    for kernel, items in pending.data["traces"].items():
        texts = items if isinstance(items, list) else [items]
        kernels.append((kernel, [str(t).replace("\\n", "\n").rstrip("\n") for t in texts]))
    return StackTracesPage(**record_page(build.inputs, pending, "Kernel stack traces"), kernels=kernels)


class ProvenancePage(Page, kw_only=True, eq=False):  # a view model: never compared or printed
    """-i: the three-pane highlighter of one compile id (pre-grad graph, post-grad graph, generated code)."""

    template: ClassVar[str] = ""  # rendered by a function, not a template (render.PYTHON_PAGES)
    pre: list[str]
    post: list[str]
    code: list[str]
    code_kind: str
    code_offset: int
    mappings: Any  # the line maps, as JSON for the page's script
    has_data: bool
    inputs: dict[str, str]  # pane → the file feeding it


def provenance_page(build: Builder, key: CompileId | None) -> ProvenancePage:
    inputs = build.inputs
    panes = provenance.panes(inputs.analysis.directory[key], build.read)
    return ProvenancePage(**page_base(inputs, f"Provenance {label(key)}"), compile_id=key, compile_page=compile_page_url(key), **panes)


PageView = Callable[[Builder, PendingPage], Page]
# view name (Output.view) → its model builder
PAGE_VIEWS: dict[str, PageView] = {
    "code": code_page,
    "metrics": metrics_page,
    "guards": guards_page,
    "guard_info": guard_info_page,
    "stack_traces": stack_traces_page,
    "pass_diff": pass_diff_page,
}
