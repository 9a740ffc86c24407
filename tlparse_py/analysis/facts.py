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

from msgspec import Struct

from .. import jsondepth
from ..patterns import lazy
from ..model import CompileId
from .stacks import is_user_code
from .store import CacheEvent, ExportFailure

CACHES = ("fx_graph_cache", "aotautograd_cache")
_USER_CODE_AT = lazy(r"Graph break in user code at (.+?:\d+)")
_FILE_LINE = lazy(r'File "([^"]+)", line (\d+)')
_ENCOUNTERED = lazy(r"^Encountered graph break when attempting to trace .*:\s*$")
# torch's wrapper around a break it could not resume from: the frame then runs eagerly (symbolic_convert.py)
SKIPPED_FRAME = "Failed to handle graph break gracefully. Skipping the function and falling back to eager."
_COMPILE_ID = lazy(r"^(?:!(\d+))?(?:/?(\d+)/(\d+))?$")
_NOT_READ = object()


def _load(text: str) -> Any:
    """JSON from an artifact, or `_NOT_READ`: too deep a nesting is bad input like any other."""
    try:
        return jsondepth.loads_text(text)
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


class BreakText(Struct, frozen=True):
    """What a `dynamo_graph_break_reason` payload says: why Dynamo broke the graph, where, and the fix
    torch suggests (its graph-break registry id, explanation, hints and documentation page)."""

    reason: str  # the break's headline (its type), e.g. "Failed to trace builtin operator"
    explanation: str
    location: str  # the user code line, "file.py:23" ("" when the traceback names no user code)
    source: str = ""  # that line's text, from the user code traceback
    function: str = ""  # the function that line is in
    registry_id: str = ""  # torch's graph-break registry id, "GB0123"
    hints: tuple[str, ...] = ()
    doc_url: str = ""  # torch's page about this break
    library_location: str = ""  # where it broke when that is inside torch or another library, "file.py:23"
    skips_frame: bool = False  # torch gave up on the frame: it runs eagerly (SKIPPED_FRAME)


_DOC_URL = lazy(r"(https://\S+/gb/(gb\d+)\.html)")
# torch's graph-break pages; a page named elsewhere in a log is not linked (a log may name any site)
GRAPH_BREAK_SITE = "https://meta-pytorch.github.io/compile-graph-break-site/gb/"
_CARETS = lazy(r"^\s*[\^~]+\s*$")


def parse_graph_break(text: str) -> BreakText:
    """The facts of a `dynamo_graph_break_reason` payload (torch 2.13's layout).

    The headline is the break's own: torch's preambles ("Encountered graph break when attempting to
    trace ...:", and the wrapper of a frame it skips) are read through to the line after them."""
    lines = text.splitlines()
    head = text.split("User code traceback:", 1)[0].split("Traceback (most recent call last)", 1)[0]
    head = head.split("*** While handling this graph break", 1)[0]  # the hints of the break itself, not of a chained one
    site = _break_site(text)
    reason = ""
    skips_frame = False
    for index, line in enumerate(lines):
        if line.startswith("Graph Break Reason:"):
            reason = line[len("Graph Break Reason:") :].strip()
            skips_frame = reason.startswith(SKIPPED_FRAME)
            following = (l.strip() for l in lines[index + 1 :] if l.strip())
            while not reason or skips_frame and reason.startswith(SKIPPED_FRAME) or _ENCOUNTERED.match(reason):
                reason = next(following, "")
                if not reason:
                    break
            break
    if not reason:
        reason = next((l.strip() for l in lines if l.strip() and not l.startswith("Graph break in user code")), "(no reason given)")
    explanation = next((l.strip()[len("Explanation:") :].strip() for l in lines if l.strip().startswith("Explanation:")), "")
    hints = tuple(l.strip()[len("Hint:") :].strip() for l in head.splitlines() if l.strip().startswith("Hint:"))
    doc = _DOC_URL.search(text)
    url = doc.group(1) if doc and doc.group(1).startswith(GRAPH_BREAK_SITE) else ""
    return BreakText(reason, explanation, site.user, site.source, site.function, doc.group(2).upper() if doc else "", hints, url,
                     site.library, skips_frame)


