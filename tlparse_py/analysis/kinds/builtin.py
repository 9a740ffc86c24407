"""The record kinds torch 2.13 writes, each declared once: parser, files, title, section, language, facts.

Declaration order is tlparse 0.4.3's parser order, which fixes the global file numbering when one
record carries several kinds. A parser turns a `Record` into `Output`s (files the report should
contain) and may note facts in the analysis; it never formats HTML and never touches the disk.
Kinds whose parser returns no files have none in tlparse either, so every other file's number
stays identical to tlparse's.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import PurePosixPath
from typing import Any

import orjson

from ... import jsondepth
from .. import facts
from ..store import Agreement, CollectiveSchedule, ExecutionOrder, ExportFailure, LoggedBreak, RuntimeEstimate, graph_of, label_of
from ...model import Record
from ..export_shapes import ExportGuard, ExportSymbol, export_call
from ..export_trace import PartialGraph, StackFrame, guard_error, own_export_call, unbacked_symbol
from ..stacks import dump_file_path, frames_from_json, strip_convert_frame
from . import vllm
from ..guard_words import dynamo_names
from ..summary import first_line
from ..vllm import PIECE_SPAN
from ..wrapper import guarded_class
from .context import ParseContext
from .registry import FILE, GLOBAL, KINDS, LINK, NAMES, PAYLOAD, REFORMAT, Output, Step, Symbol, declare, kind, named

# --------------------------------------------------------------------------------------------
# Graphs and code logged as plain text payloads (tlparse parsers 1-11, same order)


PIECE_SPAN_BYTES = PIECE_SPAN.encode()  # looked for in chromium events, only in vLLM logs


def _payload_as(name: str) -> list[Output]:
    return [Output(PAYLOAD, f"{name}.txt")]


# The metrics fields the metrics page (report/html/metrics_page.py, shared by the three metrics kinds)
# shows in a place of their own; tests/test_other_metrics.py holds this equal to the fields it names.
METRICS_SHOWN = frozenset({
    "co_name", "co_filename", "co_firstlineno",
    "entire_frame_compile_time_s", "backend_compile_time_s", "inductor_compile_time_s", "code_gen_time_s",
    "dynamo_time_before_restart_s",
    "fail_type", "fail_reason", "fail_user_frame_filename", "fail_user_frame_lineno", "restart_reasons",
    "cache_size", "accumulated_cache_size",
    "guard_count", "shape_env_guard_count", "graph_op_count", "graph_node_count", "graph_input_count",
    "compliant_custom_ops", "non_compliant_ops",
})


def other_metrics(meta: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The fields of a metrics record with no place of their own on its page, in log order: (those
    with a value, those logged as null). The page lists the first in its "Other Metrics" table, as
    upstream tlparse does after 0.4.3, and names the second."""
    valued = [name for name, value in meta.items() if name not in METRICS_SHOWN and value is not None]
    null = [name for name, value in meta.items() if name not in METRICS_SHOWN and value is None]
    return valued, null


def _metrics_page(name: str, meta: dict[str, Any], title: str) -> Output:
    other, null = other_metrics(meta)
    return Output(FILE, name, view="metrics", data={"meta": meta, "title": title, "other": other, "null": null})


_GRAPH = {"section": "pipeline", "lang": "python"}


@kind("optimize_ddp_split_graph", title="DDPOptimizer: the graph split into buckets", **_GRAPH,
      label="DDPOptimizer: split graph", step=Step("ddp", "graph"))
@kind("compiled_autograd_graph", title="Compiled autograd: captured backward graph", **_GRAPH,
      label="Compiled autograd graph", step=Step("compiled_autograd", "end", "backward"))
@kind("aot_forward_graph", title="AOTAutograd: partitioned forward graph", **_GRAPH,
      label="AOT forward graph", step=Step("aot", "graph", "forward"))
@kind("aot_backward_graph", title="AOTAutograd: partitioned backward graph", **_GRAPH,
      label="AOT backward graph", step=Step("aot", "graph", "backward"))
