"""A live report: the report of a log that is still being written, updated as it grows.

`LiveReport.update` reads what was appended since the last update (`reading.tail`), runs it through
the same pipeline a one-shot report uses, and rewrites the pages the new records changed: the
index (with the live banner), the compile pages of the compile ids that logged something, the
record pages asked for since. Reading state and the analysis stay in memory, so an update costs
what the new bytes cost, not what the log does: only the compiles of the functions that logged
something are built again (`analysis.live_compiles`), with their spans on the run timeline (the
pictures are drawn again over the spans kept), and the index renders only its rows,
sections and stack-trie nodes that changed (`views.live_index`); the failures page is rewritten
when its rows or their compiles changed. `LiveReport.finish` reads the rest and writes the report a
one-shot run writes (`Pipeline.finish`, every compile built again), then removes what only the live
report had.

Pages built for a live update use their own page builder (whose inline texts are planned within
the report's one budget, as the final report's are) and an unbudgeted highlighter, and
note nothing in the analysis: the final report is built as if the updates never happened.
"""

from __future__ import annotations

import hashlib
import itertools
import operator
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

import orjson

from .analysis import questions
from .analysis.compiles import Analysis, forget_compiles, vllm_run
from .analysis.live_compiles import CompileChanges, LiveCompiles
from .analysis.store import InputInfo
from .model import CompileId, Diagnostic
from .options import Options
from .heap import few_full_collections
from .pipeline import Pipeline, new_analysis, source_of, write_static
from .reading.records import LogReader, PieceServer
from .reading.tail import LogReset, LogTail
from .report.highlight import Highlighter
from .report.jobs import ErrorPage
from .report.outputs import SpooledRecords
from .report.render import Model, render_page, render_pieces
from .report.views.common import key_of, page_base, usual_index
from .report.views.compile import PageRef, compile_page, page_ref, unusual_shown
from .report.views.common import VLLM_USUAL_INDEX
from .report.views.index import IndexPage, failures_page, index_page
from .report.views.live_index import LiveIndex
from .report.views.vllm import vllm_page
from .report.views.live import LiveMark, live_banner
from .report.views.pages import PAGE_VIEWS, Builder, PendingPage
from .report.views.sections import PageBuilder
from .report.live_writer import LiveWriter, content_digest

LIVE_STATE = "live.js"

__all__ = ["LiveReport", "LogReset", "write_live_page", "write_live_state"]


