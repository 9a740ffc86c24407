"""The page of one compile id: everything logged about it, in pipeline order, in one place.

Built at the end of a run from the compile id's spooled record summaries; graph and code texts are
read back from the files already written, one compile id at a time, so memory stays bounded.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import parsers
from .model import CompileId
from .render import Highlighter, Lines
from .report import Report
from .stacks import frames_from_json

INLINE_LIMIT = 600_000  # bytes of text shown inline per section; larger ones are linked
DIFF_LINE_LIMIT = 20_000  # lines per side above which a diff is not computed
Reader = Callable[[str], bytes | None]

# name → (stage, role, title). A "start" opens a stage, "pass"/"end" steps are diffed against the
# previous step of the same stage, "graph" steps stand alone (their IR differs from their neighbours).
PIPELINE_STEPS: dict[str, tuple[str, str, str]] = {
    "dynamo_output_graph": ("dynamo", "graph", "Dynamo graph"),
    "optimize_ddp_split_graph": ("ddp", "graph", "DDPOptimizer: split graph"),
    "optimize_ddp_split_child": ("ddp", "graph", "DDPOptimizer: bucket submodule"),
    "compiled_autograd_graph_pre_reordering": ("compiled_autograd", "start", "Compiled autograd graph (before reordering)"),
    "compiled_autograd_graph": ("compiled_autograd", "end", "Compiled autograd graph"),
    "inductor_pre_grad_graph": ("pre_grad", "start", "Pre-grad graph"),
    "before_pre_grad_graph": ("pre_grad", "start", "Before pre-grad passes"),
    "after_pre_grad_graph": ("pre_grad", "end", "After pre-grad passes"),
    "before_recompile_pre_grad": ("recompile_pre_grad", "start", "Before pre-grad passes (recompile)"),
    "after_recompile_pre_grad": ("recompile_pre_grad", "end", "After pre-grad passes (recompile)"),
    "aot_joint_graph": ("aot", "graph", "AOT joint graph"),
    "before_joint_graph": ("joint", "start", "Before joint-graph passes"),
    "after_joint_graph": ("joint", "end", "After joint-graph passes"),
    "aot_forward_graph": ("aot", "graph", "AOT forward graph"),
    "aot_backward_graph": ("aot", "graph", "AOT backward graph"),
    "aot_inference_graph": ("aot", "graph", "AOT inference graph"),
    "aot_inference_graph_after_hop_passes": ("aot", "hop", "AOT inference graph after higher-order-op passes"),
    "before_post_grad_graph": ("post_grad", "start", "Before post-grad passes"),
    "inductor_post_grad_graph": ("post_grad", "end", "Post-grad graph (after passes)"),
    "after_post_grad_graph": ("post_grad", "end", "After post-grad passes"),
    "before_recompile_post_grad": ("recompile_post_grad", "start", "Before post-grad passes (recompile)"),
    "after_recompile_post_grad": ("recompile_post_grad", "end", "After post-grad passes (recompile)"),
    "overlap_scheduling_graph_before": ("overlap", "start", "Before overlap scheduling"),
    "overlap_scheduling_graph_after": ("overlap", "end", "After overlap scheduling"),
    "pre_decomp_comms": ("decomp_comms", "start", "Before comms decomposition"),
    "post_decomp_comms": ("decomp_comms", "end", "After comms decomposition"),
}
CODE_NAMES = {
    "inductor_output_code": ("python", "Inductor output code"),
    "inductor_aot_wrapper_code": ("cpp", "AOTInductor wrapper code"),
    "inductor_aot_kernel_code": ("cpp", "AOTInductor kernel code"),
    "inductor_aot_header_code": ("cpp", "AOTInductor header"),
    "inductor_autotune_at_compile_time_code": ("python", "Autotuning code (compile time)"),
}
GUARD_NAMES = {"dynamo_cpp_guards_str": "Guards (C++ guard tree)", "dynamo_guards": "Guards"}
PASS_STAGES = {"pre_grad_passes": "pre_grad", "joint_graph_passes": "joint", "post_grad_passes": "post_grad"}
# compile-time phases drawn in the bar: (label, css class)
PHASES = (("Dynamo", "dynamo"), ("AOTAutograd", "aot"), ("Inductor", "inductor"), ("Code generation", "codegen"))


def name_of(kinds: list[str], meta: dict[str, Any]) -> str:
    """What a record is: its kind, or for artifacts and graph dumps their name."""
    kind = kinds[0] if kinds else "(no kind)"
    if kind in ("artifact", "graph_dump"):
        value = meta.get(kind)
        name = value.get("name") if isinstance(value, dict) else None
        return name if isinstance(name, str) else kind
    return kind


def record_name(record: dict[str, Any]) -> str:
    return name_of(record["kinds"], record["meta"])


def group_of(name: str, kinds: list[str]) -> str | None:
    """The compile-page section a text belongs to (None: not shown as a text)."""
    if name == "dynamo_graph_break_reason":
        return "graph_breaks"
    if name in ("recompile_reasons", "compiled_autograd_compile_reasons"):
        return "recompiles"
    if name in GUARD_NAMES:
        return "guards"
    if pipeline_step(name) is not None:
        return "pipeline"
    if name in CODE_NAMES:
        return "code"
    kind = kinds[0] if kinds else ""
    if kind in ("artifact", "graph_dump") or not parsers.known(kind):
        return "other"
    return None


def display(name: str, kinds: list[str], payload_url: str) -> tuple[str, str]:
    """(highlighting language, title) of a text."""
    step = pipeline_step(name)
    if step is not None:
        return "python", step[2]
    if name in CODE_NAMES:
        return CODE_NAMES[name]
    if name == "dynamo_guards":
        return "json", GUARD_NAMES[name]
    if name in GUARD_NAMES:
        return "python", GUARD_NAMES[name]
    return ("json" if payload_url.endswith(".json") else "text"), name


def pipeline_step(name: str) -> tuple[str, str, str] | None:
    if name in PIPELINE_STEPS:
        return PIPELINE_STEPS[name]
    if name.endswith("_pre_grad"):
        return ("pre_grad", "pass", f"Pre-grad pass {name[: -len('_pre_grad')]}")
    if name.endswith("_post_grad"):
        return ("post_grad", "pass", f"Post-grad pass {name[: -len('_post_grad')]}")
    if name.startswith(("optimus_", "cff_")):
        return ("fusion", "pass", f"Fusion rule {name}")
    return None


@dataclass
class Section:
    """One text shown on the page: a graph, code, guards, a reason..."""

    id: str
    title: str
    name: str
    line: int
    url: str | None  # the numbered artifact file
    raw_url: str | None  # the raw text
    lang: str
    size: int
    subgraph: str | None = None
    lines: Lines | None = None
    too_large: bool = False
    note: str = ""  # why it is linked rather than shown
    diff: dict[str, Any] | None = None
    text: str = ""  # kept only while the page is built (for diffs)


class PageBuilder:
    def __init__(self, report: Report, read: Reader, highlighter: Highlighter, inline_budget: float = 64e6):
        self.report = report
        self.read = read
        self.highlighter = highlighter
        self.inline_budget = inline_budget  # bytes of text shown inline across all compile pages
        self.inlined = 0
        # (compile id, log line) of every text shown inline, decided up front in log order so the
        # pages come out the same however (and in whatever order) they are built
        self.inline: set[tuple[CompileId | None, int]] | None = None
        self._cache_index: dict[CompileId | None, list[Any]] | None = None
        self._break_index: dict[CompileId | None, list[Any]] | None = None

    def cache_events_of(self, key: CompileId | None) -> list[Any]:
        """Cache lookups logged under this compile id (indexed once for all pages)."""
        if self._cache_index is None:
            self._cache_index = {}
            for event in self.report.cache_events:
                event_key = event.compile_id.directory_key() if event.compile_id is not None else None
                self._cache_index.setdefault(event_key, []).append(event)
        return self._cache_index.get(key, [])

    def graph_breaks_of(self, key: CompileId | None) -> list[Any]:
        """Graph breaks of the frame compile: logged by the attempt that broke, shown on every attempt's page."""
        if self._break_index is None:
            self._break_index = {}
            for brk in self.report.graph_breaks:
                frame = brk.compile_id.frame_key() if brk.compile_id is not None else None
                self._break_index.setdefault(frame, []).append(brk)
        return self._break_index.get(key.frame_key() if key is not None else None, [])

    def plan_inline(self, keys: list[CompileId | None], records_of: Callable[[CompileId | None], list[dict[str, Any]]]) -> None:
        """Choose which texts the compile pages show inline, within the budget, in log order."""
        self.inline = set()
        for key in keys:
            for record in records_of(key):
                if self._group_of(record_name(record), record) is None:
                    continue
                size = record.get("payload_bytes") or 0
                if size <= INLINE_LIMIT and self.inlined + size <= self.inline_budget:
                    self.inlined += size
                    self.inline.add((key, record["line"]))

    def sections(self, records: list[dict[str, Any]], key: CompileId | None = None) -> dict[str, list[Section]]:
        """Group the compile id's texts by page section, in log order."""
        groups: dict[str, list[Section]] = {
            "graph_breaks": [], "recompiles": [], "guards": [], "pipeline": [], "code": [], "other": []
        }
        for index, record in enumerate(records):
            name = record_name(record)
            group = self._group_of(name, record)
            if group is None:
                continue
            groups[group].append(self._section(f"s{index}", name, record, key))
        self._add_diffs(groups["pipeline"])
        for sections in groups.values():
            for section in sections:
                section.text = ""
        return groups

    def _group_of(self, name: str, record: dict[str, Any]) -> str | None:
        if record.get("payload") is None or "chromium_event" in record["kinds"]:
            return None
        return group_of(name, record["kinds"])

    def _section(self, section_id: str, name: str, record: dict[str, Any], key: CompileId | None) -> Section:
        outputs = [o["url"] for o in record.get("outputs", []) if not o.get("external")]
        lang, title = display(name, record["kinds"], record["payload"])
        if record["kinds"] and record["kinds"][0] == "optimize_ddp_split_child":
            meta = record["meta"].get("optimize_ddp_split_child")
            title = f"{title} {meta.get('name', '')}" if isinstance(meta, dict) else title
        subgraph = (record.get("context") or {}).get("subgraph_name")
        section = Section(
            id=section_id,
            title=title,
            name=name,
            line=record["line"],
            url=outputs[0] if outputs else None,
            raw_url=record["payload"],
            lang=lang,
            size=record.get("payload_bytes") or 0,
            subgraph=str(subgraph) if subgraph is not None else None,
        )
        if section.size > INLINE_LIMIT:
            section.too_large, section.note = True, f"too large to show inline ({section.size:,} bytes)"
            return section
        if self.inline is None:  # no plan: decide as we go
            shown = self.inlined + section.size <= self.inline_budget
            self.inlined += section.size if shown else 0
        else:
            shown = (key, record["line"]) in self.inline
        if not shown:
            section.too_large = True
            section.note = f"the compile pages of this report already show {self.inline_budget / 1e6:g} MB of text (--inline-mb)"
            return section
        data = self.read(record["payload"])
        if data is None:
            section.too_large, section.note = True, "its file could not be read back"
            return section
        section.text = data.decode("utf-8", "replace")
        section.lines = self.highlighter.lines(section.text, lang)
        return section

    def _add_diffs(self, steps: list[Section]) -> None:
        """Diff each pass/end step against the step before it in the same stage (and subgraph)."""
        last: dict[tuple[str, str | None], Section] = {}
        last_inference: dict[str | None, Section] = {}
        for section in steps:
            stage, role, _ = pipeline_step(section.name) or ("", "graph", "")
            scope = (stage, section.subgraph)
            base = None
            if role in ("pass", "end"):
                base = last.get(scope)
            elif role == "hop":
                base = last_inference.get(section.subgraph)
            if base is not None and not section.too_large and not base.too_large:
                section.diff = self._diff(base, section)
            if role == "start" or role in ("pass", "end"):
                last[scope] = section
            if section.name == "aot_inference_graph":
                last_inference[section.subgraph] = section

    def _diff(self, base: Section, step: Section) -> dict[str, Any]:
        old, new = base.text.splitlines(), step.text.splitlines()
        info: dict[str, Any] = {"base_title": base.title, "base_id": base.id, "added": 0, "removed": 0, "lines": None, "skipped": False}
        if len(old) > DIFF_LINE_LIMIT or len(new) > DIFF_LINE_LIMIT:
            info["skipped"] = True
            return info
        diff = list(difflib.unified_diff(old, new, base.title, step.title, lineterm="", n=3))
        info["added"] = sum(1 for line in diff if line.startswith("+") and not line.startswith("+++"))
        info["removed"] = sum(1 for line in diff if line.startswith("-") and not line.startswith("---"))
        info["lines"] = self.highlighter.lines("\n".join(diff), "diff", budgeted=False) if diff else None
        return info