@kind("aot_inference_graph", title="AOTAutograd: inference graph", **_GRAPH,
      label="AOT inference graph", step=Step("aot", "graph", "inference"))
@kind("aot_joint_graph", title="AOTAutograd: joint forward+backward graph", **_GRAPH,
      label="AOT joint graph", step=Step("aot", "graph", "joint"))
@kind("inductor_post_grad_graph", title="Inductor: graph after post-grad passes", **_GRAPH,
      label="Post-grad graph (after passes)", step=Step("post_grad", "end"), provenance=("post", 1))
@kind("inductor_pre_grad_graph", title="Inductor: graph before pre-grad passes", **_GRAPH,
      label="Pre-grad graph", step=Step("pre_grad", "start"), provenance=("pre", 1))
@kind("dynamo_cpp_guards_str", title="Dynamo: installed guards (C++ guard tree)", section="guards", lang="python",
      label="Guards (C++ guard tree)")
def plain_graph(record: Record, ctx: ParseContext) -> list[Output]:
    if ctx.current_kind == "inductor_post_grad_graph":
        _note_fingerprint(record, ctx, "post_grad")
    elif ctx.current_kind == "dynamo_cpp_guards_str":
        _note_guarded_names(record, ctx)
        _note_wrapped_class(record, ctx)
    return _payload_as(ctx.current_kind)


def _note_wrapped_class(record: Record, ctx: ParseContext) -> None:
    """The class a compile's guards name for the local `fn`: the model torch's wrapper called, when the
    compile started in it (`wrapper.py`); its compiles are named after that model."""
    module = guarded_class(record.payload, record.payload_text) if record.compile_id is not None else None
    if module is not None and record.compile_id is not None:
        ctx.analysis.wrapped.note(record.compile_id, record.lineno, module)


def _note_guarded_names(record: Record, ctx: ParseContext) -> None:
    """The names Dynamo made up (`___stack0`) that a compile's guards mention: its page says what they are."""
    payload = record.payload or b""
    if record.compile_id is None or (b"___stack" not in payload and b"___context_manager_" not in payload):
        return  # the common case, without decoding the guards
    names = dynamo_names(record.payload_text())
    if names:
        ctx.analysis.note_guarded_names(record.compile_id, record.lineno, names)


def _note_fingerprint(record: Record, ctx: ParseContext, part: str, code: bool = False) -> None:
    """A graph's or code's digest for the cross-rank comparison, when one will read it (ctx.fingerprints)."""
    if ctx.fingerprints:
        ctx.analysis.distributed.fingerprint(record.compile_id).add(part, *facts.graph_fingerprint(record.payload_text(), code=code))


@kind("graph_dump", title="A named graph or code dump (AOTInductor sources, vLLM graphs)")
def graph_dump(record: Record, ctx: ParseContext) -> list[Output]:
    name = ctx.text_field(record, "graph_dump", "name") or "graph_dump"
    if vllm.is_vllm_dump(name):
        return vllm.graph_dump(record, ctx, name)
    return _payload_as(name)


@kind("dynamo_output_graph", title="Dynamo: captured FX graph", **_GRAPH, label="Dynamo graph", step=Step("dynamo", "graph"))
def dynamo_output_graph(record: Record, ctx: ParseContext) -> list[Output]:
    _note_fingerprint(record, ctx, "dynamo")
    return _payload_as("dynamo_output_graph")


@kind("dynamo_guards", title="Dynamo: guards (legacy structured list)", section="guards", lang="json", label="Guards")
def dynamo_guards(record: Record, ctx: ParseContext) -> list[Output]:
    try:
        guards = jsondepth.loads(record.payload or b"")
        if not isinstance(guards, list) or not all(isinstance(g, dict) and isinstance(g.get("code"), str) for g in guards):
            raise ValueError("expected a list of {code: str, ...}")
    except ValueError as exc:
        ctx.problem(record, "fail_dynamo_guards_json", "dynamo_guards payload is not a guard list", str(exc))
        return []
    return [Output(FILE, "dynamo_guards.html", view="guards", data={"guards": [g["code"] for g in guards]})]


