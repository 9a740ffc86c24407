"""Each side of a diff as the analysis' typed summary: from a trace (log or folder) or a report folder.

A report folder is read through its `summary.json` (`analysis.summary.load_summary`, the typed
loader); a trace is analysed (nothing is written). A folder of several ranks' logs becomes a
multi-rank summary, like `--all-ranks-html` writes.
"""

from __future__ import annotations

from pathlib import Path

from msgspec import Struct
import orjson

from ..reading.inputs import InputError, SeveralRanks, candidate_logs, choose_input, rank_of
from ..analysis.kinds import load_plugins
from ..pipeline import Options, analyze_logs, source_of
from ..analysis.summary import RankEntry, RanksSummary, Summary, SummaryError, load_summary
from ..reading.gunzip import GunzipRefused
from ..report.writer import looks_like_report


class LoadError(Exception):
    """One side cannot be read; the message says why and what to do."""


class Side(Struct):
    path: Path
    kind: str  # "trace" or "report"
    summary: Summary | RanksSummary
    note: str = ""  # which logs were read, when a choice was made


def load(path: Path, role: str = "") -> Side:
    """BASE or NEW: a trace log, a trace folder, a report folder, or a report's summary.json."""
    label = f"{role} {path}" if role else str(path)
    if not path.exists():
        raise LoadError(f"{label} does not exist")
    if path.is_file() and path.name == "summary.json":
        return Side(path, "report", read_summary(path, label))
    if path.is_dir():
        summary = path / "summary.json"
        if summary.is_file():
            return Side(path, "report", read_summary(summary, label))
        if looks_like_report(path) and any(path.iterdir()) and not candidate_logs(path):
            raise LoadError(f"{label} is a report folder without summary.json (written by tlparse, or an older tlparse-py): "
                            "point at the trace instead")
    return _trace(path, label)


def read_summary(file: Path, label: str) -> Summary | RanksSummary:
    try:
        data = orjson.loads(file.read_bytes())
    except OSError as exc:
        raise LoadError(f"cannot read {file}: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise LoadError(f"{label}: {file.name} is not valid JSON ({exc}); point at the trace instead") from None
    try:
        return load_summary(data)
    except SummaryError as exc:
        raise LoadError(f"{label}: {file.name} is not a tlparse-py summary.json ({exc}); point at the trace instead") from None


def _trace(path: Path, label: str) -> Side:
    load_plugins()
    try:
        chosen = choose_input(path)
    except SeveralRanks:
        return Side(path, "trace", _ranks(path))
    except InputError as exc:
        raise LoadError(f"{label}: {exc}" if label != str(path) else str(exc)) from None
    return Side(path, "trace", _analyze(chosen.logs), chosen.note)


def _analyze(logs: list[Path]) -> Summary:
    try:
        return analyze_logs(logs, Options(), source_of(logs)).summary()
    except GunzipRefused as exc:
        raise LoadError(str(exc)) from None
    except OSError as exc:
        raise LoadError(f"cannot read {exc.filename or logs[0]}: {exc.strerror or exc}") from None


def _ranks(folder: Path) -> RanksSummary:
    """A summary per rank (its biggest log; the others as rank_N_extra_K), as a multi-rank report holds."""
    by_rank: dict[int | None, list[Path]] = {}
    for log in candidate_logs(folder):
        by_rank.setdefault(rank_of(log), []).append(log)
    jobs: list[tuple[int | None, str, Path]] = []
    for number in sorted(r for r in by_rank if r is not None):
        ordered = sorted(by_rank[number], key=lambda p: (-p.stat().st_size, p.name))
        jobs.append((number, f"rank_{number}", ordered[0]))
        jobs += [(number, f"rank_{number}_extra_{i}", log) for i, log in enumerate(ordered[1:], start=1)]
    jobs += [(None, f"unranked_{i}", log) for i, log in enumerate(sorted(by_rank.get(None, [])), start=1)]
    ranks = []
    for rank, name, log in jobs:
        summary: Summary | None
        try:
            summary, error = _analyze([log]), None
        except LoadError as exc:
            summary, error = None, str(exc)
        ranks.append(RankEntry(rank, name, error, summary))
    return RanksSummary(ranks, inputs=[{"path": str(log), "rank": rank} for rank, _, log in jobs])
