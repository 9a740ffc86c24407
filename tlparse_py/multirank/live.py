"""The live report of a folder of rank logs: every rank followed, and a landing page that updates.

Each rank's log is followed by a live report of its own in `rank_N/` (`live.LiveReport`, the folder
of a one-shot multi-rank report), and the landing page is written again from what every rank read
so far: the same landing the final report has (`landing.landing_page`, `compare.analyse`, the same
rank results: `run.result_of`), with a banner naming each rank's compile under way. A rank whose
log appears later joins at the next look. The final report is the one-shot multi-rank report,
written over the live one (`commands.watch`), so it is byte for byte what `tlparse-py FOLDER` writes.

While the ranks are followed they are compared as far as each has logged: a rank behind the others
lacks their latest compile ids until it logs them, and the landing says so.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from msgspec.structs import replace

from ..live import LiveReport, LogReset, write_live_page, write_live_state
from ..analysis.summary import STATUS_MISSING
from ..model import CompileId, Diagnostic
from ..options import Options
from ..pipeline import write_static
from ..reading.gunzip import is_gzip
from ..reading.inputs import InputError, candidate_logs, kept_path
from ..reading.tail import NotRegular
from ..report.render import render_page
from ..report.views.live import LiveMark, RankSoFar, ranks_banner
from ..report.live_writer import LiveSubWriter, LiveWriter
from .compare import analyse
from .landing import landing_page, landing_source, write_outputs
from .run import RankJob, RankResult, discover, kept_as, result_of

COMPILING = "compiling…"  # as `_macros.html.j2` `status` says of a compile under way
BEHIND = ("Ranks are compared as far as each has logged: a rank behind the others lacks their latest compile ids "
          "until it logs them.")


class LiveRank:
    """One log of the folder, followed: its job (rank, report folder) and its live report."""

    def __init__(self, job: RankJob, live: LiveReport):
        self.job = job
        self.live = live
        self.result: RankResult | None = None  # what the landing compares, as of its last update
        self.read_since_update = True  # it read something since its pages were last written
        self.note = ""  # the banner's note its pages were last written with
        self.gone = False  # its log was removed (said once, waited for)


class LiveRanks:
    """The live report of a folder of rank logs in `out` (see the module's docstring).

    It answers what `commands.watch` asks of a live report (`read`, `update`, `bytes_read`,
    `size_now`, `pids`, `compiled`, `writer`, `close`); a rank's log that is truncated, replaced or
    removed is said through `tell` and handled for that rank alone."""

    def __init__(self, folder: Path, out: Path, options: Options, *, overwrite: bool = False, kept: tuple[Path, Path] | None = None,
                 echo: Callable[[Diagnostic], None] | None = None, tell: Callable[[str], None] = lambda line: None):
        self.folder = folder
        self.options = replace(options, workers=0)  # as the one-shot report reads each rank (landing.write_all_ranks)
        self.kept = kept
        self.echo = echo
        self.tell = tell
        self.writer = LiveWriter(out, overwrite)
        self.ranks: dict[str, LiveRank] = {}  # by report folder, in the order they joined
        self.listed: list[Path] = []  # the folder's logs at the last look
        self.finished: set[Path] = set()  # gzipped logs: not followed
        self.version = 0
        self.versions: dict[str, str] = {}  # the landing's pages → their versions (its live.js)
        self.join()

    # -- following -------------------------------------------------------------------------------

    def join(self) -> list[LiveRank]:
        """Follow the logs that appeared in the folder since the last look (each keeps the report
        folder it was given: the final report may name a rank's extra logs otherwise)."""
        try:
            logs = candidate_logs(self.folder)
        except InputError:
            return []
        if logs == self.listed:
            return []
        self.listed = logs
        try:
            jobs = kept_as(discover(self.folder, self.options), self.kept)
        except InputError:  # no log with a rank yet
            return []
        followed = {rank.job.log for rank in self.ranks.values()}
        joined = []
        for job in jobs:
            if job.log in followed or job.log in self.finished:
                continue
            if is_gzip(job.log):  # finished: the final report reads it
                self.finished.add(job.log)
                self.tell(f"{kept_path(job.log, self.kept)} is gzipped, so it is finished: it is not followed, the final report reads it")
                continue
            job = replace(job, folder=self._free(job))
            live = LiveReport(job.log, self.writer.root / job.folder, job.rank_options, source=job.source, echo=self.echo,
                              writer=LiveSubWriter(self.writer, job.folder))
            self.ranks[job.folder] = rank = LiveRank(job, live)
            joined.append(rank)
        return joined

    def _free(self, job: RankJob) -> str:
        """The job's report folder, or the next `rank_N_extra_K` when a log that joined earlier has it."""
        if job.folder not in self.ranks:
            return job.folder
        stem = f"rank_{job.rank}_extra_" if job.rank is not None else "unranked_"
        return next(f"{stem}{k}" for k in range(1, len(self.ranks) + 2) if f"{stem}{k}" not in self.ranks)

    def read(self, final: bool = False) -> set[tuple[str, CompileId | None]]:
        """Read what every rank's log appended (and join the logs that appeared); the (report folder,
        compile id) pairs that logged something."""
        for rank in self.join():
            self.tell(f"watching {kept_path(rank.job.log, self.kept)} too ({rank.job.folder})")
        touched: set[tuple[str, CompileId | None]] = set()
        for folder, rank in self.ranks.items():
            try:
                keys = rank.live.read(final)
                rank.gone = False
            except LogReset as reset:
                self.tell(f"{str(reset).replace(str(rank.job.log), str(kept_path(rank.job.log, self.kept)), 1)}: reading it again from the start")
                rank.live.restart()
                rank.read_since_update = True
                continue
            except (FileNotFoundError, NotRegular) as exc:
                if not rank.gone:
                    why = "was removed" if isinstance(exc, FileNotFoundError) else (exc.strerror or "is not a regular file")
                    self.tell(f"{kept_path(rank.job.log, self.kept)} {why}; waiting for it to come back")
                rank.gone = True
                continue
            if keys:
                rank.read_since_update = True
                touched |= {(folder, key) for key in keys}
        return touched

    @property
    def bytes_read(self) -> int:
        return sum(rank.live.bytes_read for rank in self.ranks.values())

    def size_now(self) -> int:
        return sum(rank.live.size_now() for rank in self.ranks.values())

    @property
    def pids(self) -> set[int]:
        """The processes writing the logs: every rank's."""
        return {pid for rank in self.ranks.values() for pid in rank.live.pids}

    def compiled(self) -> bool:
        return any(rank.live.compiled() for rank in self.ranks.values())

    # -- an update -------------------------------------------------------------------------------

    def update(self, note: str = "", touched: object = None, note_of: Callable[[LiveReport], str] | None = None) -> None:
        """Rewrite the pages of the ranks that read something (or whose banner's `note_of` changed),
        then the landing page, with the banner's `note`, from every rank's results so far."""
        del touched  # each rank's live report keeps what it read since its last update
        for rank in self.ranks.values():
            rank_note = note_of(rank.live) if note_of is not None else note
            if rank.read_since_update or rank.note != rank_note or rank.result is None:
                rank.live.update(rank_note)
                rank.live.analysis.note_cache_marks()  # what the ranks' cache results are compared by, so far
                rank.result = result_of(rank.job, rank.live.analysis)
                rank.read_since_update, rank.note = False, rank_note
        self.version += 1
        if self.version == 1:
            write_static(self.writer)
        self._write_landing(note)

    def _write_landing(self, note: str) -> None:
        ranks = sorted(self.ranks.values(), key=lambda r: (r.job.rank is None, r.job.rank or 0, r.job.folder))
        results = [rank.result for rank in ranks if rank.result is not None]
        under_way = {r.job.folder: frozenset((c.id, c.generation) for c, _ in r.live.analysis.open_compiles()) for r in ranks}
        landing = analyse(results, under_way)
        write_outputs(self.writer, landing)
        compared = [RankSoFar(f"rank {r.job.rank}", r.job.folder, r.live.analysis) for r in ranks if r.job.folder == f"rank_{r.job.rank}"]
        banner = ranks_banner(compared, f"{note} {BEHIND}".strip())
        page = landing_page(landing, landing_source(kept_path(self.folder, self.kept), [r.job for r in ranks]), self.options.custom_header_html)
        for row in page.rows:
            row.statuses = compiling_chips(row.statuses, len(under_way.get(row.result.folder, ())))
        write_live_page(self.writer, self.versions, "index.html", render_page(page, LiveMark("index.html", "", banner)))
        write_live_state(self.writer, self.version, self.versions)

    def close(self) -> None:
        for rank in self.ranks.values():
            rank.live.close()
        self.writer.release()


def compiling_chips(statuses: list[tuple[str, str, int]], under_way: int) -> list[tuple[str, str, int]]:
    """A rank's outcome chips while it is followed: its compiles under way (started, no metrics yet:
    `missing` in a finished log) say "compiling…", as the rank's own live index says of them."""
    if not under_way:
        return statuses
    shown = []
    for status, label, count in statuses:
        if status == STATUS_MISSING:
            if count > under_way:
                shown.append((status, label, count - under_way))
            shown.append((status, COMPILING, min(count, under_way)))
        else:
            shown.append((status, label, count))
    return shown