class _Site(Struct, frozen=True):
    user: str  # the user code line, "file.py:23"
    source: str
    function: str
    library: str  # where it broke, when that is not the user's code


class _Frame(Struct, frozen=True):
    file: str
    line: str
    function: str
    source: str

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"


def _break_site(text: str) -> _Site:
    """Where the graph broke: the user code line, and the library line when torch names one.

    torch writes "Graph break in user code at" even for a line inside torch (DDP's `distributed.py`)
    or the standard library (`contextlib.py`); the break is then attributed to the nearest frame of
    the user's own code in the user code traceback, and the library line is kept beside it."""
    match = _USER_CODE_AT.search(text)
    logged = match.group(1) if match else ""
    frames = _traceback_frames(text)
    innermost = logged or (frames[-1].location if frames else "")
    if not innermost:
        return _Site("", "", "", "")
    if is_user_code(innermost.rpartition(":")[0]):
        last = frames[-1] if frames else None
        return _Site(innermost, last.source if last else "", last.function if last else "", "")
    user = next((f for f in reversed(frames) if is_user_code(f.file)), None)
    if user is None:
        return _Site("", "", "", innermost)
    return _Site(user.location, user.source, user.function, innermost)


def _traceback_frames(text: str) -> list[_Frame]:
    """The frames of a payload's "User code traceback:", outermost first."""
    user = text.split("User code traceback:", 1)
    if len(user) < 2:
        return []
    lines = user[1].split("Traceback (most recent call last)", 1)[0].splitlines()
    frames = []
    for index, line in enumerate(lines):
        found = _FILE_LINE.search(line)
        if found is None:
            continue
        file, number = found.groups()
        function = line.rpartition(", in ")[2].strip() if ", in " in line else ""
        after = lines[index + 1].strip() if index + 1 < len(lines) else ""
        source = "" if _CARETS.match(after) or _FILE_LINE.search(after) else after
        frames.append(_Frame(file, number, function, source))
    return frames


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


def parse_compile_id(text: Any, process: int = 0) -> CompileId | None:
    """`0/1`, `!0`, `!0/3/1` (the string form torch puts in payloads) as the frame-compile key, in
    the process of the record that holds it."""
    if not isinstance(text, str):
        return None
    match = _COMPILE_ID.match(text.strip())
    if not match or not any(match.groups()):
        return None
    ca, frame, fcid = (int(g) if g is not None else None for g in match.groups())
    return CompileId(ca, frame, fcid, 0, process)


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
_C10D_CALL = lazy(r"torch\s*\.\s*ops\s*\.\s*_?c10d_functional\s*\.\s*(\w+)\s*\.\s*default\s*\(")
_COMMENTS = lazy(r"#[^\n]*|//[^\n]*|/\*.*?\*/", re.S)


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


class HopSubgraph(Struct, frozen=True):
    """A subgraph a higher-order op runs (a cond branch, a while_loop body, a flex_attention mod, ...)."""

    name: str  # its module name in the graph printout: `cond_true_0`, `body_fn_0`, `subgraph_0`
    line: int  # where the graph text defines it (1-based)
    op: str  # the higher-order op that uses it: cond, while_loop, flex_attention, invoke_subgraph, ...
    used_at: int  # the line of that call (0: not found)


_NESTED_MODULE = lazy(r"^\s+class (\w+)\(torch\.nn\.Module\):")
_HOP_CALL = lazy(r"torch\.ops\.higher_order\.(\w+)\(")