# ------------------------------------------------------------------------------------------------
# tables built from record metadata


def _meta(record: dict[str, Any], kind: str) -> dict[str, Any]:
    value = record["meta"].get(kind)
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _id(value: Any) -> Any:
    """An id from a log as a dict key (logs may hold lists or dicts where ints belong)."""
    return value if isinstance(value, (int, str, float, type(None))) else repr(value)


def input_tensors(records: list[dict[str, Any]]) -> list[dict[str, str]]:
    """describe_tensor joined with describe_source (by describer and tensor id) and describe_storage."""
    sources: dict[tuple[Any, Any], list[str]] = {}
    storages: dict[tuple[Any, Any], Any] = {}
    tensors: list[dict[str, Any]] = []
    for record in records:
        if "describe_source" in record["kinds"]:
            meta = _meta(record, "describe_source")
            sources.setdefault((_id(meta.get("describer_id")), _id(meta.get("id"))), []).append(_text(meta.get("source")))
        elif "describe_storage" in record["kinds"]:
            meta = _meta(record, "describe_storage")
            storages[(_id(meta.get("describer_id")), _id(meta.get("id")))] = meta.get("size")
        elif "describe_tensor" in record["kinds"]:
            tensors.append(_meta(record, "describe_tensor"))
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
    "create_unbacked_symbol": ("unbacked", lambda m: (m.get("symbol"), "", m.get("vr"), f"node {m.get('node_id', '')}")),
    "symbolic_shape_specialization": ("specialised", lambda m: (m.get("symbol"), m.get("value"), "", ", ".join(map(str, m.get("sources") or [])))),
    "guard_added_fast": ("guard", lambda m: (m.get("expr"), "", "", "")),
    "guard_added": ("guard", lambda m: (m.get("expr"), m.get("prefix", ""), "", "")),
    "propagate_real_tensors_provenance": ("unsound", lambda m: (m.get("expr"), m.get("result"), "", "")),
    "guard_on_data_dependent_error": ("data-dependent error", lambda m: (m.get("expr"), "", "", "")),
}


