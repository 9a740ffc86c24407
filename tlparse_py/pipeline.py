"""The pipeline: records from the reader → kinds → the analysis, and numbered outputs written as they come.

`Pipeline.add` runs a record through its kinds' parsers, numbers and writes the outputs they ask for
(tlparse's global numbering), stores its payload once, and spools a typed summary of it for the
compile pages; payloads never stay in memory after their record. `Pipeline.finish` writes what
needs the whole log: raw.jsonl, the directory, the compile pages, the index and `summary.json`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from msgspec.structs import replace

from .analysis import kinds
from .analysis.compiles import Analysis, ready_for_pages
from .analysis.digest import report_digest
from .analysis.kind_counts import KindCounts
from .analysis.summary import Summary
from .analysis.kinds import LINK, PAYLOAD, REFORMAT, Output, ParseContext
from .analysis.questions import pageless_keys
from .analysis.stacks import frames_from_json
from .analysis.store import InputInfo
from .heap import few_full_collections
from .limits import PAGE_RECORDS_PER_KIND, PAGED_START_ONLY
from .model import HINTS, CompileId, Diagnostic, DiagnosticLog, OutputRef, Record, RecordSummary, Stats, StringTable
from .options import Options
from .paths import provenance_page_url
from .reading.gunzip import LogAsRead
from .reading.inputs import LeftOut, file_size
from .report.chromium import EVENTS_SCRIPT, EVENTS_SCRIPT_LIMIT, ChromiumEvents, events_script
from .report.highlight import Highlighter, highlight_workers
from .report.jobs import Jobs, PageJobs, private_reader, started_ahead
from .report.markdown import summary_markdown
from .report.summary_json import summary_json
from .report.views.vllm import USUAL_INDEX, vllm_page
from .report.outputs import Outputs, PayloadStore, RawJsonl, RecordSpool, write_compile_directory
from .report.render import STATIC_DIR, render_page, render_pieces
from .report.search import IndexParts, build_index, page_pieces
from .report.views.common import Inputs, Page, label
from .report.views.compile import PageRef, compile_outline, compile_page, page_refs
from .report.views.index import failures_page, index_page
from .report.views.pages import PAGE_VIEWS, Builder, provenance_page
from .report.views.sections import InlineTexts, PageBuilder, graph_or_code, shown_as
from .report.folder_writer import FolderWriter, NullWriter
from .report.staging import ReportWriter


class Pipeline:
    def __init__(self, analysis: Analysis, writer: FolderWriter, options: Options):
        self.analysis = analysis
        self.writer = writer
        self.options = options
        self.label = Path(analysis.source.path).name
        self.ctx = ParseContext(analysis, self.label, export=options.export, plain_text=options.plain_text,
                                fingerprints=options.fingerprints)
        workers = options.workers if options.workers is not None else highlight_workers(analysis.source.size)
        self.highlighter = Highlighter(writer.scratch(), budget=options.highlight_mb * 1e6, workers=workers)
        self.outputs = Outputs(analysis, writer, self.ctx, self.highlighter)
        self.payloads = PayloadStore(writer)
        self.spool = RecordSpool(writer.scratch(), analysis.generation_at)
        self.raw = RawJsonl(writer.scratch(), self.ctx.problem)
        self.chromium = ChromiumEvents(writer.open("chromium_events.json"), analysis, self.ctx.problem)
        self.ctx.on_chromium_event = self.chromium.add
        self.kind_counts = KindCounts()  # analysis.kinds, equal counts shared
        self.collected = frozenset(name for name, declared in kinds.KINDS.items() if declared.collected)
        self.inputs = Inputs(analysis, options, self.outputs.global_files)  # what the views read, once reading is done
        self.jobs = PageJobs(self.inputs, writer, self.label)
        self.index_parts = IndexParts()  # what the compile pages give the search index
        self.inline_texts = InlineTexts(lambda key: read_in_part(analysis, key))  # the texts the compile pages show, for `PageBuilder.plan_inline`
        self.logs_read: list[LogAsRead] = []  # what was read of each log, from which file: what raw.log copies

    # -- per record --------------------------------------------------------------------------

    def add(self, record: Record) -> None:
        if record.other_rank:
            self.raw.add(record, None)
            return
        self.analysis.records += 1
        self.note_time(record.timestamp)
        key = record.compile_id.directory_key() if record.compile_id is not None else None
        self.outputs.note_compile_id(key)
        payload_file, refs = self._parse(record, key)
        self._note_kinds(record, key)
        if "stack" in record.envelope:
            frames = frames_from_json(record.envelope["stack"], record.process)
            if frames:
                self.analysis.unknown_stacks.insert(frames, None)
        if not self.collected.isdisjoint(record.kinds):  # gathered into a file of their own (chromium events)
            return
        if payload_file is None and record.payload:
            payload_file = self.payloads.put(record)
        self.raw.add(record, payload_file)
        summary = RecordSummary(
            record.lineno, record.kinds, {k: record.envelope[k] for k in record.kinds},
            {k: record.envelope[k] for k in ("subgraph_name", "rank") if k in record.envelope},
            payload_file, len(record.payload) if record.payload is not None else None, refs,
        )
        self.spool.add(key, summary)
        declared = shown_as(summary)
        if declared is None:
            return
        self.inline_texts.note(key, summary)
        if declared.step is not None or declared.section == "code":
            step = declared.step
            self.analysis.note_graph(key, step.stage if step else "", step.lineage if step else "", record.lineno)
        if self.outputs.pages:  # highlight it beside the reading, for its compile page
            self.highlighter.request(record.payload_text, declared.lang)

    def note_time(self, timestamp: str) -> None:
        # the earliest and latest, not the first and last: threads may log slightly out of order
        analysis = self.analysis
        if analysis.first_timestamp is None or timestamp < analysis.first_timestamp:
            analysis.first_timestamp = timestamp
        if analysis.last_timestamp is None or timestamp > analysis.last_timestamp:
            analysis.last_timestamp = timestamp

    def _parse(self, record: Record, key: CompileId | None) -> tuple[str | None, list[OutputRef]]:
        payload_file, folder = None, ""  # the folder its outputs go in, once it has one
        refs: list[OutputRef] = []
        for declared in kinds.parsers_for(record.kinds):
            if declared.parse is None:
                continue
            self.ctx.current_kind = declared.name
            try:
                outputs = list(declared.parse(record, self.ctx))
                if self.options.export and not declared.in_export:
                    # export mode numbers only exported programs and guard pages, as tlparse does; the
                    # facts an output notes once written (cache results, metrics) are noted all the same
                    for dropped in outputs:
                        if dropped.on_written is not None:
                            dropped.on_written("")
                    outputs = []
                for output in outputs:
                    folder = folder or (record.compile_id.dirname if record.compile_id is not None else f"unknown_{record.lineno}")
                    url = self.outputs.emit(output, record, key, folder)
                    refs.append(OutputRef(url, output.kind == LINK))
                    note_file_size(self.analysis, output, record, self.ctx.number)
                    if output.kind in (PAYLOAD, REFORMAT):
                        payload_file = url
            except OSError:
                raise  # writing the report failed (a full disk): not the parser's fault, and not one record's
            except Exception as exc:  # a parser bug must cost one record, not the report
                self.ctx.problem(record, "fail_parser", f"parser {declared.name} failed", f"{type(exc).__name__}: {exc}")
        return payload_file, refs

    def _note_kinds(self, record: Record, key: CompileId | None) -> None:
        names = record.kinds or ["(no kind)"]
        self.kind_counts.add(self.analysis.kinds, key, names)
        self.analysis.kinds_seen.update(names)
        for name in names:
            if not kinds.known(name) and name != "(no kind)":
                self.analysis.stats.add("unknown")
                self.analysis.unknown_kinds[name] += 1

    # -- the end -----------------------------------------------------------------------------

    def finish(self) -> None:
        self.writer.close_behind()  # the files written beside the reading: all there, before pages read them and forks
        self.outputs.pending.flush()  # the pages asked for: in their spool file, before a forked child reads it
        self.chromium.close()
        self.analysis.note_cache_marks()
        # past limits.PAGED_START_ONLY, compile ids with nothing but a dynamo_start get no page (docs/limits.md)
        self.analysis.pageless = pageless_keys(self.analysis, PAGED_START_ONLY)
        keys = [key for key in self.analysis.directory if key not in self.analysis.pageless]
        builder = PageBuilder(self.payloads.get, self.highlighter, inline_budget=self.options.inline_mb * 1e6)
        builder.plan_inline(keys, self.spool.records, self.inline_texts)
        self.highlighter.drain()
        self.jobs.on_fork = [self._private_handles]
        build = Builder(self.inputs, self.payloads.get, self.highlighter)
        # the pages kinds asked for need nothing of the compiles: a forked child starts on them while
        # this process builds the compiles, which every compile page and the index ask for
        records_pages = (len(self.outputs.pending), partial(self._pending_page, build))
        with started_ahead(self.jobs, Jobs(records_pages)) as ahead:
            ready_for_pages(self.analysis)  # once, before the compile pages' builder forks
        # the summaries (index, summary.json...) are written while the forked child starts on the pages,
        # from the analysis as it stands; a page or the search index that could not be built changes
        # what they count, and they are written again
        written: list[object] = []

        def meanwhile() -> None:
            self._write_files_of_the_run()
            if not self.options.provenance:
                written.append(write_summaries(self.writer, self.inputs, self.options))

        # the compile page jobs gather the search index's pieces (a forked child's handed over at its end)
        jobs = Jobs(records_pages, (len(pages := page_refs(self.analysis)), partial(self._compile_page, pages, builder)))
        if not self.jobs.run(jobs, gathered=(self.index_parts.encode, self.index_parts.add_from), meanwhile=meanwhile, ahead=ahead):
            written.clear()
            self._write_files_of_the_run()
        problem = self._write_search_index(builder, pages)
        if problem:  # a bug in the index must cost the search box (it stays hidden), not the report
            self.analysis.stats.add("fail_parser")
            self.analysis.diagnostics.add(self.label, 0, "could not build the search index", problem, HINTS["fail_parser"])
        if self.options.provenance:
            write_provenance_pages(self.jobs, keys, build)
        if written != [summarised(self.inputs)]:
            write_summaries(self.writer, self.inputs, self.options)
        self.spool.handle.close()
        self.writer.close_behind()  # no thread left behind by each report a process writes

    def _write_files_of_the_run(self) -> None:
        """The files no page reads (the events' script copy, raw.jsonl, raw.log, compile_directory.json,
        static/): written while a forked child starts on the pages, where there is one. Before
        the search index, whose manifest replaces static/'s default one."""
        if self.chromium.bytes_written <= EVENTS_SCRIPT_LIMIT:
            self.writer.write(EVENTS_SCRIPT, events_script(self.writer.read("chromium_events.json") or b"[]"))
        self.raw.write(self.writer, self.analysis.strings.as_list())
        self.writer.copy_logs(self.logs_read, "raw.log", self.options.limits)
        write_compile_directory(self.writer, self.analysis)
        write_static(self.writer)

    def _write_search_index(self, builder: PageBuilder, pages: Sequence[PageRef]) -> str | None:
        """The search box's index (search.py); after write_static, so the report's manifest replaces the default one.

        Returns why the index could not be built, if it could not, for `finish` to note.
        """
        try:  # each file written as it comes: the index is never held whole
            for path, content in build_index(self.analysis, self.spool.records, self.payloads.get, builder, parts=self.index_parts,
                                             pages=pages, total_bytes=int(self.options.search_mb * 1e6)):
                self.writer.write(path, content)
        except OSError:
            raise
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    def _private_handles(self) -> None:
        """In a forked child: own read handles on the spool files (a file offset is shared across fork)."""
        self.spool.handle = private_reader(self.spool.handle)
        self.outputs.pending.handle = private_reader(self.outputs.pending.handle)
        self.highlighter.spool = private_reader(self.highlighter.spool)
        self.highlighter.store = False

    def _pending_page(self, build: Builder, index: int) -> None:
        """A page kinds asked for while the log was read (code, metrics, guards...), read back (unpickled) now."""
        page = self.outputs.pending.get(index)
        self.jobs.page(page.url, page.url, lambda: PAGE_VIEWS[page.view](build, page))

    def _compile_page(self, pages: Sequence[PageRef], builder: PageBuilder, position: int) -> None:
        def make() -> Page:
            records = self.spool.records(page.key)
            outline = compile_outline(self.analysis, page, records, builder)
            self.index_parts.add(position, page_pieces(self.analysis, outline))  # the search index's, from the same outline
            return compile_page(self.inputs, pages, position, records, builder, outline)

        page = pages[position]
        self.jobs.page(page.url, page.label, make)


