"""Numbered outputs, named as tlparse names them, and the files every report holds besides its pages.

`Outputs.emit` gives an output its global number and file name (tlparse 0.4.3 parity) and lists it
in the compile directory while the log is read; a payload is written at once, a page is noted in
the `PageSpool` and built once the analysis is complete (`views.pages.PAGE_VIEWS`). The payload
store keeps each distinct payload once under `payloads/`. `RecordSpool` keeps typed per-record
summaries for the compile pages; `RawJsonl` writes raw.jsonl; `compile_directory_json` the directory.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import pickle
import re
import shutil
import struct
import tempfile
from array import array
from collections import Counter, deque
from collections.abc import Callable, Iterator
from typing import IO, Any

import msgspec
import orjson

from ..analysis.facts import NOT_JSON, strict_json
from ..analysis.files import Files
from ..analysis.kinds import GLOBAL, LINK, PAYLOAD, PLACED, REFORMAT, Output, ParseContext
from ..analysis.store import Store, subgraph_of
from ..limits import PAGE_RECORDS_PER_KIND
from ..model import Artifact, CompileId, Record, RecordSummary, cache_suffix
from ..paths import numbered, safe_relpath
from ..reading.raw_line import PAYLOAD_KEY, RAW_JSONL_KEYS, joined, raw_line
from .highlight import Highlighter
from .views.pages import PendingPage
from .fileio import GatheredWrites
from .folder_writer import FolderWriter

MD5_HEX = re.compile(r"[0-9a-f]{32}")
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

    WRITE_BYTES = 1 << 15  # pages are gathered and written this much at a time, not one call a page

    def __init__(self, handle: IO[bytes]):
        self.handle = handle
        self.where = array("Q")  # (offset, size) of each page, flattened
        self.end = handle.tell()  # where the next page goes (reads leave the position at the end: read_at)
        self.gathered = GatheredWrites(handle, self.WRITE_BYTES)  # the pages not yet written end at self.end

    # A page is kept as msgpack (a metrics page's whole record is a few times faster to write and
    # read back than pickled: at 10,000s of small compiles, a tenth of the reading), its data being
    # JSON a log held; one that does not encode (an int past 64 bits, a lone surrogate) is pickled.
    # The first byte says which.
    _ENCODE = msgspec.msgpack.Encoder().encode
    _DECODE = msgspec.msgpack.Decoder(PendingPage).decode

    def add(self, page: PendingPage) -> None:
        try:
            data = b"m" + self._ENCODE(page)
        except (TypeError, OverflowError, UnicodeEncodeError, ValueError):
            data = b"p" + pickle.dumps(page, pickle.HIGHEST_PROTOCOL)
        self.where.extend((self.end, len(data)))
        self.gathered.write(data)
        self.end += len(data)

    def __len__(self) -> int:
        return len(self.where) // 2

    def flush(self) -> None:
        """Everything added, in the file: before a fork, whose child reads through a handle of its own."""
        self.gathered.flush()
        self.handle.flush()

    def get(self, index: int) -> PendingPage:
        offset, size = self.where[2 * index], self.where[2 * index + 1]
        self.flush()
        data = read_at(self.handle, offset, size)
        if data[:1] == b"m":
            page: PendingPage = self._DECODE(memoryview(data)[1:])
        else:
            page = pickle.loads(memoryview(data)[1:])  # noqa: S301 - written by this process, just above
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

    def note_compile_id(self, key: CompileId | None) -> None:
        """A record of `key`: the compile id is listed in the directory from its first record on (its
        files past the first PAGE_FILES are spooled: `analysis.files`)."""
        listed = key in self.analysis.directory
        if not listed:
            self.analysis.note_first_read(key)
            self.analysis.directory[key] = Files(self.analysis.facts)
        self.analysis.note_attempt_read(key, listed)

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
                self.highlighter.request(record.payload_text, data["lang"])
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


def read_at(handle: IO[bytes], offset: int, size: int) -> bytes:
    """`size` bytes at `offset` of a scratch file, its position left where it was (at its end, for
    the next write): a spool still in memory is read there; one on disk by one pread, which neither
    moves nor shares a file offset (safe in a forked page builder too) and costs one system call, not
    the seek and read of the spooled file's Python wrapper."""
    if isinstance(handle, tempfile.SpooledTemporaryFile) and not getattr(handle, "_rolled", False):
        handle.seek(offset)
        data = handle.read(size)
        handle.seek(0, 2)
        return data
    return os.pread(handle.fileno(), size, offset)