def symbols(records: list[dict[str, Any]], report: Report) -> list[dict[str, Any]]:
    """Symbols created, specialised and guarded on, with the user line that caused each."""
    from .pages import frame_view

    rows = []
    for record in records:
        for kind in record["kinds"]:
            if kind not in SYMBOL_KINDS:
                continue
            event, extract = SYMBOL_KINDS[kind]
            meta = _meta(record, kind)
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
                    "line": record["line"],
                }
            )
    return rows


def runtime_overheads(records: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Non-empty `runtime_*` fields of compilation_metrics_runtime records (cudagraphify, autotuning)."""
    rows = []
    for record in records:
        for kind in ("compilation_metrics_runtime", "bwd_compilation_metrics_runtime"):
            meta = _meta(record, kind)
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
    for (label, css), seconds in zip(PHASES, values, strict=True):
        width = 1000 * seconds / entire
        segments.append({"label": label, "css": css, "seconds": seconds, "x": round(x, 2), "width": round(width, 2), "share": seconds / entire})
        x += width
    return {"total": entire, "segments": segments}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def pass_timings(report: Report, key: CompileId | None) -> dict[str, list[tuple[str, float]]]:
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


def phase_table(report: Report, key: CompileId | None) -> list[tuple[str, float]]:
    """Top-level chromium phases of the frame compile (not passes), slowest first."""
    if key is None:
        return []
    times = report.phase_times.get(key.frame_key(), {})
    return sorted(((n, t / 1e6) for n, t in times.items() if not n.startswith("pass.")), key=lambda r: -r[1])[:25]


def cache_rows(builder: PageBuilder, key: CompileId | None) -> list[dict[str, Any]]:
    return [
        {
            "cache": event.cache,
            "state": event.state,
            "key": event.key,
            "reason": event.reason,
            "saved": event.time_saved_ns / 1e9 if event.time_saved_ns else None,
            "url": event.url,
        }
        for event in builder.cache_events_of(key)
    ]


def recompile_rows(report: Report, key: CompileId | None) -> list[dict[str, str]]:
    rows = []
    for reason in report.recompile_reasons.get(key, []):
        head, _, rest = reason.partition("\n")
        rows.append({"head": head, "rest": rest})
    return rows

