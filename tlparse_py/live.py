"""A live report: the report of a log that is still being written, updated as it grows.

`LiveReport.update` reads what was appended since the last update (`reading.tail`), runs it through
the same pipeline a one-shot report uses, and rewrites the pages the new records changed: the
index (with the live banner), the compile pages of the compile ids that logged something, the
record pages asked for since. Reading state and the analysis stay in memory, so an update costs
what the new bytes cost, not what the log does. `LiveReport.finish` reads the rest and writes the
report a one-shot run writes (`Pipeline.finish`), then removes what only the live report had.

Pages built for a live update use their own page builder and an unbudgeted highlighter, and
note nothing in the analysis: the final report is built as if the updates never happened.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import orjson
from markupsafe import Markup

from .analysis.compiles import Analysis, vllm_run
from .analysis.store import InputInfo
from .analysis.summary import STATUS_LABELS
from .model import CompileId, Diagnostic
from .options import Options
from .pipeline import Pipeline, new_analysis, source_of, write_static
from .reading.records import LogReader
from .reading.tail import LogReset, LogTail
from .report.highlight import Highlighter
from .report.jobs import ErrorPage
from .report.render import Model, render_macro, render_page
from .report.views.common import page_base
from .report.views.compile import compile_page, page_refs
from .report.views.common import VLLM_USUAL_INDEX
from .report.views.index import IndexPage, failures_page, index_page
from .report.views.vllm import vllm_page
from .report.views.live import LiveMark, live_banner
from .report.views.pages import PAGE_VIEWS, Builder
from .report.views.sections import PageBuilder
from .report.writer import LiveWriter

LIVE_STATE = "live.js"

__all__ = ["LiveReport", "LogReset"]


class LiveReport:
    """The live report of one log (a process's main trace log) in `out`."""

    def __init__(self, log: Path, out: Path, options: Options, *, overwrite: bool = False,
                 source: Callable[[], InputInfo] | None = None, echo: Callable[[Diagnostic], None] | None = None,
                 on_rank: Callable[[int], None] | None = None):
        self.log = log
        self.options = options
        self.source = source or (lambda: source_of([log]))
        self.writer = LiveWriter(out, overwrite)
        self.echo = echo
        self.on_rank = on_rank
        self.version = 0  # updates written so far
        self.versions: dict[str, str] = {}  # page → the version written last (what live.js lists)
        self.pids: set[int] = set()  # the glog pids of the records read: the processes writing the log
        self.compiling: frozenset[str] = frozenset()  # the compiles under way at the last update
        self.sections: dict[bytes, Markup] = {}  # the index's compile-id sections, by a digest of what they show
        self._start()

    def _start(self) -> None:
        self.analysis: Analysis = new_analysis(self.source(), self.options, self.echo)
        self.pipeline = Pipeline(self.analysis, self.writer, self.options)
        reader = LogReader(self.log, self.analysis.stats, self.analysis.diagnostics, strings=self.analysis.strings,
                           limits=self.options.limits, scanning_child=self.options.scanning_child)
        reader.on_rank_detected = self.on_rank
        reader.on_time = self.pipeline.note_time  # as the one-shot reading does (pipeline.read_logs)
        self.tail = LogTail(self.log, self.analysis.stats, self.analysis.diagnostics, self.analysis.strings, reader)
        self.pending_built = 0  # record pages (pipeline.outputs.pending) written so far
        self.pids.clear()

    def restart(self) -> None:
        """Start over from the log's first byte (it was truncated or replaced): a fresh analysis
        in the same folder, emptied of every file the earlier reading wrote."""
        self.pipeline.highlighter.close()
        self.pipeline.spool.handle.close()
        self.pipeline.chromium.close()
        self.writer.forget_written()
        self.version = 0
        self.versions.clear()
        self._start()

    # -- reading ---------------------------------------------------------------------------------

    def read(self, final: bool = False) -> set[CompileId | None]:
        """Read what was appended (everything, when `final`); the compile ids that logged something.

        Raises LogReset when the log is no longer the one read so far."""
        touched: set[CompileId | None] = set()
        for record in self.tail.read(final):
            self.pipeline.add(record)
            if not record.other_rank:
                self.pids.add(record.pid)
                touched.add(record.compile_id.directory_key() if record.compile_id is not None else None)
        if self.analysis.rank is None:
            self.analysis.rank = self.tail.reader.expected_rank
        self.analysis.source = self.source()
        return touched

    @property
    def bytes_read(self) -> int:
        return self.tail.offset

    # -- a live update ---------------------------------------------------------------------------

    def update(self, note: str = "", touched: set[CompileId | None] | None = None) -> None:
        """Rewrite the pages that changed since the last update (read with `read`), with the banner's `note`."""
        self.analysis.forget_indexes()
        self.compiling = frozenset(compile_.label for compile_, _ in self.analysis.open_compiles())
        self.version += 1
        if self.version == 1:
            write_static(self.writer)
        builder = Builder(self.pipeline.inputs, self.pipeline.payloads.get, Highlighter(self.pipeline.highlighter.spool))
        self._write_record_pages(builder)
        self._write_compile_pages(touched or set())
        banner = live_banner(self.analysis, note)
        self._write("failures_and_restarts.html", lambda: failures_page(self.pipeline.inputs))
        run = vllm_run(self.analysis)
        if run is not None:  # vLLM's pieces, as they compile: its summary is the front page, as in the final report
            self._write(VLLM_USUAL_INDEX, self._index_page, banner)
            self._write("index.html", lambda: vllm_page(self.pipeline.inputs, run), banner)
        else:
            self._write("index.html", self._index_page, banner)
        state = {"update": self.version, "done": False, "pages": self.versions}
        self.writer.write(LIVE_STATE, b"tlparseLive(" + orjson.dumps(state) + b");\n")

    def _write(self, url: str, make: Callable[[], Model], banner: object = None) -> None:
        """One page with the live mark; a page that cannot be built now is replaced by a page saying
        why (not counted: the final report builds it again, and counts it if it fails then)."""
        mark = LiveMark(url, "", banner, self.compiling)  # type: ignore[arg-type]
        try:
            html = render_page(make(), mark)
        except Exception as exc:  # noqa: BLE001 - a live page must not stop the watch
            error = ErrorPage(**page_base(self.pipeline.inputs, f"Page {url}", root="../" * url.count("/")),
                              what=url, detail=f"{type(exc).__name__}: {exc}")
            html = render_page(error, mark)
        # the page's version is a digest of what it shows: an unchanged page is the same bytes (not
        # rewritten, not reloaded). The mark is in <head>, before any text from the log.
        version = hashlib.blake2b(html.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
        self.writer.write(url, html.replace(' data-version=""', f' data-version="{version}"', 1))
        self.versions[url] = version

    def _index_page(self) -> IndexPage:
        """The index, its "Files by compile id" sections rendered once each and reused while their
        compile id logs nothing new (they are most of a big log's index)."""
        page = index_page(self.pipeline.inputs)
        sections: dict[bytes, Markup] = {}
        for entry in page.compiles:
            key = hashlib.blake2b(orjson.dumps(entry, default=str), digest_size=16).digest()
            html = self.sections.get(key)
            if html is None:
                html = render_macro("compile_id_section", entry, page.root, STATUS_LABELS)
            entry["html"] = sections[key] = html
        self.sections = sections  # only the current ones: memory follows the index, not the log's history
        return page

    def _write_record_pages(self, builder: Builder) -> None:
        pending = self.pipeline.outputs.pending
        for index in range(self.pending_built, len(pending)):
            page = pending.get(index)
            self._write(page.url, lambda page=page: PAGE_VIEWS[page.view](builder, page))  # type: ignore[misc]
        self.pending_built = len(pending)

    def _write_compile_pages(self, touched: set[CompileId | None]) -> None:
        """The compile pages of the compile ids that logged something, and of the compiles just
        before new ones (their "next" link)."""
        if not touched:
            return
        pages = page_refs(self.analysis)
        chosen = [i for i, page in enumerate(pages) if page.key in touched or (page.next is not None and page.next.key in touched)]
        builder = PageBuilder(self.pipeline.payloads.get, Highlighter(self.pipeline.highlighter.spool),
                              inline_budget=self.options.inline_mb * 1e6)
        keys = list(dict.fromkeys(pages[i].key for i in chosen))
        builder.plan_inline(keys, self.pipeline.spool.records)
        for position in chosen:
            page = pages[position]
            self._write(page.url, lambda page=page, position=position: compile_page(  # type: ignore[misc]
                self.pipeline.inputs, pages, position, self.pipeline.spool.records(page.key), builder))

    # -- the end ---------------------------------------------------------------------------------

    def finish(self) -> Analysis:
        """Read the rest of the log and write the final report: what a one-shot run writes."""
        try:
            self.read(final=True)
            self.analysis.forget_indexes()
            self.analysis.source = self.source()
            self.pipeline.finish([self.log])
        finally:
            self.pipeline.highlighter.close()
        self.writer.finish_live()
        self.analysis.report_dir = self.writer.out
        return self.analysis

    def close(self) -> None:
        self.pipeline.highlighter.close()
        self.writer.release()
