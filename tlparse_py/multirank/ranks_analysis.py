"""The analysis of a folder of rank logs, as the Python API returns it (`tlparse_py.analyze`, `build`).

One door: each rank is read as the multi-rank report reads it (`run.RankJob`, `run.result_of`), the
ranks are compared by `compare.analyse` (which asks `analysis.ranks.compare`), and `to_dict()` is
`landing.landing_summary`, what the multi-rank report's summary.json holds. `build` writes that
report with `landing.write_all_ranks`, the function the command line calls.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from msgspec.structs import replace

from ..analysis.compiles import Analysis
from ..analysis.rank_answers import RankComparison
from ..analysis.summary import RanksSummary
from ..options import Options
from ..pipeline import analyze_logs
from .compare import Landing, analyse
from .landing import landing_summary, ranks_summary, write_all_ranks
from .run import RankJob, RankResult, discover, failed, result_of

html_view: Callable[[RanksAnalysis], str] | None = None  # set by tlparse_py.notebook (this layer renders nothing)


class RanksAnalysis:
    """The typed analysis of a folder of rank logs: each log's summary (`results`), the cross-rank
    comparison (`comparison`), and each rank's whole analysis (`rank(n)`)."""

    def __init__(self, folder: Path, jobs: list[RankJob], landing: Landing, analyses: dict[str, Analysis], report_dir: Path | None = None):
        self.folder = folder  # the folder of rank logs
        self.jobs = jobs
        self.landing = landing
        self.report_dir = report_dir  # where its report was written (a notebook's summary links there)
        self._analyses = analyses  # by report folder (rank_N): those read so far
        self._summary: RanksSummary | None = None

    def _repr_html_(self) -> str | None:
        """How a notebook shows it (tlparse_py.notebook registers the view)."""
        return html_view(self) if html_view is not None else None

    @property
    def results(self) -> list[RankResult]:
        """Every log of the folder, in report order: its rank, report folder, error, typed summary."""
        return self.landing.results

    @property
    def ranks(self) -> list[int]:
        """The ranks compared (one main log each), in order."""
        return [r.number for r in self.landing.ranks]

    @property
    def comparison(self) -> RankComparison:
        """What the comparison of the ranks found (`analysis.ranks.compare`): divergences, notes, ..."""
        return self.landing.comparison

    @property
    def diverges(self) -> bool:
        """The ranks compiled or communicate differently (cache results alone are no divergence)."""
        return self.landing.diverges

    def rank(self, number: int) -> Analysis:
        """The whole analysis of a rank's main log (`rank_N/`), as `tlparse_py.analyze` gives of one
        log; read when first asked when it was not read here (`build` reads the ranks in worker
        processes). Raises KeyError for a rank the folder does not hold."""
        job = next((j for j in self.jobs if j.rank == number and j.folder == f"rank_{number}"), None)
        if job is None:
            raise KeyError(f"no log of rank {number} (ranks: {', '.join(map(str, self.ranks)) or 'none'})")
        if job.folder not in self._analyses:
            analysis = _read(job)
            analysis.report_dir = self.report_dir / job.folder if self.report_dir is not None else None
            self._analyses[job.folder] = analysis
        return self._analyses[job.folder]

    def summary(self) -> RanksSummary:
        """What the multi-rank summary.json holds, as typed objects (as `summary_load.load_ranks` reads it back)."""
        if self._summary is None:
            self._summary = ranks_summary(self.landing, self.to_dict())
        return self._summary

    def to_dict(self) -> dict[str, Any]:
        """Exactly what the multi-rank report's summary.json holds."""
        return landing_summary(self.landing, self.jobs)


def analyze_ranks(folder: Path, options: Options) -> RanksAnalysis:
    """Read every log of a folder of rank logs, in this process, and compare the ranks; writes nothing.
    A log that cannot be read is a result with its error, as on the landing page."""
    jobs = discover(folder, replace(options, workers=0))
    analyses: dict[str, Analysis] = {}
    results = []
    for job in jobs:
        try:
            analysis = _read(job)
        except Exception as exc:  # noqa: BLE001 - one unreadable rank must not lose the others (as the report)
            results.append(failed(job, exc))
            continue
        analyses[job.folder] = analysis
        results.append(result_of(job, analysis))
    return RanksAnalysis(folder, jobs, analyse(results), analyses)


def build_ranks(folder: Path, out: Path, overwrite: bool, options: Options) -> RanksAnalysis:
    """Write the multi-rank report of the folder to `out`, as `tlparse-py FOLDER -o OUT` writes it,
    and return its analysis (each rank's whole analysis is read again when asked: `rank(n)`)."""
    jobs = discover(folder, replace(options, workers=0))
    landing, _ = write_all_ranks(folder, out, overwrite, options)
    return RanksAnalysis(folder, jobs, landing, {}, out)


def _read(job: RankJob) -> Analysis:
    return analyze_logs([job.log], job.rank_options, job.source())
