"""One report over every rank of a distributed run: per-rank reports, then what diverges across ranks
(answered in `analysis.ranks`, shown on the landing page)."""

from __future__ import annotations

from .cluster import ClusterError
from .compare import Landing, analyse
from .landing import write_all_ranks
from .run import RankJob, RankResult, build_all, build_rank, discover

__all__ = ["ClusterError", "Landing", "RankJob", "RankResult", "analyse", "build_all", "build_rank", "discover", "write_all_ranks"]
