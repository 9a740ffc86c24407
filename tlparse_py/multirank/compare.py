"""What diverges across ranks: pure functions of the rank results (their analyses).

Divergence between ranks (different graphs, cache paths, collective order, compiler decisions) is
the classic cause of hangs.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from msgspec import Struct, field

from ..analysis.facts import differing_lines, input_signature, normalise_collective, sync_decision
from ..analysis.summary import RanksSummary
from ..analysis.totals import value_at
from ..model import CompileId
from .run import RankResult

PARITY_DESCRIPTION = "Difference of # of collectives in scheduler and inductor output code and missing wait collectives"
CACHE_PRIORITY = {"❌": 3, "✅": 2, "❓": 1}  # miss > hit > bypass, for a compile id's cache status


def primary(results: list[RankResult]) -> list[RankResult]:
    """One result per rank (its main log), in rank order: what cross-rank comparisons use."""
    return sorted((r for r in results if r.rank is not None and r.folder == f"rank_{r.rank}"), key=lambda r: r.number)


def groups_of(signatures: dict[int, Any]) -> list[tuple[Any, list[int]]]:
    """Ranks grouped by equal signature; the biggest group (the majority) first."""
    grouped: dict[str, tuple[Any, list[int]]] = {}
    for rank, signature in sorted(signatures.items()):
        key = json.dumps(signature, sort_keys=True, default=str)
        grouped.setdefault(key, (signature, []))[1].append(rank)
    return sorted(grouped.values(), key=lambda g: (-len(g[1]), g[1]))


def compile_id_divergence(ranks: list[RankResult]) -> list[dict[str, Any]]:
    """Ranks whose compile ids differ from the majority's: what each is missing and has extra."""
    sets = {r.number: [c for c in r.compile_ids if c != "[-/-]"] for r in ranks}
    groups = groups_of({rank: sorted(ids) for rank, ids in sets.items()})
    if len(groups) <= 1:
        return []
    reference = set(groups[0][0])
    rows = []
    for r in ranks:
        mine = set(sets[r.number])
        if mine != reference:
            rows.append(
                {
                    "rank": r.number,
                    "missing": [c for c in _ordered(reference, ranks) if c not in mine],
                    "extra": [c for c in sets[r.number] if c not in reference],
                    "folder": r.folder,
                    "pages": r.pages,
                }
            )
    return rows


def _ordered(ids: set[str], ranks: list[RankResult]) -> list[str]:
    seen: list[str] = []
    for r in ranks:
        seen.extend(c for c in r.compile_ids if c in ids and c not in seen)
    return seen


def first_difference(a: list[Any], b: list[Any]) -> int | None:
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def sequence_divergence(sequences: dict[int, list[tuple[str, str]]]) -> list[dict[str, Any]]:
    """Ranks grouped by equal sequences of (item, compile id), majority first; for each group, where
    it first departs from the majority: the position, its item and compile id there, and the majority's."""
    groups = groups_of(sequences)
    if len(groups) <= 1:
        return []
    reference = groups[0][0]
    rows = []
    for sequence, members in groups:
        index = first_difference([item for item, _ in reference], [item for item, _ in sequence])
        here = sequence[index] if index is not None and index < len(sequence) else (None, None)
        there = reference[index] if index is not None and index < len(reference) else (None, None)
        rows.append({"ranks": members, "sequence": sequence, "at": index, "item": here[0], "compile_id": here[1], "expected": there[0]})
    return rows


def cache_divergence(ranks: list[RankResult]) -> list[dict[str, Any]]:
    """Groups of ranks with the same sequence of cache hits/misses/bypasses, and where each group departs."""
    rows = sequence_divergence({r.number: [(c.mark, c.compile_id) for c in r.cache] for r in ranks})
    return [{**row, "marks": "".join(mark for mark, _ in row["sequence"])} for row in rows]


CACHE_WORDS = {"✅": "a hit", "❌": "a miss", "❓": "a bypass"}
# torch.distributed's default collective timeouts: a rank waits this long for the others at a collective
NCCL_TIMEOUT_S = 600.0
OTHER_TIMEOUT_S = 1800.0