def hop_subgraphs(graph: str) -> list[HopSubgraph]:
    """The subgraphs nested in an FX graph printout, each with the higher-order op that calls it.

    Dynamo and AOTAutograd print a HOP's subgraphs as nested `class name(torch.nn.Module):` blocks,
    and the op's call names them (directly, as `self.name`, or as a quoted identifier).
    """
    if " class " not in graph and "\tclass " not in graph:  # no nested module: most graphs, found at C speed
        return []
    lines = graph.splitlines()
    calls = [(number, match.group(1), text) for number, text in enumerate(lines, 1) if (match := _HOP_CALL.search(text))]
    aliases: dict[str, set[str]] = {}
    for text in lines:  # `subgraph_1 = self.subgraph_0`: the call names the alias
        alias = re.match(r"\s*(\w+) = self\.(\w+)\s*$", text)
        if alias:
            aliases.setdefault(alias.group(2), set()).add(alias.group(1))
    found = []
    for number, text in enumerate(lines, 1):
        match = _NESTED_MODULE.match(text)
        if match is None:
            continue
        name = match.group(1)
        names = {name} | aliases.get(name, set())
        use = next(((n, op) for n, op, call in calls if any(re.search(rf"\b{re.escape(x)}\b", call) for x in names)), (0, ""))
        found.append(HopSubgraph(name, number, use[1], use[0]))
    return found


# ------------------------------------------------------------------------------------------------
# What a compile produced, normalised so that two ranks (or two runs) of the same program compare
# equal: cross-rank divergence is judged on these fingerprints, never on raw text.

GRAPH_LINE_CAP = 200  # normalised lines kept of a graph, for the landing page's side-by-side view
LINE_WIDTH_CAP = 400  # characters kept of each such line
# Each pattern starts with a literal, which the regex engine scans for at C speed, and none crosses
# a line end: the rules are per line, applied to the whole text at once.
_ADDRESS = lazy(r"0x(?<=\b0x)[0-9a-fA-F]+\b")
_OBJ_ID_CALL = lazy(r"((?:obj_id|id_match|check_obj_id)\([^,()\n]*,[^\S\n]*)\d+")
_ID_NUMBER = lazy(r"id(?<=\bid)([^\S\n]*[=:][^\S\n]*)\d{6,}")
_FILE_COMMENT = lazy(r"# File: (?:\"[^\"\n]*\"|\S+?):\d+(?=[ ,]|$)", re.M)  # only at a line's start
_FILE_LINE_COMMENT = lazy(r'File "[^"\n]*", line \d+')
_KERNEL_PATH = lazy(r"# kernel path: [^\n]*")  # only at a line's start
# an absolute path whose file is named by a hash (inductor's cache: /tmp/torchinductor_u/ab/cab12...xyz.py)
_HASHED_PATH = lazy(r"""(?:[A-Za-z]:)?[/\\][^\s'"`]*?[/\\][a-z]?[a-z0-9]{20,}(?:\.[A-Za-z0-9]+)*(?=[\s'"`),]|$)""")
_HASHED_NAME = lazy(r"[/\\][a-z]?[a-z0-9]{20}")  # what every hashed path holds: a quick test before the slow pattern
_LONG_HASH = lazy(r"(?<!\w)(?=[0-9A-Za-z]{32})(?=[0-9A-Za-z]*\d)(?=[0-9A-Za-z]*[A-Za-z])[0-9A-Za-z]{32,}\b")
_BENCHMARK_HARNESS = lazy(r"^(?:def (?:get_args|benchmark_compiled_module)\(|if __name__ == ['\"]__main__['\"]:)", re.M)


def _at_line_start(text: str, start: int) -> bool:
    """Whether only blanks stand between the start of the line and `start`."""
    return not text[text.rfind("\n", 0, start) + 1 : start].strip()


