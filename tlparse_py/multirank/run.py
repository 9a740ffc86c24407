"""Rank reports: one pure function per rank, (rank log, output folder) → rank report + rank analysis.

Ranks are read in parallel worker processes, or as tasks on a Dask cluster (`cluster.py`); each
writes its own `rank_N/` report and returns a small `RankResult`: its typed summary (what its
`summary.json` holds, as `analysis.summary_load` loads it) and its distributed facts. Only those travel
back to be compared (`analysis.ranks`). A rank whose worker dies is built once more; dying again,
it is reported as failed and the other ranks are kept.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from msgspec import Struct, field
from msgspec.structs import replace

from ..reading.inputs import InputError, candidate_logs, file_size, kept_path, rank_of
from ..model import Stats
from ..options import Options
from ..pipeline import build_report
from ..shutdown import die_with_starter
from ..analysis.compiles import Analysis
from ..analysis.rank_answers import RankFacts
from ..analysis.store import DistributedFacts, InputInfo
from ..analysis.summary import Summary
from ..analysis.summary_load import load_summary
from ..report.folder_writer import FolderWriter
from .cluster import build_on_cluster


# ------------------------------------------------------------------------------------------------
# finding the logs


class RankJob(Struct):
    rank: int | None
    log: Path
    folder: str  # sub-report folder: rank_N, rank_N_extra_K or unranked_K
    options: Options
    shown: str = ""  # the log's path as the report names it, when not `log` (`run` names where it keeps the trace)

    @property
    def named(self) -> str:
        """The log's path as the report names it."""
        return self.shown or str(self.log)

    @property
    def rank_options(self) -> Options:
        """How its log is read: the landing page compares fingerprints; every core already builds a
        rank of its own."""
        return replace(self.options, fingerprints=True, scanning_child=False)

    def source(self) -> InputInfo:
        """What its report says it was written from (the log's size now)."""
        return InputInfo(self.named, file_size(self.log))


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
        ordered = sorted(by_rank[rank], key=lambda p: (-file_size(p), p.name))
        jobs.append(RankJob(rank, ordered[0], f"rank_{rank}", options))
        jobs.extend(RankJob(rank, log, f"rank_{rank}_extra_{i}", options) for i, log in enumerate(ordered[1:], start=1))
    jobs.extend(RankJob(None, log, f"unranked_{i}", options) for i, log in enumerate(sorted(by_rank.get(None, [])), start=1))
    if not any(job.rank is not None for job in jobs):
        raise InputError(f"No rank log files found in {folder}: none of its logs carries a rank (use it without --all-ranks-html)")
    return jobs


def kept_as(jobs: list[RankJob], kept: tuple[Path, Path] | None) -> list[RankJob]:
    """The jobs with their logs named where they will be kept (`reading.inputs.kept_path`)."""
    return [replace(job, shown=str(kept_path(job.log, kept))) for job in jobs] if kept is not None else jobs


# ------------------------------------------------------------------------------------------------
# one rank (in a worker process)


class RankResult(Struct):
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
    summary: Summary | None = None  # the rank's summary.json, typed (None when it could not be read)
    distributed: DistributedFacts = field(default_factory=DistributedFacts)

    @property
    def number(self) -> int:
        """Its rank; the results compared across ranks always have one (`compare.primary` keeps those)."""
        if self.rank is None:
            raise ValueError(f"{self.folder} holds no rank")
        return self.rank

    def facts(self) -> RankFacts:
        """What the cross-rank comparison (`analysis.ranks`) reads of it."""
        return RankFacts(self.number, self.summary, self.distributed)

    @property
    def compile_ids(self) -> list[str]:
        """Compile ids in first-appearance order (a reused id once)."""
        return list(dict.fromkeys(c.id for c in self.summary.compiles)) if self.summary is not None else []

    @property
    def pages(self) -> dict[str, str | None]:
        """Compile id → its page in the rank's report (None: listed without one)."""
        return {c.id: c.url for c in self.summary.compiles} if self.summary is not None else {}


def build_rank(job: RankJob, root: Path) -> RankResult:
    """Write `root/<folder>/` for one log and return what the landing page compares."""
    try:
        analysis = build_report([job.log], FolderWriter(root / job.folder), job.rank_options, job.source())
    except Exception as exc:  # one unreadable rank must not lose the others
        return failed(job, exc)
    return result_of(job, analysis)


def failed(job: RankJob, exc: Exception) -> RankResult:
    """The result of a rank whose log could not be read: shown so on the landing page."""
    return RankResult(job.rank, job.folder, job.named, error=f"{type(exc).__name__}: {exc}", stats_line=Stats().format())


