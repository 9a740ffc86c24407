"""The pipeline: records from the reader → parsers → numbered outputs written as they come → pages.

`build_report()` is the whole run. Per record it asks the registered parsers for outputs, gives each
output tlparse's global number and file name, renders it if it is a page, and hands it to the writer
at once; payloads never stay in memory after their record. Per-record summaries go to a spool file
so the compile-id pages can be written at the end, one compile id at a time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from array import array
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from . import compile_page, facts, pages, parsers, provenance
from .compile_page import PageBuilder
from .model import HINTS, Artifact, CompileId, Record, Stats, cache_suffix
from .parsers import GLOBAL, LINK, PAYLOAD, REFORMAT, Output
from .paths import numbered, safe_relpath
from .reader import DiagnosticLog, LogReader, StringTable
from .render import STATIC_DIR, Highlighter, highlight_workers, pygments_css, render
from .report import InputInfo, Report
from .stacks import frames_from_json
from .limits import Limits
from .writer import FolderWriter, ReportWriter

MD5_HEX = re.compile(r"[0-9a-f]{32}")
PARALLEL_PAGES = 200  # below this many pages, a second process costs more than it saves
RAW_JSONL_KEYS = ("timestamp", "thread", "pathname", "lineno", "payload_filename")
STACK_TRACES_PREFIX = "inductor_provenance_tracking_kernel_stack_traces"


@dataclass
class Options:
    plain_text: bool = False
    custom_header_html: str = ""
    export: bool = False  # -e: tlparse's export report (only exported programs and guard pages are numbered)
    provenance: bool = False  # -i: a provenance-tracking highlighter page per compile id
    highlight_mb: float = 4.0  # text highlighted with Pygments per report; the rest is shown plain (and coloured by the page's script)
    inline_mb: float = 8.0  # text shown inline on compile-id pages per report; the rest is linked
    workers: int | None = None  # highlighting processes beside the reader (None: by input size and cores)
    limits: Limits = field(default_factory=Limits)  # bounds on lines, gunzip and raw.log (limits.py)


class ParseContext:
    """What a parser may use: field access with type checks, the report's facts, page helpers."""

    def __init__(self, builder: ReportBuilder):
        self.builder = builder
        self.report = builder.report
        self.plain_text = builder.options.plain_text
        self.export = builder.options.export
        self.current_kind: str = ""
        self._reported: tuple[int, str] | None = None

    # -- fields ------------------------------------------------------------------------------

    def problem(self, record: Record, counter: str | None, problem: str, detail: str = "") -> None:
        if counter:
            self.report.stats.add(counter)
        self.report.diagnostics.add(self.builder.label, record.lineno, problem, detail, HINTS.get(counter or "", ""))

    def dict_field(self, record: Record, kind: str) -> dict[str, Any]:
        """The record's metadata object; anything else counts as a field-type problem and reads as {}."""
        value = record.envelope.get(kind)
        if isinstance(value, dict):
            return value
        if value is not None and self._reported != (id(record), kind):  # once per record and kind
            self._reported = (id(record), kind)
            self.problem(record, "fail_field_type", f"`{kind}` metadata is not an object", repr(value)[:80])
        return {}

    def text_field(self, record: Record, kind: str, name: str) -> str | None:
        value = self.dict_field(record, kind).get(name)
        if value is None or isinstance(value, str):
            return value
        self.problem(record, "fail_field_type", f"`{kind}.{name}` is not a string", repr(value)[:80])
        return str(value)

    def resolve_filename(self, filename: int | str | None) -> str:
        return self.report.resolve_filename(filename)

    # -- page contexts -----------------------------------------------------------------------

    def code_page(self, record: Record, lang: str, title: str) -> dict[str, Any]:
        self.builder.highlighter.request(record.payload_text(), lang)
        context = pages.code_context(None, lang, title, self.builder.payload_path(record))
        context["deferred_lang"] = lang
        return context

    def guard_page(self, record: Record, meta: dict[str, Any]) -> dict[str, Any]:
        return pages.guard_context(self.report, meta)

    def metrics_page(self, record: Record, meta: dict[str, Any], title: str) -> dict[str, Any]:
        return pages.metrics_context(self.report, record, meta, title)

    def report_chromium_event(self, record: Record) -> None:
        self.builder.add_chromium_event(record)