class RecordSpool:
    """Typed record summaries, spooled while reading and read back one compile id at a time.

    Each summary is written after a header that says where the id's previous one lies, so the spool
    keeps one number per compile id (where its latest summary lies), not one per record: an id with
    millions of records costs no more memory than an id with one. `records` walks the chain back.
    """

    HEADER = struct.Struct("<QQ")  # the id's previous entry: its offset + 1 (0: none), and its size
    SIZE_BITS = 40  # an entry's place, packed in one int: offset << SIZE_BITS | size

    WRITE_BYTES = 1 << 15  # entries are gathered and written this much at a time, not one call a record
    READ_BACK = 1 << 14  # bytes read at once when an id's records are read back: one call for a small compile's all

    def __init__(self, handle: IO[bytes], generation_of: Callable[[CompileId | None, int], int] | None = None):
        self.handle = handle
        self.last: dict[CompileId | None, int] = {}  # compile id → its latest entry, packed (offset, size)
        self.generation_of = generation_of  # (key, log line) → the generation the record belongs to
        # where the next entry goes: kept here, as tell() on a spooled file costs a system call a record
        self.end = handle.tell()
        self.gathered = GatheredWrites(handle, self.WRITE_BYTES)  # the entries not yet written end at self.end

    # An entry is the summary as JSON with sorted keys (NaN as null), as orjson writes it, but encoded
    # from the summary and decoded into one by msgspec, in C: building a dict of the summary to encode,
    # and a summary of the dict decoded, cost as much again (0.38 against 0.16 s to encode the 73,829
    # records of 10,000 small compiles). Where msgspec cannot (a lone surrogate in a text), the same
    # layout goes through `dumps`, and is read back through `loads`.
    _ENCODE = msgspec.json.Encoder(order="sorted").encode
    _DECODE = msgspec.json.Decoder(RecordSummary).decode

    def add(self, key: CompileId | None, summary: RecordSummary) -> None:
        try:
            data: bytes | None = self._ENCODE(summary)
        except (UnicodeEncodeError, TypeError, ValueError, OverflowError):
            data = dumps(msgspec.to_builtins(summary))
        if data is None:
            summary.meta = {kind: repr(value)[:2000] for kind, value in summary.meta.items()}
            data = dumps(msgspec.to_builtins(summary)) or b"{}"
        previous, offset = self.last.get(key), self.end
        if previous is None:
            header = self.HEADER.pack(0, 0)
        else:
            header = self.HEADER.pack((previous >> self.SIZE_BITS) + 1, previous & ((1 << self.SIZE_BITS) - 1))
        self.gathered.write(header, data)
        self.end += len(header) + len(data)
        self.last[key] = offset << self.SIZE_BITS | (len(header) + len(data))

    def flush(self) -> None:
        self.gathered.flush()
        self.handle.flush()  # what `read_at` reads is in the file, not in the handle's buffer

    def records(self, key: CompileId | None, per_kind: int = PAGE_RECORDS_PER_KIND) -> SpooledRecords:
        """The id's record summaries in log order, at most `per_kind` of each kind per generation (a
        page never holds more: memory stays flat however many records one id logged)."""
        self.flush()
        few = self._few_records(key, per_kind)
        if few is not None:
            return few
        kept: dict[tuple[int, str], deque[tuple[int, Any]]] = {}  # (generation, kind) → its first records
        seen: Counter[tuple[int, str]] = Counter()
        first_left_out: dict[tuple[int, str], int] = {}  # where the first record past the bound lies
        for offset, summary in self._entries(key):
            line, kinds = summary.line, summary.kinds or ["(no kind)"]
            place = (self.generation_of(key, line) if self.generation_of is not None else 0, kinds[0])
            seen[place] += 1
            first = kept.get(place)
            if first is None:
                first = kept[place] = deque(maxlen=per_kind)
            if len(first) == first.maxlen:  # full: the record it pushes out (or this one, for a bound of 0) is past the bound
                first_left_out[place] = first[-1][0] if first else offset
            first.appendleft((offset, summary))
        first_records = sorted((item for first in kept.values() for item in first), key=lambda item: item[0])  # back in log order
        records = SpooledRecords(summary for _, summary in first_records)
        records.omitted = Counter()
        for place in sorted(first_left_out, key=first_left_out.__getitem__):  # in log order, as they were met
            records.omitted[place] = seen[place] - len(kept[place])
        return records

    def _few_records(self, key: CompileId | None, per_kind: int) -> SpooledRecords | None:
        """`records` of an id with at most `per_kind` records in all (most ids: a small compile logs
        a few), where no kind can pass the bound; None for an id with more."""
        entries: list[RecordSummary] = []
        for _, summary in self._entries(key):
            if len(entries) == per_kind:
                return None
            entries.append(summary)
        records = SpooledRecords(reversed(entries))  # back in log order
        records.omitted = Counter()
        return records

    def _entries(self, key: CompileId | None) -> Iterator[tuple[int, RecordSummary]]:
        """The id's entries, (offset, summary), from its latest back to its first."""
        mask = (1 << self.SIZE_BITS) - 1
        entry = self.last.get(key)
        window, window_start = b"", 0  # the spool bytes read last: an id's records mostly lie close together
        while entry is not None:
            offset, size = entry >> self.SIZE_BITS, entry & mask
            if not (window_start <= offset and offset + size <= window_start + len(window)):
                # one read for this entry and the READ_BACK bytes before it, where its earlier ones likely are
                window_start = max(0, offset + size - max(size, self.READ_BACK))
                window = read_at(self.handle, window_start, offset + size - window_start)
            start = offset - window_start
            previous, previous_size = self.HEADER.unpack_from(window, start)
            yield offset, self._decoded(window[start + self.HEADER.size : start + size])
            entry = ((previous - 1) << self.SIZE_BITS | previous_size) if previous else None


    @classmethod
    def _decoded(cls, data: bytes) -> RecordSummary:
        try:
            return cls._DECODE(data)
        except msgspec.DecodeError:  # written by `dumps` (`add`): a lone surrogate's escape
            return msgspec.convert(loads(data), RecordSummary)


