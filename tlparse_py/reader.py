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

from .model import (
    COMPILE_ID_KEYS,
    CONTEXT_KEYS,
    HINTS,
    CompileId,
    Diagnostic,
    Record,
    Stats,
)

# The glog prefix torch writes: `V1202 12:14:23.064000 5351 torch/_dynamo/utils.py:2350] {...}`.
# Unlike tlparse we do not keep the space before the path, we allow a Windows drive letter in the
# path, and we escape the dot before the microseconds. `[rank0]:`-style prefixes of non-trace
# logs are tolerated by searching when the anchored match fails.
GLOG_PREFIX = re.compile(
    rb"(?P<level>[VIWEC])(?P<month>\d\d)(?P<day>\d\d) (?P<hour>\d\d):(?P<minute>\d\d):(?P<second>\d\d)\.(?P<micro>\d{6})"
    rb" (?P<pid>\d+) (?P<path>(?:[A-Za-z]:)?[^:\]]+):(?P<line>\d+)\](?P<extra>[^ ]*) "
)
MAX_ID = 2**32 - 1
MAX_DIGITS = 19  # a glog pid or line number longer than this is junk, and int() of thousands of digits raises
MIN_STRING_INDEX_BOUND = 1_000_000
STRING_INDEXES_PER_LINE = 16  # a `str` index beyond max(1M, 16 x lines read) would only inflate raw.jsonl


class DiagnosticLog:
    """Problems found while reading, counted by kind; the first `limit` are kept with details."""

    def __init__(self, limit: int = 500, echo: Callable[[Diagnostic], None] | None = None):
        self.limit = limit
        self.kept: list[Diagnostic] = []
        self.total = 0
        self.echo = echo

    def add(self, path: str, lineno: int, problem: str, detail: str = "", hint: str = "") -> None:
        self.total += 1
        diagnostic = Diagnostic(path, lineno, problem, detail[:300], hint)
        if len(self.kept) < self.limit:
            self.kept.append(diagnostic)
        if self.echo is not None:
            self.echo(diagnostic)


class StringTable:
    """The `str` intern table of one log file (never shared between files or ranks)."""

    def __init__(self) -> None:
        self.strings: dict[int, str] = {}

    def add(self, value: Any, lines_read: int = 0) -> str:
        """Intern `value` (`["text", index]`); the reason it is refused, or "" when taken.

        raw.jsonl writes the table as a list up to the largest index, so one record naming index
        10,000,000 would write a 50 MB list of nulls: indexes are bounded by how much log was read
        (torch numbers strings from 0 as it meets them, a few per record at most).
        """
        if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)):
            return "malformed `str` record"
        index = value[1]
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            return "malformed `str` record"
        if index > max(MIN_STRING_INDEX_BOUND, lines_read * STRING_INDEXES_PER_LINE):
            return f"`str` index {_short_repr(index)} is far beyond the strings a log this long can define"
        self.strings[index] = value[0]
        return ""

    def lookup(self, index: Any) -> str | None:
        if isinstance(index, str):
            return index
        return self.strings.get(index) if isinstance(index, int) else None

    def as_list(self) -> list[str | None]:
        """The table as tlparse writes it at the top of raw.jsonl (`[null]` when empty)."""
        size = max(self.strings, default=0) + 1
        return [self.strings.get(i) for i in range(size)]