def against(groups: list[dict[str, Any]]) -> str:
    """Who a departing group is compared with: "the majority (ranks 0, 2 and 3)" when the first group
    holds more than half of the ranks, else just "rank 0" (two ranks have no majority)."""
    reference = groups[0]["ranks"]
    total = sum(len(g["ranks"]) for g in groups)
    names = words([str(r) for r in reference])
    who = f"rank{'s' if len(reference) > 1 else ''} {names}"
    return f"the majority ({who})" if len(reference) * 2 > total else who


def rank_names(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {words([str(r) for r in ranks])}"


def cache_note(landing_cache: list[dict[str, Any]], ranks: list[RankResult]) -> dict[str, Any] | None:
    """Ranks that differ only in cache results (their graphs, shapes and collectives agree): a note,
    not a divergence. A cache difference cannot make ranks compute differently; it costs the slower
    rank compile time, which the others spend waiting at their next collective. That wait is a hang
    only when it nears the collective timeout, so the note gives the compile-time spread beside it."""
    if not landing_cache:
        return None
    times = {r.number: value_at(r.summary.get("totals", {}), "compile_time_s") for r in ranks}
    known = {rank: t for rank, t in times.items() if isinstance(t, (int, float))}
    spread = round(max(known.values()) - min(known.values()), 6) if len(known) == len(times) and known else None
    first = landing_cache[1]
    reference = landing_cache[0]
    return {
        "kind": "cache",
        "compile_id": first["compile_id"],
        "ranks": first["ranks"],
        "detail": (f"{rank_names(first['ranks'])} took different cache results from {against(landing_cache)}: lookup {first['at'] + 1}"
                   f"{' in ' + first['compile_id'] if first['compile_id'] else ''} was {CACHE_WORDS.get(first['item'] or '', 'missing')} "
                   f"where {rank_names(reference['ranks'])} had {CACHE_WORDS.get(first['expected'] or '', 'none')}") if first["at"] is not None else "",
        "compile_time_s": {str(rank): times[rank] for rank in sorted(times)},
        "spread_s": spread,
        "timeout": timeout_risk(spread),
    }


def timeout_risk(spread: float | None) -> str:
    """What a compile-time spread between ranks means for a collective timeout, in words."""
    if spread is None:
        return "unknown: a rank's compile time was not logged"
    if spread >= NCCL_TIMEOUT_S:
        return "at least NCCL's default collective timeout (10 min): a rank waiting at a collective can time out"
    if spread >= 60:
        return "under the default collective timeouts (10 min with NCCL, 30 min with other backends), but a job with a shorter timeout could hit it"
    return "far under the default collective timeouts (10 min with NCCL, 30 min with other backends)"


def schedule_divergence(ranks: list[RankResult]) -> list[dict[str, Any]]:
    """Groups of ranks issuing the same collectives in the same order (a mismatch hangs the job)."""
    if not any(r.distributed.schedules for r in ranks):
        return []
    rows = sequence_divergence({r.number: [(op, s.compile_id) for s in r.distributed.schedules for op in s.ops] for r in ranks})
    return [{**row, "count": len(row["sequence"]), "op": row["item"]} for row in rows]


def tensor_meta_groups(ranks: list[RankResult]) -> list[dict[str, Any]]:
    signatures = {r.number: sorted((e.graph, e.fingerprint) for e in r.distributed.runtime) for r in ranks if r.distributed.runtime}
    groups = groups_of(signatures)
    return [] if len(groups) <= 1 else [{"ranks": members} for _, members in groups]


def runtime_estimations(ranks: list[RankResult]) -> list[dict[str, Any]]:
    """runtime_estimations.json: the first estimate of each graph (compile dir), per rank."""
    rows = []
    for r in ranks:
        seen: set[str] = set()
        for estimate in r.distributed.runtime:
            if estimate.ops and estimate.graph not in seen:
                seen.add(estimate.graph)
                rows.append({"rank": r.number, "graph": estimate.graph, "ops": estimate.ops})
    return rows


def runtime_analysis(estimations: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Per graph present on every rank: the estimated total and the spread between ranks.

    Graphs are paired by name (tlparse pairs them by position, which compares unrelated graphs
    as soon as one rank compiled one more).
    """
    if not estimations:
        return None
    totals: dict[int, dict[str, float]] = {}
    for row in estimations:
        totals.setdefault(row["rank"], {})[row["graph"]] = sum(op["estimated_runtime_ns"] for op in row["ops"])
    graph_sets = {rank: set(graphs) for rank, graphs in totals.items()}
    common = set.intersection(*graph_sets.values())
    uneven = sorted(set.union(*graph_sets.values()) - common)
    graphs: list[dict[str, Any]] = []
    for graph in sorted(common):
        per_rank = {rank: totals[rank][graph] for rank in totals}
        fastest = min(per_rank, key=lambda r: (per_rank[r], -r))  # ties go to the later rank, as in tlparse
        slowest = max(per_rank, key=lambda r: (per_rank[r], r))
        graphs.append(
            {
                "graph": graph,
                "delta_ms": round((per_rank[slowest] - per_rank[fastest]) / 1e6, 3),
                "fastest": (fastest, round(per_rank[fastest] / 1e6, 3)),
                "slowest": (slowest, round(per_rank[slowest] / 1e6, 3)),
            }
        )
    graphs.sort(key=lambda g: -g["delta_ms"])
    return {"graphs": graphs, "uneven": uneven, "mismatched_graph_counts": len({len(s) for s in graph_sets.values()}) > 1}


def runtime_trace(estimations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """chromium_trace_with_runtime.json: each graph's ops laid end to end, one process per rank."""
    events: list[dict[str, Any]] = []
    threads: dict[int, list[str]] = {}
    for row in estimations:
        rank, graph = row["rank"], row["graph"]
        graphs = threads.setdefault(rank, [])
        graphs.append(graph)
        tid, ts = len(graphs), 0
        for op in row["ops"]:
            duration = max(1, -(-int(op["estimated_runtime_ns"]) // 1000))
            events.append(
                {"name": op["name"], "ph": "X", "ts": ts, "dur": duration, "pid": rank, "tid": tid, "cat": "runtime",
                 "args": {"graph": graph, "rank": rank, "runtime_ns": int(op["estimated_runtime_ns"])}}
            )
            ts += duration
    for rank in sorted(threads):
        events.append({"name": "process_name", "ph": "M", "pid": rank, "args": {"name": f"Rank {rank}"}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": rank, "args": {"sort_index": rank}})
        for tid, graph in enumerate(threads[rank], start=1):
            events.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": tid, "args": {"name": f"graph {graph}"}})
            events.append({"name": "thread_sort_index", "ph": "M", "pid": rank, "tid": tid, "args": {"sort_index": tid}})
    return events


def collective_schedules(ranks: list[RankResult]) -> list[dict[str, Any]]:
    return [{"rank": r.number, "graph": s.graph, "ops": s.ops} for r in ranks for s in r.distributed.schedules if s.ops]


def collectives_parity(result: RankResult) -> dict[str, Any]:
    """Scheduler vs generated code, per compile: collectives that differ in count, and waits missing."""
    last_schedule: dict[str, tuple[str, list[str]]] = {}
    for schedule in result.distributed.schedules:
        last_schedule[schedule.compile_id] = (schedule.graph, schedule.ops)
    graphs = []
    for label, (graph, ops) in last_schedule.items():
        if label not in result.distributed.code_collectives:
            continue
        code_counts, waits = result.distributed.code_collectives[label]
        scheduled = Counter(n for n in (normalise_collective(op) for op in ops) if n is not None)
        offset = sum(abs(scheduled.get(op, 0) - code_counts.get(op, 0)) for op in set(scheduled) | set(code_counts))
        missing_waits = max(0, sum(code_counts.values()) - waits)
        if offset or missing_waits:
            graphs.append({"graph": graph, "compile_id": label, "offset": offset, "missing_waits": missing_waits})
    return {"description": PARITY_DESCRIPTION, "graphs": graphs}


def execution_order_analysis(ranks: list[RankResult]) -> dict[str, Any] | None:
    """Line up the graphs each rank ran, in order; flag steps where ranks ran different collectives or cache paths."""
    orders = {r.number: r.distributed.execution_orders[-1].order for r in ranks if r.distributed.execution_orders}
    if len(orders) < 2:
        return None
    schedules = {(r.number, s.compile_id): s.ops for r in ranks for s in r.distributed.schedules}
    cache: dict[tuple[int, str], str] = {}
    for r in ranks:
        for c in r.cache:
            if CACHE_PRIORITY.get(c.mark, 0) > CACHE_PRIORITY.get(cache.get((r.number, c.compile_id), ""), 0):
                cache[(r.number, c.compile_id)] = c.mark
    rows = analyze_execution_order(orders, schedules, cache)
    schedule_ranks = sorted({rank for row in rows if "schedule" in row["issues"] for rank in row["by_rank"]})
    cache_ranks = sorted({rank for row in rows if "cache" in row["issues"] for rank in row["by_rank"]})
    return {
        "rows": [row for row in rows if row["issues"] or len(set(row["by_rank"].values())) > 1],
        "order_differs": any(len(set(row["by_rank"].values())) > 1 for row in rows),
        "schedule_ranks": schedule_ranks,
        "cache_ranks": cache_ranks,
    }


def analyze_execution_order(
    orders: dict[int, list[str]], schedules: dict[tuple[int, str], list[str]], cache: dict[tuple[int, str], str]
) -> list[dict[str, Any]]:
    """Per step of the run: which compile id each rank ran, and whether collectives or cache results differ."""
    rows = []
    for index in range(max((len(o) for o in orders.values()), default=0)):
        by_rank = {rank: order[index] for rank, order in sorted(orders.items()) if index < len(order)}
        if not by_rank:
            continue
        issues = []
        known = [schedules[(r, c)] for r, c in by_rank.items() if (r, c) in schedules]
        if len(known) >= 2 and any(k != known[0] for k in known):
            issues.append("schedule")
        statuses = [cache[(r, c)] for r, c in by_rank.items() if cache.get((r, c))]
        if len(statuses) >= 2 and len(set(statuses)) > 1:
            issues.append("cache")
        rows.append({"index": index, "by_rank": by_rank, "issues": issues})
    return rows


# what an artifact is to the comparison: its kind's `collective` role (kinds/builtin.py)
LOCAL_STATE = "local_state"  # each rank's own state BEFORE the exchange: differs by design
SYNC_DECISION = "sync_decision"
SPMD_MISMATCH = "spmd_mismatch"


def agreement_divergence(ranks: list[RankResult]) -> list[dict[str, Any]]:
    """Decisions ranks must share that differ between ranks.

    A `compiler_collective` artifact is not one: it is the rank's local state before the exchange
    (see `compiler_collectives`). An AOT sync decision is compared on the rank it picked
    (`picked_rank_idx`; the saved nodes listed after it are the rank's own), or whole when it
    does not say.
    """
    by_key: dict[tuple[str, str], dict[int, tuple[str, str, str]]] = {}
    for r in ranks:
        for a in r.distributed.agreements:
            if a.role in (LOCAL_STATE, SPMD_MISMATCH):
                continue
            decision = (sync_decision(a.line) if a.role == SYNC_DECISION else None) or a.digest
            by_key.setdefault((a.compile_id, a.name), {})[r.number] = (decision, a.line, f"{r.folder}/{a.url}")
    rows = []
    for (label, name), per_rank in by_key.items():
        groups = groups_of({rank: decision for rank, (decision, _, _) in per_rank.items()})
        if len(groups) > 1:
            rows.append(
                {
                    "compile_id": label,
                    "name": name,
                    "groups": [{"ranks": members, "line": per_rank[members[0]][1], "url": per_rank[members[0]][2]} for _, members in groups],
                }
            )
    return rows


def dynamic_divergence(ranks: list[RankResult]) -> list[dict[str, Any]]:
    """Frame compiles where ranks made different dynamic/static decisions (different dynamic dimensions)."""
    compiles = sorted({c for r in ranks for c in r.distributed.dynamic_sources})
    rows = []
    for label in compiles:
        per_rank = {r.number: sorted(r.distributed.dynamic_sources.get(label, ())) for r in ranks if label in r.compile_ids or label in r.distributed.dynamic_sources}
        groups = groups_of(per_rank)
        if len(groups) > 1:
            rows.append({"compile_id": label, "groups": [{"ranks": members, "sources": sources} for sources, members in groups]})
    return rows


def spmd_mismatches(ranks: list[RankResult]) -> list[dict[str, Any]]:
    """`inductor_spmd_graph_mismatch`: Inductor itself found the ranks' graphs differ (its presence is the verdict)."""
    rows: dict[str, dict[str, Any]] = {}
    for r in ranks:
        for a in r.distributed.agreements:
            if a.role == SPMD_MISMATCH:
                row = rows.setdefault(a.compile_id, {"compile_id": a.compile_id, "ranks": [], "line": a.line, "url": f"{r.folder}/{a.url}"})
                if r.number not in row["ranks"]:
                    row["ranks"].append(r.number)
    return list(rows.values())


# ------------------------------------------------------------------------------------------------
# what each compile id produced, rank against rank

CONTENT_PARTS = (("dynamo", "Dynamo graph"), ("post_grad", "post-grad graph"), ("output_code", "output code"))


def log_order(ranks: list[RankResult]) -> list[str]:
    """Compile ids in log order: the first rank's order, then ids only later ranks have."""
    seen: dict[str, None] = {}
    for r in ranks:
        for label in [*r.compile_ids, *r.distributed.fingerprints]:
            seen.setdefault(label, None)
    return list(seen)


def content_signature(result: RankResult, label: str) -> dict[str, Any]:
    """What a compile id produced on a rank, as compared: graph and code digests, input shapes (dimensions
    the rank made dynamic masked: those may differ by design)."""
    fingerprint = result.distributed.fingerprints[label]
    dynamic = result.distributed.dynamic_sources.get(fingerprint.frame, set())
    signature: dict[str, Any] = {part: fingerprint.graphs.get(part, []) for part, _ in CONTENT_PARTS}
    signature["inputs"] = input_signature(fingerprint.inputs, dynamic)
    return signature


def content_divergence(ranks: list[RankResult]) -> list[dict[str, Any]]:
    """Compile ids whose graphs, output code or input shapes differ between the ranks that compiled
    them, in log order: for each group of ranks departing from the reference (the biggest group;
    on a tie, the one with the lowest rank), what differs and the first differing lines side by side."""
    rows = []
    by_rank = {r.number: r for r in ranks}
    for label in log_order(ranks):
        signatures = {r.number: content_signature(r, label) for r in ranks if label in r.distributed.fingerprints}
        if len(signatures) < 2:
            continue
        groups = groups_of(signatures)
        if len(groups) <= 1:
            continue
        reference, reference_ranks = groups[0]
        left = by_rank[reference_ranks[0]]
        departures = []
        for signature, members in groups[1:]:
            right = by_rank[members[0]]
            differs = [name for part, name in CONTENT_PARTS if signature[part] != reference[part]]
            if signature["inputs"] != reference["inputs"]:
                differs.append("input shapes")
            departures.append(
                {
                    "ranks": members,
                    "differs": differs,
                    "side_by_side": side_by_side(left, right, label, reference, signature),
                    "urls": (_page(left, label), _page(right, label)),
                }
            )
        rows.append({"compile_id": label, "reference": reference_ranks, "departures": departures})
    return rows


def _page(result: RankResult, label: str) -> str:
    page = result.pages.get(label)
    return f"{result.folder}/{page}" if page else f"{result.folder}/index.html"


def side_by_side(left: RankResult, right: RankResult, label: str, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any] | None:
    """The first differing lines of the first part that differs and whose text was kept
    (the Dynamo graph, else the post-grad graph), else of the input shapes."""
    mine, theirs = left.distributed.fingerprints[label], right.distributed.fingerprints[label]
    for part, name in CONTENT_PARTS:
        if a[part] != b[part] and (mine.lines.get(part) or theirs.lines.get(part)):
            rows = differing_lines(mine.lines.get(part, []), theirs.lines.get(part, []))
            if rows:
                return {"what": name, "left": left.number, "right": right.number, "rows": rows}
    if a["inputs"] != b["inputs"]:
        rows = differing_lines([f"input {i}: {s}" for i, s in enumerate(a["inputs"], 1)], [f"input {i}: {s}" for i, s in enumerate(b["inputs"], 1)])
        return {"what": "input shapes", "left": left.number, "right": right.number, "rows": rows}
    return None


def compiler_collectives(ranks: list[RankResult], content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Information, not a verdict: each frame compile whose ranks exchanged state through compiler
    collectives, whether their local states (before the exchange) differed, and what they decided
    together: the dynamic dimensions each rank ended with. `agreed` is False only when a desync
    remains after the exchange (different dynamic dimensions, or different graphs in that frame)."""
    frames: dict[str, dict[int, list[str]]] = {}
    for r in ranks:
        for a in r.distributed.agreements:
            if a.role == LOCAL_STATE:
                frame = frame_of(a.compile_id)
                frames.setdefault(frame, {}).setdefault(r.number, []).append(a.digest)
    diverging = {frame_of(row["compile_id"]) for row in content}
    rows = []
    for frame, states in frames.items():
        dynamic = {r.number: sorted(r.distributed.dynamic_sources.get(frame, ())) for r in ranks if frame in r.distributed.dynamic_sources or r.number in states}
        decisions = groups_of(dynamic)
        shared = decisions[0][0] if len(decisions) == 1 else None
        rows.append(
            {
                "compile_id": frame,
                "ranks": sorted(states),
                "exchanges": max(len(v) for v in states.values()),
                "local_states_differ": len(groups_of(states)) > 1,
                "dynamic_sources": shared if shared is not None else None,
                "dynamic_by_rank": {str(rank): sources for rank, sources in dynamic.items()},
                "agreed": shared is not None and frame not in diverging,
            }
        )
    return rows


def frame_of(label: str) -> str:
    """`[0/0_1]` → `[0/0]` (a display label without its attempt)."""
    key = CompileId.parse(label)
    return str(key.frame_key()) if key is not None else label


class Landing(Struct):
    """Everything the landing page says, computed once from the rank results."""

    results: list[RankResult]
    ranks: list[RankResult]
    compile_ids: list[dict[str, Any]]
    cache: list[dict[str, Any]]
    schedules: list[dict[str, Any]]
    tensor_meta: list[dict[str, Any]]
    runtime: dict[str, Any] | None
    execution: dict[str, Any] | None
    agreements: list[dict[str, Any]]
    dynamic: list[dict[str, Any]]
    parity: dict[str, dict[str, Any]]
    estimations: list[dict[str, Any]]
    content: list[dict[str, Any]] = field(default_factory=list)
    spmd: list[dict[str, Any]] = field(default_factory=list)
    collectives: list[dict[str, Any]] = field(default_factory=list)  # compiler collectives: information
    chromium_events: int = 0
    summary: RanksSummary | None = None  # the ranks' summaries, typed (set once summary.json is written)

    @property
    def diverges(self) -> bool:
        """The ranks compiled or communicate differently: a job can hang or time out on that. Cache
        results alone are no divergence (`notes`)."""
        return bool(
            self.compile_ids or self.schedules or self.tensor_meta or self.agreements or self.dynamic
            or self.content or self.spmd
        )

    @property
    def notes(self) -> list[dict[str, Any]]:
        """Differences between ranks that are not divergences: cache results, with the compile time they cost."""
        note = cache_note(self.cache, self.ranks)
        return [note] if note is not None else []

    @property
    def first(self) -> dict[str, Any] | None:
        """The first divergence in log order (a compile id), or the first one without one."""
        rows = divergences(self)
        if not rows:
            return None
        order = {label: index for index, label in enumerate(log_order(self.ranks))}
        return min(rows, key=lambda row: order.get(row["compile_id"], len(order)) if row["compile_id"] else len(order) + 1)


def analyse(results: list[RankResult]) -> Landing:
    ranks = primary(results)
    estimations = runtime_estimations(ranks)
    content = content_divergence(ranks)
    return Landing(
        results=results,
        ranks=ranks,
        compile_ids=compile_id_divergence(ranks),
        cache=cache_divergence(ranks),
        schedules=schedule_divergence(ranks),
        tensor_meta=tensor_meta_groups(ranks),
        runtime=runtime_analysis(estimations),
        execution=execution_order_analysis(ranks),
        agreements=agreement_divergence(ranks),
        dynamic=dynamic_divergence(ranks),
        parity={r.folder: collectives_parity(r) for r in results},
        estimations=estimations,
        content=content,
        spmd=spmd_mismatches(ranks),
        collectives=compiler_collectives(ranks, content),
    )


def divergences(landing: Landing) -> list[dict[str, Any]]:
    """Every cross-rank verdict as `{kind, compile_id, ranks, detail}`: empty when the ranks agree."""
    rows: list[dict[str, Any]] = []
    for row in landing.content:
        for departure in row["departures"]:
            rows.append({"kind": "compile_content", "compile_id": row["compile_id"], "ranks": departure["ranks"],
                         "detail": f"{words(departure['differs'])} differ from rank {row['reference'][0]}'s"
                                   f"{_first_lines(departure['side_by_side'])}"})
    for row in landing.spmd:
        rows.append({"kind": "spmd_graph_mismatch", "compile_id": row["compile_id"], "ranks": row["ranks"],
                     "detail": f"Inductor found the ranks' graphs differ: {row['line']}"})
    for row in landing.compile_ids:
        detail = f"missing {', '.join(row['missing']) or 'nothing'}; extra {', '.join(row['extra']) or 'nothing'}"
        first = (row["missing"] or row["extra"] or [None])[0]
        rows.append({"kind": "compile_ids", "compile_id": first, "ranks": [row["rank"]], "detail": detail})
    for row in landing.schedules[1:]:  # the first group is the biggest
        where = f"collective {row['at'] + 1} is {row['item'] or 'missing'}" if row["at"] is not None else "the collectives differ"
        rows.append({"kind": "collective_schedule", "compile_id": row["compile_id"], "ranks": row["ranks"],
                     "detail": f"{rank_names(row['ranks'])} differ from {against(landing.schedules)}: {where} "
                               f"where {rank_names(landing.schedules[0]['ranks'])} issue {row['expected'] or 'nothing'}"})
    for row in landing.tensor_meta[1:]:
        rows.append({"kind": "tensor_meta", "compile_id": None, "ranks": row["ranks"], "detail": "different tensor metadata"})
    for row in landing.agreements:
        for group in row["groups"][1:]:
            rows.append({"kind": "shared_decision", "compile_id": row["compile_id"], "ranks": group["ranks"],
                         "detail": f"{row['name']} differs: {group['line']}"})
    for row in landing.dynamic:
        for group in row["groups"][1:]:
            rows.append({"kind": "dynamic_shapes", "compile_id": row["compile_id"], "ranks": group["ranks"],
                         "detail": f"dynamic dimensions {', '.join(group['sources']) or 'none'}"})
    return [_as_compile(row) for row in rows]


def _as_compile(row: dict[str, Any]) -> dict[str, Any]:
    """Name a verdict by its compile, as summary.json's `compiles` do (`[1/0]`), the attempt in the detail."""
    compile_id = row["compile_id"]
    key = CompileId.parse(compile_id) if isinstance(compile_id, str) else None
    if key is not None and key.attempt:
        row = {**row, "compile_id": str(key.frame_key()), "detail": f"in attempt {compile_id}: {row['detail']}"}
    return row


def words(items: list[str]) -> str:
    """["a", "b", "c"] → "a, b and c"."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}" if items else ""


def _first_lines(view: dict[str, Any] | None) -> str:
    """`: first difference in the Dynamo graph, line 3: "a" vs "b"` (one line of each side)."""
    if not view or not view["rows"]:
        return ""
    left_no, left, right_no, right = view["rows"][0]
    return (f"; first difference in the {view['what']}, line {left_no or right_no}: "
            f"rank {view['left']} {left.strip()[:160]!r} vs rank {view['right']} {right.strip()[:160]!r}")