class LiveReport:
    """The live report of one log (a process's main trace log) in `out`, or through `writer` (a
    rank's report inside a live multi-rank report, `multirank.live`: `out` is then not used)."""

    def __init__(self, log: Path, out: Path, options: Options, *, overwrite: bool = False,
                 source: Callable[[], InputInfo] | None = None, echo: Callable[[Diagnostic], None] | None = None,
                 on_rank: Callable[[int], None] | None = None, writer: LiveWriter | None = None):
        self.log = log
        self.options = options
        self.source = source or (lambda: source_of([log]))
        self.writer = writer if writer is not None else LiveWriter(out, overwrite)
        self.echo = echo
        self.on_rank = on_rank
        self.version = 0  # updates written so far
        self.versions: dict[str, str] = {}  # page → the version written last (what live.js lists)
        self.compiling: frozenset[str] = frozenset()  # the compiles under way at the last update
        self.rendered: Counter[str] = Counter()  # what the last update built and rendered (tests count it)
        self.serve = writer is None  # (a rank's report, among many: no process of its own)
        self._start()

    def _start(self) -> None:
        self.analysis: Analysis = new_analysis(self.source(), self.options, self.echo)
        self.pipeline = Pipeline(self.analysis, self.writer, self.options)
        reader = LogReader(self.log, self.analysis.stats, self.analysis.diagnostics, strings=self.analysis.strings,
                           limits=self.options.limits, scanning_child=self.options.scanning_child, processes=self.analysis.processes,
                           compile_ids=self.analysis.compile_ids)
        reader.on_rank_detected = self.on_rank
        reader.on_time = self.pipeline.note_time  # as the one-shot reading does (pipeline.read_logs)
        self.tail = LogTail(self.log, self.analysis.stats, self.analysis.diagnostics, self.analysis.strings, reader)
        if self.serve:  # each piece appended scanned by a process forked now, while the heap is small
            PieceServer.start(reader)
        self.record_pages = LiveRecordPages(self.pipeline)
        self.pids: set[int] = set()  # the glog pids of the records read: the processes writing the log
        self.touched: set[CompileId | None] = set()  # the compile ids read since the last update
        self._incremental()
        self.pages = LivePages(self.analysis)
        self.inline = LiveInline(self.pipeline, self.options)
        self.failures_seen: tuple[int, str] | None = None  # (failure rows, usual index) at the last failures page
        self.failure_frames: set[CompileId] = set()  # the frame compiles of those rows

    def _incremental(self) -> None:
        """What an update keeps so as to build again only what changed: the compiles (and the pictures' data), the index."""
        self.compiles = LiveCompiles(self.analysis)
        self.index = LiveIndex(self.pipeline.inputs, self.compiles)
        self.index_pieces = KeptPieces()  # the index's pieces as written last, encoded and hashed

    def restart(self) -> None:
        """Start over from the log's first byte (it was truncated or replaced): a fresh analysis
        in the same folder, emptied of every file the earlier reading wrote."""
        self.pipeline.highlighter.close()
        self.pipeline.spool.handle.close()
        self.pipeline.chromium.close()
        PieceServer.stop(self.tail.reader)
        self.writer.forget_written()
        self.version = 0
        self.versions.clear()
        self._start()

    # -- reading ---------------------------------------------------------------------------------

    def read(self, final: bool = False) -> set[CompileId | None]:
        """Read what was appended (everything, when `final`); the compile ids that logged something.
        Raises LogReset when the log is no longer the one read so far."""
        touched: set[CompileId | None] = set()
        with few_full_collections():  # what is read is kept: a full collection per batch would find nothing
            for record in self.tail.read(final):
                self.pipeline.add(record)
                if not record.other_rank:
                    self.pids.add(record.pid)
                    touched.add(record.compile_id.directory_key() if record.compile_id is not None else None)
        self.touched |= touched
        if self.analysis.rank is None:
            self.analysis.rank = self.tail.reader.expected_rank
        self.analysis.source = self.source()
        return touched

    @property
    def bytes_read(self) -> int:
        return self.tail.offset

    def size_now(self) -> int:  # the log's size now (what is still to be read, with `bytes_read`)
        return self.tail.size_now()

    def compiled(self) -> bool:  # whether a compile was read so far
        return bool(self.analysis.compiles())

    # -- a live update ---------------------------------------------------------------------------

    @few_full_collections()  # the report is kept: a full collection would walk all of it and find nothing
    def update(self, note: str = "", touched: set[CompileId | None] | None = None) -> None:
        """Rewrite the pages that changed since the last update (read with `read`), with the banner's `note`.

        `touched`: the compile ids `read` returned (it keeps them too: those read since the last update count)."""
        touched = self.touched | (touched or set())
        self.touched = set()
        self.rendered.clear()
        self.analysis.forget_indexes()
        built = self.compiles.built
        try:
            changes: CompileChanges | None = self.compiles.refresh(touched)
        except Exception:  # noqa: BLE001 - a live page must not stop the watch: the pages say what failed
            changes = None
            forget_compiles(self.analysis)
            self._incremental()  # the next update builds everything again
        self.rendered["compiles"] = self.compiles.built - built
        self.rendered["timeline spans"] = self.compiles.timeline.built  # 0 after a failed refresh: a new LiveCompiles
        self.compiling = frozenset(compile_.label for compile_, _ in self.analysis.open_compiles())
        self.version += 1
        if self.version == 1:
            write_static(self.writer)
        builder = Builder(self.pipeline.inputs, self.pipeline.payloads.get, Highlighter(self.pipeline.highlighter.spool))
        every = self.pages.index_moved(usual_index(self.pipeline.inputs))  # (vLLM's summary became the front page: every page links it)
        self._write_record_pages(builder, touched, every)
        self._write_compile_pages(touched | pages_changed(self.compiles, changes), every)
        banner = live_banner(self.analysis, note)
        index = lambda: self._index_page(changes, touched)  # noqa: E731
        run = vllm_run(self.analysis)
        if run is not None:  # vLLM's pieces, as they compile: its summary is the front page, as in the final report
            self._write(VLLM_USUAL_INDEX, index, banner, self.index_pieces)
            self._write("index.html", lambda: vllm_page(self.pipeline.inputs, run), banner)
        else:
            self._write("index.html", index, banner, self.index_pieces)
        write_failures(self, {c.key for _, _, c in changes.changed} if changes is not None else None)  # after the index (its totals)
        write_live_state(self.writer, self.version, self.versions)

    def _write(self, url: str, make: Callable[[], Model], banner: object = None, kept: KeptPieces | None = None) -> None:
        """One page with the live mark; a page that cannot be built now is replaced by a page saying
        why (not counted: the final report builds it again, and counts it if it fails then).
        `kept`: the page's pieces as written last (`KeptPieces`: the index's)."""
        mark = LiveMark(url, "", banner, self.compiling)  # type: ignore[arg-type]
        try:
            pieces = list(render_pieces(make(), mark))  # the index in its pieces, never joined into one string
        except Exception as exc:  # noqa: BLE001 - a live page must not stop the watch
            error = ErrorPage(**page_base(self.pipeline.inputs, f"Page {url}", root="../" * url.count("/")),
                              what=url, detail=f"{type(exc).__name__}: {exc}")
            pieces = [render_page(error, mark)]
        write_live_page(self.writer, self.versions, url, pieces, kept)

    def _index_page(self, changes: CompileChanges | None, touched: set[CompileId | None]) -> IndexPage:
        """The index, rendering only its rows, sections and stack-trie nodes that changed (`LiveIndex`);
        built whole when the compiles could not be built piece by piece."""
        if changes is None:
            return index_page(self.pipeline.inputs)
        try:
            return self.index.page(changes, touched, self.compiling)
        finally:
            self.rendered.update(self.index.rendered)
            if not self.index.whole:  # it failed half way: the next update renders everything again
                self.index = LiveIndex(self.pipeline.inputs, self.compiles)

    def _write_record_pages(self, builder: Builder, touched: set[CompileId | None], every: bool) -> None:
        for page in self.record_pages.refresh(touched, every):
            self._write(page.url, lambda page=page: PAGE_VIEWS[page.view](builder, page))  # type: ignore[misc]
            self.rendered["record pages"] += 1

    def _write_compile_pages(self, touched: set[CompileId | None], every: bool) -> None:
        """The compile pages of the compile ids that logged something, and of the compiles just
        before new ones (their "next" link): `LivePages.refresh`."""
        pages = self.pages.refresh(touched, every)
        records = {key: self.pipeline.spool.records(key) for key in dict.fromkeys(page.key for page in pages)}  # read back once
        builder = self.inline.planned(records, Highlighter(self.pipeline.highlighter.spool), self.tail.lineno)
        for page in pages:
            self._write(page.url, lambda page=page: compile_page(  # type: ignore[misc]
                self.pipeline.inputs, [page], 0, records[page.key], builder))
            self.rendered["compile pages"] += 1

    # -- the end ---------------------------------------------------------------------------------

    @few_full_collections()  # what is read is kept (see heap), and the pages are built from it
    def finish(self) -> Analysis:
        """Read the rest of the log and write the final report: what a one-shot run writes."""
        try:
            self.read(final=True)
            PieceServer.stop(self.tail.reader)
            self.analysis.forget_indexes()
            forget_compiles(self.analysis, finished=True)  # built whole, as a one-shot run builds them
            self.analysis.trie.inserted = self.analysis.unknown_stacks.inserted = None
            self.analysis.source = self.source()
            self.pipeline.logs_read += [self.tail.as_read] if self.tail.as_read is not None else []  # what the last read read
            self.pipeline.finish()
        finally:
            self.pipeline.highlighter.close()
        self.writer.finish_live()
        self.analysis.report_dir = self.writer.out
        return self.analysis

    def close(self) -> None:
        self.pipeline.highlighter.close()
        PieceServer.stop(self.tail.reader)
        self.writer.release()