def result_of(job: RankJob, analysis: Analysis) -> RankResult:
    """What the landing page compares of a rank's analysis (built here, or live)."""
    result = RankResult(job.rank, job.folder, job.named)
    result.stats_line = analysis.stats.format()
    result.records = analysis.records
    result.problems = analysis.diagnostics.total
    result.unknown_kinds = dict(analysis.unknown_kinds)
    result.chromium_events = analysis.chromium_events
    summary = load_summary(analysis.to_dict())  # what its summary.json holds, typed
    assert isinstance(summary, Summary)
    result.summary = summary
    result.distributed = analysis.distributed
    return result


def build_all(
    jobs: list[RankJob], root: Path, workers: int | None = None, on_done: Callable[[RankResult], None] | None = None, cluster: Any = None
) -> list[RankResult]:
    """Every rank's report, in job order: on the Dask cluster `cluster` (a connected client, see
    cluster.py) when given, else in parallel across local cores (a rank's string table stays in
    its process). `on_done` hears of each rank in job order."""
    build = build_rank  # looked up now: tests replace it with one that kills its worker
    emit = _InOrder(len(jobs), on_done)
    if cluster is not None:
        # the workers' current folder is not ours: they get absolute log paths
        build_on_cluster(cluster, build, [replace(job, log=job.log.absolute()) for job in jobs], root, emit, died)
        return emit.results()
    workers = workers or min(len(jobs), os.cpu_count() or 1)
    if workers <= 1 or len(jobs) == 1:
        for index, job in enumerate(jobs):
            emit(index, build(job, root))
        return emit.results()
    broken = _in_pool(build, jobs, root, workers, emit)
    if broken:
        _each_alone(build, jobs, broken, root, workers, emit)
    return emit.results()


def died(job: RankJob, why: str) -> RankResult:
    """The result of a rank whose worker died on each try: failed, shown so on the landing page."""
    return RankResult(job.rank, job.folder, job.named, error=why, stats_line=Stats().format())


class _InOrder:
    """Results by job index, handed to `on_done` in job order as soon as all before them are in."""

    def __init__(self, count: int, on_done: Callable[[RankResult], None] | None):
        self.slots: list[RankResult | None] = [None] * count
        self.on_done = on_done
        self.next = 0

    def __call__(self, index: int, result: RankResult) -> None:
        self.slots[index] = result
        while self.next < len(self.slots) and self.slots[self.next] is not None:
            if self.on_done:
                self.on_done(self.slots[self.next])  # type: ignore[arg-type]
            self.next += 1

    def results(self) -> list[RankResult]:
        assert self.next == len(self.slots), "a rank was never built"
        return self.slots  # type: ignore[return-value]


def _in_pool(build: Callable[[RankJob, Path], RankResult], jobs: list[RankJob], root: Path, workers: int, emit: _InOrder) -> list[int]:
    """Every job in one pool of `workers` processes; the indices of those lost when a worker died
    (a dead worker breaks the whole pool: every rank not finished by then is lost with it)."""
    broken = []
    with ProcessPoolExecutor(max_workers=workers, initializer=die_with_starter) as pool:
        futures = [pool.submit(build, job, root) for job in jobs]
        for index, future in enumerate(futures):
            try:
                result = future.result()
            except BrokenProcessPool:
                broken.append(index)
                continue
            emit(index, result)
    return broken


def _each_alone(build: Callable[[RankJob, Path], RankResult], jobs: list[RankJob], indices: list[int], root: Path, workers: int, emit: _InOrder) -> None:
    """The ranks lost with a dead worker, once more, each in a process of its own (`workers` at a
    time): a death now is that rank's own, and it is reported as failed."""
    queue = list(indices)
    running: dict[Future[RankResult], tuple[int, ProcessPoolExecutor]] = {}
    try:
        while queue or running:
            while queue and len(running) < workers:
                index = queue.pop(0)
                pool = ProcessPoolExecutor(max_workers=1, initializer=die_with_starter)
                running[pool.submit(build, jobs[index], root)] = (index, pool)
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                index, pool = running.pop(future)
                pool.shutdown()
                try:
                    result = future.result()
                except BrokenProcessPool as exc:
                    result = died(jobs[index], f"its worker process died twice while building this rank ({type(exc).__name__})")
                emit(index, result)
    finally:
        for _, pool in running.values():
            pool.shutdown(wait=False, cancel_futures=True)