def write_provenance_pages(jobs: PageJobs, keys: list[CompileId | None], build: Builder) -> None:
    """provenance_tracking_<dir>.html for every compile id (as tlparse names them)."""
    for key in keys:
        url = provenance_page_url(key)
        try:
            page = provenance_page(build, key)
            jobs.inputs.provenance_pages.append((key, url, page.has_data))
            jobs.writer.write(url, render_page(page))
        except OSError:
            raise
        except Exception as exc:
            jobs.inputs.provenance_pages.append((key, url, False))
            jobs.failed(url, f"provenance of {label(key)}", exc)


def read_in_part(analysis: Analysis, key: CompileId | None) -> bool:
    """Whether a page reads only some of the id's records: more than PAGE_RECORDS_PER_KIND of a kind."""
    counts = analysis.kinds.get(key)
    return counts is not None and max(counts.values(), default=0) > PAGE_RECORDS_PER_KIND


def note_file_size(analysis: Analysis, output: Output, record: Record, number: int) -> None:
    """The size the file lists show beside a graph or generated code (`Analysis.file_sizes`): the
    text its record logged, when file `number` holds it or shows it."""
    if (record.payload is not None and (output.kind in (PAYLOAD, REFORMAT) or output.view == "code")
            and graph_or_code(record.kinds, record.envelope)):
        analysis.file_sizes.note(number, record.payload)


