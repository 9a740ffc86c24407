"""The page of one compile id: everything logged about it, in pipeline order, in one place."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...analysis import kinds, questions
from ...model import CompileId, RecordSummary
from ...analysis.stacks import frames_from_json
from ...analysis.store import Store
from ...analysis.summary import STATUS_LABELS
from .common import artifact_view, base_context, compile_page_url, frame_view, index_anchor, label, pretty_value
from .sections import PageBuilder

MAX_RECORDS_PER_KIND = 12  # per kind on a compile-id page; all of them are in raw.jsonl
PASS_STAGES = {"pre_grad_passes": "pre_grad", "joint_graph_passes": "joint", "post_grad_passes": "post_grad"}
# compile-time phases drawn in the bar: (label, css class)
PHASES = (("Dynamo", "dynamo"), ("AOTAutograd", "aot"), ("Inductor", "inductor"), ("Code generation", "codegen"))


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _id(value: Any) -> Any:
    """An id from a log as a dict key (logs may hold lists or dicts where ints belong)."""
    return value if isinstance(value, (int, str, float, type(None))) else repr(value)


def input_tensors(records: list[RecordSummary]) -> list[dict[str, str]]:
    """describe_tensor joined with describe_source (by describer and tensor id) and describe_storage."""
    sources: dict[tuple[Any, Any], list[str]] = {}
    storages: dict[tuple[Any, Any], Any] = {}
    tensors: list[dict[str, Any]] = []
    for record in records:
        if "describe_source" in record.kinds:
            meta = record.kind_meta("describe_source")
            sources.setdefault((_id(meta.get("describer_id")), _id(meta.get("id"))), []).append(_text(meta.get("source")))
        elif "describe_storage" in record.kinds:
            meta = record.kind_meta("describe_storage")
            storages[(_id(meta.get("describer_id")), _id(meta.get("id")))] = meta.get("size")
        elif "describe_tensor" in record.kinds:
            tensors.append(record.kind_meta("describe_tensor"))
    rows = []
    for meta in tensors:
        key = (_id(meta.get("describer_id")), _id(meta.get("id")))
        flags = [name for name in ("requires_grad", "is_leaf", "is_view", "is_parameter", "is_sparse", "is_inference") if meta.get(name)]
        rows.append(
            {
                "source": ", ".join(sources.get(key, [])) or f"tensor {meta.get('id')}",
                "shape": _text(meta.get("size")),
                "dtype": _text(meta.get("dtype")).removeprefix("torch."),
                "device": _text(meta.get("device")).removeprefix("device(type=").removesuffix(")").replace("'", ""),
                "stride": _text(meta.get("stride")),
                "storage": _text(storages.get((_id(meta.get("describer_id")), _id(meta.get("storage"))))),
                "flags": ", ".join(flags),
            }
        )
    return rows


SYMBOL_KINDS = {
    "create_symbol": ("created", lambda m: (m.get("symbol"), m.get("val"), m.get("vr"), m.get("source"))),
    # an unbacked symbol has no source: it is a value computed from data (node_id is an object id, not a name)
    "create_unbacked_symbol": ("unbacked", lambda m: (m.get("symbol"), "", m.get("vr"), "data-dependent value")),
    "symbolic_shape_specialization": ("specialised", lambda m: (m.get("symbol"), m.get("value"), "", ", ".join(map(str, m.get("sources") or [])))),
    "guard_added_fast": ("guard", lambda m: (m.get("expr"), "", "", "")),
    "guard_added": ("guard", lambda m: (m.get("expr"), m.get("prefix", ""), "", "")),
    "propagate_real_tensors_provenance": ("unsound", lambda m: (m.get("expr"), m.get("result"), "", "")),
    "guard_on_data_dependent_error": ("data-dependent error", lambda m: (m.get("expr"), "", "", "")),
}


def symbols(records: list[RecordSummary], report: Store) -> list[dict[str, Any]]:
    """Symbols created, specialised and guarded on, with the user line that caused each."""
    rows = []
    for record in records:
        for kind in record.kinds:
            if kind not in SYMBOL_KINDS:
                continue
            event, extract = SYMBOL_KINDS[kind]
            meta = record.kind_meta(kind)
            name, value, ranges, source = (_text(v) for v in extract(meta))
            user = frames_from_json(meta.get("user_stack")) or []
            rows.append(
                {
                    "event": event,
                    "kind": kind,
                    "name": name,
                    "value": value,
                    "range": ranges,
                    "source": source,
                    "where": frame_view(user[-1], report) if user else None,
                    "line": record.line,
                }
            )
    return rows


def runtime_overheads(records: list[RecordSummary]) -> list[tuple[str, str]]:
    """Non-empty `runtime_*` fields of compilation_metrics_runtime records (cudagraphify, autotuning)."""
    rows = []
    for record in records:
        for kind in ("compilation_metrics_runtime", "bwd_compilation_metrics_runtime"):
            meta = record.kind_meta(kind)
            for name, value in meta.items():
                if name.startswith("runtime_") and value not in (None, 0, "", [], {}):
                    rows.append((f"{kind}.{name}", _text(value)))
    return rows


def time_bar(fields: dict[str, Any]) -> dict[str, Any] | None:
    """Compile time split into Dynamo / AOTAutograd / Inductor / codegen, as SVG-ready segments."""
    entire, backend = fields.get("entire_frame_compile_time_s"), fields.get("backend_compile_time_s")
    inductor, codegen = fields.get("inductor_compile_time_s"), fields.get("code_gen_time_s")
    if not _number(entire) or entire <= 0:
        return None
    backend = min(backend, entire) if _number(backend) else 0.0
    inductor = min(inductor, backend) if _number(inductor) else 0.0
    codegen = min(codegen, inductor) if _number(codegen) else 0.0
    values = (entire - backend, backend - inductor, inductor - codegen, codegen)
    segments, x = [], 0.0
    for (name, css), seconds in zip(PHASES, values, strict=True):
        width = 1000 * seconds / entire
        segments.append({"label": name, "css": css, "seconds": seconds, "x": round(x, 2), "width": round(width, 2), "share": seconds / entire})
        x += width
    return {"total": entire, "segments": segments}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def pass_timings(report: Store, key: CompileId | None) -> dict[str, list[tuple[str, float]]]:
    """`pass.<stage>.<name>` chromium timings of the frame compile, by pipeline stage, slowest first."""
    if key is None:
        return {}
    times = report.phase_times.get(key.frame_key(), {})
    stages: dict[str, list[tuple[str, float]]] = {}
    for name, micros in times.items():
        parts = name.split(".", 2)
        if len(parts) == 3 and parts[0] == "pass":
            stages.setdefault(PASS_STAGES.get(parts[1], parts[1]), []).append((parts[2], micros / 1e6))
    return {stage: sorted(rows, key=lambda r: -r[1]) for stage, rows in stages.items()}


MAX_PHASE_ROWS = 80


def phase_tree(report: Store, key: CompileId | None, generation: int = 0) -> list[dict[str, Any]]:
    """Where compile time went: the chromium spans of the compile as a tree, with total and self time.

    Spans nest (`compile_fx` inside `backend_compile` inside `entire_frame_compile`), so their times
    add up only along the tree: self time is a span's total less its children's.
    """
    if key is None:
        return []
    tree = report.phase_trees.get((key.frame_key(), generation), {})
    children: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for path in tree:
        children.setdefault(path[:-1], []).append(path)
    rows: list[dict[str, Any]] = []

    def walk(parent: tuple[str, ...]) -> None:
        for path in sorted(children.get(parent, []), key=lambda p: -tree[p]):
            if len(rows) >= MAX_PHASE_ROWS:
                return
            total = tree[path]
            inner = sum(tree[c] for c in children.get(path, []))
            rows.append({"name": path[-1], "depth": len(path) - 1, "total": total / 1e6, "self": max(0.0, total - inner) / 1e6})
            walk(path)

    walk(())
    return rows


def cache_rows(report: Store, key: CompileId | None) -> list[dict[str, Any]]:
    return [
        {
            "cache": event.cache,
            "state": event.state,
            "key": event.key,
            "reason": event.reason,
            "saved": event.time_saved_ns / 1e9 if event.time_saved_ns else None,
            "url": event.url,
            "line": event.line,
        }
        for event in report.cache_events_of(key)
    ]


def recompile_rows(report: Store, key: CompileId | None, generation: int | None = None) -> list[dict[str, str]]:
    rows = []
    for reason in report.recompile_reasons_of(key, generation):
        head, _, rest = reason.partition("\n")
        rows.append({"head": head, "rest": rest})
    return rows


def record_groups(records: list[RecordSummary], counts: Counter[str]) -> list[dict[str, Any]]:
    """Spooled record summaries grouped by kind (first-appearance order), each record as a field table.

    Kinds counted but not spooled (chromium events live in chromium_events.json) get a count-only group.
    """
    groups: dict[str, dict[str, Any]] = {}
    for record in records:
        for kind in record.kinds or ["(no kind)"]:
            group = groups.get(kind)
            if group is None:
                group = groups[kind] = {
                    "kind": kind,
                    "title": kinds.title_of(kind),
                    "known": kinds.known(kind),
                    "count": 0,
                    "records": [],
                }
            group["count"] += 1
            if len(group["records"]) < MAX_RECORDS_PER_KIND:
                meta = record.meta.get(kind)
                group["records"].append(
                    {
                        "line": record.line,
                        "meta": pretty_value(meta),
                        "context": pretty_value(record.context) if record.context else "",
                        "payload": record.payload,
                        "payload_bytes": record.payload_bytes,
                        "outputs": record.outputs,
                    }
                )
    for kind, count in counts.items():
        if kind not in groups:
            groups[kind] = {"kind": kind, "title": kinds.title_of(kind), "known": kinds.known(kind), "count": count, "records": []}
    return list(groups.values())


@dataclass(frozen=True, slots=True)
class PageRef:
    """One compile page: a compile id in one generation (ids reused after reset() get a page each)."""

    key: CompileId | None
    generation: int
    url: str
    label: str
    is_compile: bool
    previous: PageRef | None = None  # the compiles before and after it in log order ([-/-] is none)
    next: PageRef | None = None
    others: tuple[PageRef, ...] = ()  # the other generations of a reused compile id


def page_refs(report: Store) -> list[PageRef]:
    """Every compile page, in log order (a reused id's generations one after another), linked to its neighbours."""
    plain = []
    for key in report.directory:
        if key in report.pageless:  # listed without a page (limits.PAGED_START_ONLY)
            continue
        for generation in report.generations_of(key):
            name = label(key) + (f" #{generation + 1}" if generation else "")
            plain.append(PageRef(key, generation, compile_page_url(key, generation), name, questions.is_compile(key)))
    compiles = [page for page in plain if page.is_compile]
    neighbours = {page.url: (compiles[i - 1] if i else None, compiles[i + 1] if i + 1 < len(compiles) else None) for i, page in enumerate(compiles)}
    by_key: dict[CompileId | None, list[PageRef]] = {}
    for page in plain:
        by_key.setdefault(page.key, []).append(page)
    refs = []
    for page in plain:
        before, after = neighbours.get(page.url, (None, None))
        others = tuple(p for p in by_key[page.key] if p is not page) if len(by_key[page.key]) > 1 else ()
        refs.append(PageRef(page.key, page.generation, page.url, page.label, page.is_compile, before, after, others))
    return refs


def compile_context(report: Store, pages: list[PageRef], position: int, records: list[RecordSummary], builder: PageBuilder) -> dict[str, Any]:
    """The page of `pages[position]`, with links to the compiles before and after it in log order."""
    page = pages[position]
    key, generation = page.key, page.generation
    mine = lambda line: report.generation_at(key, line) == generation  # noqa: E731 - a one-line filter
    records = [r for r in records if mine(r.line)]
    context = base_context(report, f"Compile {page.label}", root="../")
    metrics = [m for m in report.own_metrics(key) if m.generation == generation]
    frame_key = key.frame_key() if key is not None else None
    pooled = [m for m in report.metrics.get(frame_key, []) if m.generation == generation] if key is not None and key.frame_compile_id is not None else metrics
    stack = report.start_stack(key, generation) if key is not None else None
    sections = builder.sections(records, key, report.lineages_of(key))
    before, after = page.previous, page.next
    context.update(
        label=page.label,
        page=page.url,
        anchor=index_anchor(report, key),
        status=report.status_of(key, generation) if page.is_compile else None,
        status_labels=STATUS_LABELS,
        artifacts=[artifact_view(a) for a in report.directory[key]],
        metrics=[{"url": m.url, "fields": m.fields, "bar": time_bar(m.fields)} for m in metrics],
        backward=_backward_times(report, key, mine),
        other_attempts=[
            {"label": label(m.compile_id), "page": compile_page_url(m.compile_id, generation)} for m in pooled if m not in metrics
        ],
        reuses=list(page.others),
        generation=generation,
        stack=[frame_view(f, report) for f in stack or []],
        sections=sections,
        guard_count=next((m.fields.get("guard_count") for m in metrics if isinstance(m.fields.get("guard_count"), int)), None),
        hops=[(s, hop) for s in sections["pipeline"] for hop in s.hops],
        graph_breaks=[b for b in report.graph_breaks_of_frame(key) if mine(b.line)],
        recompiles=recompile_rows(report, key, generation),
        tensors=input_tensors(records),
        symbols=symbols(records, report),
        runtime=runtime_overheads(records),
        cache=[row for row in cache_rows(report, key) if mine(row["line"])],
        pass_timings=pass_timings(report, key),
        phases=phase_tree(report, key, generation),
        subgraphs=sorted({s.subgraph for group in sections.values() for s in group if s.subgraph}),
        groups=record_groups(records, _unspooled_counts(report, key, generation)),
        previous=before.url if before else None,
        next=after.url if after else None,
        previous_label=before.label if before else None,
        next_label=after.label if after else None,
    )
    return context


def _unspooled_counts(report: Store, key: CompileId | None, generation: int) -> Counter[str]:
    """Counts of the kinds whose records are not spooled (chromium events), shown on the first page of an id."""
    counts = report.kinds.get(key, Counter())
    if len(report.generations_of(key)) == 1:
        return counts
    return Counter({kind: n for kind, n in counts.items() if kind == "chromium_event"}) if generation == 0 else Counter()


def _backward_times(report: Store, key: CompileId | None, mine: Callable[[int], bool]) -> list[float]:
    """Seconds of each lazy backward compile of this compile (bwd_compilation_metrics)."""
    if key is None:
        return []
    times = []
    for compile_id, line, meta in report.backward_metrics.get(key.frame_key(), []):
        seconds = questions.seconds(meta.get("inductor_compile_time_s"))
        if compile_id == key and mine(line) and seconds is not None:
            times.append(seconds)
    return times
