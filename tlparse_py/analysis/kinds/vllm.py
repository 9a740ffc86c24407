"""vLLM's records: their declarations, in one place (see `analysis.vllm` for what they mean).

The named artifacts note their facts once their file is written; the graph dumps that are vLLM's
(`graph_dump` dispatches them here by name) choose their own files: the patterns as `.py`, each pass
dump as text and a side-by-side diff page against the graph before it.
"""

from __future__ import annotations

from typing import Any

import orjson

from ... import jsondepth
from ...model import Record
from ..store import label_of
from ..vllm import DIFF_PAGE, PIECE_SPAN, PassChange, COMPILE_EVENT, COMPILE_START, CONFIG, PATTERNS, PIECE_GRAPHS, POST_GRAD, SPLIT_GRAPH
from .context import ParseContext
from .registry import PAYLOAD, PLACED, Output, declare

VLLM_SECTION = "other"


def _json(record: Record, ctx: ParseContext) -> Any:
    """The record's JSON payload; None (counted, shown as damaged) when it is not JSON."""
    try:
        return jsondepth.loads(record.payload or b"")
    except orjson.JSONDecodeError as exc:
        ctx.problem(record, "fail_vllm_json", f"vLLM record {record.kinds[0] if record.kinds else ''} is not valid JSON", str(exc)[:120])
        ctx.analysis.vllm.damaged_record()
        return None


def _config(record: Record, ctx: ParseContext, url: str) -> None:
    data = _json(record, ctx)
    ctx.analysis.vllm.config(data, url)


def _compile_start(record: Record, ctx: ParseContext, url: str) -> None:
    data = _json(record, ctx)
    if isinstance(data, dict):
        ctx.analysis.vllm.compile_start(data, label_of(record.compile_id) if record.compile_id else None, record.lineno)


def _compile_event(record: Record, ctx: ParseContext, url: str) -> None:
    ctx.analysis.vllm.event(_json(record, ctx))  # waits for its call: the event comes before the config


def baseline(record: Record, ctx: ParseContext, url: str) -> None:
    """Inductor's `before_post_grad_graph`: what vLLM's first pass is diffed against."""
    ctx.analysis.vllm.baseline(url, record.payload_text())


declare(CONFIG, "vLLM: the compilation config of one compile call", carrier="artifact", facts=_config, section=VLLM_SECTION, lang="json")
declare(COMPILE_START, "vLLM: a piece of the split graph starts compiling for a range or size", carrier="artifact",
        facts=_compile_start, section=VLLM_SECTION, lang="json")
declare(COMPILE_EVENT, "vLLM: how a compile call was served (aot_cache_hit, ...)", carrier="artifact", facts=_compile_event,
        section=VLLM_SECTION, lang="json")


def is_vllm_dump(name: str) -> bool:
    return name == SPLIT_GRAPH or name.startswith((PATTERNS, POST_GRAD, *PIECE_GRAPHS))


def graph_dump(record: Record, ctx: ParseContext, name: str) -> list[Output]:
    """The files of one of vLLM's graph dumps."""
    vllm = ctx.analysis.vllm
    vllm.start()
    if name.startswith(PATTERNS):
        return [Output(PAYLOAD, f"{name}.py")]
    if name == SPLIT_GRAPH:
        return [Output(PAYLOAD, f"{name}.txt", on_written=vllm.split_graph)]
    if not name.startswith(POST_GRAD):
        return [Output(PAYLOAD, f"{name}.txt")]
    before = vllm.baseline_url()
    text = record.payload_text()
    compile_id = label_of(record.compile_id) if record.compile_id else None
    page = Output(PLACED, f"{name}{DIFF_PAGE}", view="pass_diff", data={"before": before, "title": f"Pass Diff: {name[len(POST_GRAD):]}"})

    noted: list[PassChange] = []

    def written(url: str) -> None:
        change = vllm.post_grad(name, url, text, compile_id, record.lineno)
        noted.append(change)
        page.data = {**(page.data or {}), "after": url, "baseline": change.baseline, "added": change.added, "removed": change.removed}
        page.name = vllm.diff_page_name(url, page.name)

    graph = Output(PAYLOAD, f"{name}.txt", on_written=written)
    if before is None:  # nothing to compare with: the pass's graph alone (what is missing is said on the summary)
        return [graph]

    def diffed(url: str) -> None:
        for change in noted:
            change.diff = url or None

    page.on_written = diffed
    return [graph, page]


def chromium_event(record: Record, ctx: ParseContext) -> None:
    """An Inductor compile span while a piece compiles: the piece's cost (only read in vLLM logs)."""
    try:
        event = jsondepth.loads(record.payload or b"")
    except orjson.JSONDecodeError:
        return  # the chromium events file says so; nothing to time
    if isinstance(event, dict) and event.get("name") == PIECE_SPAN and isinstance(event.get("ts"), (int, float)):
        ctx.analysis.vllm.span(str(event.get("ph")), float(event["ts"]))