class ReportBuilder:
    def __init__(self, report: Report, writer: FolderWriter, options: Options):
        self.report = report
        self.writer = writer
        self.options = options
        self.context = ParseContext(self)
        self.label = Path(report.source.path).name
        self.counter = 0
        self.last_number = -1
        self.payloads_written: set[str] = set()
        self.raw_body = writer.scratch()
        self.spool = writer.scratch()
        workers = options.workers if options.workers is not None else highlight_workers(report.source.size)
        self.highlighter = Highlighter(writer.scratch(), budget=options.highlight_mb * 1e6, workers=workers)
        self.deferred: list[tuple[str, str, dict[str, Any], str, str]] = []  # code pages rendered at the end
        self.child_failures: list[tuple[str, str, str]] | None = None  # set in a forked page-building child
        self.open_events: dict[tuple[Any, ...], list[float]] = {}  # chromium B events awaiting their E
        self.chromium = writer.open("chromium_events.json")
        self.chromium.write(b"[")

    # -- per record --------------------------------------------------------------------------

    def add(self, record: Record) -> None:
        if record.other_rank:
            self._raw_jsonl(record, None)
            return
        self.report.records += 1
        key = record.compile_id.directory_key() if record.compile_id is not None else None
        self.report.directory.setdefault(key, [])
        folder = record.compile_id.dirname if record.compile_id is not None else f"unknown_{record.lineno}"
        payload_file, urls = self._run_parsers(record, key, folder)
        self._note_kinds(record, key)
        if "stack" in record.envelope:
            frames = frames_from_json(record.envelope["stack"])
            if frames:
                self.report.unknown_stacks.insert(frames, None)
        is_chromium = "chromium_event" in record.envelope
        if payload_file is None and record.payload and not is_chromium:
            payload_file = self._write_payload(record)
        if not is_chromium:
            self._raw_jsonl(record, payload_file)
            self._spool(record, key, payload_file, urls)
            if payload_file is not None:
                self._highlight_early(record, payload_file)

    def _highlight_early(self, record: Record, payload_file: str) -> None:
        """Hand a text the pages will show to the highlighting workers while reading goes on."""
        name = compile_page.name_of(record.kinds, record.envelope)
        if compile_page.group_of(name, record.kinds) is not None:
            lang, _ = compile_page.display(name, record.kinds, payload_file)
            self.highlighter.request(record.payload_text(), lang)

    def _run_parsers(self, record: Record, key: CompileId | None, folder: str) -> tuple[str | None, list[dict[str, Any]]]:
        payload_file = None
        urls: list[dict[str, Any]] = []
        for info in parsers.parsers_for(record):
            self.context.current_kind = info.kind
            try:
                outputs = list(info.parse(record, self.context))
                if self.options.export and info.files:
                    outputs = []  # export mode numbers only exported programs and guard pages, as tlparse does
                for output in outputs:
                    url = self._emit(output, record, key, folder)
                    urls.append({"url": url, "external": output.kind == LINK})
                    if output.kind in (PAYLOAD, REFORMAT):
                        payload_file = url
            except Exception as exc:  # a parser bug must cost one record, not the report
                self.context.problem(record, "fail_parser", f"parser {info.kind} failed", f"{type(exc).__name__}: {exc}")
        return payload_file, urls

    def _note_kinds(self, record: Record, key: CompileId | None) -> None:
        kinds = self.report.kinds.setdefault(key, Counter())
        for kind in record.kinds or ["(no kind)"]:
            kinds[kind] += 1
            if not parsers.known(kind) and kind != "(no kind)":
                self.report.stats.add("unknown")
                self.report.unknown_kinds[kind] += 1

    # -- outputs -----------------------------------------------------------------------------

    def _next_number(self) -> int:
        number = self.counter
        self.counter += 1
        return number

    def _emit(self, output: Output, record: Record, key: CompileId | None, folder: str) -> str:
        """Number one output, render/write it, list it in the directory; return its url."""
        number = self.last_number = self._next_number()
        entries = self.report.directory[key]
        if output.kind == LINK:
            entries.append(Artifact(url=output.url, name=output.name, number=number, kind=self.context.current_kind, is_link=True))
            return output.url
        if output.kind == GLOBAL:
            url = safe_relpath(output.name)
            if url in self.report.global_files:  # tlparse overwrites the first one; keep both
                url = numbered(url, number)
            self.report.global_files.add(url)
        else:
            url = f"{folder}/{numbered(output.name, number)}"
        artifact = Artifact(url=url, name=url.rpartition("/")[2], number=number, suffix=cache_suffix(url), kind=self.context.current_kind)
        if output.kind in (PAYLOAD, REFORMAT):
            artifact.raw = url
        elif record.payload:
            artifact.raw = self.payload_path(record)  # written after the parsers (see add)
        if artifact.name.startswith(STACK_TRACES_PREFIX) and artifact.name.endswith(".json"):
            # tlparse gives the readable companion its own number (before the JSON's entry)
            artifact.readable_url = self._stack_traces_companion(record, url)
        content = self._content(output, record, url)
        if content is not None:
            self.writer.write(url, content)
        entries.append(artifact)
        if output.on_written is not None:
            output.on_written(url)
        return url

    def _content(self, output: Output, record: Record, url: str) -> bytes | str | None:
        payload = record.payload or b""
        if output.kind == PAYLOAD:
            return payload
        if output.kind == REFORMAT:
            assert output.reformat is not None
            return output.reformat(payload)
        context = dict(output.context or {})
        if context.get("deferred_lang"):  # a code page: rendered at the end, once its highlighting is done
            self.deferred.append((url, output.template, context, self.payload_path(record), context.pop("deferred_lang")))
            self._page_defaults(context, record, url)
            return None
        self._page_defaults(context, record, url)
        return render(output.template, context)

    def _page_defaults(self, context: dict[str, Any], record: Record, url: str) -> None:
        context.setdefault("root", "../" * url.count("/"))
        context.setdefault("source", self.report.source)
        context.setdefault("title", self.context.current_kind)
        context.setdefault("compile_id", record.compile_id)
        context.setdefault("kind", self.context.current_kind)
        context.setdefault("lineno", record.lineno)
        context.setdefault("compile_page", pages.compile_page_url(record.compile_id))

    def _stack_traces_companion(self, record: Record, url: str) -> str:
        self._next_number()
        readable = url[: -len(".json")] + "_readable.html"
        try:
            traces = json.loads(record.payload_text())
            if not isinstance(traces, dict):
                raise ValueError("not an object")
        except (ValueError, RecursionError):
            return ""
        context = pages.stack_traces_context(traces)
        context.update(
            root="../" * readable.count("/"),
            source=self.report.source,
            compile_id=record.compile_id,
            compile_page=pages.compile_page_url(record.compile_id),
            kind=self.context.current_kind,
            lineno=record.lineno,
        )
        self.writer.write(readable, render("stack_traces.html.j2", context))
        return readable

    def payload_path(self, record: Record) -> str:
        """Where the raw payload of a record lives: `payloads/<md5>.txt` (md5 from the envelope, if sane)."""
        md5 = record.payload_md5 if record.payload_md5 and MD5_HEX.fullmatch(record.payload_md5) else None
        if md5 is None:
            md5 = hashlib.md5(record.payload or b"").hexdigest()
        return f"payloads/{md5}.txt"

    def _write_payload(self, record: Record) -> str:
        path = self.payload_path(record)
        if path not in self.payloads_written:
            self.writer.write(path, record.payload or b"")
            self.payloads_written.add(path)
        return path

    def add_chromium_event(self, record: Record) -> None:
        """Append one event to chromium_events.json: a JSON array, one event per line.

        tlparse indents every event; one line per event keeps the same array at half the size,
        which matters when a big log holds hundreds of thousands of events.
        """
        payload = record.payload or b""
        try:
            event = orjson.loads(payload)
            # valid JSON has no raw newline inside a string: dropping them gives compact JSON as is
            text = payload.replace(b"\n", b"").replace(b"\r", b"")
        except orjson.JSONDecodeError:
            try:
                event = json.loads(record.payload_text())
                text = orjson.dumps(event, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)  # NaN becomes null
            except (ValueError, RecursionError, TypeError, orjson.JSONEncodeError):
                self.context.problem(record, None, "chromium_event payload is not JSON (skipped)")
                return
        self.chromium.write(b"\n" if not self.report.chromium_events else b",\n")
        self.chromium.write(text)
        self.report.chromium_events += 1
        if isinstance(event, dict):
            self._time_phase(event, record)

    def _time_phase(self, event: dict[str, Any], record: Record) -> None:
        """Add a B/E pair's duration to its frame compile's phase times (only small totals are kept)."""
        phase, name, ts = event.get("ph"), event.get("name"), event.get("ts")
        if phase not in ("B", "E") or not isinstance(name, str) or not isinstance(ts, (int, float)):
            return
        args = event.get("args")
        compile_id = facts.parse_compile_id(args.get("compile_id")) if isinstance(args, dict) else None
        if compile_id is None and record.compile_id is not None:
            compile_id = record.compile_id.frame_key()
        if compile_id is None:
            return
        key = (compile_id, name, event.get("tid"))
        if phase == "B":
            self.open_events.setdefault(key, []).append(ts)
        elif self.open_events.get(key):
            started = self.open_events[key].pop()
            times = self.report.phase_times.setdefault(compile_id, {})
            times[name] = times.get(name, 0.0) + max(0.0, ts - started)

    # -- raw.jsonl and the record spool ------------------------------------------------------

    def _raw_jsonl(self, record: Record, payload_file: str | None) -> None:
        conflict = next((k for k in RAW_JSONL_KEYS if k in record.envelope), None)
        if conflict:
            self.context.problem(record, "fail_key_conflict", f"envelope already has `{conflict}`; left out of raw.jsonl")
            return
        line = dict(record.envelope)
        line.update(timestamp=record.timestamp, thread=record.pid, pathname=record.pathname, lineno=record.source_line)
        if payload_file is not None:
            line["payload_filename"] = payload_file
        data = _dumps(line)
        if data is None:
            self.context.problem(record, "fail_json_serialization", "record could not be written to raw.jsonl")
            return
        self.raw_body.write(data + b"\n")

    def _spool(self, record: Record, key: CompileId | None, payload_file: str | None, urls: list[dict[str, Any]]) -> None:
        summary = {
            "line": record.lineno,
            "kinds": record.kinds,
            "meta": {kind: record.envelope[kind] for kind in record.kinds},
            "context": {k: record.envelope[k] for k in ("subgraph_name", "rank") if k in record.envelope},
            "payload": payload_file,
            "payload_bytes": len(record.payload) if record.payload is not None else None,
            "outputs": urls,
        }
        data = _dumps(summary)
        if data is None:
            data = _dumps({**summary, "meta": {kind: repr(record.envelope[kind])[:2000] for kind in record.kinds}}) or b"{}"
        offsets = self.report.record_offsets.get(key)
        if offsets is None:
            offsets = self.report.record_offsets[key] = array("Q")
        offsets.append(self.spool.tell())
        self.spool.write(data + b"\n")

    def spooled_records(self, key: CompileId | None) -> list[dict[str, Any]]:
        """The summaries of one compile id's records, read back from the spool."""
        records = []
        for offset in self.report.record_offsets.get(key, ()):
            self.spool.seek(offset)
            records.append(_loads(self.spool.readline()))
        self.spool.seek(0, 2)
        return records

    # -- the end -----------------------------------------------------------------------------

    def _deferred_jobs(self) -> list[Callable[[], None]]:
        """Code pages, to render now that their highlighting has run alongside the reading."""

        def job(url: str, template: str, context: dict[str, Any], raw: str, lang: str) -> Callable[[], None]:
            def render_page() -> None:
                text = (self.writer.read(raw) or b"").decode("utf-8", "replace")
                context["lines"] = self.highlighter.lines(text, lang)
                self._write_page(url, url, template, lambda: context)

            return render_page

        jobs = [job(*item) for item in self.deferred]
        self.deferred.clear()
        return jobs

    def _write_page(self, url: str, what: str, template: str, make_context: Callable[[], dict[str, Any]]) -> None:
        """Render and write one page; one that cannot be built is replaced by a page saying why."""
        try:
            self.writer.write(url, render(template, make_context()))
        except OSError:
            raise
        except Exception as exc:  # a page that cannot be built must not cost the report
            self._page_failed(url, what, exc)

    def _compile_page_jobs(self, keys: list[CompileId | None], page_builder: PageBuilder) -> list[Callable[[], None]]:
        def job(position: int, key: CompileId | None) -> Callable[[], None]:
            def context() -> dict[str, Any]:
                return pages.compile_context(self.report, keys, position, self.spooled_records(key), page_builder)

            return lambda: self._write_page(self.report.pages[key], pages.label(key), "compile.html.j2", context)

        return [job(position, key) for position, key in enumerate(keys)]

    def _render_in_parallel(self, jobs: list[Callable[[], None]]) -> None:
        """Run page jobs in this process and a forked one (every other job each).

        Pages are independent once reading is done, and a fork shares the whole report without
        copying it. If the child fails, its share is done here; pages it could not build are
        reported back through a pipe. Small reports, and systems without fork, stay in one process.
        """
        if len(jobs) < PARALLEL_PAGES or not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
            for job in jobs:
                job()
            return
        self.highlighter.drain()
        reader_fd, writer_fd = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: build the odd pages, report failures, exit without cleanup
            code = 1
            try:
                os.close(reader_fd)
                self._become_page_child()
                for job in jobs[1::2]:
                    job()
                os.write(writer_fd, json.dumps(self.child_failures).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(writer_fd)
        for job in jobs[0::2]:
            job()
        with os.fdopen(reader_fd, "rb") as pipe:
            reported = pipe.read()
        _, status = os.waitpid(pid, 0)
        if status != 0:
            for job in jobs[1::2]:
                job()
            return
        for _url, what, detail in json.loads(reported or b"[]"):
            self._count_page_failure(what, detail)

    def _become_page_child(self) -> None:
        """Private read handles on the spool files (a file offset is shared across fork)."""
        self.child_failures = []
        self.spool = private_reader(self.spool)
        self.highlighter.spool = private_reader(self.highlighter.spool)
        self.highlighter.store = False

    def finish(self, logs: list[Path]) -> None:
        self.chromium.write(b"\n]" if self.report.chromium_events else b"]")
        self.chromium.close()
        self._write_raw_jsonl()
        self._write_raw_log(logs)
        self.writer.write("compile_directory.json", compile_directory_json(self.report))
        self._write_static()
        for key in self.report.directory:
            self.report.pages[key] = pages.compile_page_url(key)
        keys = list(self.report.directory)
        page_builder = PageBuilder(self.report, self.writer.read, self.highlighter, inline_budget=self.options.inline_mb * 1e6)
        page_builder.plan_inline(keys, self.spooled_records)
        self._render_in_parallel(self._deferred_jobs() + self._compile_page_jobs(keys, page_builder))
        if self.options.provenance:
            self._write_provenance_pages(keys)
        self.writer.write("failures_and_restarts.html", render("failures.html.j2", pages.failures_context(self.report)))
        self.writer.write("index.html", render("index.html.j2", pages.index_context(self.report)))
        self.spool.close()

    def _page_failed(self, url: str, what: str, exc: Exception) -> None:
        """Count and show a page we could not build, and put a page saying so in its place."""
        detail = f"{type(exc).__name__}: {exc}"
        if self.child_failures is not None:
            self.child_failures.append((url, what, detail))
        else:
            self._count_page_failure(what, detail)
        context = pages.base_context(self.report, f"Page of {what}", root="../" * url.count("/"))
        context.update(what=what, detail=detail)
        self.writer.write(url, render("page_error.html.j2", context))

    def _count_page_failure(self, what: str, detail: str) -> None:
        self.report.stats.add("fail_parser")
        self.report.diagnostics.add(self.label, 0, f"could not build the page of {what}", detail, HINTS["fail_parser"])

    def _write_provenance_pages(self, keys: list[CompileId | None]) -> None:
        """provenance_tracking_<dir>.html for every compile id (as tlparse names them)."""
        for key in keys:
            url = pages.provenance_page_url(key)
            try:
                context = provenance.page_context(self.report.directory[key], self.writer.read)
                context.update(pages.base_context(self.report, f"Provenance {pages.label(key)}"))
                context.update(compile_id=key, compile_page=pages.compile_page_url(key))
                self.report.provenance_pages.append((key, url, context["has_data"]))
                self.writer.write(url, render("provenance.html.j2", context))
            except OSError:
                raise
            except Exception as exc:
                self.report.provenance_pages.append((key, url, False))
                self._page_failed(url, f"provenance of {pages.label(key)}", exc)

    def _write_raw_jsonl(self) -> None:
        with self.writer.open("raw.jsonl") as out:
            out.write(orjson.dumps({"string_table": self.report.strings.as_list()}) + b"\n")
            self.raw_body.seek(0)
            shutil.copyfileobj(self.raw_body, out, 1 << 20)
        self.raw_body.close()

    def _write_raw_log(self, logs: list[Path]) -> None:
        """raw.log: the log itself (un-gzipped), byte for byte; several logs are concatenated."""
        self.writer.copy_logs(logs, "raw.log", self.options.limits)

    def _write_static(self) -> None:
        write_static(self.writer)


def private_reader(handle: Any) -> Any:
    """A read handle on the same temporary file with its own offset (in memory: already private)."""
    if isinstance(handle, tempfile.SpooledTemporaryFile) and not getattr(handle, "_rolled", False):
        return handle
    return open(f"/proc/self/fd/{handle.fileno()}", "rb")


def write_static(writer: FolderWriter) -> None:
    """The shared stylesheet, scripts and Pygments colours every page links to."""
    for item in sorted(STATIC_DIR.iterdir()):
        if item.is_file():
            writer.write(f"static/{item.name}", item.read_bytes())
    writer.write("static/pygments.css", pygments_css())


def compile_directory_json(report: Report) -> bytes:
    """compile_directory.json with tlparse's schema: sorted keys, 2-space indent, raw UTF-8."""
    data = {
        ("unknown" if key is None else str(key)): {"artifacts": [a.to_json() for a in entries]}
        for key, entries in report.directory.items()
    }
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False).encode("utf-8")


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def _dumps(value: Any) -> bytes | None:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        try:  # integers beyond 64 bits: the standard library copes
            return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False, default=repr).encode()
        except (TypeError, ValueError):
            return None


