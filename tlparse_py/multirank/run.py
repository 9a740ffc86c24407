"""Rank reports: one pure function per rank, (rank log, output folder) → rank report + rank analysis.

Ranks are read in parallel worker processes; each writes its own `rank_N/` report and returns a
small `RankResult`: its summary (what `summary.json` holds) and its distributed facts. Only those
travel back to be compared.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..inputs import InputError, candidate_logs, rank_of
from ..model import Stats
from ..pipeline import Options, build_report
from ..store import CacheMark, DistributedFacts, InputInfo
from ..writer import FolderWriter


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
    """What one rank's analysis tells the landing page (small: it travels between processes)."""

    rank: int | None
    folder: str
    log: str
    error: str = ""
    stats_line: str = ""
    records: int = 0
    problems: int = 0
    unknown_kinds: dict[str, int] = field(default_factory=dict)
    chromium_events: int = 0
    summary: dict[str, Any] = field(default_factory=dict)  # the rank's summary.json
    distributed: DistributedFacts = field(default_factory=DistributedFacts)

    @property
    def compile_ids(self) -> list[str]:
        """Compile ids in first-appearance order (a reused id once)."""
        return list(dict.fromkeys(c["id"] for c in self.summary.get("compiles", [])))

    @property
    def pages(self) -> dict[str, str]:
        return {c["id"]: c["url"] for c in self.summary.get("compiles", [])}

    @property
    def statuses(self) -> dict[str, str]:
        return {c["id"]: c["status"] for c in self.summary.get("compiles", [])}

    @property
    def failures(self) -> int:
        return self.summary.get("totals", {}).get("failed", 0)

    @property
    def cache(self) -> list[CacheMark]:
        return self.distributed.cache


def build_rank(job: RankJob, root: Path) -> RankResult:
    """Write `root/<folder>/` for one log and return what the landing page compares."""
    result = RankResult(job.rank, job.folder, str(job.log))
    try:
        writer = FolderWriter(root / job.folder)
        analysis = build_report([job.log], writer, job.options, InputInfo(str(job.log), _size(job.log)))
    except Exception as exc:  # one unreadable rank must not lose the others
        result.error = f"{type(exc).__name__}: {exc}"
        result.stats_line = Stats().format()
        return result
    result.stats_line = analysis.stats.format()
    result.records = analysis.records
    result.problems = analysis.diagnostics.total
    result.unknown_kinds = dict(analysis.unknown_kinds)
    result.chromium_events = analysis.chromium_events
    result.summary = analysis.to_dict()
    result.distributed = analysis.distributed
    return result


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