def write_summaries(writer: FolderWriter, inputs: Inputs, options: Options) -> object:
    """The pages and files that sum the run up: the failures page, the index, summary.json and
    summary.md. Returns what they were made from (`summarised`): not the summary, which at 40,000
    compiles holds 60 MB the page jobs would keep alive."""
    made_from = summarised(inputs)
    summary = inputs.analysis.summary(kept=True)  # once, its compiles read from their spool at each pass
    writer.write("failures_and_restarts.html", render_page(failures_page(inputs, summary)))
    write_indexes(writer, inputs, summary)
    writer.write_pieces("summary.json", summary_json(summary))
    writer.write("summary.md", summary_markdown(report_digest(summary, options.source_root)).encode("utf-8"))
    return made_from


def summarised(inputs: Inputs) -> object:
    """What building the pages changes of what the summaries say: the problems counted (a page or
    the search index that could not be built) and the provenance pages written."""
    return (tuple(inputs.analysis.stats.counts.items()), inputs.analysis.diagnostics.total, len(inputs.provenance_pages))


def write_indexes(writer: FolderWriter, inputs: Inputs, summary: Summary) -> None:
    """index.html; for a vLLM log, vLLM's summary there and the usual index beside it (as upstream).
    The index is written as it is rendered, in pieces: at 10,000s of compiles it is 10s of MB."""
    if summary.vllm is not None:
        writer.write_pieces(USUAL_INDEX, render_pieces(index_page(inputs, summary=summary)))
        writer.write("index.html", render_page(vllm_page(inputs, summary.vllm)))
    else:
        writer.write_pieces("index.html", render_pieces(index_page(inputs, summary=summary)))