def write_failures(report: LiveReport, frames: set[CompileId] | None) -> None:
    """The failures page, when its rows, or the compiles they show the outcome of, changed."""
    failures = report.analysis.failures
    seen = (len(failures), report.pipeline.inputs.analysis.vllm.active and VLLM_USUAL_INDEX or "index.html")
    for row in itertools.islice(failures, report.failures_seen[0] if report.failures_seen else 0, None):
        if row.compile_id is not None and questions.is_compile(row.compile_id):
            report.failure_frames.add(row.compile_id.frame_key())
    if seen == report.failures_seen and frames is not None and report.failure_frames.isdisjoint(frames):
        return
    report.failures_seen = seen
    report.rendered["failures page"] += 1
    report._write("failures_and_restarts.html", lambda: failures_page(report.pipeline.inputs, totals=report.index.totals))


def pages_changed(compiles: LiveCompiles, changes: CompileChanges | None) -> set[CompileId | None]:
    """The compile ids whose page shows what `changes` changed, besides those that logged something:
    each attempt of a compile built again otherwise (a restart's metrics, logged under its last
    attempt, end the compile every attempt's page shows), or whose unusual settings, as its page
    shows them, moved with the run's usual values."""
    if changes is None:
        return set()
    return {attempt for position, old, new in changes.changed
            if old != new and (position not in changes.settings_only or old is None or unusual_shown(old) != unusual_shown(new))
            for attempt in compiles.attempts_of(new.key)}