@kind("inductor_output_code", title="Inductor: generated output code", section="code", lang="python", label="Inductor output code",
      provenance=("python", 0))
def inductor_output_code(record: Record, ctx: ParseContext) -> list[Output]:
    label = label_of(record.compile_id)
    if label not in ctx.analysis.distributed.code_collectives:  # the collectives parity check reads the first code
        ctx.analysis.distributed.code_collectives[label] = facts.collective_calls(record.payload_text())
    _note_fingerprint(record, ctx, "output_code", code=True)
    filename = ctx.text_field(record, "inductor_output_code", "filename")
    stem = f"inductor_output_code_{PurePosixPath(filename.replace(chr(92), '/')).stem}" if filename else "inductor_output_code"
    if ctx.plain_text:
        return [Output(PAYLOAD, f"{stem}.txt")]
    return [Output(FILE, f"{stem}.html", view="code", data={"lang": "python", "title": filename or "output code"})]


@kind("optimize_ddp_split_child", title="DDPOptimizer: one bucket's submodule", **_GRAPH,
      label="DDPOptimizer: bucket submodule", subject=lambda meta: str(meta.get("name", "")),
      step=Step("ddp", "graph"))
def optimize_ddp_split_child(record: Record, ctx: ParseContext) -> list[Output]:
    name = ctx.text_field(record, "optimize_ddp_split_child", "name") or "unnamed"
    return _payload_as(f"optimize_ddp_split_child_{name}")


@kind("aot_autograd_backward_compilation_metrics", title="AOTAutograd: backward compilation metrics (legacy)")
def aot_backward_metrics(record: Record, ctx: ParseContext) -> list[Output]:
    meta = ctx.dict_field(record, "aot_autograd_backward_compilation_metrics")
    return [_metrics_page("aot_autograd_backward_compilation_metrics.html", meta, "AOT Autograd Backward Compilation Metrics")]


@kind("bwd_compilation_metrics", title="Backward compilation metrics")
def bwd_metrics(record: Record, ctx: ParseContext) -> list[Output]:
    meta = ctx.dict_field(record, "bwd_compilation_metrics")
    ctx.analysis.note_backward_metrics(record.compile_id, record.lineno, meta)
    return [_metrics_page("bwd_compilation_metrics.html", meta, "Backward Compilation Metrics")]


@kind("link", title="A link to an external resource (e.g. an uploaded profile)")
def link(record: Record, ctx: ParseContext) -> list[Output]:
    name = ctx.text_field(record, "link", "name") or "link"
    url = ctx.text_field(record, "link", "url") or ""
    return [Output(LINK, name, url=url)]


@kind("artifact", title="A named artifact (text or JSON)")
def artifact(record: Record, ctx: ParseContext) -> list[Output]:
    name = ctx.text_field(record, "artifact", "name") or "artifact"
    encoding = ctx.text_field(record, "artifact", "encoding")
    if encoding == "json":
        output = Output(REFORMAT, f"{name}.json", reformat=pretty_json)
    else:  # "string", and encodings nobody knows: the payload is shown as text rather than lost
        output = Output(PAYLOAD, f"{name}.txt")
    if name == "inductor_post_grad_graph":  # compared across ranks, like the kind of that name
        _note_fingerprint(record, ctx, "post_grad")
    declared = NAMES.get(name)
    facts_of = declared.facts if declared is not None else None
    if facts_of is not None:
        output.on_written = lambda url: facts_of(record, ctx, url)
    return [output]


@kind("dump_file", title="Source of FX-generated code (eval_with_key) referenced by stack frames")
def dump_file(record: Record, ctx: ParseContext) -> list[Output]:
    name = ctx.text_field(record, "dump_file", "name") or "dump_file"
    return [Output(GLOBAL, dump_file_path(name), view="code", data={"lang": "python", "title": name})]