def write_static(writer: FolderWriter) -> None:
    """The shared stylesheet, scripts and Pygments colours every page links to."""
    for item in sorted(STATIC_DIR.iterdir()):
        if item.is_file():
            writer.write(f"static/{item.name}", item.read_bytes())


Progress = Callable[[int, int], None]


def read_logs(logs: list[Path], pipeline: Pipeline, on_rank: Callable[[int], None] | None, progress: Progress | None) -> None:
    """Every record of the logs (usually one) through the pipeline.

    A string table belongs to the process that wrote it: the logs of one process share it
    (draft_export's capture file uses file-name ids that only the main log of the same process
    defines), and each other process's strings are kept apart, keyed by its number. Processes are
    numbered by pid, and where two processes of the logs have one pid (containers run each program
    as pid 1: `inputs.process_of_each` tells them apart) the later one is numbered apart too
    (`LogProcesses`), so yesterday's file ids are never read in today's table.
    """
    from .reading.inputs import LogProcesses, process_of_each
    from .reading.records import LogReader

    analysis = pipeline.analysis
    owners: dict[int, int] = {}
    numbers: dict[tuple[int, int], int] = {}
    for log, process in zip(logs, process_of_each(logs) if len(logs) > 1 else [0]):
        processes = LogProcesses(analysis.processes, process, owners, numbers) if len(logs) > 1 else analysis.processes
        reader = LogReader(log, analysis.stats, analysis.diagnostics, strings=analysis.strings, limits=pipeline.options.limits,
                           scanning_child=pipeline.options.scanning_child, processes=processes,
                           compile_ids=analysis.compile_ids)
        reader.on_rank_detected = on_rank
        if reader.may_fork(file_size(log)):  # a big log: its payload files are written by a child process too
            pipeline.writer.write_behind_in_a_process()
        reader.on_time = pipeline.note_time  # the string-table records' times too: the log's first line is one
        for count, record in enumerate(reader.records(), start=1):
            pipeline.add(record)
            if progress is not None and count % 2000 == 0:
                progress(reader.scanned_bytes(), analysis.records)
        if analysis.rank is None:
            analysis.rank = reader.expected_rank
        if reader.as_read is not None:
            pipeline.logs_read.append(reader.as_read)


