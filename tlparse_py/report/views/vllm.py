"""The vLLM compilation summary (`index.html` of a log that holds vLLM's records): its view model.

Every fact is the analysis' (`analysis.vllm.VllmRun`, `Analysis.compiles`); this only orders them
for the page: each compile call with its config, Dynamo compile, split graph, pieces by compile
range or size, pattern dumps and pass diffs, and the slowest pieces where the log says what they cost.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from ...analysis.summary import CompileSummary
from ...analysis.vllm import CompileCall, VllmRun
from ...paths import compile_page_url
from ..render import trusted_html
from .common import VLLM_USUAL_INDEX as USUAL_INDEX, Inputs, Page, page_base

TITLE = "vLLM Compilation Summary"
# The config's fields, in the two tables upstream tlparse shows (the rest are listed after them)
CORE_FIELDS = ("model", "mode", "backend", "prefix", "custom_ops", "splitting_ops")
COMPILE_FIELDS = ("cudagraph_mode", "use_inductor_graph_partition", "compile_sizes", "compile_ranges_endpoints",
                  "compile_ranges_split_points", "inductor_passes", "enabled_passes", "dynamic_shapes_type",
                  "dynamic_shapes_evaluate_guards")


class VllmPage(Page, kw_only=True, eq=False):  # a view model: never compared or printed
    template: ClassVar[str] = "vllm.html.j2"
    calls: list[dict[str, Any]]
    shared_config: list[tuple[str, list[tuple[str, str]]]] | None
    slowest: list[dict[str, Any]]  # the pieces that cost the most Inductor time
    damaged: int
    custom_header: Any


def vllm_page(inputs: Inputs, run: VllmRun) -> VllmPage:
    compiles = {c.id: c for c in inputs.analysis.compiles()}
    shared = run.shared_config()
    return VllmPage(
        **page_base(inputs, TITLE),
        calls=[_call(call, compiles, shared is None) for call in run.calls],
        shared_config=config_tables(shared) if shared is not None else None,
        slowest=[{"call": call.number, "prefix": call.prefix, "piece": piece} for call, piece in run.slowest()],
        damaged=run.damaged,
        custom_header=trusted_html(inputs.settings.custom_header_html),
    )


def _call(call: CompileCall, compiles: dict[str, CompileSummary], show_config: bool) -> dict[str, Any]:
    ids = list(dict.fromkeys(p.compile_id for p in call.pieces if p.compile_id))
    return {
        "number": call.number,
        "prefix": call.prefix,
        "aot_cache_hit": call.aot_cache_hit,
        "event": call.event,
        "config": config_tables(call.config) if show_config and call.config is not None else None,
        "config_url": call.config_url,
        "split_graph": call.split_graph,
        "dynamo_files": call.dynamo_files,
        "dynamo_compiles": [_compile_ref(compiles[i]) for i in ids if i in compiles],
        "patterns": call.patterns,
        "groups": [{"name": name, "pieces": pieces} for name, pieces in call.groups()],
        "passes": call.passes,
        "missing": call.missing,
    }


def _compile_ref(compile_: CompileSummary) -> dict[str, Any]:
    return {"id": compile_.label, "url": compile_.url or compile_page_url(compile_.key), "status": compile_.status,
            "time": compile_.compile_time_s.total}


def config_tables(config: dict[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    """The config as (table title, [(field, value as text)]): the core fields, the compile fields, the rest."""
    def rows(names: tuple[str, ...] | list[str]) -> list[tuple[str, str]]:
        return [(name, _text(config[name])) for name in names if name in config]

    rest = [name for name in config if name not in CORE_FIELDS and name not in COMPILE_FIELDS]
    tables = [("Core", rows(CORE_FIELDS)), ("Compilation", rows(COMPILE_FIELDS)), ("Other fields", rows(rest))]
    return [(title, table) for title, table in tables if table]


def _text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value)