@kind("compilation_metrics", title="Dynamo: metrics of one frame compile (time, graph size, failure, restarts)")
def compilation_metrics(record: Record, ctx: ParseContext) -> list[Output]:
    meta = ctx.dict_field(record, "compilation_metrics")
    ctx.analysis.note_metrics(record, meta)
    page = _metrics_page("compilation_metrics.html", meta, "Compilation Metrics")
    page.on_written = lambda url: ctx.analysis.metrics_page_written(record, url)
    return [page]


# --------------------------------------------------------------------------------------------
# Artifacts whose content the summary needs: small facts noted while the payload is at hand

@named("dynamo_graph_break_reason", title="Why Dynamo broke the graph, with the user code line", section="graph_breaks")
def graph_break_reason(record: Record, ctx: ParseContext, url: str) -> None:
    text = facts.parse_graph_break(record.payload_text())
    ctx.analysis.graph_breaks.append(LoggedBreak(record.compile_id, text.reason, text.explanation, text.location, url, record.lineno,
                                                 text.source, text.function, text.registry_id, text.hints, text.doc_url,
                                                 text.library_location, text.skips_frame))


@named("recompile_reasons", "compiled_autograd_compile_reasons", title="The guards that failed, making Dynamo recompile", section="recompiles")
def recompile_reasons(record: Record, ctx: ParseContext, url: str) -> None:
    key = record.compile_id.directory_key() if record.compile_id is not None else None
    reasons = [(record.lineno, reason) for reason in facts.parse_reason_list(record.payload_text())]
    if key is not None:
        ctx.analysis.note_compile_logged(key.frame_key(), record.lineno)
    ctx.analysis.recompile_reasons.setdefault(key, []).extend(reasons)


@named(*(f"{cache}_{state}" for cache in facts.CACHES for state in ("hit", "miss", "bypass")), "fx_graph_bundled_cache_hit",
       title="A cache lookup and its outcome", section="other")
def cache_event(record: Record, ctx: ParseContext, url: str) -> None:
    name = ctx.text_field(record, "artifact", "name") or ""
    event = facts.cache_event(record.compile_id, name, record.payload_text(), url)
    event.line = record.lineno
    ctx.analysis.cache_events.append(event)
    if ctx.analysis.vllm.active:  # a lookup while one of vLLM's pieces compiles is that piece's
        ctx.analysis.vllm.cache_lookup(event.cache, event.state)


@named("inductor_runtime_and_tensor_meta", title="Estimated runtime and tensor metadata of each op", section="other")
def runtime_estimates(record: Record, ctx: ParseContext, url: str) -> None:
    ops, fingerprint = facts.runtime_and_tensor_meta(record.payload_text())
    estimate = RuntimeEstimate(ctx.number, label_of(record.compile_id), graph_of(record.compile_id), ops, fingerprint)
    ctx.analysis.distributed.runtime.append(estimate)


@named("inductor_collective_schedule", title="The order of collective ops Inductor scheduled", section="other")
def collective_schedule(record: Record, ctx: ParseContext, url: str) -> None:
    ops = facts.string_list(record.payload_text())
    schedule = CollectiveSchedule(ctx.number, label_of(record.compile_id), graph_of(record.compile_id), ops)
    ctx.analysis.distributed.schedules.append(schedule)


@named("graph_execution", "inductor_graph_execution", title="The order compiled graphs ran in", section="other")
def graph_execution(record: Record, ctx: ParseContext, url: str) -> None:
    ctx.analysis.distributed.execution_orders.append(ExecutionOrder(ctx.number, facts.execution_order(record.payload_text())))


AGREEMENT_LINE = 200  # characters of a compiler-collective artifact's first line kept per record (their state may be one long line)