class RawJsonl:
    """raw.jsonl: the string table, then every record's envelope with tlparse's extra keys."""

    WRITE_BYTES = 1 << 15  # lines are gathered and written this much at a time, not one call a record

    def __init__(self, handle: IO[bytes], problem: Callable[[Record, str | None, str], None]):
        self.body = handle
        self.problem = problem
        self.gathered = GatheredWrites(handle, self.WRITE_BYTES)

    def add(self, record: Record, payload_file: str | None) -> None:
        # the line as a scanning child encoded it, the payload file's name put in (`reading.raw_line`)
        data = joined(record.raw_pieces, payload_file) if record.raw_pieces is not None else None
        if data is None:
            data = self._encoded(record, payload_file)
            if data is None:
                return
        self.gathered.write(data, b"\n")

    def _encoded(self, record: Record, payload_file: str | None) -> bytes | None:
        """The record's line encoded here; None (a counted problem) when it cannot be written."""
        line = raw_line(record.envelope, record.timestamp, record.pid, record.pathname, record.source_line)
        if line is None:
            conflict = next(k for k in RAW_JSONL_KEYS if k in record.envelope)
            self.problem(record, "fail_key_conflict", f"envelope already has `{conflict}`; left out of raw.jsonl")
            return None
        if payload_file is not None:
            line[PAYLOAD_KEY] = payload_file
        data = dumps(line)
        if data is None:
            self.problem(record, "fail_json_serialization", "record could not be written to raw.jsonl")
        return data

    def write(self, writer: FolderWriter, strings: list[str | None]) -> None:
        self.gathered.flush()
        with writer.open("raw.jsonl") as out:
            out.write(orjson.dumps({"string_table": strings}) + b"\n")
            self.body.seek(0)
            shutil.copyfileobj(self.body, out, 1 << 20)
        self.body.close()


DIRECTORY_BATCH = 1000  # entries encoded at a time: one compile id may hold millions


def compile_directory_json(analysis: Store) -> bytes:
    """compile_directory.json with tlparse's schema: sorted keys, 2-space indent, raw UTF-8."""
    try:
        return b"".join(_directory_pieces(analysis))
    except (TypeError, orjson.JSONEncodeError):  # integers beyond 64 bits, lone surrogates
        return _directory_by_json(analysis)


def write_compile_directory(writer: FolderWriter, analysis: Store) -> None:
    """compile_directory.json (the same bytes), written a batch of entries at a time: they are never
    all in memory at once."""
    with writer.open("compile_directory.json") as out:
        try:
            for piece in _directory_pieces(analysis):
                out.write(piece)
        except (TypeError, orjson.JSONEncodeError):
            out.seek(0)
            out.truncate()
            out.write(_directory_by_json(analysis))


def _directory_names(analysis: Store) -> dict[str, list[Artifact]]:
    return {("unknown" if key is None else str(key)): entries for key, entries in analysis.directory.items()}


def _directory_pieces(analysis: Store) -> Iterator[bytes]:
    """The bytes orjson writes for the whole directory (OPT_INDENT_2 | OPT_SORT_KEYS: orjson is 20 times
    faster than the standard library, and a log may hold 100,000s of compile ids), in pieces."""
    by_name = _directory_names(analysis)
    if not by_name:
        yield b"{}"
        return
    yield b"{\n"
    for position, name in enumerate(sorted(by_name)):
        yield (b",\n" if position else b"") + b"  " + orjson.dumps(name) + b': {\n    "artifacts": '
        entries = by_name[name]
        if not entries:
            yield b"[]\n  }"
            continue
        yield b"[\n"
        batch: list[dict[str, Any]] = []
        first = True
        for artifact in itertools.chain(entries, (None,)):
            if artifact is not None:
                batch.append(artifact.to_json())
                if len(batch) < DIRECTORY_BATCH:
                    continue
            if batch:
                text = orjson.dumps(batch, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
                # "[\n  {...},\n  {...}\n]": its items, four spaces deeper (no JSON string holds a newline)
                yield (b"" if first else b",\n") + b"    " + text[2:-2].replace(b"\n", b"\n    ")
                first, batch = False, []
        yield b"\n    ]\n  }"
    yield b"\n}"


def _directory_by_json(analysis: Store) -> bytes:
    data = {name: {"artifacts": [a.to_json() for a in entries]} for name, entries in _directory_names(analysis).items()}
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
