"""One report over every rank of a distributed run: per-rank reports, then what diverges across ranks.

Ranks are read in parallel worker processes, each writing its own `rank_N/` report and returning a
small `RankResult` of facts; the landing page compares those facts. Divergence between ranks
(different graphs, cache paths, collective order, compiler decisions) is the classic cause of hangs.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ._version import __version__
from .analysis import SCHEMA_VERSION, Analysis
from .facts import normalise_collective
from .inputs import InputError, candidate_logs, rank_of
from .model import CompileId, DiagnosticLog, Stats
from .paths import compile_page_url
from .pipeline import Options, build_report, write_static
from .render import render, trusted_html
from .store import STATUS_LABELS, InputInfo
from .writer import FolderWriter, ReportWriter

PARITY_DESCRIPTION = "Difference of # of collectives in scheduler and inductor output code and missing wait collectives"
CACHE_PRIORITY = {"❌": 3, "✅": 2, "❓": 1}  # miss > hit > bypass, for a compile id's cache status


# ------------------------------------------------------------------------------------------------
# finding the logs


@dataclass
class RankJob:
    rank: int | None
    log: Path
    folder: str  # sub-report folder: rank_N, rank_N_extra_K or unranked_K
    options: Options


def discover(folder: Path, options: Options) -> list[RankJob]:
    """Every trace log in the folder, by rank (from its name, else its records).

    A rank with several logs (forked workers, a log started before the process group) gets its
    biggest log as `rank_N/` and the others as `rank_N_extra_K/`; logs with no rank at all become
    `unranked_K/`.
    """
    if not folder.is_dir():
        raise InputError(f"{folder} must be a folder holding rank logs when using --all-ranks-html")
    logs = candidate_logs(folder)
    if not logs:
        raise InputError(f"No rank log files found in {folder} (expected dedicated_log_torch_trace_rank_<N>_*.log)")
    by_rank: dict[int | None, list[Path]] = {}
    for log in logs:
        by_rank.setdefault(rank_of(log), []).append(log)
    jobs = []
    for rank in sorted((r for r in by_rank if r is not None)):
        ordered = sorted(by_rank[rank], key=lambda p: (-_size(p), p.name))
        jobs.append(RankJob(rank, ordered[0], f"rank_{rank}", options))
        jobs.extend(RankJob(rank, log, f"rank_{rank}_extra_{i}", options) for i, log in enumerate(ordered[1:], start=1))
    jobs.extend(RankJob(None, log, f"unranked_{i}", options) for i, log in enumerate(sorted(by_rank.get(None, [])), start=1))
    if not any(job.rank is not None for job in jobs):
        raise InputError(f"No rank log files found in {folder}: none of its logs carries a rank (use it without --all-ranks-html)")
    return jobs


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


# ------------------------------------------------------------------------------------------------
# one rank (in a worker process)


@dataclass
class RankResult:
    rank: int | None
    folder: str
    log: str
    stats_line: str = ""
    error: str = ""
    records: int = 0
    problems: int = 0
    unknown_kinds: dict[str, int] = field(default_factory=dict)
    compile_ids: list[str] = field(default_factory=list)  # labels in first-appearance order ([-/-] included)
    pages: dict[str, str] = field(default_factory=dict)  # label → page url inside the rank folder
    dirnames: dict[str, str] = field(default_factory=dict)  # label → compile dir name
    statuses: dict[str, str] = field(default_factory=dict)
    failures: int = 0
    cache: list[tuple[int, str, str, str]] = field(default_factory=list)  # (number, mark, label, file name)
    runtime: list[tuple[int, str, str, list[dict[str, Any]], str]] = field(default_factory=list)  # number, label, dir, ops, meta fp
    schedules: list[tuple[int, str, str, list[str]]] = field(default_factory=list)  # number, label, dir, ops
    execution_orders: list[tuple[int, list[str]]] = field(default_factory=list)
    code_collectives: dict[str, tuple[dict[str, int], int]] = field(default_factory=dict)
    agreements: list[tuple[str, str, str, str, str]] = field(default_factory=list)  # label, name, digest, line, url
    dynamic: dict[str, list[str]] = field(default_factory=dict)  # frame compile → dynamic sources
    chromium_events: int = 0
    summary: dict[str, Any] = field(default_factory=dict)  # the rank's summary.json


def build_rank(job: RankJob, root: Path) -> RankResult:
    """Write `root/<folder>/` for one log and return what the landing page compares."""
    result = RankResult(job.rank, job.folder, str(job.log))
    try:
        writer = FolderWriter(root / job.folder)
        source = InputInfo(str(job.log), _size(job.log))
        report = build_report([job.log], writer, job.options, source)
    except Exception as exc:  # one unreadable rank must not lose the others
        result.error = f"{type(exc).__name__}: {exc}"
        result.stats_line = Stats().format()
        return result

    return facts_of(report, result, report.stats, report.diagnostics)


def facts_of(report: Analysis, result: RankResult, stats: Stats, diagnostics: DiagnosticLog) -> RankResult:
    result.summary = report.to_dict()
    result.stats_line = stats.format()
    result.records = report.records
    result.problems = diagnostics.total
    result.unknown_kinds = dict(report.unknown_kinds)
    keys = [k for k in report.directory if k is not None]
    result.compile_ids = [str(k) for k in keys]
    result.pages = {str(k): compile_page_url(k) for k in keys}
    result.dirnames = {str(k): k.dirname for k in keys}
    result.statuses = {str(k): report.status_of(k) for k in keys if k.frame_id is not None or k.compiled_autograd_id is not None}
    result.failures = sum(1 for entries in report.metrics.values() for m in entries if m.get("fail_type"))
    result.cache = sorted(
        (a.number, a.suffix, str(k), a.name) for k in keys for a in report.directory[k] if a.suffix
    )
    dist = report.distributed
    result.runtime = [(n, _label(c), _dirname(c), ops, fp) for n, c, ops, fp in sorted(dist.runtime, key=_first)]
    result.schedules = [(n, _label(c), _dirname(c), ops) for n, c, ops in sorted(dist.schedules, key=_first)]
    result.execution_orders = sorted(dist.execution_orders, key=_first)
    result.code_collectives = {_label(k): v for k, v in dist.code_collectives.items()}
    result.agreements = [(_label(c), name, digest, line, url) for c, name, digest, line, url in dist.agreements]
    result.dynamic = {str(k): sorted(v) for k, v in dist.dynamic_sources.items()}
    result.chromium_events = report.chromium_events
    return result


def _first(item: tuple[Any, ...]) -> Any:
    return item[0]


def _label(compile_id: CompileId | None) -> str:
    return "(unknown)" if compile_id is None else str(compile_id.directory_key())


def _dirname(compile_id: CompileId | None) -> str:
    return "unknown" if compile_id is None else compile_id.dirname


def build_all(jobs: list[RankJob], root: Path, workers: int | None = None, on_done: Callable[[RankResult], None] | None = None) -> list[RankResult]:
    """Every rank's report, in parallel across cores (a rank's string table stays in its process)."""
    workers = workers or min(len(jobs), os.cpu_count() or 1)
    results: list[RankResult] = []
    if workers <= 1 or len(jobs) == 1:
        for job in jobs:
            results.append(build_rank(job, root))
            if on_done:
                on_done(results[-1])
        return results
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for result in pool.map(build_rank, jobs, [root] * len(jobs)):
            results.append(result)
            if on_done:
                on_done(result)
    return results


# ------------------------------------------------------------------------------------------------
# comparing ranks (pure functions of the results)


def primary(results: list[RankResult]) -> list[RankResult]:
    """One result per rank (its main log), in rank order: what cross-rank comparisons use."""
    return sorted((r for r in results if r.rank is not None and r.folder == f"rank_{r.rank}"), key=lambda r: r.rank)


def groups_of(signatures: dict[int, Any]) -> list[tuple[Any, list[int]]]:
    """Ranks grouped by equal signature; the biggest group (the majority) first."""
    grouped: dict[str, tuple[Any, list[int]]] = {}
    for rank, signature in sorted(signatures.items()):
        key = json.dumps(signature, sort_keys=True, default=str)
        grouped.setdefault(key, (signature, []))[1].append(rank)
    return sorted(grouped.values(), key=lambda g: (-len(g[1]), g[1]))


def compile_id_divergence(ranks: list[RankResult]) -> list[dict[str, Any]]:
    """Ranks whose compile ids differ from the majority's: what each is missing and has extra."""
    sets = {r.rank: [c for c in r.compile_ids if c != "[-/-]"] for r in ranks}
    groups = groups_of({rank: sorted(ids) for rank, ids in sets.items()})
    if len(groups) <= 1:
        return []
    reference = set(groups[0][0])
    rows = []
    for r in ranks:
        mine = set(sets[r.rank])
        if mine != reference:
            rows.append(
                {
                    "rank": r.rank,
                    "missing": [c for c in _ordered(reference, ranks) if c not in mine],
                    "extra": [c for c in sets[r.rank] if c not in reference],
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
    rows = sequence_divergence({r.rank: [(mark, label) for _, mark, label, _ in r.cache] for r in ranks})
    return [{**row, "marks": "".join(mark for mark, _ in row["sequence"])} for row in rows]


def schedule_divergence(ranks: list[RankResult]) -> list[dict[str, Any]]:
    """Groups of ranks issuing the same collectives in the same order (a mismatch hangs the job)."""
    if not any(r.schedules for r in ranks):
        return []
    rows = sequence_divergence({r.rank: [(op, label) for _, label, _, ops in r.schedules for op in ops] for r in ranks})
    return [{**row, "count": len(row["sequence"]), "op": row["item"]} for row in rows]


def tensor_meta_groups(ranks: list[RankResult]) -> list[dict[str, Any]]:
    signatures = {r.rank: sorted((d, fp) for _, _, d, _, fp in r.runtime) for r in ranks if r.runtime}
    groups = groups_of(signatures)
    return [] if len(groups) <= 1 else [{"ranks": members} for _, members in groups]


def runtime_estimations(ranks: list[RankResult]) -> list[dict[str, Any]]:
    """runtime_estimations.json: the first estimate of each graph (compile dir), per rank."""
    rows = []
    for r in ranks:
        seen: set[str] = set()
        for _, _, graph, ops, _ in r.runtime:
            if ops and graph not in seen:
                seen.add(graph)
                rows.append({"rank": r.rank, "graph": graph, "ops": ops})
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
    graphs = []
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
    return [{"rank": r.rank, "graph": graph, "ops": ops} for r in ranks for _, _, graph, ops in r.schedules if ops]


def collectives_parity(result: RankResult) -> dict[str, Any]:
    """Scheduler vs generated code, per compile: collectives that differ in count, and waits missing."""
    last_schedule: dict[str, tuple[str, list[str]]] = {}
    for _, label, graph, ops in result.schedules:
        last_schedule[label] = (graph, ops)
    graphs = []
    for label, (graph, ops) in last_schedule.items():
        if label not in result.code_collectives:
            continue
        code_counts, waits = result.code_collectives[label]
        scheduled = Counter(n for n in (normalise_collective(op) for op in ops) if n is not None)
        offset = sum(abs(scheduled.get(op, 0) - code_counts.get(op, 0)) for op in set(scheduled) | set(code_counts))
        missing_waits = max(0, sum(code_counts.values()) - waits)
        if offset or missing_waits:
            graphs.append({"graph": graph, "compile_id": label, "offset": offset, "missing_waits": missing_waits})
    return {"description": PARITY_DESCRIPTION, "graphs": graphs}


def execution_order_analysis(ranks: list[RankResult]) -> dict[str, Any] | None:
    """Line up the graphs each rank ran, in order; flag steps where ranks ran different collectives or cache paths."""
    orders = {r.rank: r.execution_orders[-1][1] for r in ranks if r.execution_orders}
    if len(orders) < 2:
        return None
    schedules = {(r.rank, label): ops for r in ranks for _, label, _, ops in r.schedules}
    cache: dict[tuple[int, str], str] = {}
    for r in ranks:
        for _, mark, label, _ in r.cache:
            if CACHE_PRIORITY.get(mark, 0) > CACHE_PRIORITY.get(cache.get((r.rank, label), ""), 0):
                cache[(r.rank, label)] = mark
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


def agreement_divergence(ranks: list[RankResult]) -> list[dict[str, Any]]:
    """Compiler-collective artifacts (what ranks must agree on) whose content differs between ranks."""
    by_key: dict[tuple[str, str], dict[int, tuple[str, str, str]]] = {}
    for r in ranks:
        for label, name, digest, line, url in r.agreements:
            by_key.setdefault((label, name), {})[r.rank] = (digest, line, f"{r.folder}/{url}")
    rows = []
    for (label, name), per_rank in by_key.items():
        groups = groups_of({rank: digest for rank, (digest, _, _) in per_rank.items()})
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
    compiles = sorted({c for r in ranks for c in r.dynamic} | set())
    rows = []
    for label in compiles:
        per_rank = {r.rank: r.dynamic.get(label, []) for r in ranks if label in r.compile_ids or label in r.dynamic}
        groups = groups_of(per_rank)
        if len(groups) > 1:
            rows.append({"compile_id": label, "groups": [{"ranks": members, "sources": sources} for sources, members in groups]})
    return rows


# ------------------------------------------------------------------------------------------------
# writing the landing outputs


def merge_chromium(writer: FolderWriter, results: list[RankResult], out: Any) -> int:
    """Concatenate every rank's chromium events with pid = rank (one rank file in memory at a time)."""
    count = 0
    out.write(b"[")
    for r in primary(results):
        try:
            events = orjson.loads(writer.sub(r.folder).read("chromium_events.json") or b"")
        except orjson.JSONDecodeError:
            continue
        for event in events if isinstance(events, list) else []:
            if isinstance(event, dict):
                event["pid"] = r.rank
                out.write(b"\n" if not count else b",\n")
                out.write(orjson.dumps(event, option=orjson.OPT_SORT_KEYS))
                count += 1
    out.write(b"\n]" if count else b"]")
    return count


@dataclass
class Landing:
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
    chromium_events: int = 0

    @property
    def diverges(self) -> bool:
        return bool(self.compile_ids or self.cache or self.schedules or self.tensor_meta or self.agreements or self.dynamic)


def analyse(results: list[RankResult]) -> Landing:
    ranks = primary(results)
    estimations = runtime_estimations(ranks)
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
    )


def write_outputs(writer: FolderWriter, landing: Landing) -> list[str]:
    """The landing's JSON files and every rank's collectives_parity.json; returns notes for stdout."""
    notes = []
    for folder, parity in landing.parity.items():
        writer.write(f"{folder}/collectives_parity.json", json.dumps(parity, indent=2))
    with writer.open("chromium_events.json") as out:
        landing.chromium_events = merge_chromium(writer, landing.results, out)
    if landing.estimations:
        writer.write("runtime_estimations.json", json.dumps(landing.estimations, indent=2))
        writer.write("chromium_trace_with_runtime.json", json.dumps(runtime_trace(landing.estimations), indent=2, sort_keys=True))
        notes.append("Runtime estimations: runtime_estimations.json")
    schedules = collective_schedules(landing.ranks)
    if schedules:
        writer.write("collective_schedules.json", json.dumps(schedules, indent=2))
        notes.append("Collective schedules: collective_schedules.json")
    return notes


def landing_context(landing: Landing, source: InputInfo, custom_header_html: str) -> dict[str, Any]:
    context = base_context_for(source)
    by_folder = {r.folder: r for r in landing.results}
    context.update(
        title="Multi-rank report",
        custom_header=trusted_html(custom_header_html),
        landing=landing,
        rows=[
            {
                "result": r,
                "statuses": Counter(r.statuses.values()),
                "parity": landing.parity.get(r.folder, {}).get("graphs", []),
            }
            for r in sorted(landing.results, key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.folder))
        ],
        by_folder=by_folder,
        status_labels=STATUS_LABELS,
    )
    return context


