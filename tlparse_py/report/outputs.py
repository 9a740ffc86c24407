"""Numbered outputs, named as tlparse names them, and the files every report holds besides its pages.

`Outputs.emit` gives an output its global number and file name (tlparse 0.4.3 parity) and lists it
in the compile directory while the log is read; a payload is written at once, a page is noted in
the `PageSpool` and built once the analysis is complete (`views.pages.PAGE_VIEWS`). The payload
store keeps each distinct payload once under `payloads/`. `RecordSpool` keeps typed per-record
summaries for the compile pages; `RawJsonl` writes raw.jsonl; `compile_directory_json` the directory.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import re
import shutil
from array import array
from collections import Counter
from collections.abc import Callable, Iterator
from typing import IO, Any

import orjson

from ..analysis.facts import NOT_JSON, strict_json
from ..analysis.kinds import GLOBAL, LINK, PAYLOAD, PLACED, REFORMAT, Output, ParseContext
from ..analysis.store import Store, subgraph_of
from ..limits import PAGE_RECORDS_PER_KIND
from ..model import Artifact, CompileId, Record, RecordSummary, cache_suffix
from ..paths import numbered, safe_relpath
from .highlight import Highlighter
from .views.pages import PendingPage
from .writer import FolderWriter

MD5_HEX = re.compile(r"[0-9a-f]{32}")
RAW_JSONL_KEYS = ("timestamp", "thread", "pathname", "lineno", "payload_filename")
STACK_TRACES_PREFIX = "inductor_provenance_tracking_kernel_stack_traces"


def payload_path(record: Record) -> str:
    """Where the raw payload of a record lives: `payloads/<md5>.txt` (md5 from the envelope, if sane)."""
    md5 = record.payload_md5 if record.payload_md5 and MD5_HEX.fullmatch(record.payload_md5) else None
    if md5 is None:
        md5 = hashlib.md5(record.payload or b"").hexdigest()
    return f"payloads/{md5}.txt"


class PayloadStore:
    """Each distinct payload written once, read back through here (never by opening report files)."""

    def __init__(self, writer: FolderWriter):
        self.writer = writer
        self.written: set[str] = set()

    def put(self, record: Record) -> str:
        path = payload_path(record)
        if path not in self.written:
            self.writer.write_behind(path, record.payload or b"")
            self.written.add(path)
        return path

    def get(self, path: str) -> bytes | None:
        return self.writer.read(path)


class PageSpool:
    """Pages asked for while reading, kept in a temporary file until the analysis is complete: a log
    may ask for 100,000s, each with its record's metadata."""

    def __init__(self, handle: IO[bytes]):
        self.handle = handle
        self.where = array("Q")  # (offset, size) of each page, flattened

    def add(self, page: PendingPage) -> None:
        data = pickle.dumps(page, pickle.HIGHEST_PROTOCOL)
        self.handle.seek(0, 2)
        self.where.extend((self.handle.tell(), len(data)))
        self.handle.write(data)

    def __len__(self) -> int:
        return len(self.where) // 2

    def get(self, index: int) -> PendingPage:
        offset, size = self.where[2 * index], self.where[2 * index + 1]
        self.handle.seek(offset)
        page: PendingPage = pickle.loads(self.handle.read(size))
        return page

    def __iter__(self) -> Iterator[PendingPage]:
        return (self.get(i) for i in range(len(self)))