def is_gzip(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(2) == b"\x1f\x8b"
    except OSError:
        return False


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

    def scanned_bytes(self) -> int:
        """How far into the log reading is (bytes of log text)."""
        scanner = getattr(self, "_scanner", None)
        return scanner.bytes_read if scanner is not None else self.bytes_read

    def _problem(self, counter: str | None, lineno: int, problem: str, detail: str = "") -> None:
        if counter:
            self.stats.add(counter)
        self.diagnostics.add(self.label, lineno, problem, detail, HINTS.get(counter or "", ""))

    def records(self) -> Iterator[Record]:
        with open_log(self.path) as handle:
            yield from self._records(handle)

    def _records(self, handle: IO[bytes]) -> Iterator[Record]:
        lines = LineScanner(handle)
        self._scanner = lines
        while (line := lines.next_line()) is not None:
            if not line:
                continue
            if line[0] == TAB:
                first = lines.lineno
                _, count = lines.take_block()
                self._problem("fail_orphan_payload", first, "payload lines with no record", f"{count + 1} line(s)")
                continue
            header = GLOG_PREFIX.match(line) or GLOG_PREFIX.search(line)
            if header is None:
                self._problem("fail_glog", lines.lineno, "not a trace line (no glog prefix)", _snippet(line))
                continue
            record_line = lines.lineno
            envelope, problem = self._envelope(line[header.end() :], record_line)
            if envelope is None:
                self._problem("fail_json", record_line, "envelope is not a JSON object", problem)
                lines.take_block()  # its payload lines (if any) belong to the bad record: skip them
                continue
            if "str" in envelope:
                refused = self.strings.add(envelope["str"], lines.lineno)
                if refused:
                    self._problem("fail_field_type", record_line, refused, _snippet(line))
                lines.take_block()
                continue
            payload = None
            expected_md5 = None
            if "has_payload" in envelope:
                expected_md5 = envelope["has_payload"]
                payload, _ = lines.take_block()
                if not (isinstance(expected_md5, str) and hashlib.md5(payload).hexdigest() == expected_md5):
                    self._problem("fail_payload_md5", record_line, "payload md5 mismatch", f"expected {expected_md5!s:.40}")
                if not isinstance(expected_md5, str):
                    expected_md5 = str(expected_md5)
            elif lines.next_starts_with_tab():
                first = lines.lineno + 1
                _, count = lines.take_block()
                self._problem("fail_orphan_payload", first, "payload lines after a record without has_payload", f"{count} line(s)")
            yield self._record(envelope, header, record_line, payload, expected_md5)
        self.bytes_read = lines.bytes_read

    def _number(self, digits: bytes, what: str, lineno: int) -> int:
        """A glog number; a counted bad field (read as 0) when it is too long to be real."""
        if len(digits) <= MAX_DIGITS:
            return int(digits)
        self._problem("fail_field_type", lineno, f"{what} has {len(digits):,} digits", _snippet(digits, 40))
        return 0

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

    def _record(
        self, envelope: dict[str, Any], header: re.Match[bytes], lineno: int, payload: bytes | None, md5: str | None
    ) -> Record:
        rank = envelope.get("rank")
        if type(rank) is not int or not 0 <= rank <= MAX_ID:  # a rank names a folder: keep it small
            if rank is not None:
                self._problem("fail_field_type", lineno, "`rank` is not a small non-negative integer", _short_repr(rank))
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
        pid = self._number(g("pid"), "glog pid", lineno)
        source_line = self._number(g("line"), "glog line number", lineno)
        return Record(
            lineno=lineno,
            envelope=envelope,
            kinds=[key for key in envelope if key not in CONTEXT_KEYS],
            compile_id=compile_id_of(envelope),
            rank=rank,
            payload=payload,
            payload_md5=md5,
            timestamp=f"{self.year:04d}-{_s(g('month'))}-{_s(g('day'))}T{_s(g('hour'))}:{_s(g('minute'))}:{_s(g('second'))}.{_s(g('micro'))}Z",
            pid=pid,
            pathname=g("path").decode("utf-8", "replace"),
            source_line=source_line,
            other_rank=other,
        )


TAB = 0x09
_BLOCK_END = re.compile(rb"\n(?![\t\r\n])")  # a newline not followed by another payload (or blank) line
_CR_AT_EOL = re.compile(rb"\r(?=\n|$)")


class LineScanner:
    """Lines of a binary stream, read in large chunks.

    Payloads (runs of TAB lines) are cut out with a few bytes operations instead of a Python step
    per line: that is what keeps the reader fast on logs of hundreds of MB.
    """

    CHUNK = 1 << 22

    def __init__(self, handle: IO[bytes]):
        self.handle = handle
        self.buf = b""
        self.pos = 0
        self.eof = False
        self.lineno = 0
        self.bytes_read = 0
        self.lines_in_parts = 0

    def _fill(self) -> bool:
        """Append the next chunk (dropping what was consumed); False at end of input."""
        if self.eof:
            return False
        data = self.handle.read(self.CHUNK)
        if not data:
            self.eof = True
            return False
        self.buf = self.buf[self.pos :] + data
        self.pos = 0
        return True

    def next_line(self) -> bytes | None:
        """The next line without its line ending; None at the end."""
        newline = self.buf.find(b"\n", self.pos)
        while newline < 0 and self._fill():
            newline = self.buf.find(b"\n", self.pos)
        if newline < 0:
            if self.pos >= len(self.buf):
                return None
            line, self.pos = self.buf[self.pos :], len(self.buf)
        else:
            line, self.pos = self.buf[self.pos : newline], newline + 1
        self.lineno += 1
        self.bytes_read += len(line) + 1
        return line[:-1] if line.endswith(b"\r") else line

    def _peek(self, offset: int = 0) -> int | None:
        while self.pos + offset >= len(self.buf):
            if not self._fill():
                return None
        return self.buf[self.pos + offset]

    def next_starts_with_tab(self) -> bool:
        return self._peek() == TAB

    def take_block(self) -> tuple[bytes, int]:
        """Consume the TAB lines that follow (blank lines among them are skipped, as tlparse does).

        Returns the payload (one leading TAB removed per line, lines joined by newlines) and the
        number of payload lines.
        """
        parts: list[bytes] = []
        self.lines_in_parts = 0
        while True:
            first = self._peek()
            if first == TAB:
                match = _BLOCK_END.search(self.buf, self.pos)
                while (match is None or match.start() == len(self.buf) - 1) and self._fill():
                    match = _BLOCK_END.search(self.buf, self.pos)
                end = match.start() if match else len(self.buf)
                chunk = self.buf[self.pos : end]
                self.pos = end + 1 if match else end
                self.bytes_read += len(chunk) + 1
                self._add_block(chunk, parts)
                continue
            if first in (0x0A, 0x0D) and self._blank_lines_then_tab():
                continue
            break
        self.lineno += self.lines_in_parts
        return b"\n".join(parts), self.lines_in_parts

    def _add_block(self, chunk: bytes, parts: list[bytes]) -> None:
        """Split a chunk of TAB lines (and stray blank lines between them) into payload lines."""
        if b"\r" in chunk:
            chunk = _CR_AT_EOL.sub(b"", chunk)
        if b"\n\n" not in chunk and not chunk.endswith(b"\n"):  # the usual case, done in C
            parts.append(chunk[1:].replace(b"\n\t", b"\n"))
            self.lines_in_parts += chunk.count(b"\n") + 1
            return
        for line in chunk.split(b"\n"):
            if line:
                parts.append(line[1:])
                self.lines_in_parts += 1
            else:
                self.lineno += 1  # a blank line between payload lines: counted, not kept

    def _blank_lines_then_tab(self) -> bool:
        """Whether blank lines here are followed by more payload; if so they are consumed."""
        offset = 0
        while (byte := self._peek(offset)) in (0x0A, 0x0D):
            offset += 1
        if byte != TAB:
            return False
        blanks = self.buf.count(b"\n", self.pos, self.pos + offset)
        self.lineno += blanks
        self.bytes_read += offset
        self.pos += offset
        return True


def _short_repr(value: Any) -> str:
    if type(value) is int and value.bit_length() > 64:
        return f"an integer of {value.bit_length():,} bits"  # repr() of a huge int is slow, or raises
    return repr(value)[:80]


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