def write_live_page(writer: LiveWriter, versions: dict[str, str], url: str, html: str | Iterable[str],
                    kept: KeptPieces | None = None) -> None:
    """A page rendered with its live mark (whole, or in its pieces), written with its version (noted
    in `versions`, the page → version that live.js lists), unless it is the same as written last.
    `kept`: the page's pieces as encoded and hashed for its last version (the index's)."""
    # the page's version is a digest of what it shows: an unchanged page is the same bytes (not
    # rewritten, not reloaded). The mark is in <head>, before any text from the log: in the first
    # piece that holds its placeholder. A piece is encoded alone: most are ASCII, and copied as
    # they are, where the joined page (any piece not ASCII makes it two bytes a character) was
    # copied and converted whole (an index of 4,000 compiles: 8 MB an update).
    if kept is not None and not isinstance(html, str):
        pieces, digest = kept.encoded(html)
    else:
        pieces = [piece.encode("utf-8", "surrogatepass") for piece in ((html,) if isinstance(html, str) else html)]
        digest = content_digest(*pieces)
    version = digest[:8].hex()
    if versions.get(url) == version:
        return  # the same bytes as written last (encoded and hashed once: an index may be megabytes)
    for at, piece in enumerate(pieces):
        if PLACEHOLDER in piece:
            pieces[at] = piece.replace(PLACEHOLDER, b' data-version="%s"' % version.encode(), 1)
            break
    writer.write(url, pieces, digest=b"v" + digest)  # written from its pieces, never joined
    versions[url] = version


PLACEHOLDER = b' data-version=""'  # the live mark's, in the page's <head> (report/html/shell.py)


class KeptPieces:
    """A page's pieces as its last version was written, each encoded and hashed. An update renders
    again only the index's rows and sections that changed (`LiveIndex`) and hands out the same
    strings for the rest: those are not encoded and hashed again (at 4,347 compiles, 8 MB in 8,900
    pieces, all but ~80 the same objects from one update to the next). The page's version is then
    a digest of its pieces' digests, in order: the same pieces, the same version."""

    def __init__(self) -> None:
        self.kept: dict[str, tuple[bytes, bytes]] = {}

    def encoded(self, pieces: Iterable[str]) -> tuple[list[bytes], bytes]:
        """The pieces encoded, and the page's digest; only these pieces are kept for the next version."""
        pieces = list(pieces)
        # looked up in C (map, zip, dict): a loop in Python over 8,900 pieces cost 3-6 ms an update
        found: list[tuple[bytes, bytes] | None] = list(map(self.kept.get, pieces))
        for at in itertools.compress(range(len(found)), map(operator.not_, found)):  # the new ones
            data = pieces[at].encode("utf-8", "surrogatepass")
            found[at] = (data, hashlib.sha256(data).digest())
        self.kept = dict(zip(pieces, found))  # type: ignore[arg-type]
        return list(map(_ENCODED, found)), hashlib.sha256(b"".join(map(_DIGEST, found))).digest()[:16]  # type: ignore[arg-type]


_ENCODED, _DIGEST = operator.itemgetter(0), operator.itemgetter(1)


def write_live_state(writer: LiveWriter, update: int, versions: dict[str, str]) -> None:
    """live.js: the latest version of every page of the folder, which its open pages poll."""
    state = {"update": update, "done": False, "pages": versions}
    writer.write(LIVE_STATE, b"tlparseLive(" + orjson.dumps(state) + b");\n")


class LiveInline:
    """The texts a live report's compile pages show inline: planned as their records are read,
    within the report's one --inline-mb budget (`PageBuilder.plan_inline_after`)."""

    def __init__(self, pipeline: Pipeline, options: Options):
        self.builder = PageBuilder(pipeline.payloads.get, Highlighter(pipeline.highlighter.spool), inline_budget=options.inline_mb * 1e6)
        self.planned_through = 0  # the log line the plan has reached

    def planned(self, records: dict[CompileId | None, SpooledRecords], highlighter: Highlighter, lines_read: int) -> PageBuilder:
        """The page builder of an update, the texts of `records` (the ids whose pages it writes,
        their records read back) planned up to the `lines_read` lines of the log read so far."""
        self.builder.highlighter = highlighter
        self.builder.plan_inline_after(list(records), records.__getitem__, self.planned_through)
        self.planned_through = lines_read
        return self.builder


