"""Bytes → records: the only module that knows how a TORCH_TRACE log is encoded.

A log is a sequence of glog-prefixed lines, each carrying one JSON envelope, optionally followed
by payload lines that start with a TAB (see ../shared/spec/torch-2.13-records.md §1). The reader
streams: it holds one line, plus the payload of the record being assembled, at a time.

Every problem is counted in `Stats`, described in the diagnostics, and skipped; nothing here raises
for bad input (an unreadable *file* is the caller's business).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from .model import COMPILE_ID_KEYS, CONTEXT_KEYS, CompileId, Diagnostic, Record, Stats

# The glog prefix torch writes: `V1202 12:14:23.064000 5351 torch/_dynamo/utils.py:2350] {...}`.
# Unlike tlparse we do not keep the space before the path, we allow a Windows drive letter in the
# path, and we escape the dot before the microseconds. `[rank0]:`-style prefixes of non-trace
# logs are tolerated by searching when the anchored match fails.
GLOG_PREFIX = re.compile(
    rb"(?P<level>[VIWEC])(?P<month>\d\d)(?P<day>\d\d) (?P<hour>\d\d):(?P<minute>\d\d):(?P<second>\d\d)\.(?P<micro>\d{6})"
    rb" (?P<pid>\d+) (?P<path>(?:[A-Za-z]:)?[^:\]]+):(?P<line>\d+)\](?P<extra>[^ ]*) "
)
MAX_ID = 2**32 - 1


class DiagnosticLog:
    """Problems found while reading, counted by kind; the first `limit` are kept with details."""

    def __init__(self, limit: int = 500, echo: Callable[[Diagnostic], None] | None = None):
        self.limit = limit
        self.kept: list[Diagnostic] = []
        self.total = 0
        self.echo = echo

    def add(self, path: str, lineno: int, problem: str, detail: str = "") -> None:
        self.total += 1
        diagnostic = Diagnostic(path, lineno, problem, detail[:300])
        if len(self.kept) < self.limit:
            self.kept.append(diagnostic)
        if self.echo is not None:
            self.echo(diagnostic)


class StringTable:
    """The `str` intern table of one log file (never shared between files or ranks)."""

    def __init__(self) -> None:
        self.strings: dict[int, str] = {}

    def add(self, value: Any) -> bool:
        if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)):
            return False
        index = value[1]
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index <= 10_000_000:
            return False
        self.strings[index] = value[0]
        return True

    def lookup(self, index: Any) -> str | None:
        if isinstance(index, str):
            return index
        return self.strings.get(index) if isinstance(index, int) else None

    def as_list(self) -> list[str | None]:
        """The table as tlparse writes it at the top of raw.jsonl (`[null]` when empty)."""
        size = max(self.strings, default=0) + 1
        return [self.strings.get(i) for i in range(size)]


def open_log(path: Path) -> IO[bytes]:
    """Open a log for binary reading, transparently un-gzipping `.gz` files (checked by magic bytes)."""
    handle = open(path, "rb")
    magic = handle.peek(2)[:2] if hasattr(handle, "peek") else b""
    if magic == b"\x1f\x8b":
        handle.close()
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return handle


def parse_envelope(data: bytes) -> tuple[Any, bool]:
    """Decode one JSON envelope. Returns (value, had_invalid_utf8); raises ValueError when it is not JSON.

    orjson is the fast path; Python's json is the fallback because torch writes `NaN`/`Infinity`
    (json.dumps' default) and logs may hold invalid UTF-8, both of which orjson refuses.
    """
    try:
        return orjson.loads(data), False
    except orjson.JSONDecodeError:
        pass
    text = data.decode("utf-8", "replace")
    bad_utf8 = "\ufffd" in text and b"\xef\xbf\xbd" not in data
    try:
        return json.loads(text), bad_utf8
    except (ValueError, RecursionError) as exc:
        raise ValueError(str(exc)[:200]) from None


def compile_id_of(envelope: dict[str, Any]) -> CompileId | None:
    """The record's compile id; None when an id field is present but not a small non-negative int."""
    parts = []
    for key in COMPILE_ID_KEYS:
        value = envelope.get(key)
        if value is not None and (type(value) is not int or not 0 <= value <= MAX_ID):
            return None
        parts.append(value)
    return CompileId(*parts)


class LogReader:
    """Streams the records of one log file.

    Usage: `for record in LogReader(path, stats, diagnostics).records(): ...`. `strings` holds the
    file's intern table afterwards; `records()` yields other-rank records too (flagged), because
    they still belong in raw.jsonl.
    """

    def __init__(
        self, path: Path, stats: Stats, diagnostics: DiagnosticLog, year: int | None = None, strings: StringTable | None = None
    ):
        self.path = path
        self.label = path.name
        self.stats = stats
        self.diagnostics = diagnostics
        self.strings = strings if strings is not None else StringTable()
        self.expected_rank: int | None = None
        self.bytes_read = 0
        self.year = year if year is not None else _file_year(path)
        self.on_rank_detected: Callable[[int], None] | None = None

    def _problem(self, counter: str | None, lineno: int, problem: str, detail: str = "") -> None:
        if counter:
            self.stats.add(counter)
        self.diagnostics.add(self.label, lineno, problem, detail)

    def records(self) -> Iterator[Record]:
        with open_log(self.path) as handle:
            yield from self._records(handle)

    def _records(self, handle: IO[bytes]) -> Iterator[Record]:
        lines = iter(handle)
        lineno = 0
        line = next(lines, None)
        while line is not None:
            lineno += 1
            self.bytes_read += len(line)
            line = _strip_eol(line)
            if not line:
                line = next(lines, None)
                continue
            if line[:1] == b"\t":
                # payload lines with no record before them
                first = lineno
                line, lineno, count = self._skip_payload(lines, lineno)
                self._problem("fail_orphan_payload", first, "payload lines with no record", f"{count + 1} line(s)")
                continue
            header = GLOG_PREFIX.match(line) or GLOG_PREFIX.search(line)
            if header is None:
                self._problem("fail_glog", lineno, "not a trace line (no glog prefix)", _snippet(line))
                line = next(lines, None)
                continue
            record_line = lineno
            envelope, problem = self._envelope(line[header.end() :], record_line)
            if envelope is None:
                self._problem("fail_json", record_line, "envelope is not a JSON object", problem)
                # its payload lines (if any) belong to the bad record: skip them silently
                line, lineno, _ = self._skip_payload(lines, lineno)
                continue
            if "str" in envelope:
                if not self.strings.add(envelope["str"]):
                    self._problem("fail_field_type", record_line, "malformed `str` record", _snippet(line))
                line, lineno, _ = self._skip_payload(lines, lineno)
                continue
            payload = None
            expected_md5 = None
            if "has_payload" in envelope:
                expected_md5 = envelope["has_payload"]
                line, lineno, payload = self._take_payload(lines, lineno)
                if not (isinstance(expected_md5, str) and hashlib.md5(payload).hexdigest() == expected_md5):
                    self._problem("fail_payload_md5", record_line, "payload md5 mismatch", f"expected {expected_md5!s:.40}")
                if not isinstance(expected_md5, str):
                    expected_md5 = str(expected_md5)
            else:
                line = next(lines, None)
                if line is not None and line[:1] == b"\t":
                    first = lineno + 1
                    line, lineno, count = self._skip_payload(lines, lineno, line)
                    self._problem(
                        "fail_orphan_payload", first, "payload lines after a record without has_payload", f"{count} line(s)"
                    )
            yield self._record(envelope, header, record_line, payload, expected_md5)

    def _envelope(self, data: bytes, lineno: int) -> tuple[dict[str, Any] | None, str]:
        try:
            value, bad_utf8 = parse_envelope(data)
        except ValueError as exc:
            return None, f"{exc}: {_snippet(data)}"
        if not isinstance(value, dict):
            return None, f"JSON {type(value).__name__}, not an object: {_snippet(data)}"
        if bad_utf8:
            self._problem("fail_utf8", lineno, "invalid UTF-8 in the envelope (replaced)")
        return value, ""

    def _take_payload(self, lines: Iterator[bytes], lineno: int) -> tuple[bytes | None, int, bytes]:
        """Consume the TAB lines after a header; return (next line, its number - 1, payload)."""
        parts = []
        line, lineno = self._next_skipping_blank(lines, lineno)
        while line is not None and line[:1] == b"\t":
            parts.append(_strip_eol(line)[1:])
            line, lineno = self._next_skipping_blank(lines, lineno)
        return line, lineno, b"\n".join(parts)

    def _next_skipping_blank(self, lines: Iterator[bytes], lineno: int) -> tuple[bytes | None, int]:
        """The next line, counted; blank lines in between are skipped (as tlparse does: a payload
        may be interrupted by stray empty lines, torch itself writes an empty payload line as a tab).

        Returns the line with the number of the line *before* it, as the main loop expects.
        """
        while True:
            line = next(lines, None)
            if line is None or line.strip(b"\r\n"):
                if line is not None and line[:1] == b"\t":
                    lineno += 1
                    self.bytes_read += len(line)
                return line, lineno
            lineno += 1
            self.bytes_read += len(line)

    def _skip_payload(
        self, lines: Iterator[bytes], lineno: int, line: bytes | None = None
    ) -> tuple[bytes | None, int, int]:
        """Skip TAB lines starting at `line` (or the next one); return (next line, lineno, count)."""
        count = 0
        if line is None:
            line, lineno = self._next_skipping_blank(lines, lineno)
        else:
            lineno += 1
            self.bytes_read += len(line)
        while line is not None and line[:1] == b"\t":
            count += 1
            line, lineno = self._next_skipping_blank(lines, lineno)
        return line, lineno, count

    def _record(
        self, envelope: dict[str, Any], header: re.Match[bytes], lineno: int, payload: bytes | None, md5: str | None
    ) -> Record:
        rank = envelope.get("rank")
        if type(rank) is not int:
            if rank is not None:
                self._problem("fail_field_type", lineno, "`rank` is not an integer", repr(rank)[:80])
            rank = None
        other = False
        if rank is not None:
            if self.expected_rank is None:
                self.expected_rank = rank
                if self.on_rank_detected:
                    self.on_rank_detected(rank)
            elif rank != self.expected_rank:
                other = True
        if other:
            self.stats.add("other_rank")
        else:
            self.stats.add("ok")
        g = header.group
        return Record(
            lineno=lineno,
            envelope=envelope,
            kinds=[key for key in envelope if key not in CONTEXT_KEYS],
            compile_id=compile_id_of(envelope),
            rank=rank,
            payload=payload,
            payload_md5=md5,
            timestamp=f"{self.year:04d}-{_s(g('month'))}-{_s(g('day'))}T{_s(g('hour'))}:{_s(g('minute'))}:{_s(g('second'))}.{_s(g('micro'))}Z",
            pid=int(g("pid")),
            pathname=g("path").decode("utf-8", "replace"),
            source_line=int(g("line")),
            other_rank=other,
        )


def _s(value: bytes) -> str:
    return value.decode("ascii")


def _strip_eol(line: bytes) -> bytes:
    if line.endswith(b"\n"):
        line = line[:-1]
    if line.endswith(b"\r"):
        line = line[:-1]
    return line


def _snippet(data: bytes, limit: int = 120) -> str:
    text = data[:limit].decode("utf-8", "replace")
    return text + ("…" if len(data) > limit else "")


def _file_year(path: Path) -> int:
    """glog lines carry no year; the log file's modification time is the best guess."""
    try:
        return time.gmtime(path.stat().st_mtime).tm_year
    except OSError:
        return time.gmtime().tm_year