def new_analysis(source: InputInfo, options: Options, echo: Callable[[Diagnostic], None] | None = None) -> Analysis:
    return Analysis(
        source=source,
        stats=Stats(),
        diagnostics=DiagnosticLog(echo=echo),
        strings=StringTable(),
        settings=options,
    )


def source_of(logs: list[Path], others: list[Path] | None = None, left_out: list[LeftOut] | None = None,
              every_log: bool = False) -> InputInfo:
    """What a report says it was written from: the logs read, and those of the folder left out (and
    why); `every_log`: every log of the folder was read, whichever run it is of."""
    sizes = {p.name: file_size(p) for p in logs[1:]}
    return InputInfo(str(logs[0]), file_size(logs[0]), [p.name for p in others or []], [p.name for p in logs[1:]], sizes, left_out or [],
                     every_log)


def build_report(
    logs: list[Path],
    writer: FolderWriter,
    options: Options,
    source: InputInfo,
    on_rank: Callable[[int], None] | None = None,
    progress: Progress | None = None,
    echo: Callable[[Diagnostic], None] | None = None,
) -> Analysis:
    """Read the logs and write the whole report into the writer's folder; return the analysis."""
    analysis = new_analysis(source, options, echo)
    pipeline = Pipeline(analysis, writer, options)
    try:
        with few_full_collections():
            read_logs(logs, pipeline, on_rank, progress)
            pipeline.finish()
    finally:
        pipeline.highlighter.close()
    return analysis


def analyze_logs(logs: list[Path], options: Options | None = None, source: InputInfo | None = None) -> Analysis:
    """The analysis of the logs, without writing anything."""
    options = options or Options()
    analysis = new_analysis(source or source_of(logs), options)
    pipeline = Pipeline(analysis, NullWriter(), replace(options, highlight_mb=0, workers=0))
    pipeline.outputs.pages = False
    try:
        with few_full_collections():
            read_logs(logs, pipeline, None, None)
            pipeline.chromium.close()
            analysis.note_cache_marks()
            analysis.pageless = pageless_keys(analysis, PAGED_START_ONLY)  # as the written report has them
    finally:
        pipeline.highlighter.close()
    return analysis


def write_report(
    log: Path | list[Path],
    out: Path,
    *,
    overwrite: bool = False,
    options: Options | None = None,
    source: InputInfo | None = None,
    echo: Callable[[Diagnostic], None] | None = None,
    on_rank: Callable[[int], None] | None = None,
    progress: Progress | None = None,
) -> Analysis:
    """Read `log` and write its report to `out`, all or nothing (the library entry point).

    Raises OutputError before any work if `out` cannot be used, OSError if writing fails; in both
    cases an existing report at `out` is left as it was.
    """
    logs = log if isinstance(log, list) else [log]
    writer = ReportWriter(out, overwrite)
    try:
        analysis = build_report(logs, writer, options or Options(), source or source_of(logs), on_rank, progress, echo)
        analysis.report_dir = writer.commit()
    except BaseException:
        writer.abort()
        raise
    return analysis
