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
