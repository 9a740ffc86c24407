"""Numbered outputs, named as tlparse names them, and the files every report holds besides its pages.

`Outputs.emit` gives an output its global number and file name (tlparse 0.4.3 parity), lists it in
the compile directory, and writes it (pages through `views.pages.PAGE_VIEWS`). The payload store
keeps each distinct payload once under `payloads/`. `RecordSpool` keeps typed per-record summaries
for the compile pages; `RawJsonl` writes raw.jsonl; `compile_directory_json` the directory.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from array import array
from collections.abc import Callable
from typing import IO, Any

import orjson

from ..analysis.kinds import GLOBAL, LINK, PAYLOAD, REFORMAT, Output, ParseContext
from ..model import Artifact, CompileId, Record, RecordSummary, cache_suffix
from ..paths import compile_page_url, numbered, safe_relpath
from .highlight import Highlighter
from .render import render
from ..analysis.store import Store
from .views import pages
from .writer import FolderWriter

MD5_HEX = re.compile(r"[0-9a-f]{32}")
RAW_JSONL_KEYS = ("timestamp", "thread", "pathname", "lineno", "payload_filename")
STACK_TRACES_PREFIX = "inductor_provenance_tracking_kernel_stack_traces"
DeferredPage = tuple[str, str, dict[str, Any], str, str]  # (url, template, context, payload path, language)


def payload_path(record: Record) -> str:
    """Where the raw payload of a record lives: `payloads/<md5>.txt` (md5 from the envelope, if sane)."""
    md5 = record.payload_md5 if record.payload_md5 and MD5_HEX.fullmatch(record.payload_md5) else None
    if md5 is None:
        md5 = hashlib.md5(record.payload or b"").hexdigest()
    return f"payloads/{md5}.txt"


NOT_JSON = object()
LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # paired escapes decode to one character; lone ones stay
SERDE_DEPTH_LIMIT = 128  # serde_json's recursion limit: 127 nested arrays/objects parse, 128 do not


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError("number out of range")
    return value


def _finite_int(text: str) -> int:
    value = int(text)
    if abs(value) >= 1 << 64 and float(text) in (float("inf"), float("-inf")):  # serde falls back to f64
        raise ValueError("number out of range")
    return value


def strict_json(text: str) -> Any:
    """`text` parsed as serde_json (tlparse) parses it, or NOT_JSON where serde_json would refuse it.

    Beyond the standard library's rules serde_json refuses NaN/Infinity, numbers beyond f64, lone
    UTF-16 surrogates in `\\u` escapes, and nesting 128 deep.
    """
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float, parse_int=_finite_int)
    except (ValueError, RecursionError, OverflowError):
        return NOT_JSON
    work: list[tuple[Any, int]] = [(value, 1)]
    while work:
        item, depth = work.pop()
        if isinstance(item, str):
            if LONE_SURROGATE.search(item):
                return NOT_JSON
        elif isinstance(item, (dict, list)):
            if depth >= SERDE_DEPTH_LIMIT:
                return NOT_JSON
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            work.extend((child, depth + 1) for child in children)
    return value


class PayloadStore:
    """Each distinct payload written once, read back through here (never by opening report files)."""

    def __init__(self, writer: FolderWriter):
        self.writer = writer
        self.written: set[str] = set()

    def put(self, record: Record) -> str:
        path = payload_path(record)
        if path not in self.written:
            self.writer.write(path, record.payload or b"")
            self.written.add(path)
        return path

    def get(self, path: str) -> bytes | None:
        return self.writer.read(path)


class Outputs:
    """Numbers, names, renders and writes the outputs parsers ask for."""

    def __init__(self, analysis: Store, writer: FolderWriter, ctx: ParseContext, highlighter: Highlighter):
        self.analysis = analysis
        self.writer = writer
        self.ctx = ctx
        self.highlighter = highlighter
        self.counter = 0
        self.deferred: list[DeferredPage] = []  # code pages, rendered once their highlighting has run
        self.pages = True  # False: number and list outputs, write nothing (analysis only)

    def next_number(self) -> int:
        number = self.counter
        self.counter += 1
        return number

    def emit(self, output: Output, record: Record, key: CompileId | None, folder: str) -> str:
        """Number one output, render/write it, list it in the directory; return its url."""
        number = self.ctx.number = self.next_number()
        entries = self.analysis.directory[key]
        if output.kind == LINK:
            entries.append(Artifact(url=output.url, name=output.name, number=number, kind=self.ctx.current_kind, is_link=True))
            return output.url
        url = self._url(output, number, folder)
        artifact = Artifact(url=url, name=url.rpartition("/")[2], number=number, suffix=cache_suffix(url), kind=self.ctx.current_kind)
        if output.kind in (PAYLOAD, REFORMAT):
            artifact.raw = url
        elif record.payload:
            artifact.raw = payload_path(record)  # written after the parsers (see Pipeline.add)
        if artifact.name.startswith(STACK_TRACES_PREFIX) and artifact.name.endswith(".json"):
            # tlparse gives the readable companion its own number, but only when the payload is JSON
            artifact.readable_url = self._stack_traces_companion(record, url)
        content = self._content(output, record, url) if self.pages else None
        if content is not None:
            self.writer.write(url, content)
        entries.append(artifact)
        if output.on_written is not None:
            output.on_written(url)
        return url

    def _url(self, output: Output, number: int, folder: str) -> str:
        if output.kind != GLOBAL:
            return f"{folder}/{numbered(output.name, number)}"
        url = safe_relpath(output.name)
        if url in self.analysis.global_files:  # tlparse overwrites the first one; keep both
            url = numbered(url, number)
        self.analysis.global_files.add(url)
        return url

    def _content(self, output: Output, record: Record, url: str) -> bytes | str | None:
        payload = record.payload or b""
        if output.kind == PAYLOAD:
            return payload
        if output.kind == REFORMAT:
            assert output.reformat is not None
            return output.reformat(payload)
        template, make_context = pages.PAGE_VIEWS[output.view]
        context = make_context(self.analysis, record, output.data or {})
        self._page_defaults(context, record, url)
        if output.view == "code":  # rendered at the end, once its highlighting has run beside the reading
            self.highlighter.request(record.payload_text(), context["lang"])
            context["raw_url"] = payload_path(record)
            self.deferred.append((url, template, context, payload_path(record), context["lang"]))
            return None
        return render(template, context)

    def _page_defaults(self, context: dict[str, Any], record: Record, url: str) -> None:
        context.setdefault("root", "../" * url.count("/"))
        context.setdefault("source", self.analysis.source)
        context.setdefault("title", self.ctx.current_kind)
        context.setdefault("compile_id", record.compile_id)
        context.setdefault("kind", self.ctx.current_kind)
        context.setdefault("lineno", record.lineno)
        context.setdefault("compile_page", compile_page_url(record.compile_id))

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
            context = pages.stack_traces_context(traces if isinstance(traces, dict) else {})
            self._page_defaults(context, record, readable)
            self.writer.write(readable, render("stack_traces.html.j2", context))
        return readable


class RecordSpool:
    """Typed record summaries, spooled while reading and read back one compile id at a time."""

    def __init__(self, handle: IO[bytes]):
        self.handle = handle
        self.offsets: dict[CompileId | None, int | array] = {}  # one record: its offset; more: an array

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

    def records(self, key: CompileId | None) -> list[RecordSummary]:
        records = []
        offsets = self.offsets.get(key, ())
        for offset in (offsets,) if isinstance(offsets, int) else offsets:
            self.handle.seek(offset)
            records.append(RecordSummary.from_json(loads(self.handle.readline())))
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