class LiveRecordPages:
    """The record pages of a live report (`pipeline.outputs.pending`): each written once it is read,
    and a metrics page again whenever its compile id logs something (it lists the id's files and
    its shape facts, which come after it)."""

    def __init__(self, pipeline: Pipeline):
        self.pending = pipeline.outputs.pending
        self.built = 0  # the pages written so far
        self.metrics: dict[CompileId | None, list[int]] = {}  # compile id → its metrics pages

    def refresh(self, touched: set[CompileId | None], every: bool = False) -> list[PendingPage]:
        """The pages read since the last update, and the metrics pages of the ids that logged
        something; `every`: all of them."""
        again = range(self.built) if every else sorted(i for key in touched for i in self.metrics.get(key, ()))
        pages = [self.pending.get(index) for index in again]
        for index in range(self.built, len(self.pending)):
            page = self.pending.get(index)
            if page.view == "metrics":
                self.metrics.setdefault(key_of(page.compile_id), []).append(index)
            pages.append(page)
        self.built = len(self.pending)
        return pages


class LivePages:
    """The compile pages of a live report (`views.compile.page_refs`), kept from one update to the
    next: the pages of new compile ids are added at the end, and only the pages asked for are linked
    to their neighbours."""

    def __init__(self, analysis: Analysis):
        self.analysis = analysis
        self.keys_seen = 0  # directory keys listed
        self.plain: list[PageRef] = []  # every page, in log order, unlinked
        self.at: dict[CompileId | None, list[int]] = {}  # compile id → its pages' positions (one per generation)
        self.compiles: list[int] = []  # the positions of the compiles' pages, in order
        self.rank: dict[int, int] = {}  # a compile page's position → its place in `compiles`
        # (process, compiled autograd graph) → its captures: a capture's page says what became of the compiles of the graph it captured
        self.captures: dict[tuple[int, int], list[CompileId]] = {}
        self.index = "index.html"  # the front page every page links (`usual_index`) at the last update

    def index_moved(self, index: str) -> bool:
        """Whether the front page every page links moved to `index` since the last update."""
        moved, self.index = index != self.index, index
        return moved

    def refresh(self, touched: set[CompileId | None], every: bool = False) -> list[PageRef]:
        """The pages of the compile ids that logged something (or whose compile changed), of the
        captures of their graphs, and of the compiles just before the new ones among them (whose
        "next" link is new), each linked as `page_refs` links it, in log order; `every`: all pages."""
        report = self.analysis
        grown = [key for key in touched if key in self.at and len(report.generations_of(key)) != len(self.at[key])]
        if grown:  # an id reused after reset(): its new page goes after its others, mid-list
            self.keys_seen, self.plain, self.at, self.compiles, self.rank = 0, [], {}, [], {}
        linked = len(self.compiles)  # the compiles whose pages were written with their "next" link (all but the last)
        for key in itertools.islice(report.directory, self.keys_seen, None):
            if key in report.pageless:  # listed without a page (limits.PAGED_START_ONLY)
                continue
            if questions.is_capture(key):
                assert key is not None and key.compiled_autograd_id is not None
                self.captures.setdefault((key.process, key.compiled_autograd_id), []).append(key)
            for generation in report.generations_of(key):
                page = page_ref(report, key, generation)
                self.at.setdefault(key, []).append(len(self.plain))
                if page.is_compile:
                    self.rank[len(self.plain)] = len(self.compiles)
                    self.compiles.append(len(self.plain))
                self.plain.append(page)
        self.keys_seen = len(report.directory)
        graphs = {(key.process, key.compiled_autograd_id) for key in touched if key is not None and key.compiled_autograd_id is not None}
        touched = touched | {capture for graph in graphs for capture in self.captures.get(graph, ())}
        positions = set(range(len(self.plain))) if every else {p for key in touched for p in self.at.get(key, ())}
        # a compile's page already written links to the one after it: only a new compile changes its neighbour's link
        positions |= {self.compiles[self.rank[p] - 1] for p in list(positions) if self.rank.get(p, 0) >= max(linked, 1)}
        return [self._linked(p) for p in sorted(positions)]

    def _linked(self, position: int) -> PageRef:
        page = self.plain[position]
        before = after = None
        place = self.rank.get(position)
        if place is not None:
            before = self.plain[self.compiles[place - 1]] if place else None
            after = self.plain[self.compiles[place + 1]] if place + 1 < len(self.compiles) else None
        mine = self.at[page.key]
        others = tuple(self.plain[p] for p in mine if p != position) if len(mine) > 1 else ()
        return PageRef(page.key, page.generation, page.url, page.label, page.is_compile, before, after, others)