def compiler_collective(record: Record, ctx: ParseContext, url: str) -> None:
    name = ctx.text_field(record, "artifact", "name") or ""
    text = record.payload_text()
    digest = hashlib.md5(text.encode("utf-8", "surrogatepass")).hexdigest()
    declared = NAMES.get(name)
    role = declared.collective if declared is not None else ""
    agreement = Agreement(label_of(record.compile_id), name, digest, first_line(text, AGREEMENT_LINE), url, role)
    ctx.analysis.distributed.agreements.append(agreement)


for _name, _role, _title in (
    # each rank's own state BEFORE the exchange: it differs across ranks by design
    ("compiler_collective", "local_state", "A rank's state before compiler collectives exchange it"),
    ("aot_joint_graph_sync_decision_cross_ranks", "sync_decision", "What AOTAutograd decided with the other ranks (saved activations)"),
    ("inductor_spmd_graph_mismatch", "spmd_mismatch", "Inductor found that the ranks' graphs differ"),
):
    declare(_name, _title, carrier="artifact", facts=compiler_collective, section="other", collective=_role)


def pretty_json(payload: bytes) -> bytes:
    """Payload JSON re-indented with sorted keys (as tlparse writes it); text that is not JSON is kept as is."""
    try:
        value = jsondepth.loads(payload)
    except orjson.JSONDecodeError:
        try:
            value = jsondepth.loads_text(payload.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            return payload
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return payload


# --------------------------------------------------------------------------------------------
# Kinds that feed the report without files of their own


@kind("dynamo_start", title="Dynamo started compiling a frame: the user stack that triggered it")
def dynamo_start(record: Record, ctx: ParseContext) -> list[Output]:
    meta = ctx.dict_field(record, "dynamo_start")
    if record.compile_id is not None:
        ctx.analysis.note_start(record.compile_id, record.lineno, record.timestamp)
    frames = frames_from_json(meta.get("stack"), record.process)
    if frames is not None and record.compile_id is not None:
        frames = strip_convert_frame(frames, ctx.resolve_filename)
        ctx.analysis.note_start_stack(record.compile_id, frames)
    return []


@kind("chromium_event", title="A Perfetto/Chrome trace event (collected into chromium_events.json)", collected=True)
def chromium_event(record: Record, ctx: ParseContext) -> list[Output]:
    if ctx.on_chromium_event is not None:
        ctx.on_chromium_event(record)
    if ctx.analysis.vllm.active and record.payload and PIECE_SPAN_BYTES in record.payload:
        vllm.chromium_event(record, ctx)
    return []


@kind("create_symbol", title="A backed symbol was created: a dynamic dimension appeared",
      symbol=lambda m: Symbol("created", _text(m.get("symbol")), _text(m.get("val")), _text(m.get("vr")), _text(m.get("source"))))
def create_symbol(record: Record, ctx: ParseContext) -> list[Output]:
    meta = ctx.dict_field(record, "create_symbol")
    source = meta.get("source")
    if record.compile_id is not None and isinstance(source, str):
        ctx.analysis.distributed.dynamic_sources.setdefault(str(record.compile_id.frame_key()), set()).add(source)
    if _outside_compiles(record):
        _note_export_symbol(record, ctx, meta)
    return []


def _note_export_symbol(record: Record, ctx: ParseContext, meta: dict[str, Any]) -> None:
    """A symbol a non-strict export created (outside any compile, its stack through torch.export)."""
    frames = frames_from_json(meta.get("stack"), record.process) or []
    call = export_call([(ctx.resolve_filename(f.filename), f.line, f.loc) for f in frames])
    symbol, vr, source = meta.get("symbol"), meta.get("vr"), meta.get("source")
    if call is not None and isinstance(symbol, str) and isinstance(vr, str) and isinstance(source, str):
        ctx.analysis.export_shapes.note_symbol(ExportSymbol(symbol, vr, source, call[0], call[1], record.lineno))


@kind("symbolic_shape_specialization", title="A symbol was specialised to a constant", shape_fact="specializations",
      symbol=lambda m: Symbol("specialised", _text(m.get("symbol")), _text(m.get("value")), "", ", ".join(map(str, m.get("sources") or []))))
@kind("guard_added_fast", title="A shape guard was added", shape_fact="guards_added", symbol=lambda m: Symbol("guard", _text(m.get("expr"))))
def shape_fact(record: Record, ctx: ParseContext) -> list[Output]:
    meta = ctx.dict_field(record, ctx.current_kind)
    if record.compile_id is not None:
        ctx.analysis.note_shape_fact(KINDS[ctx.current_kind].shape_fact, record.compile_id, meta)
    if _outside_compiles(record) and ctx.current_kind == "guard_added_fast" and isinstance(meta.get("expr"), str):
        ctx.analysis.export_shapes.note_guard(ExportGuard(meta["expr"], record.lineno))
    return []


def _outside_compiles(record: Record) -> bool:
    """Logged outside any Dynamo frame compile (as a non-strict export logs its shapes)."""
    return record.compile_id is not None and record.compile_id.frame_id is None


def _no_files(record: Record, ctx: ParseContext) -> list[Output]:
    return []


def _compile_input(record: Record, ctx: ParseContext) -> list[Output]:
    """describe_tensor / describe_source of a compile: its input shapes, compared across ranks (no files)."""
    if record.compile_id is not None:
        meta = ctx.dict_field(record, ctx.current_kind)  # checked (a bad field is a diagnostic) even when not noted
        if ctx.fingerprints:
            facts.note_input(ctx.analysis.distributed.fingerprint(record.compile_id), ctx.current_kind, meta)
    return []


# Kinds shown on the compile-id page as records (metadata table + payload), with no file of their own.
# The fake-tensor descriptions join into the input-tensor table: a tensor, its Dynamo source, its storage.
declare("describe_storage", "Fake-tensor conversion: a real storage", tensor="storage")
declare("describe_tensor", "Fake-tensor conversion: an input tensor (shape, dtype, device, strides)", parse=_compile_input, tensor="tensor")
declare("describe_source", "Fake-tensor conversion: the Dynamo source of a tensor", parse=_compile_input, tensor="source")
declare("propagate_real_tensors", "Real-tensor propagation decided an unbacked expression")
declare("export", "torch.export started")
declare("compilation_metrics_runtime", "Compile overhead paid at run time (cudagraphify, Triton autotuning)", runtime=True)
declare("bwd_compilation_metrics_runtime", "Backward compile overhead paid at run time", runtime=True)


# --------------------------------------------------------------------------------------------
# torch.export: what draft_export found. Noted in every mode; files only in export mode (-e), where
# tlparse numbers exactly these outputs (exported programs and guard pages).


@kind("exported_program", title="The final exported program", in_export=True)
def exported_program(record: Record, ctx: ParseContext) -> list[Output]:
    ctx.analysis.exported_programs.append("")
    if not ctx.export:
        return []
    index = len(ctx.analysis.exported_programs) - 1

    def remember(url: str) -> None:
        ctx.analysis.exported_programs[index] = url

    return [Output(PAYLOAD, "exported_program.txt", on_written=remember)]


@kind("guard_added", title="A shape guard was added (verbose, with frame locals)", in_export=True,
      symbol=lambda m: Symbol("guard", _text(m.get("expr")), _text(m.get("prefix", ""))))
def guard_added(record: Record, ctx: ParseContext) -> list[Output]:
    meta = ctx.dict_field(record, "guard_added")
    if meta.get("prefix") != "eval":  # only guards evaluated by export can be constraint violations
        return []
    return _export_failure(record, ctx, "Guard Evaluated", meta, guard_page=True)


@kind("propagate_real_tensors_provenance", title="Real-tensor propagation decided an unbacked expression", in_export=True,
      symbol=lambda m: Symbol("unsound", _text(m.get("expr")), _text(m.get("result"))))
def propagate_real_tensors_provenance(record: Record, ctx: ParseContext) -> list[Output]:
    meta = ctx.dict_field(record, "propagate_real_tensors_provenance")
    return _export_failure(record, ctx, "Data Dependent Error", meta, guard_page=True)


@kind("guard_on_data_dependent_error", title="A guard on a data-dependent expression raised an error",
      symbol=lambda m: Symbol("data-dependent error", _text(m.get("expr"))))
def guard_on_data_dependent_error(record: Record, ctx: ParseContext) -> list[Output]:
    meta = ctx.dict_field(record, ctx.current_kind)
    if _outside_compiles(record) and isinstance(meta.get("expr"), str):  # what a failed export trace may have failed on
        place = (ctx.analysis.records, record.lineno)
        ctx.analysis.export_trace.note_guard_error(guard_error(meta["expr"], place, _stack_of(meta.get("stack"), record, ctx)))
    return _export_failure(record, ctx, "Data Dependent Guard Error", meta, guard_page=False)


@kind("missing_fake_kernel", title="A custom op has no fake kernel")
@kind("mismatched_fake_kernel", title="A custom op's fake kernel disagrees with its real kernel")
def fake_kernel(record: Record, ctx: ParseContext) -> list[Output]:
    kind = "Missing Fake Kernel" if ctx.current_kind == "missing_fake_kernel" else "Mismatched Fake Kernel"
    return _export_failure(record, ctx, kind, ctx.dict_field(record, ctx.current_kind), guard_page=False)


@kind("expression_created", title="A symbolic expression was built (export provenance)")
# an unbacked symbol has no source: it is a value computed from data (node_id is an object id, not a name)
@kind("create_unbacked_symbol", title="An unbacked symbol was created (data-dependent value)",
      symbol=lambda m: Symbol("unbacked", _text(m.get("symbol")), "", _text(m.get("vr")), "data-dependent value"))
def symbolic_expression(record: Record, ctx: ParseContext) -> list[Output]:
    if ctx.export:  # the provenance graph behind guard pages; chatty, so only kept when it is used
        ctx.analysis.note_expression(ctx.current_kind, ctx.dict_field(record, ctx.current_kind))
    if ctx.current_kind == "create_unbacked_symbol" and _outside_compiles(record):
        _note_unbacked_symbol(record, ctx, ctx.dict_field(record, ctx.current_kind))
    return []


def _stack_of(value: Any, record: Record, ctx: ParseContext) -> list[StackFrame]:
    """A logged stack as (file, line, function, text), outermost first; [] when it is not a list."""
    return [(ctx.resolve_filename(f.filename), f.line, f.name, f.loc) for f in frames_from_json(value, record.process) or []]


def _note_unbacked_symbol(record: Record, ctx: ParseContext, meta: dict[str, Any]) -> None:
    """An unbacked symbol a non-strict export created: what a failed export trace may have failed on."""
    symbol, vr = meta.get("symbol"), meta.get("vr")
    if isinstance(symbol, str) and isinstance(vr, str):
        user_stack, stack = _stack_of(meta.get("user_stack"), record, ctx), _stack_of(meta.get("stack"), record, ctx)
        place = (ctx.analysis.records, record.lineno)
        ctx.analysis.export_trace.note_symbol(unbacked_symbol(symbol, vr, place, user_stack, stack))


@named("make_fx_fail_partial", title="The graph traced until the trace failed (torch raised on)")
def partial_graph(record: Record, ctx: ParseContext, url: str) -> None:
    """A failed trace: an export's own when logged outside any compile with its stack through torch.export."""
    call = own_export_call(_stack_of(record.envelope.get("stack"), record, ctx)) if _outside_compiles(record) else None
    if call is not None and record.compile_id is not None:
        graph = PartialGraph(ctx.analysis.records, record.lineno, record.compile_id.directory_key(), url, call[0], call[1])
        ctx.analysis.export_trace.note_partial_graph(graph)


@named("torch_version", title="The torch version and commit that wrote the log")
def torch_version(record: Record, ctx: ParseContext, url: str) -> None:
    try:
        build = jsondepth.loads(record.payload or b"")
    except orjson.JSONDecodeError:
        return  # its text is still shown; the version stays unknown unless a compile's metrics name it
    if isinstance(build, dict):
        ctx.analysis.note_torch_version(build.get("pytorch_version"), build.get("commit"))


def _export_failure(record: Record, ctx: ParseContext, failure_type: str, meta: dict[str, Any], guard_page: bool) -> list[Output]:
    failure = ExportFailure(failure_type, meta, record.compile_id, record.lineno)
    ctx.analysis.export_failures.append(failure)
    if not (ctx.export and guard_page):
        return []

    def remember(url: str) -> None:
        failure.url = url

    return [Output(FILE, "symbolic_guard_information.html", view="guard_info", data={"meta": meta}, on_written=remember)]


# --------------------------------------------------------------------------------------------
# Named graphs and code carried by `artifact` / `graph_dump` records: where their text is shown.

# the -i provenance page's panes: (pane, preference), newer torch names first
_PROVENANCE = {"before_pre_grad_graph": ("pre", 0), "after_post_grad_graph": ("post", 0)}

for _name, _stage, _role, _label in (
    ("compiled_autograd_graph_pre_reordering", "compiled_autograd", "start", "Compiled autograd graph (before reordering)"),
    ("before_pre_grad_graph", "pre_grad", "start", "Before pre-grad passes"),
    ("after_pre_grad_graph", "pre_grad", "end", "After pre-grad passes"),
    ("before_recompile_pre_grad", "recompile_pre_grad", "start", "Before pre-grad passes (recompile)"),
    ("after_recompile_pre_grad", "recompile_pre_grad", "end", "After pre-grad passes (recompile)"),
    ("before_joint_graph", "joint", "start", "Before joint-graph passes"),
    ("after_joint_graph", "joint", "end", "After joint-graph passes"),
    ("aot_inference_graph_after_hop_passes", "aot", "hop", "AOT inference graph after higher-order-op passes"),
    ("before_post_grad_graph", "post_grad", "start", "Before post-grad passes"),
    ("after_post_grad_graph", "post_grad", "end", "After post-grad passes"),
    ("before_recompile_post_grad", "recompile_post_grad", "start", "Before post-grad passes (recompile)"),
    ("after_recompile_post_grad", "recompile_post_grad", "end", "After post-grad passes (recompile)"),
    ("overlap_scheduling_graph_before", "overlap", "start", "Before overlap scheduling"),
    ("overlap_scheduling_graph_after", "overlap", "end", "After overlap scheduling"),
    ("pre_decomp_comms", "decomp_comms", "start", "Before comms decomposition"),
    ("post_decomp_comms", "decomp_comms", "end", "After comms decomposition"),
):
    declare(_name, "A graph at one step of the compile pipeline", carrier="artifact", **_GRAPH, label=_label, step=Step(_stage, _role),
            provenance=_PROVENANCE.get(_name), facts=vllm.baseline if _name == "before_post_grad_graph" else None)

for _name, _lang, _label in (
    ("inductor_aot_wrapper_code", "cpp", "AOTInductor wrapper code"),
    ("inductor_aot_kernel_code", "cpp", "AOTInductor kernel code"),
    ("inductor_aot_header_code", "cpp", "AOTInductor header"),
    ("inductor_autotune_at_compile_time_code", "python", "Autotuning code (compile time)"),
):
    declare(_name, "Generated code", carrier="graph_dump", section="code", lang=_lang, label=_label,
            provenance=("cpp", 0) if _name == "inductor_aot_wrapper_code" else None)

declare("inductor_provenance_tracking_node_mappings", "Which pre-grad node became which post-grad node and kernel (-i)",
        carrier="artifact", section="other", provenance=("mappings", 0))


def _text(value: Any) -> str:
    """A metadata value as table text: strings as they are, anything else as JSON."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)
