"""Page contexts: the report model turned into the plain values each template shows.

Pure functions of the model (and of spooled record summaries); URLs are relative to the report
root, and templates prefix them with `root` so every page works from `file://` and from a zip.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import orjson

from . import compile_page, parsers, summary
from .compile_page import PageBuilder
from .model import Artifact, CompileId, Record
from .render import safe_href, trusted_html
from .report import STATUS_LABELS, Report
from .stacks import Frame, eval_with_key, frames_from_json, simplify_filename

MAX_RECORDS_PER_KIND = 12  # per kind on a compile-id page; all of them are in raw.jsonl
MAX_VALUE_CHARS = 4000


@dataclass(slots=True)
class FrameView:
    file: str
    line: int
    name: str
    loc: str
    href: str | None  # root-relative link to FX-generated source, when we have it


def frame_view(frame: Frame, report: Report) -> FrameView:
    filename = simplify_filename(report.resolve_filename(frame.filename))
    key = eval_with_key(filename)
    page = f"dump_file/eval_with_key_{key}.html" if key else None
    href = f"{page}#L{frame.line}" if page in report.global_files else None
    return FrameView(filename, frame.line, frame.name, frame.loc, href)


def anchor(key: CompileId | None) -> str:
    return "cid-unknown" if key is None else f"cid-{key.dirname}"


def compile_page_url(compile_id: CompileId | None) -> str:
    if compile_id is None:
        return "unknown/index.html"
    return f"{compile_id.directory_key().dirname}/index.html"


def provenance_page_url(key: CompileId | None) -> str:
    return f"provenance_tracking_{'unknown' if key is None else key.dirname}.html"


def label(key: CompileId | None) -> str:
    return "(unknown)" if key is None else str(key)


# ------------------------------------------------------------------------------------------------
# pages rendered while reading


def code_context(lines: Any, lang: str, title: str, raw_url: str) -> dict[str, Any]:
    return {"title": title, "lines": lines, "raw_url": raw_url, "lang": lang}


def metrics_context(report: Report, record: Record, meta: dict[str, Any], title: str) -> dict[str, Any]:
    key = record.compile_id.directory_key() if record.compile_id is not None else None
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


def shape_fact_views(report: Report, kind: str, compile_id: CompileId | None) -> list[dict[str, Any]]:
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


def guard_context(report: Report, meta: dict[str, Any]) -> dict[str, Any]:
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


def expression_tree(report: Report, root: Any) -> list[dict[str, Any]]:
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


def export_rows(report: Report) -> list[dict[str, Any]]:
    """The issues torch.export ran into, as table rows (plain text; the template escapes it)."""
    rows = []
    for failure in report.export_failures:
        meta = failure.meta
        expr, result, op, reason = (meta.get(k) for k in ("expr", "result", "op", "reason"))
        if failure.failure_type == "Guard Evaluated":
            text = f"The guard {expr} was evaluated during export and may have caused a constraint violation."
        elif failure.failure_type == "Data Dependent Error":
            text = f"Could not decide whether {expr} always holds, so it was specialised to {result} and a runtime assert was inserted."
        elif failure.failure_type == "Missing Fake Kernel":
            text = f"torch.ops.{op} has no fake kernel implementation."
        elif failure.failure_type == "Mismatched Fake Kernel":
            text = f"torch.ops.{op} has a fake kernel whose behaviour differs from the real kernel: {reason}"
        else:
            text = f"A guard on the data-dependent expression {expr} raised an error."
        rows.append(
            {
                "type": failure.failure_type,
                "text": text,
                "url": failure.url,
                "line": failure.lineno,
                "fake_kernel": "Fake Kernel" in failure.failure_type,
                "label": label(failure.compile_id),
                "page": compile_page_url(failure.compile_id),
            }
        )
    return rows


def stack_traces_context(traces: dict[str, Any]) -> dict[str, Any]:
    """Kernel → stack traces, with the escaped `\\n` sequences torch writes turned into real lines."""
    kernels = []
    for kernel, items in traces.items():
        texts = items if isinstance(items, list) else [items]
        kernels.append((kernel, [str(t).replace("\\n", "\n").rstrip("\n") for t in texts]))
    return {"title": "Kernel stack traces", "kernels": kernels}


# ------------------------------------------------------------------------------------------------
# pages rendered at the end


def artifact_view(artifact: Artifact) -> dict[str, Any]:
    href = safe_href(artifact.url) if artifact.is_link else artifact.url
    return {
        "url": artifact.url,
        "href": href,
        "external": artifact.is_link,
        "name": artifact.name,
        "number": artifact.number,
        "suffix": artifact.suffix,
        "readable_url": artifact.readable_url or None,
        "kind": artifact.kind,
    }


def format_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        text = value
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (int, float)):
        text = repr(value)
    else:
        try:
            text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
        except (TypeError, orjson.JSONEncodeError):
            text = repr(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS] + f"… ({len(text)} characters)"


def pretty_value(value: Any) -> str:
    """Metadata as indented JSON (one escaped block per record is far cheaper than a table)."""
    try:
        text = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        text = repr(value)
    return text if len(text) <= MAX_VALUE_CHARS * 4 else text[: MAX_VALUE_CHARS * 4] + f"\n… ({len(text):,} characters)"


def trie_rows(report: Report, trie) -> list[dict[str, Any]]:
    rows = []
    for kind, frame, terminals in trie.rows():
        rows.append(
            {
                "kind": kind,
                "frame": frame_view(frame, report) if frame is not None else None,
                "ids": [terminal_view(report, t) for t in terminals],
            }
        )
    return rows


def terminal_view(report: Report, compile_id: CompileId | None) -> dict[str, Any]:
    if compile_id is None:
        return {"label": "(unknown)", "url": None, "status": "missing"}
    return {"label": str(compile_id), "url": compile_page_url(compile_id), "status": report.status_of(compile_id)}


def kind_rows(counts: Counter[str]) -> list[dict[str, Any]]:
    return [
        {"kind": kind, "count": count, "title": parsers.title_of(kind), "known": parsers.known(kind)}
        for kind, count in counts.most_common()
    ]


def key_status(report: Report, key: CompileId | None) -> str | None:
    """The outcome of a compile; None for buckets that are not compiles ([-/-], malformed ids)."""
    if key is None or (key.frame_id is None and key.compiled_autograd_id is None):
        return None
    return report.status_of(key)


def compile_entries(report: Report) -> list[dict[str, Any]]:
    entries = []
    for key, artifacts in report.directory.items():
        # metrics are pooled per frame compile for the status; the time belongs to the attempt that logged it
        metrics = [
            m
            for m in report.metrics.get(key.frame_key() if key is not None else None, [])
            if (m.compile_id.directory_key() if m.compile_id is not None else None) == key
        ]
        entries.append(
            {
                "label": label(key),
                "anchor": anchor(key),
                "page": compile_page_url(key),
                "status": key_status(report, key),
                "artifacts": [artifact_view(a) for a in artifacts],
                "kinds": kind_rows(report.kinds.get(key, Counter())),
                "compile_time": next((m.get("entire_frame_compile_time_s") for m in metrics if m.get("entire_frame_compile_time_s") is not None), None),
            }
        )
    return entries


def row_view(row: summary.CompileRow) -> dict[str, Any]:
    return {**vars(row), "page": compile_page_url(row.key)}


def base_context(report: Report, title: str, root: str = "") -> dict[str, Any]:
    return {
        "title": title,
        "root": root,
        "source": report.source,
        "compile_id": None,
        "kind": "",
        "lineno": None,
        "compile_page": None,
    }


def index_context(report: Report) -> dict[str, Any]:
    context = base_context(report, "tlparse-py report")
    context.update(
        custom_header=trusted_html(report.custom_header_html),
        stats=report.stats,
        stats_line=report.stats.format(),
        diagnostics=report.diagnostics,
        summary=summary.counts(report),
        compile_rows=[row_view(r) for r in summary.compile_rows(report)],
        graph_breaks=[
            {**vars(g), "compile_ids": [{"label": label(k), "page": compile_page_url(k)} for k in g.compile_ids]}
            for g in summary.graph_break_groups(report)
        ],
        recompiles=[
            {
                "frame": f"{'!' + str(f.compiled_autograd_id) + '/' if f.compiled_autograd_id is not None else ''}{f.frame_id}",
                "name": f.name,
                "compiles": [{"label": label(k), "page": compile_page_url(k)} for k in f.compiles],
                "reasons": [{"label": label(k), "page": compile_page_url(k), "reason": r} for k, r in f.reasons],
                "hit_limit": f.hit_limit,
            }
            for f in summary.recompiles_per_frame(report)
        ],
        slowest=[row_view(r) for r in summary.slowest(report)],
        unknown_kinds=sorted(report.unknown_kinds.items()),
        trie=trie_rows(report, report.trie),
        unknown_trie=trie_rows(report, report.unknown_stacks) if report.unknown_stacks.size else [],
        failures=len(report.failures),
        compiles=compile_entries(report),
        status_labels=STATUS_LABELS,
        rank=report.rank,
        export_mode=report.export_mode,
        provenance_pages=[{"label": label(k), "url": url, "has_data": has_data} for k, url, has_data in report.provenance_pages],
        export_rows=export_rows(report),
        exported_programs=[url for url in report.exported_programs if url],
    )
    return context


def failures_context(report: Report) -> dict[str, Any]:
    context = base_context(report, "Failures and restarts")
    context["rows"] = [
        {
            "label": label(row.compile_id),
            "url": row.url,
            "page": compile_page_url(row.compile_id),
            "type": row.failure_type,
            "description": row.description,
            "source": row.source,
        }
        for row in report.failures
    ]
    return context


def record_groups(records: list[dict[str, Any]], counts: Counter[str]) -> list[dict[str, Any]]:
    """Spooled record summaries grouped by kind (first-appearance order), each record as a field table.

    Kinds counted but not spooled (chromium events live in chromium_events.json) get a count-only group.
    """
    groups: dict[str, dict[str, Any]] = {}
    for record in records:
        for kind in record["kinds"] or ["(no kind)"]:
            group = groups.get(kind)
            if group is None:
                group = groups[kind] = {
                    "kind": kind,
                    "title": parsers.title_of(kind),
                    "known": parsers.known(kind),
                    "count": 0,
                    "records": [],
                }
            group["count"] += 1
            if len(group["records"]) < MAX_RECORDS_PER_KIND:
                meta = record["meta"].get(kind)
                group["records"].append(
                    {
                        "line": record["line"],
                        "meta": pretty_value(meta),
                        "context": pretty_value(record["context"]) if record.get("context") else "",
                        "payload": record["payload"],
                        "payload_bytes": record["payload_bytes"],
                        "outputs": record["outputs"],
                    }
                )
    for kind, count in counts.items():
        if kind not in groups:
            groups[kind] = {"kind": kind, "title": parsers.title_of(kind), "known": parsers.known(kind), "count": count, "records": []}
    return list(groups.values())


def compile_context(
    report: Report, keys: list[CompileId | None], position: int, records: list[dict[str, Any]], builder: PageBuilder
) -> dict[str, Any]:
    """The page of `keys[position]`, with links to its neighbours in log order."""
    key = keys[position]
    context = base_context(report, f"Compile {label(key)}", root="../")
    frame_key = key.frame_key() if key is not None else None
    metrics = [m for m in report.metrics.get(frame_key, []) if (m.compile_id.directory_key() if m.compile_id else None) == key]
    pooled = report.metrics.get(frame_key, []) if key is not None and key.frame_compile_id is not None else metrics
    stack = report.start_stacks.get(frame_key) if key is not None else None
    sections = builder.sections(records, key)
    context.update(
        label=label(key),
        page=compile_page_url(key),
        anchor=anchor(key),
        status=key_status(report, key),
        status_labels=STATUS_LABELS,
        artifacts=[artifact_view(a) for a in report.directory[key]],
        metrics=[{"url": m.url, "fields": m.fields, "bar": compile_page.time_bar(m.fields)} for m in metrics],
        other_attempts=[
            {"label": label(m.compile_id), "page": compile_page_url(m.compile_id)} for m in pooled if m not in metrics
        ],
        stack=[frame_view(f, report) for f in stack or []],
        sections=sections,
        graph_breaks=builder.graph_breaks_of(key),
        recompiles=compile_page.recompile_rows(report, key),
        tensors=compile_page.input_tensors(records),
        symbols=compile_page.symbols(records, report),
        runtime=compile_page.runtime_overheads(records),
        cache=compile_page.cache_rows(builder, key),
        pass_timings=compile_page.pass_timings(report, key),
        phases=compile_page.phase_table(report, key),
        subgraphs=sorted({s.subgraph for group in sections.values() for s in group if s.subgraph}),
        groups=record_groups(records, report.kinds.get(key, Counter())),
        previous=compile_page_url(keys[position - 1]) if position > 0 else None,
        next=compile_page_url(keys[position + 1]) if position + 1 < len(keys) else None,
        previous_label=label(keys[position - 1]) if position > 0 else None,
        next_label=label(keys[position + 1]) if position + 1 < len(keys) else None,
    )
    return context
