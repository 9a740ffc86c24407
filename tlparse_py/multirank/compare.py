"""The cross-rank comparison as the landing page and its files show it.

What diverges across ranks is answered once, in `analysis.ranks`, from the typed rank results;
this module picks the results compared (one main log per rank), runs that comparison, and shapes
its answers for the page (links into the rank reports, status labels) and the JSON files.
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct, field, to_builtins

from ..analysis.questions import CollectivesParity, ParityGraph, collectives_parity
from ..analysis.rank_answers import RankComparison, RankFigures, RuntimeEstimation, figures
from ..analysis.rank_timeline import RankRun, RankTimeline, rank_timeline
from ..analysis.ranks import compare
from ..analysis.summary import STATUS_LABELS, RanksSummary
from .run import RankResult


def primary(results: list[RankResult]) -> list[RankResult]:
    """One result per rank (its main log), in rank order: what cross-rank comparisons use."""
    return sorted((r for r in results if r.rank is not None and r.folder == f"rank_{r.rank}"), key=lambda r: r.number)


class Landing(Struct):
    """Everything the landing page says: the rank results, and their comparison (computed once)."""

    results: list[RankResult]
    ranks: list[RankResult]  # `primary(results)`: those compared
    comparison: RankComparison
    parity: dict[str, CollectivesParity]  # each log's collectives parity, by report folder
    timeline: RankTimeline  # the ranks' compiles on one time axis (the landing's picture)
    chromium_events: int = 0
    summary: RanksSummary | None = None  # the ranks' summaries, typed (set once summary.json is written)
    by_rank: dict[int, RankResult] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_rank = {r.number: r for r in self.ranks}

    @property
    def diverges(self) -> bool:
        """The ranks compiled or communicate differently (cache results alone are no divergence)."""
        return self.comparison.diverges

    def link(self, rank: int, url: str) -> str:
        """A file of a compared rank's report, from the landing page."""
        return f"{self.by_rank[rank].folder}/{url}"

    def page(self, rank: int, compile_id: str) -> str:
        """The page of a compile id in a compared rank's report, else that report's index."""
        page = self.by_rank[rank].pages.get(compile_id)
        return self.link(rank, page or "index.html")

    @property
    def compile_ids(self) -> list[dict[str, Any]]:
        """Ranks that compiled different compile ids, with links to their extra ones, and the causes found for them."""
        return [
            {"rank": row.rank, "missing": [str(k) for k in row.missing], "extra": [str(k) for k in row.extra],
             "folder": self.by_rank[row.rank].folder, "pages": self.by_rank[row.rank].pages,
             "causes": [group for group in row.groups if group.cause is not None]}
            for row in self.comparison.compile_ids
        ]


def analyse(results: list[RankResult], under_way: dict[str, frozenset[tuple[str, int]]] | None = None) -> Landing:
    """The landing of the rank results; `under_way`: a live landing's compiles started and not ended
    yet, by report folder, as (id, generation)."""
    ranks = primary(results)
    open_ = under_way or {}
    return Landing(
        results=results,
        ranks=ranks,
        comparison=compare([r.facts() for r in ranks]),
        parity={r.folder: collectives_parity(r.distributed) for r in results},
        timeline=rank_timeline([RankRun(r.number, r.folder, r.summary, r.error or None, open_.get(r.folder, frozenset())) for r in ranks]),
    )


class RankRow(Struct):
    """One log's row in the landing's table of ranks."""

    result: RankResult
    figures: RankFigures
    statuses: list[tuple[str, str, int]]  # (status, its label, how many compiles ended so)
    parity: list[ParityGraph]  # its compiles whose collectives differ between schedule and code


def rank_rows(landing: Landing) -> list[RankRow]:
    """Every log, ranked ones first in rank order (a compiler-collective restart is no graph break:
    the analysis counts such a compile as a success)."""
    rows = []
    for r in sorted(landing.results, key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.folder)):
        found = figures(r.summary)
        parity = landing.parity.get(r.folder)
        rows.append(RankRow(
            r, found, [(status, STATUS_LABELS.get(status, status), count) for status, count in found.statuses],
            list(parity.graphs) if parity is not None else [],
        ))
    return rows


# ------------------------------------------------------------------------------------------------
# the landing's JSON files


def as_json(value: Any) -> Any:
    """A comparison's typed answer as JSON values (fields in declaration order)."""
    return to_builtins(value)


def runtime_trace(estimations: list[RuntimeEstimation]) -> list[dict[str, Any]]:
    """chromium_trace_with_runtime.json: each graph's ops laid end to end, one process per rank."""
    events: list[dict[str, Any]] = []
    threads: dict[int, list[str]] = {}
    for row in estimations:
        rank, graph = row.rank, row.graph
        graphs = threads.setdefault(rank, [])
        graphs.append(graph)
        tid, ts = len(graphs), 0
        for op in row.ops:
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
    """collective_schedules.json: every schedule each rank logged."""
    return [{"rank": r.number, "graph": s.graph, "ops": s.ops} for r in ranks for s in r.distributed.schedules if s.ops]