def base_context_for(source: InputInfo) -> dict[str, Any]:
    return {"root": "", "source": source, "compile_id": None, "kind": "", "lineno": None, "compile_page": None, "failures_link": False}


def write_all_ranks(
    folder: Path, out: Path, overwrite: bool, options: Options, on_done: Callable[[RankResult], None] | None = None
) -> tuple[Landing, list[str]]:
    """The whole multi-rank report, all or nothing: rank reports, comparisons, landing page."""
    # ranks already run in parallel: no highlighting workers inside each rank's process
    jobs = discover(folder, dataclasses.replace(options, workers=0))
    writer = ReportWriter(out, overwrite)
    try:
        results = build_all(jobs, writer.root, on_done=on_done)
        landing = analyse(results)
        notes = write_outputs(writer, landing)
        write_static(writer)
        source = InputInfo(str(folder), sum(_size(job.log) for job in jobs), [])
        writer.write("summary.json", orjson.dumps(landing_summary(landing, jobs), option=orjson.OPT_INDENT_2))
        writer.write("index.html", render("landing.html.j2", landing_context(landing, source, options.custom_header_html)))
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    return landing, notes


def divergences(landing: Landing) -> list[dict[str, Any]]:
    """Every cross-rank verdict as `{kind, compile_id, ranks, detail}`: empty when the ranks agree."""
    rows: list[dict[str, Any]] = []
    for row in landing.compile_ids:
        detail = f"missing {', '.join(row['missing']) or 'nothing'}; extra {', '.join(row['extra']) or 'nothing'}"
        first = (row["missing"] or row["extra"] or [None])[0]
        rows.append({"kind": "compile_ids", "compile_id": first, "ranks": [row["rank"]], "detail": detail})
    for kind, items, what in (("cache", landing.cache, "cache results"), ("collective_schedule", landing.schedules, "collectives")):
        for row in items[1:]:  # the first group is the majority
            rows.append({"kind": kind, "compile_id": row["compile_id"], "ranks": row["ranks"],
                         "detail": f"{what} depart from the majority at position {row['at']}: {row['item']} instead of {row['expected']}"})
    for row in landing.tensor_meta[1:]:
        rows.append({"kind": "tensor_meta", "compile_id": None, "ranks": row["ranks"], "detail": "different tensor metadata"})
    for row in landing.agreements:
        for group in row["groups"][1:]:
            rows.append({"kind": "compiler_collective", "compile_id": row["compile_id"], "ranks": group["ranks"],
                         "detail": f"{row['name']} differs: {group['line']}"})
    for row in landing.dynamic:
        for group in row["groups"][1:]:
            rows.append({"kind": "dynamic_shapes", "compile_id": row["compile_id"], "ranks": group["ranks"],
                         "detail": f"dynamic dimensions {', '.join(group['sources']) or 'none'}"})
    return rows


def landing_summary(landing: Landing, jobs: list[RankJob]) -> dict[str, Any]:
    """The multi-rank summary.json: every rank's summary, and the divergences between ranks."""
    return {
        "schema_version": SCHEMA_VERSION,
        "generator": {"name": "tlparse-py", "version": __version__},
        "inputs": [{"path": str(job.log), "bytes": _size(job.log), "rank": job.rank} for job in jobs],
        "ranks": [{"rank": r.rank, "folder": r.folder, "error": r.error or None, "summary": r.summary or None} for r in landing.results],
        "divergences": divergences(landing),
    }