class Outputs:
    """Numbers and names the outputs parsers ask for; writes payloads, notes pages for later."""

    def __init__(self, analysis: Store, writer: FolderWriter, ctx: ParseContext, highlighter: Highlighter):
        self.analysis = analysis
        self.writer = writer
        self.ctx = ctx
        self.highlighter = highlighter
        self.counter = 0
        self.pending = PageSpool(writer.scratch())  # pages, built once the analysis is complete
        self.global_files: set[str] = set()  # pages written at fixed paths (dump_file sources)
        self.pages = True  # False: number and list outputs, write nothing (analysis only)

    def next_number(self) -> int:
        number = self.counter
        self.counter += 1
        return number

    def emit(self, output: Output, record: Record, key: CompileId | None, folder: str) -> str:
        """Number one output, write it (or note its page), list it in the directory; return its url."""
        number = self.ctx.number = self.next_number()
        entries = self.analysis.directory[key]
        if output.kind == LINK:
            entries.append(Artifact(url=output.url, name=output.name, number=number, kind=self.ctx.current_kind, is_link=True,
                                    subgraph=subgraph_of(record)))
            return output.url
        url = self._url(output, number, folder)
        artifact = Artifact(url=url, name=url.rpartition("/")[2], number=number, suffix=cache_suffix(url), kind=self.ctx.current_kind,
                            subgraph=subgraph_of(record))
        if output.kind in (PAYLOAD, REFORMAT):
            artifact.raw = url
        elif record.payload:
            artifact.raw = payload_path(record)  # written after the parsers (see Pipeline.add)
        if artifact.name.startswith(STACK_TRACES_PREFIX) and artifact.name.endswith(".json"):
            # tlparse gives the readable companion its own number, but only when the payload is JSON
            artifact.readable_url = self._stack_traces_companion(record, url)
        if self.pages:
            self._write(output, record, url)
        entries.append(artifact)
        if self.analysis.vllm.active:  # vLLM's pieces own the files written while they compile
            self.analysis.vllm.output(url, self.ctx.current_kind)
        if output.on_written is not None:
            output.on_written(url)
        return url

    def _url(self, output: Output, number: int, folder: str) -> str:
        if output.kind == PLACED:  # named as upstream tlparse names it; the number is spent all the same
            return f"{folder}/{safe_relpath(output.name)}"
        if output.kind != GLOBAL:
            return f"{folder}/{numbered(output.name, number)}"
        url = safe_relpath(output.name)
        if url in self.global_files:  # tlparse overwrites the first one; keep both
            url = numbered(url, number)
        self.global_files.add(url)
        return url

    def _write(self, output: Output, record: Record, url: str) -> None:
        payload = record.payload or b""
        if output.kind == PAYLOAD:
            self.writer.write_behind(url, payload)
        elif output.kind == REFORMAT:
            assert output.reformat is not None
            self.writer.write_behind(url, output.reformat(payload))
        else:
            data = output.data or {}
            if output.view == "code":  # highlighted beside the reading, rendered at the end
                self.highlighter.request(record.payload_text(), data["lang"])
            self._pend(url, output.view, data, record)

    def _pend(self, url: str, view: str, data: dict[str, Any], record: Record) -> None:
        payload = payload_path(record) if record.payload is not None else None
        self.pending.add(PendingPage(url, view, data, record.compile_id, self.ctx.current_kind, record.lineno, payload))

    def _stack_traces_companion(self, record: Record, url: str) -> str:
        """The `*_readable.html` page of a kernel-stack-traces JSON; its url, or "" when there is none.

        tlparse 0.4.3 makes the page, and spends a number on it, exactly when the payload parses as
        JSON (serde_json): any value, even `[]` or `null` (an empty page). A payload that does not
        parse, including the absent one torch logs on an FX-graph-cache hit, gets no page and no
        number, so the next output takes the very next number.
        """
        traces = strict_json(record.payload_text())
        if traces is NOT_JSON:
            return ""
        self.next_number()
        readable = url[: -len(".json")] + "_readable.html"
        if self.pages:
            self._pend(readable, "stack_traces", {"traces": traces if isinstance(traces, dict) else {}}, record)
        return readable


class SpooledRecords(list[RecordSummary]):
    """A compile id's record summaries as read back: at most PAGE_RECORDS_PER_KIND of each kind per
    generation; `omitted` counts the rest by (generation, kind)."""

    omitted: Counter[tuple[int, str]]


