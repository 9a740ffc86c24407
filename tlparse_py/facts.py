"""Reading meaning out of artifact text: graph-break reports, recompile reasons, cache results.

Torch writes these as free text or loosely specified JSON; every function here accepts anything
and returns its best reading, never raising.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Callable
from typing import Any

from .model import CompileId
from .store import CacheEvent

CACHES = ("fx_graph_cache", "aotautograd_cache")
_USER_CODE_AT = re.compile(r"Graph break in user code at (.+?:\d+)")
_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)')
_ENCOUNTERED = re.compile(r"^Encountered graph break when attempting to trace .*:\s*$")
_COMPILE_ID = re.compile(r"^(?:!(\d+))?(?:/?(\d+)/(\d+))?$")
_NOT_READ = object()


def _load(text: str) -> Any:
    """JSON from an artifact, or `_NOT_READ`: too deep a nesting is bad input like any other."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOT_READ


def _bad_input_reads_as(empty: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A fact parser that returns `empty` where deep nesting defeats Python's recursion
    (`str()` or `json.dumps` of a nested list), instead of raising: input, not a bug of ours."""

    def wrap(parse: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(parse)
        def safe(*args: Any, **kwargs: Any) -> Any:
            try:
                return parse(*args, **kwargs)
            except RecursionError:
                return empty() if callable(empty) else empty

        return safe

    return wrap


def parse_graph_break(text: str) -> tuple[str, str, str]:
    """(reason headline, explanation, user location) of a `dynamo_graph_break_reason` payload."""
    lines = text.splitlines()
    location = ""
    match = _USER_CODE_AT.search(text)
    if match:
        location = match.group(1)
    else:
        user = text.split("User code traceback:", 1)
        frames = _FILE_LINE.findall(user[1].split("Traceback (most recent call last)", 1)[0]) if len(user) > 1 else []
        if frames:
            location = f"{frames[-1][0]}:{frames[-1][1]}"
    reason = ""
    for index, line in enumerate(lines):
        if line.startswith("Graph Break Reason:"):
            reason = line[len("Graph Break Reason:") :].strip()
            if _ENCOUNTERED.match(reason) or not reason:
                reason = next((l.strip() for l in lines[index + 1 :] if l.strip()), reason)
            break
    if not reason:
        reason = next((l.strip() for l in lines if l.strip() and not l.startswith("Graph break in user code")), "(no reason given)")
    explanation = next((l.strip()[len("Explanation:") :].strip() for l in lines if l.strip().startswith("Explanation:")), "")
    return reason, explanation, location


@_bad_input_reads_as(list)
def parse_reason_list(text: str) -> list[str]:
    """`recompile_reasons` is a JSON list for several reasons and a bare string for one."""
    stripped = text.strip()
    if stripped.startswith("["):
        value = _load(stripped)
        if isinstance(value, list):
            return [str(item) for item in value]
    return [stripped] if stripped else []


def cache_event(compile_id: CompileId | None, name: str, text: str, url: str) -> CacheEvent:
    cache, _, state = name.rpartition("_")
    cache = cache.removesuffix("_bundled_cache").removesuffix("_cache") or name
    value = _load(text)
    info: dict[str, Any] = value if isinstance(value, dict) else {}
    try:
        return _cache_event(compile_id, cache, state, info, url)
    except RecursionError:  # a deeply nested key or reason: the event without the details
        return _cache_event(compile_id, cache, state, {}, url)


def _cache_event(compile_id: CompileId | None, cache: str, state: str, info: dict[str, Any], url: str) -> CacheEvent:
    reason = info.get("cache_bypass_reason") or info.get("reason") or ""
    saved = info.get("time_saved_ns")
    try:
        time_saved = int(saved) if saved is not None else None
    except (TypeError, ValueError, OverflowError):  # a string of 5000 digits, Infinity
        time_saved = None
    key = info.get("key")
    return CacheEvent(compile_id, cache, state, "" if key in (None, "None") else str(key), str(reason), time_saved, url)


def parse_compile_id(text: Any) -> CompileId | None:
    """`0/1`, `!0`, `!0/3/1` (the string form torch puts in payloads) as the frame-compile key."""
    if not isinstance(text, str):
        return None
    match = _COMPILE_ID.match(text.strip())
    if not match or not any(match.groups()):
        return None
    ca, frame, fcid = (int(g) if g is not None else None for g in match.groups())
    return CompileId(ca, frame, fcid, 0)


def first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0][:200]


@_bad_input_reads_as(list)
def string_list(text: str) -> list[str]:
    """A JSON list of strings (collective schedules); anything else reads as empty."""
    value = _load(text)
    return [str(item) for item in value] if isinstance(value, list) else []


@_bad_input_reads_as(lambda: ([], ""))
def runtime_and_tensor_meta(text: str) -> tuple[list[dict[str, Any]], str]:
    """(ops with their estimated runtime, fingerprint of the tensor metadata alone).

    tlparse fingerprints the whole artifact, runtimes included, so any timing noise reads as
    "divergent tensor metadata"; we fingerprint names, types and output shapes/strides/dtypes only.
    """
    value = _load(text)
    ops = value.get("ops") if isinstance(value, dict) else None
    if not isinstance(ops, list):
        return [], ""
    runtimes, meta = [], []
    for op in ops:
        if not isinstance(op, dict):
            continue
        runtime = op.get("estimated_runtime_ns")
        if isinstance(op.get("name"), str) and _sane_number(runtime):
            runtimes.append({"name": op["name"], "estimated_runtime_ns": runtime})
        meta.append({k: v for k, v in op.items() if k != "estimated_runtime_ns"})
    fingerprint = hashlib.md5(json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return runtimes, fingerprint


def _sane_number(value: Any) -> bool:
    """A finite runtime that fits in 64 bits (the JSON may say Infinity, NaN or 10**400)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) and abs(value) < 2**63


@_bad_input_reads_as(list)
def execution_order(text: str) -> list[str]:
    """`{"graph_execution_order": [...]}` → compile ids as displayed (`[0/1]`)."""
    value = _load(text)
    order = value.get("graph_execution_order") if isinstance(value, dict) else None
    if not isinstance(order, list):
        return []
    result = []
    for item in order:
        cid = item.get("compile_id") if isinstance(item, dict) else item
        if isinstance(cid, str):
            result.append(f"[{cid}]")
    return result


COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "all_to_all")
_C10D_CALL = re.compile(r"torch\s*\.\s*ops\s*\.\s*_?c10d_functional\s*\.\s*(\w+)\s*\.\s*default\s*\(")
_COMMENTS = re.compile(r"#[^\n]*|//[^\n]*|/\*.*?\*/", re.S)


def normalise_collective(op: str) -> str | None:
    """`torch.ops._c10d_functional.all_reduce_.default` → `all_reduce` (None if not a collective)."""
    name = op.rstrip("_")
    for collective in COLLECTIVES:
        if collective in name:
            return collective
    return "reduce" if "reduce" in name else None


def collective_calls(code: str) -> tuple[dict[str, int], int]:
    """Collective calls in generated code (comments stripped) and how many wait_tensor calls follow them."""
    counts: dict[str, int] = {}
    waits = 0
    for match in _C10D_CALL.finditer(_COMMENTS.sub("", code)):
        op = match.group(1)
        if op == "wait_tensor":
            waits += 1
            continue
        name = normalise_collective(op)
        if name is not None:
            counts[name] = counts.get(name, 0) + 1
    return counts, waits
