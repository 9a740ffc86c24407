"""What a page written while the log is still being read adds: its live mark, and on the index the banner.

The banner's facts come from the analysis (the compiles so far, the compiles started and not ended);
the clock ("for 41 s") is the time since the compile's `dynamo_start`, by this machine's clock: glog
writes local time without a zone, so it is only shown when the start is within a day of now.
"""

from __future__ import annotations

import time

from msgspec import Struct, field

from ...analysis.compiles import Analysis

MAX_CLOCK_S = 86_400.0  # a start further from now than this is not this run's (another machine, another day)


class OpenCompile(Struct, eq=False):
    label: str
    url: str | None
    since: str  # HH:MM:SS of its dynamo_start
    since_epoch: float | None  # the same, in seconds since the epoch by this machine's clock (None: not to be trusted)
    elapsed: str | None  # "41 s" when the page was written (the page's script keeps it running)


class LiveBanner(Struct, eq=False):
    last_record: str | None  # HH:MM:SS
    compiles: int
    compiling: list[OpenCompile] = field(default_factory=list)
    note: str = ""
    ranks: int = 0  # a multi-rank landing's: the ranks followed (their compiles are `compiles`, added up)


class LiveMark(Struct, eq=False):
    """A page written by a live report: which page it is (relative to the report root) and which
    version (a digest of its content, filled in once rendered); live.js lists the latest version of every page."""

    page: str
    version: str
    banner: LiveBanner | None = None
    compiling: frozenset[str] = frozenset()  # the compiles started and not ended: shown as "compiling…", not by status


def live_banner(analysis: Analysis, note: str, now: float | None = None) -> LiveBanner:
    now = time.time() if now is None else now
    compiles = analysis.compiles()
    compiling = [_open_compile(c.label, c.url, started, now) for c, started in analysis.open_compiles()]
    return LiveBanner(_clock(analysis.last_timestamp), len(compiles), compiling[-3:], note)


class RankSoFar(Struct, eq=False):
    """One rank's live report, as the landing's banner reads it."""

    name: str  # `rank 3`
    folder: str  # its report folder, from the landing: `rank_3`
    analysis: Analysis


MAX_RANKS_COMPILING = 8  # ranks whose compile under way the landing's banner names


def ranks_banner(ranks: list[RankSoFar], note: str, now: float | None = None) -> LiveBanner:
    """The multi-rank landing's banner: the latest record of any rank, the compiles of every rank so
    far, and each rank's latest compile under way (`rank 1 [0/1]`, linking into its report): a rank
    that is still compiling while the others went on is what a live landing is for."""
    now = time.time() if now is None else now
    compiling = []
    for rank in ranks:
        under_way = rank.analysis.open_compiles()
        if under_way:
            c, started = under_way[-1]
            compiling.append(_open_compile(f"{rank.name} {c.label}", f"{rank.folder}/{c.url}" if c.url else None, started, now))
    stamps = [r.analysis.last_timestamp for r in ranks if r.analysis.last_timestamp]
    return LiveBanner(_clock(max(stamps)) if stamps else None, sum(len(r.analysis.compiles()) for r in ranks),
                      compiling[:MAX_RANKS_COMPILING], note, len(ranks))


def _open_compile(label: str, url: str | None, started: str, now: float) -> OpenCompile:
    epoch = glog_epoch(started)
    elapsed = None if epoch is None or not 0 <= now - epoch <= MAX_CLOCK_S else now - epoch
    return OpenCompile(label, url, _clock(started) or "an unknown time", epoch if elapsed is not None else None,
                       duration(elapsed) if elapsed is not None else None)


def duration(seconds: float) -> str:
    """`41 s`, `3 min 5 s`, `2 h 10 min` (report.js counts on in the same words)."""
    whole = int(round(seconds))
    if whole < 120:
        return f"{whole} s"
    if whole < 7200:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def _clock(timestamp: str | None) -> str | None:
    """HH:MM:SS of a record's timestamp (`2026-12-03T14:47:50.325000Z`)."""
    return timestamp[11:19] if timestamp and len(timestamp) >= 19 else None


def glog_epoch(timestamp: str) -> float | None:
    """A record's timestamp in seconds since the epoch, read as this machine's local time (as glog
    wrote it); None when it cannot be read."""
    try:
        return time.mktime(time.strptime(timestamp[:19], "%Y-%m-%dT%H:%M:%S")) + float("0" + timestamp[19:26])
    except (ValueError, OverflowError):
        return None