class RecordSpool:
    """Typed record summaries, spooled while reading and read back one compile id at a time."""

    def __init__(self, handle: IO[bytes], generation_of: Callable[[CompileId | None, int], int] | None = None):
        self.handle = handle
        self.offsets: dict[CompileId | None, int | array] = {}  # one record: its offset; more: an array
        self.generation_of = generation_of  # (key, log line) → the generation the record belongs to

    def add(self, key: CompileId | None, summary: RecordSummary) -> None:
        data = dumps(summary.to_json())
        if data is None:
            summary.meta = {kind: repr(value)[:2000] for kind, value in summary.meta.items()}
            data = dumps(summary.to_json()) or b"{}"
        offsets, offset = self.offsets.get(key), self.handle.tell()
        if offsets is None:  # most compile ids of a log with 100,000s of them hold one record
            self.offsets[key] = offset
        elif isinstance(offsets, int):
            self.offsets[key] = array("Q", (offsets, offset))
        else:
            offsets.append(offset)
        self.handle.write(data + b"\n")

    def records(self, key: CompileId | None, per_kind: int = PAGE_RECORDS_PER_KIND) -> SpooledRecords:
        """The id's record summaries in log order, at most `per_kind` of each kind per generation (a
        page never holds more: memory stays flat however many records one id logged)."""
        records = SpooledRecords()
        records.omitted = Counter()
        kept: Counter[tuple[int, str]] = Counter()
        offsets = self.offsets.get(key, ())
        for offset in (offsets,) if isinstance(offsets, int) else offsets:
            self.handle.seek(offset)
            data = loads(self.handle.readline())
            line, kinds = data.get("line", 0), data.get("kinds") or ["(no kind)"]
            place = (self.generation_of(key, line) if self.generation_of is not None else 0, kinds[0])
            if kept[place] >= per_kind:
                records.omitted[place] += 1
                continue
            kept[place] += 1
            records.append(RecordSummary.from_json(data))
        self.handle.seek(0, 2)
        return records


class RawJsonl:
    """raw.jsonl: the string table, then every record's envelope with tlparse's extra keys."""

    def __init__(self, handle: IO[bytes], problem: Callable[[Record, str | None, str], None]):
        self.body = handle
        self.problem = problem

    def add(self, record: Record, payload_file: str | None) -> None:
        conflict = next((k for k in RAW_JSONL_KEYS if k in record.envelope), None)
        if conflict:
            self.problem(record, "fail_key_conflict", f"envelope already has `{conflict}`; left out of raw.jsonl")
            return
        line = dict(record.envelope)
        line.update(timestamp=record.timestamp, thread=record.pid, pathname=record.pathname, lineno=record.source_line)
        if payload_file is not None:
            line["payload_filename"] = payload_file
        data = dumps(line)
        if data is None:
            self.problem(record, "fail_json_serialization", "record could not be written to raw.jsonl")
            return
        self.body.write(data + b"\n")

    def write(self, writer: FolderWriter, strings: list[str | None]) -> None:
        with writer.open("raw.jsonl") as out:
            out.write(orjson.dumps({"string_table": strings}) + b"\n")
            self.body.seek(0)
            shutil.copyfileobj(self.body, out, 1 << 20)
        self.body.close()


def compile_directory_json(analysis: Store) -> bytes:
    """compile_directory.json with tlparse's schema: sorted keys, 2-space indent, raw UTF-8."""
    data = {
        ("unknown" if key is None else str(key)): {"artifacts": [a.to_json() for a in entries]}
        for key, entries in analysis.directory.items()
    }
    try:  # orjson writes the same bytes, 20 times faster (a log may hold 100,000s of compile ids)
        return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):  # integers beyond 64 bits, lone surrogates
        return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False).encode("utf-8")


def loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def dumps(value: Any) -> bytes | None:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        try:  # integers beyond 64 bits: the standard library copes
            return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False, default=repr).encode()
        except (TypeError, ValueError, RecursionError):
            return None