def build_report(
    logs: list[Path],
    writer: FolderWriter,
    stats: Stats,
    diagnostics: DiagnosticLog,
    options: Options,
    source: InputInfo,
    on_rank: Any = None,
    progress: Any = None,
) -> Report:
    """Read the logs (usually one) and write the whole report into the writer's folder.

    `progress(bytes_read, records)` is called now and then while reading (for a progress bar).

    Several logs share one string table: draft_export's capture file uses file-name ids that only
    the main log of the same process defines.
    """
    strings = StringTable()
    report = Report(
        source=source,
        stats=stats,
        diagnostics=diagnostics,
        strings=strings,
        plain_text=options.plain_text,
        custom_header_html=options.custom_header_html,
        export_mode=options.export,
    )
    builder = ReportBuilder(report, writer, options)
    try:
        for log in logs:
            reader = LogReader(log, stats, diagnostics, strings=strings, limits=options.limits)
            reader.on_rank_detected = on_rank
            for count, record in enumerate(reader.records(), start=1):
                builder.add(record)
                if progress is not None and count % 2000 == 0:
                    progress(reader.scanned_bytes(), report.records)
            if report.rank is None:
                report.rank = reader.expected_rank
        builder.finish(logs)
    finally:
        builder.highlighter.close()
    return report


def write_report(
    log: Path | list[Path],
    out: Path,
    *,
    overwrite: bool = False,
    options: Options | None = None,
    source: InputInfo | None = None,
    echo: Any = None,
    on_rank: Any = None,
    progress: Any = None,
) -> Report:
    """Read `log` and write its report to `out`, all or nothing (the library entry point).

    Raises OutputError before any work if `out` cannot be used, OSError if writing fails; in both
    cases an existing report at `out` is left as it was.
    """
    logs = log if isinstance(log, list) else [log]
    writer = ReportWriter(out, overwrite)
    stats = Stats()
    diagnostics = DiagnosticLog(echo=echo)
    if source is None:
        source = InputInfo(str(logs[0]), logs[0].stat().st_size, also=[p.name for p in logs[1:]])
    try:
        report = build_report(logs, writer, stats, diagnostics, options or Options(), source, on_rank, progress)
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    return report