def normalise_graph(text: str) -> str:
    """An FX graph's text without run-to-run noise: memory addresses, object ids, and the file
    paths and line numbers of `# File:` comments (the code they quote is kept). Trailing blanks
    and blank last lines go too."""
    text = text.replace("\r\n", "\n")
    text = _FILE_COMMENT.sub(lambda m: "# File: <file>" if _at_line_start(text, m.start()) else m.group(0), text)
    text = _FILE_LINE_COMMENT.sub('File "<file>"', text)
    if "_id(" in text or "id_match(" in text:
        text = _OBJ_ID_CALL.sub(r"\1<id>", text)
    text = _ID_NUMBER.sub(r"id\1<id>", text)
    text = _ADDRESS.sub("0x?", text)
    return "\n".join(line.rstrip() for line in text.split("\n")).rstrip("\n")


def normalise_code(text: str) -> str:
    """Generated output code without run-to-run noise: `# kernel path:` comments, hash-named cache
    paths, long hashes, and the benchmark harness at the end (it holds this rank's example sizes).

    Kernel names (`triton_poi_fused_add_sin_0`, `cpp_fused_relu_0`) are deterministic and kept."""
    harness = _BENCHMARK_HARNESS.search(text)
    if harness:
        text = text[: harness.start()]
    text = text.replace("\r\n", "\n")
    kept, position = [], 0
    for match in _KERNEL_PATH.finditer(text):
        if _at_line_start(text, match.start()):  # the whole line goes, with its line end
            kept.append(text[position : text.rfind("\n", 0, match.start()) + 1])
            position = match.end() + 1
    text = normalise_graph("".join(kept) + text[position:])
    if _HASHED_NAME.search(text):
        text = _HASHED_PATH.sub("<cache path>", text)
    return _LONG_HASH.sub("<hash>", text)


def digest(text: str) -> str:
    return hashlib.md5(text.encode("utf-8", "surrogatepass")).hexdigest()


def graph_fingerprint(text: str, code: bool = False) -> tuple[str, list[str]]:
    """(digest of the normalised text, its first GRAPH_LINE_CAP lines) of a graph or of output code."""
    normalised = normalise_code(text) if code else normalise_graph(text)
    lines = [line[:LINE_WIDTH_CAP] for line in normalised.split("\n", GRAPH_LINE_CAP)[:GRAPH_LINE_CAP]]
    return digest(normalised), lines


_DTYPES = {
    "float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64", "int32": "i32",
    "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "b8", "complex64": "c64", "complex128": "c128",
}


def tensor_input(meta: dict[str, Any]) -> dict[str, Any]:
    """A `describe_tensor` record as a compile input: {key (describer, id), dtype, size, source}."""
    dtype = str(meta.get("dtype", "?")).removeprefix("torch.")
    size = meta.get("size")
    return {
        "key": f"{meta.get('describer_id')}/{meta.get('id')}",
        "dtype": _DTYPES.get(dtype, dtype),
        "size": [s if isinstance(s, int) else str(s) for s in size] if isinstance(size, list) else [],
        "source": None,
    }


