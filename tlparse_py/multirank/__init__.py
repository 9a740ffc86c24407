"""One report over every rank of a distributed run: per-rank reports, then what diverges across ranks."""

from __future__ import annotations

from .cluster import ClusterError
from .compare import Landing, analyse, analyze_execution_order, divergences
from .landing import write_all_ranks
from .run import RankJob, RankResult, build_all, build_rank, discover

__all__ = [
    "ClusterError", "Landing", "RankJob", "RankResult", "analyse", "analyze_execution_order", "build_all", "build_rank", "discover",
    "divergences", "write_all_ranks",
]
