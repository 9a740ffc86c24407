"""One function per record kind, in a registry: adding a kind is one decorated function here.

A parser turns a `Record` into `Output`s (files the report should contain) and may note facts in the
`Report` (stacks, metrics, failures). It never formats HTML and never touches the disk: a page is
asked for by template name and context, and the builder numbers, renders and writes it.

Registration order is tlparse 0.4.3's parser order, which fixes the global file numbering when one
record carries several kinds. Kinds registered with `files=False` never produce numbered files
(tlparse has no output for them), so the numbering of everything else stays identical to tlparse.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

import orjson

from . import facts
from .model import Record
from .report import ExportFailure, GraphBreak
from .stacks import dump_file_path, frames_from_json, strip_convert_frame

if TYPE_CHECKING:
    from .build import ParseContext

FILE = "file"  # a generated page, numbered: `name_N.ext`
GLOBAL = "global"  # a generated page at a fixed path from the report root (dump_file)
PAYLOAD = "payload"  # the payload verbatim, numbered
REFORMAT = "reformat"  # the payload transformed (pretty JSON), numbered
LINK = "link"  # an external URL; consumes a number, writes nothing


@dataclass(slots=True)
class Output:
    kind: str
    name: str = ""  # file name (FILE/PAYLOAD/REFORMAT), path from the root (GLOBAL), label (LINK)
    template: str = ""  # FILE/GLOBAL: the page template
    context: dict[str, Any] | None = None
    reformat: Callable[[bytes], bytes] | None = None
    url: str = ""  # LINK
    on_written: Callable[[str], None] | None = None  # told the output's url once it is numbered


Parser = Callable[[Record, "ParseContext"], Iterable[Output]]


@dataclass(slots=True)
class KindInfo:
    kind: str
    parse: Parser
    title: str  # a short human description shown next to the kind name
    files: bool  # whether it can produce numbered files
    order: int


KINDS: dict[str, KindInfo] = {}


def parser(*kinds: str, title: str, files: bool = True) -> Callable[[Parser], Parser]:
    """Register `fn` as the parser of `kinds` (the envelope keys, exactly as torch writes them)."""

    def register(fn: Parser) -> Parser:
        for kind in kinds:
            KINDS[kind] = KindInfo(kind, fn, title, files, len(KINDS))
        return fn

    return register


def known(kind: str) -> bool:
    return kind in KINDS


def parsers_for(record: Record) -> list[KindInfo]:
    """The registered kinds of a record, in registration (tlparse) order."""
    infos = [KINDS[kind] for kind in record.kinds if kind in KINDS]
    infos.sort(key=lambda info: info.order)
    return infos


# --------------------------------------------------------------------------------------------
# Graphs and code logged as plain text payloads (tlparse parsers 1-11, same order)


def _payload_as(name: str) -> list[Output]:
    return [Output(PAYLOAD, f"{name}.txt")]


@parser("optimize_ddp_split_graph", title="DDPOptimizer: the graph split into buckets")
@parser("compiled_autograd_graph", title="Compiled autograd: captured backward graph")
@parser("aot_forward_graph", title="AOTAutograd: partitioned forward graph")
@parser("aot_backward_graph", title="AOTAutograd: partitioned backward graph")
@parser("aot_inference_graph", title="AOTAutograd: inference graph")
@parser("aot_joint_graph", title="AOTAutograd: joint forward+backward graph")
@parser("inductor_post_grad_graph", title="Inductor: graph after post-grad passes")
@parser("inductor_pre_grad_graph", title="Inductor: graph before pre-grad passes")
@parser("dynamo_cpp_guards_str", title="Dynamo: installed guards (C++ guard tree)")
def plain_graph(record: Record, ctx: ParseContext) -> list[Output]:
    return _payload_as(ctx.current_kind)


@parser("graph_dump", title="A named graph or code dump (AOTInductor sources, vLLM graphs)")
def graph_dump(record: Record, ctx: ParseContext) -> list[Output]:
    name = ctx.text_field(record, "graph_dump", "name") or "graph_dump"
    return _payload_as(name)


@parser("dynamo_output_graph", title="Dynamo: captured FX graph")
def dynamo_output_graph(record: Record, ctx: ParseContext) -> list[Output]:
    return _payload_as("dynamo_output_graph")


@parser("dynamo_guards", title="Dynamo: guards (legacy structured list)")
def dynamo_guards(record: Record, ctx: ParseContext) -> list[Output]:
    try:
        guards = orjson.loads(record.payload or b"")
        if not isinstance(guards, list) or not all(isinstance(g, dict) and isinstance(g.get("code"), str) for g in guards):
            raise ValueError("expected a list of {code: str, ...}")
    except ValueError as exc:
        ctx.problem(record, "fail_dynamo_guards_json", "dynamo_guards payload is not a guard list", str(exc))
        return []
    return [Output(FILE, "dynamo_guards.html", "guards.html.j2", {"guards": [g["code"] for g in guards]})]


@parser("inductor_output_code", title="Inductor: generated output code")
def inductor_output_code(record: Record, ctx: ParseContext) -> list[Output]:
    key = record.compile_id.directory_key() if record.compile_id is not None else None
    if key not in ctx.report.distributed.code_collectives:  # the collectives parity check reads the first code
        ctx.report.distributed.code_collectives[key] = facts.collective_calls(record.payload_text())
    filename = ctx.text_field(record, "inductor_output_code", "filename")
    stem = f"inductor_output_code_{PurePosixPath(filename.replace(chr(92), '/')).stem}" if filename else "inductor_output_code"
    if ctx.plain_text:
        return [Output(PAYLOAD, f"{stem}.txt")]
    return [Output(FILE, f"{stem}.html", "code.html.j2", ctx.code_page(record, "python", filename or "output code"))]


@parser("optimize_ddp_split_child", title="DDPOptimizer: one bucket's submodule")
def optimize_ddp_split_child(record: Record, ctx: ParseContext) -> list[Output]:
    name = ctx.text_field(record, "optimize_ddp_split_child", "name") or "unnamed"
    return _payload_as(f"optimize_ddp_split_child_{name}")


@parser("aot_autograd_backward_compilation_metrics", title="AOTAutograd: backward compilation metrics (legacy)")
def aot_backward_metrics(record: Record, ctx: ParseContext) -> list[Output]:
    meta = ctx.dict_field(record, "aot_autograd_backward_compilation_metrics")
    return [Output(FILE, "aot_autograd_backward_compilation_metrics.html", "metrics.html.j2", ctx.metrics_page(record, meta, "AOT Autograd Backward Compilation Metrics"))]


@parser("bwd_compilation_metrics", title="Backward compilation metrics")
def bwd_metrics(record: Record, ctx: ParseContext) -> list[Output]:
    meta = ctx.dict_field(record, "bwd_compilation_metrics")
    ctx.report.note_backward_metrics(record.compile_id, meta)
    return [Output(FILE, "bwd_compilation_metrics.html", "metrics.html.j2", ctx.metrics_page(record, meta, "Backward Compilation Metrics"))]


@parser("link", title="A link to an external resource (e.g. an uploaded profile)")
def link(record: Record, ctx: ParseContext) -> list[Output]:
    name = ctx.text_field(record, "link", "name") or "link"
    url = ctx.text_field(record, "link", "url") or ""
    return [Output(LINK, name, url=url)]


@parser("artifact", title="A named artifact (text or JSON)")
def artifact(record: Record, ctx: ParseContext) -> list[Output]:
    name = ctx.text_field(record, "artifact", "name") or "artifact"
    encoding = ctx.text_field(record, "artifact", "encoding")
    if encoding == "json":
        output = Output(REFORMAT, f"{name}.json", reformat=pretty_json)
    else:  # "string", and encodings nobody knows: the payload is shown as text rather than lost
        output = Output(PAYLOAD, f"{name}.txt")
    fact = ARTIFACT_FACTS.get(name)
    if fact is not None:
        output.on_written = lambda url: fact(record, ctx, url)
    return [output]


@parser("dump_file", title="Source of FX-generated code (eval_with_key) referenced by stack frames")
def dump_file(record: Record, ctx: ParseContext) -> list[Output]:
    name = ctx.text_field(record, "dump_file", "name") or "dump_file"
    return [Output(GLOBAL, dump_file_path(name), "code.html.j2", ctx.code_page(record, "python", name))]


@parser("compilation_metrics", title="Dynamo: metrics of one frame compile (time, graph size, failure, restarts)")
def compilation_metrics(record: Record, ctx: ParseContext) -> list[Output]:
    meta = ctx.dict_field(record, "compilation_metrics")
    ctx.report.note_metrics(record, meta)
    page = Output(FILE, "compilation_metrics.html", "metrics.html.j2", ctx.metrics_page(record, meta, "Compilation Metrics"))
    page.on_written = lambda url: ctx.report.metrics_page_written(record, url)
    return [page]


# --------------------------------------------------------------------------------------------
# Artifacts whose content the summary needs: small facts noted while the payload is at hand

ArtifactFact = Callable[[Record, "ParseContext", str], None]
ARTIFACT_FACTS: dict[str, ArtifactFact] = {}


def artifact_fact(*names: str) -> Callable[[ArtifactFact], ArtifactFact]:
    """Register `fn(record, ctx, url)` for artifacts with these names (called once the file is written)."""

    def register(fn: ArtifactFact) -> ArtifactFact:
        ARTIFACT_FACTS.update(dict.fromkeys(names, fn))
        return fn

    return register


@artifact_fact("dynamo_graph_break_reason")
def graph_break_reason(record: Record, ctx: ParseContext, url: str) -> None:
    reason, explanation, location = facts.parse_graph_break(record.payload_text())
    ctx.report.graph_breaks.append(GraphBreak(record.compile_id, reason, explanation, location, url))


@artifact_fact("recompile_reasons", "compiled_autograd_compile_reasons")
def recompile_reasons(record: Record, ctx: ParseContext, url: str) -> None:
    key = record.compile_id.directory_key() if record.compile_id is not None else None
    ctx.report.recompile_reasons.setdefault(key, []).extend(facts.parse_reason_list(record.payload_text()))


@artifact_fact(*(f"{cache}_{state}" for cache in facts.CACHES for state in ("hit", "miss", "bypass")), "fx_graph_bundled_cache_hit")
def cache_event(record: Record, ctx: ParseContext, url: str) -> None:
    name = ctx.text_field(record, "artifact", "name") or ""
    ctx.report.cache_events.append(facts.cache_event(record.compile_id, name, record.payload_text(), url))


def _artifact_number(ctx: ParseContext) -> int:
    return ctx.builder.last_number  # the number the artifact just got (its place in log order)


@artifact_fact("inductor_runtime_and_tensor_meta")
def runtime_estimates(record: Record, ctx: ParseContext, url: str) -> None:
    ops, fingerprint = facts.runtime_and_tensor_meta(record.payload_text())
    ctx.report.distributed.runtime.append((_artifact_number(ctx), record.compile_id, ops, fingerprint))


@artifact_fact("inductor_collective_schedule")
def collective_schedule(record: Record, ctx: ParseContext, url: str) -> None:
    ops = facts.string_list(record.payload_text())
    ctx.report.distributed.schedules.append((_artifact_number(ctx), record.compile_id, ops))


@artifact_fact("graph_execution", "inductor_graph_execution")
def graph_execution(record: Record, ctx: ParseContext, url: str) -> None:
    ctx.report.distributed.execution_orders.append((_artifact_number(ctx), facts.execution_order(record.payload_text())))


@artifact_fact("compiler_collective", "aot_joint_graph_sync_decision_cross_ranks", "inductor_spmd_graph_mismatch")
def compiler_collective(record: Record, ctx: ParseContext, url: str) -> None:
    name = ctx.text_field(record, "artifact", "name") or ""
    text = record.payload_text()
    digest = hashlib.md5(text.encode("utf-8", "surrogatepass")).hexdigest()
    ctx.report.distributed.agreements.append((record.compile_id, name, digest, facts.first_line(text), url))


def pretty_json(payload: bytes) -> bytes:
    """Payload JSON re-indented with sorted keys (as tlparse writes it); text that is not JSON is kept as is."""
    try:
        value = orjson.loads(payload)
    except orjson.JSONDecodeError:
        try:
            import json

            value = json.loads(payload.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            return payload
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return payload


# --------------------------------------------------------------------------------------------
# Kinds that feed the report without files of their own


@parser("dynamo_start", title="Dynamo started compiling a frame: the user stack that triggered it", files=False)
def dynamo_start(record: Record, ctx: ParseContext) -> list[Output]:
    meta = ctx.dict_field(record, "dynamo_start")
    frames = frames_from_json(meta.get("stack"))
    if frames is not None and record.compile_id is not None:
        frames = strip_convert_frame(frames, ctx.resolve_filename)
        ctx.report.note_start_stack(record.compile_id, frames)
    return []


@parser("chromium_event", title="A Perfetto/Chrome trace event (collected into chromium_events.json)", files=False)
def chromium_event(record: Record, ctx: ParseContext) -> list[Output]:
    ctx.report_chromium_event(record)
    return []


@parser("create_symbol", title="A backed symbol was created: a dynamic dimension appeared", files=False)
def create_symbol(record: Record, ctx: ParseContext) -> list[Output]:
    source = ctx.dict_field(record, "create_symbol").get("source")
    if record.compile_id is not None and isinstance(source, str):
        ctx.report.distributed.dynamic_sources.setdefault(record.compile_id.frame_key(), set()).add(source)
    return []


@parser("symbolic_shape_specialization", title="A symbol was specialised to a constant", files=False)
@parser("guard_added_fast", title="A shape guard was added", files=False)
def shape_fact(record: Record, ctx: ParseContext) -> list[Output]:
    if record.compile_id is not None:
        ctx.report.note_shape_fact(ctx.current_kind, record.compile_id, ctx.dict_field(record, ctx.current_kind))
    return []


def _no_files(record: Record, ctx: ParseContext) -> list[Output]:
    return []


# Kinds shown on the compile-id page as records (metadata table + payload), with no file of their own.
for _kind, _title in {
    "describe_storage": "Fake-tensor conversion: a real storage",
    "describe_tensor": "Fake-tensor conversion: an input tensor (shape, dtype, device, strides)",
    "describe_source": "Fake-tensor conversion: the Dynamo source of a tensor",
    "propagate_real_tensors": "Real-tensor propagation decided an unbacked expression",
    "export": "torch.export started",
    "compilation_metrics_runtime": "Compile overhead paid at run time (cudagraphify, Triton autotuning)",
    "bwd_compilation_metrics_runtime": "Backward compile overhead paid at run time",
}.items():
    parser(_kind, title=_title, files=False)(_no_files)


# --------------------------------------------------------------------------------------------
# torch.export: what draft_export found. Noted in every mode; files only in export mode (-e), where
# tlparse numbers exactly these outputs (exported programs and guard pages).


@parser("exported_program", title="The final exported program", files=False)
def exported_program(record: Record, ctx: ParseContext) -> list[Output]:
    ctx.report.exported_programs.append("")
    if not ctx.export:
        return []
    index = len(ctx.report.exported_programs) - 1

    def remember(url: str) -> None:
        ctx.report.exported_programs[index] = url

    return [Output(PAYLOAD, "exported_program.txt", on_written=remember)]


@parser("guard_added", title="A shape guard was added (verbose, with frame locals)", files=False)
def guard_added(record: Record, ctx: ParseContext) -> list[Output]:
    meta = ctx.dict_field(record, "guard_added")
    if meta.get("prefix") != "eval":  # only guards evaluated by export can be constraint violations
        return []
    return _export_failure(record, ctx, "Guard Evaluated", meta, guard_page=True)


@parser("propagate_real_tensors_provenance", title="Real-tensor propagation decided an unbacked expression", files=False)
def propagate_real_tensors_provenance(record: Record, ctx: ParseContext) -> list[Output]:
    meta = ctx.dict_field(record, "propagate_real_tensors_provenance")
    return _export_failure(record, ctx, "Data Dependent Error", meta, guard_page=True)


@parser("guard_on_data_dependent_error", title="A guard on a data-dependent expression raised an error", files=False)
def guard_on_data_dependent_error(record: Record, ctx: ParseContext) -> list[Output]:
    return _export_failure(record, ctx, "Data Dependent Guard Error", ctx.dict_field(record, ctx.current_kind), guard_page=False)


@parser("missing_fake_kernel", title="A custom op has no fake kernel", files=False)
@parser("mismatched_fake_kernel", title="A custom op's fake kernel disagrees with its real kernel", files=False)
def fake_kernel(record: Record, ctx: ParseContext) -> list[Output]:
    kind = "Missing Fake Kernel" if ctx.current_kind == "missing_fake_kernel" else "Mismatched Fake Kernel"
    return _export_failure(record, ctx, kind, ctx.dict_field(record, ctx.current_kind), guard_page=False)


@parser("expression_created", title="A symbolic expression was built (export provenance)", files=False)
@parser("create_unbacked_symbol", title="An unbacked symbol was created (data-dependent value)", files=False)
def symbolic_expression(record: Record, ctx: ParseContext) -> list[Output]:
    if ctx.export:  # the provenance graph behind guard pages; chatty, so only kept when it is used
        ctx.report.note_expression(ctx.current_kind, ctx.dict_field(record, ctx.current_kind))
    return []


def _export_failure(record: Record, ctx: ParseContext, failure_type: str, meta: dict[str, Any], guard_page: bool) -> list[Output]:
    failure = ExportFailure(failure_type, meta, record.compile_id, record.lineno)
    ctx.report.export_failures.append(failure)
    if not (ctx.export and guard_page):
        return []

    def remember(url: str) -> None:
        failure.url = url

    context = ctx.guard_page(record, meta)
    return [Output(FILE, "symbolic_guard_information.html", "guard_info.html.j2", context, on_written=remember)]


def title_of(kind: str) -> str:
    info = KINDS.get(kind)
    return info.title if info else "Unknown record kind (not known to this version of tlparse-py)"