def input_signature(inputs: list[dict[str, Any]], dynamic_sources: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Compile inputs as `f32[4, 512]`, in order; a dimension made dynamic (its source among
    `dynamic_sources`, e.g. `L['x'].size()[0]`) reads `*`, since ranks may differ there by design."""
    signature = []
    for item in inputs:
        source = item.get("source")
        dims = [
            "*" if source and f"{source}.size()[{index}]" in dynamic_sources else str(size)
            for index, size in enumerate(item.get("size", []))
        ]
        signature.append(f"{item.get('dtype', '?')}[{', '.join(dims)}]")
    return signature


def differing_lines(left: list[str], right: list[str], limit: int = 12) -> list[tuple[int | None, str, int | None, str]]:
    """The first `limit` differing lines of two texts, side by side: (left line no, left text,
    right line no, right text); a line only one side has pairs with (None, "")."""
    import difflib  # only where two ranks' texts differ

    rows: list[tuple[int | None, str, int | None, str]] = []
    matcher = difflib.SequenceMatcher(None, left, right, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        for offset in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + offset, j1 + offset
            rows.append((i + 1 if i < i2 else None, left[i] if i < i2 else "", j + 1 if j < j2 else None, right[j] if j < j2 else ""))
            if len(rows) >= limit:
                return rows
    return rows


_PICKED_RANK = lazy(r"picked_rank_idx=(\d+)")


def sync_decision(text: str) -> str | None:
    """The decision all ranks share in an `aot_joint_graph_sync_decision_cross_ranks` artifact
    (`picked_rank_idx=N`; the saved nodes that follow are this rank's own), or None."""
    match = _PICKED_RANK.search(text)
    return f"picked_rank_idx={match.group(1)}" if match else None


def note_input(fingerprint: Any, kind: str, meta: dict[str, Any]) -> None:
    """A `describe_tensor` adds an input to a compile's fingerprint; a `describe_source` names one."""
    if kind == "describe_tensor":
        fingerprint.inputs.append(tensor_input(meta))
    elif kind == "describe_source" and isinstance(meta.get("source"), str):
        key = f"{meta.get('describer_id')}/{meta.get('id')}"
        for item in reversed(fingerprint.inputs):
            if item["key"] == key:
                item["source"] = item["source"] or meta["source"]
                break


# ------------------------------------------------------------------------------------------------
# JSON as tlparse reads it

NOT_JSON = object()
LONE_SURROGATE = lazy("[\ud800-\udfff]")  # paired escapes decode to one character; lone ones stay
SERDE_DEPTH_LIMIT = 128  # serde_json's recursion limit: 127 nested arrays/objects parse, 128 do not


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError("number out of range")
    return value


def _finite_int(text: str) -> int:
    value = int(text)
    if abs(value) >= 1 << 64 and float(text) in (float("inf"), float("-inf")):  # serde falls back to f64
        raise ValueError("number out of range")
    return value


def strict_json(text: str) -> Any:
    """`text` parsed as serde_json (tlparse) parses it, or NOT_JSON where serde_json would refuse it.

    Beyond the standard library's rules serde_json refuses NaN/Infinity, numbers beyond f64, lone
    UTF-16 surrogates in `\\u` escapes, and nesting 128 deep.
    """
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float, parse_int=_finite_int)
    except (ValueError, RecursionError, OverflowError):
        return NOT_JSON
    work: list[tuple[Any, int]] = [(value, 1)]
    while work:
        item, depth = work.pop()
        if isinstance(item, str):
            if LONE_SURROGATE.search(item):
                return NOT_JSON
        elif isinstance(item, (dict, list)):
            if depth >= SERDE_DEPTH_LIMIT:
                return NOT_JSON
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            work.extend((child, depth + 1) for child in children)
    return value


class ExportIssue(Struct, frozen=True):
    """What one issue torch.export ran into is (an `ExportFailure` read): the export report's row.

    `what` names the issue: "guard_evaluated" (a guard export evaluated, maybe a constraint
    violation), "data_dependent" (an unbacked expression specialised, with a runtime assert),
    "missing_fake_kernel", "mismatched_fake_kernel", or "data_dependent_guard" (a guard on a
    data-dependent expression raised). The other fields are the record's, as logged (None when absent).
    """

    what: str
    failure_type: str  # torch's name of it, as the report shows it ("Guard Evaluated", ...)
    fake_kernel: bool  # a custom op's fake kernel is behind it
    expr: Any = None
    result: Any = None
    op: Any = None
    reason: Any = None


_EXPORT_ISSUES = {
    "Guard Evaluated": "guard_evaluated",
    "Data Dependent Error": "data_dependent",
    "Missing Fake Kernel": "missing_fake_kernel",
    "Mismatched Fake Kernel": "mismatched_fake_kernel",
}


def export_issue(failure: ExportFailure) -> ExportIssue:
    """What an export failure (its type as the kinds note it, and its record's metadata) is."""
    what = _EXPORT_ISSUES.get(failure.failure_type, "data_dependent_guard")
    meta = failure.meta
    return ExportIssue(what, failure.failure_type, what.endswith("fake_kernel"),
                       meta.get("expr"), meta.get("result"), meta.get("op"), meta.get("reason"))
