"""Bytes → records: the only module that knows how a TORCH_TRACE log is encoded.

A log is a sequence of glog-prefixed lines, each carrying one JSON envelope, optionally followed
by payload lines that start with a TAB (see ../shared/spec/torch-2.13-records.md §1). The reader
streams: it holds one line, plus the payload of the record being assembled, at a time.

Every problem is counted in `Stats`, described in the diagnostics, and skipped; nothing here raises
for bad input (an unreadable *file* is the caller's business).
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from .forked import forked_items
from .limits import GUNZIP_GRACE_MB, MB, Limits
from .model import (
    COMPILE_ID_KEYS,
    CONTEXT_KEYS,
    HINTS,
    CompileId,
    DiagnosticLog,
    Record,
    Stats,
    StringTable,
    short_repr,
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


class GunzipRefused(Exception):
    """A .gz expands far more than any trace log does (a decompression bomb); the message says how to
    read it anyway."""


def is_gzip(path: Path) -> bool:
    try:
        with open_file(path) as handle:
            return handle.read(2) == b"\x1f\x8b"
    except OSError:
        return False


def open_file(path: Path) -> IO[bytes]:
    """Open a log file without following a symlink at its last step.

    Inputs come resolved (inputs.py): a log that turns into a symlink between being chosen and being
    read is refused (ELOOP), rather than letting a link to /proc/self/environ or ~/.ssh into raw.log.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(exc.errno, "is a symbolic link (pass the file it points to)", str(path)) from None
        raise
    return os.fdopen(fd, "rb")


def open_log(path: Path, limits: Limits | None = None) -> IO[bytes]:
    """Open a log for binary reading, transparently un-gzipping `.gz` files (checked by magic bytes)."""
    handle = open_file(path)
    magic = handle.peek(2)[:2] if hasattr(handle, "peek") else b""
    if magic == b"\x1f\x8b":
        return BoundedGunzip(handle, path, limits or Limits())  # type: ignore[return-value]
    return handle


class BoundedGunzip(io.RawIOBase):
    """A gzip stream that refuses to expand more than `max_gunzip_ratio` times over.

    A 261 KB gzip of newlines expands to 257 MB: without a bound, a few KB of input cost minutes
    and a huge raw.log. The ratio is checked against the compressed bytes consumed so far, once the
    output passes a grace size (small logs may compress as well as they like).
    """

    def __init__(self, raw: IO[bytes], path: Path, limits: Limits):
        self.raw = raw
        self.path = path
        self.ratio = limits.max_gunzip_ratio
        self.expanded = 0
        self.damaged = ""  # why decompression stopped early, if it did
        # zlib directly rather than GzipFile: a cut or damaged .gz then yields everything before the
        # damage (GzipFile raises for the whole read and loses what it had decompressed)
        self.inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.pending = b""
        self.backlog = b""  # compressed bytes read but not yet inflated
        self.started = False  # inside a gzip member (its end marker not yet seen)
        self.done = False

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        size = size if size and size > 0 else 1 << 20
        while not self.pending and not self.done:
            self._inflate(size)
        data, self.pending = self.pending[:size], self.pending[size:]
        self.expanded += len(data)
        self._check()
        return data

    def _inflate(self, size: int) -> None:
        compressed, self.backlog = self.backlog or self.raw.read(1 << 16), b""
        if not compressed:
            self.done = True
            if self.started:
                self.damaged = "the compressed stream ends before its end marker (a cut .gz)"
            return
        self.started = True
        try:
            self.pending = self.inflater.decompress(compressed, size)
        except zlib.error as exc:
            self.done, self.damaged = True, f"zlib.error: {exc}"
            return
        self.backlog = self.inflater.unconsumed_tail
        if self.inflater.eof:  # a .gz may hold several members, one after another
            rest = self.inflater.unused_data
            self.inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            self.started = False
            self.backlog = rest if rest.strip(b"\0") else b""

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def _check(self) -> None:
        if self.ratio <= 0 or self.expanded <= GUNZIP_GRACE_MB * MB:
            return
        consumed = max(self.raw.tell(), 1)
        if self.expanded > self.ratio * consumed:
            raise GunzipRefused(
                f"{self.path}: refusing to un-gzip: {consumed / 1e6:,.2f} MB expanded past {self.expanded / 1e6:,.0f} MB "
                f"(more than {self.ratio:g} times over, like a decompression bomb); "
                "pass --max-gunzip-ratio N or --no-gunzip-limit to read it anyway"
            )

    def close(self) -> None:
        try:
            self.raw.close()
        finally:
            super().close()


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


# What `EventScanner.events` yields: tuples tagged with one of these.
RECORD, STRING, PROBLEM, JUNK, END = range(5)
Event = tuple[Any, ...]
# From this size a plain log is scanned in a forked child while this process builds its records
# (a sixth faster on a 200 MB log on two cores); below it the fork and the pipe cost about what
# they save.
SCANNING_CHILD_MIN_BYTES = 8 * MB


def _sendable(events: Iterator[Event], scanned: Callable[[], int]) -> Iterator[Event]:
    """Events as a scanning child sends them: a record's glog match as its bytes (`_records` matches
    them again), and how far the scan is (`scanned()`) for the progress bar."""
    for event in events:
        if event[0] == RECORD:
            event = (RECORD, event[1], event[2].group(0), *event[3:], scanned())
        yield event


def _event_size(event: Event) -> int:
    return len(event[4] or b"") + 256 if event[0] == RECORD else 256


class LogReader:
    """Streams the records of one log file.

    Usage: `for record in LogReader(path, stats, diagnostics).records(): ...`. `strings` holds the
    file's intern table afterwards; `records()` yields other-rank records too (flagged), because
    they still belong in raw.jsonl.
    """

    def __init__(
        self,
        path: Path,
        stats: Stats,
        diagnostics: DiagnosticLog,
        year: int | None = None,
        strings: StringTable | None = None,
        limits: Limits | None = None,
        scanning_child: bool = True,
    ):
        self.path = path
        self.scanning_child = scanning_child  # may a big log be scanned in a forked child
        self.label = path.name
        self.stats = stats
        self.diagnostics = diagnostics
        self.strings = strings if strings is not None else StringTable()
        self.expected_rank: int | None = None
        self.bytes_read = 0
        self.year = year if year is not None else _file_year(path)
        self.on_rank_detected: Callable[[int], None] | None = None
        self.limits = limits or Limits()
        self.max_line = self.limits.max_line

    def scanned_bytes(self) -> int:
        """How far into the log reading is (bytes of log text)."""
        scanner = getattr(self, "_scanner", None)
        return max(scanner.bytes_read(), self.bytes_read) if scanner is not None else self.bytes_read

    def _problem(self, counter: str | None, lineno: int, problem: str, detail: str = "") -> None:
        if counter:
            self.stats.add(counter)
        self.diagnostics.add(self.label, lineno, problem, detail, HINTS.get(counter or "", ""))

    def records(self) -> Iterator[Record]:
        with open_log(self.path, self.limits) as handle:
            scanner = self._scanner = EventScanner(self.max_line)
            if self._worth_a_scanning_child(handle):
                events = forked_items(lambda: _sendable(scanner.events(handle), scanner.bytes_read), _event_size)
            else:
                events = scanner.events(handle)
            yield from self._records(events)

    def _worth_a_scanning_child(self, handle: IO[bytes]) -> bool:
        """A big plain log is scanned in a forked child (see `EventScanner`) when there is a core for it."""
        if not self.scanning_child or isinstance(handle, BoundedGunzip) or not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
            return False
        try:
            return os.fstat(handle.fileno()).st_size >= SCANNING_CHILD_MIN_BYTES
        except (OSError, ValueError):
            return False

    def _records(self, events: Iterator[Event]) -> Iterator[Record]:
        """Records, with the problems met on the way counted in log order, from a scanner's events."""
        for event in events:
            tag = event[0]
            if tag == RECORD:
                lineno, header, envelope, payload, md5 = event[1:6]
                if type(header) is bytes:  # sent by a scanning child: a match does not pickle
                    header = GLOG_PREFIX.match(header)
                    self.bytes_read = event[6]
                yield self._record(envelope, header, lineno, payload, md5)
            elif tag == PROBLEM:
                self._problem(*event[1:])
            elif tag == STRING:
                _, value, lineno, record_line, snippet = event
                refused = self.strings.add(value, lineno)
                if refused:
                    self._problem("fail_field_type", record_line, refused, snippet)
            elif tag == JUNK:
                _, lineno, count, first = event
                self.stats.add("fail_glog", count)
                self.diagnostics.add(self.label, lineno, f"{count:,} lines in a row are not trace lines (no glog prefix); the first",
                                     _snippet(first), HINTS["fail_glog"])
            else:  # END
                self.bytes_read = event[1]

    def _number(self, digits: bytes, what: str, lineno: int) -> int:
        """A glog number; a counted bad field (read as 0) when it is too long to be real."""
        if len(digits) <= MAX_DIGITS:
            return int(digits)
        self._problem("fail_field_type", lineno, f"{what} has {len(digits):,} digits", _snippet(digits, 40))
        return 0

    def _record(
        self, envelope: dict[str, Any], header: re.Match[bytes], lineno: int, payload: bytes | None, md5: str | None
    ) -> Record:
        rank = envelope.get("rank")
        if type(rank) is not int or not 0 <= rank <= MAX_ID:  # a rank names a folder: keep it small
            if rank is not None:
                self._problem("fail_field_type", lineno, "`rank` is not a small non-negative integer", short_repr(rank))
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


class EventScanner:
    """A log's bytes cut into events: records (their envelope parsed, payload checked against its
    md5), interned strings and problems, in log order.

    It works on bytes alone and owes nothing to what came before but the line count, so a forked
    child can run it for a big log while the reader builds records from its events.
    """

    def __init__(self, max_line: int):
        self.max_line = max_line
        self._lines: LineScanner | None = None

    def bytes_read(self) -> int:
        return self._lines.bytes_read if self._lines is not None else 0

    def events(self, handle: IO[bytes]) -> Iterator[Event]:
        """The events of the log `handle` reads, in log order (each step queues them as it meets them)."""
        lines = self._lines = LineScanner(handle, self.max_line)
        events: list[Event] = []
        lines.on_too_long = lambda lineno, length, head: events.append(self._too_long(lineno, length, head))
        lines.on_junk = lambda lineno, count, first: events.append((JUNK, lineno, count, first))
        while self._step(lines, events):
            if events:
                yield from events
                events.clear()
        damaged = getattr(handle, "damaged", "")
        if damaged:
            events.append((PROBLEM, None, 0, "the .gz file is cut off or damaged; the records before the damage were read", damaged))
        events.append((END, lines.bytes_read))
        yield from events

    def _step(self, lines: LineScanner, events: list[Event]) -> bool:
        """Read the next record (or stray line) and queue its events; False at the end of the log."""
        emit = events.append
        lines.skip_junk()
        line = lines.next_line()
        if line is None:
            return False
        if not line:
            return True
        if line[0] == TAB:
            first = lines.lineno
            _, count = lines.take_block()
            emit((PROBLEM, "fail_orphan_payload", first, "payload lines with no record", f"{count + 1} line(s)"))
            return True
        header = GLOG_PREFIX.match(line) or GLOG_PREFIX.search(line)
        if header is None:
            emit((PROBLEM, "fail_glog", lines.lineno, "not a trace line (no glog prefix)", _snippet(line)))
            return True
        record_line = lines.lineno
        envelope, problem = self._envelope(line[header.end() :], record_line, events)
        if envelope is None:
            emit((PROBLEM, "fail_json", record_line, "envelope is not a JSON object", problem))
            lines.take_block()  # its payload lines (if any) belong to the bad record: skip them
            return True
        if "str" in envelope:
            emit((STRING, envelope["str"], lines.lineno, record_line, _snippet(line)))
            lines.take_block()
            return True
        payload = None
        expected_md5 = None
        if "has_payload" in envelope:
            expected_md5 = envelope["has_payload"]
            payload, _ = lines.take_block()
            if not (isinstance(expected_md5, str) and hashlib.md5(payload).hexdigest() == expected_md5):
                emit((PROBLEM, "fail_payload_md5", record_line, "payload md5 mismatch", f"expected {expected_md5!s:.40}"))
            if not isinstance(expected_md5, str):
                expected_md5 = str(expected_md5)
        elif lines.next_starts_with_tab():
            first = lines.lineno + 1
            _, count = lines.take_block()
            emit((PROBLEM, "fail_orphan_payload", first, "payload lines after a record without has_payload", f"{count} line(s)"))
        emit((RECORD, record_line, header, envelope, payload, expected_md5))
        return True

    def _too_long(self, lineno: int, length: int, head: bytes) -> Event:
        return (PROBLEM, "fail_line_too_long", lineno,
                f"line of {length / 1e6:,.1f} MB is longer than --max-line-mb ({self.max_line / 1e6:,.0f} MB)", _snippet(head, 80))

    @staticmethod
    def _envelope(data: bytes, lineno: int, events: list[Event]) -> tuple[dict[str, Any] | None, str]:
        try:
            value, bad_utf8 = parse_envelope(data)
        except ValueError as exc:
            return None, f"{exc}: {_snippet(data)}"
        if not isinstance(value, dict):
            return None, f"JSON {type(value).__name__}, not an object: {_snippet(data)}"
        if bad_utf8:
            events.append((PROBLEM, "fail_utf8", lineno, "invalid UTF-8 in the envelope (replaced)", ""))
        return value, ""


TAB = 0x09
# A newline not followed by another payload line or a blank (LF or CRLF) line. A line that starts
# with a lone CR is not payload (it may be a record: GLOG_PREFIX searches).
_BLOCK_END = re.compile(rb"\n(?!\t|\r?\n)")
_CR_AT_EOL = re.compile(rb"\r(?=\n|$)")
_TAB_LINE = re.compile(rb"\n\t")
_BLANK_LINES = re.compile(rb"(?:\r?\n)*")  # whole blank lines (LF or CRLF), as next_line sees them
_CR_LF_RUN = re.compile(rb"[\r\n]*")  # the same, a hundred times faster, but it also takes lone CRs
# What every glog prefix holds (`:23.064000 5351`), with a literal first byte so the search runs at
# memchr speed; a superset of GLOG_PREFIX: a line it misses cannot be a record.
_GLOG_HINT = re.compile(rb":\d\d\.\d{6} \d")
# Maps LF to LF and every other byte to `x`: once CRLF is LF, `\nx` counts the lines that are not blank.
_LINE_STARTS = bytes(0x0A if b == 0x0A else 0x78 for b in range(256))
FEW_JUNK_LINES = 8  # up to this many junk lines in a row are named one by one; more are skipped in bulk


class JunkSkipper:
    """The part of `LineScanner` that steps over runs of blank and junk lines in bulk (bytes searches
    over the buffer, not a Python loop per line), so junk is skipped at close to reading speed."""

    buf: bytes
    pos: int
    lineno: int
    bytes_read: int
    on_junk: Callable[[int, int, bytes], None] | None
    _peek: Callable[..., int | None]
    # the last `_tab_line_start` answer: (buffer, searched from, found); a log without payloads has
    # no TAB line, and searching the rest of the 4 MB buffer again for every record was quadratic
    _tab_memo: tuple[bytes, int, int] | None = None

    def skip_junk(self) -> None:
        """Skip blank lines, and runs of many junk lines, before the next line that may be a record.

        A line may be a record if it holds a glog prefix, or payload if it starts with a TAB; every
        other line is blank (dropped) or junk (counted as `fail_glog`). A few junk lines are left for
        the caller to name one by one; a longer run is counted in bulk and reported once.
        """
        while self._peek() is not None:
            end = self._interesting_line_start()
            if end <= self.pos:
                return
            region = self.buf[self.pos : end]
            junk = _junk_lines(region)
            if junk > FEW_JUNK_LINES:
                self._skip_junk_region(region, junk)
                continue
            start = _blank_prefix(region) if junk else len(region)  # the blank lines before the first junk line
            self.lineno += region.count(b"\n", 0, start)
            self.bytes_read += start
            self.pos += start
            if junk:
                return

    def _interesting_line_start(self) -> int:
        """Where, in the buffer, the first line that may be a record or payload starts; without one,
        the end of the buffer's last complete line (the position itself when there is none)."""
        buf, pos = self.buf, self.pos
        if buf[pos] == TAB:
            return pos
        tab = self._next_tab_line(buf, pos)
        hint = _GLOG_HINT.search(buf, pos, tab if tab >= 0 else len(buf))
        if hint is not None:
            return buf.rfind(b"\n", pos, hint.start()) + 1 or pos
        if tab >= 0:
            return tab
        return buf.rfind(b"\n", pos) + 1 or pos

    def _next_tab_line(self, buf: bytes, pos: int) -> int:
        """`_tab_line_start(buf, pos)`, reusing the last answer while it still holds: no TAB line
        starts between where that search began and what it found (or the buffer's end)."""
        memo = self._tab_memo
        if memo is not None and memo[0] is buf and memo[1] <= pos and (memo[2] < 0 or pos < memo[2]):
            return memo[2]
        tab = _tab_line_start(buf, pos)
        self._tab_memo = (buf, pos, tab)
        return tab

    def _skip_junk_region(self, region: bytes, junk: int) -> None:
        line_start = _blank_prefix(region)
        first_line = region[line_start : line_start + 120].split(b"\n", 1)[0]
        first_lineno = self.lineno + region.count(b"\n", 0, line_start) + 1
        self.lineno += region.count(b"\n")
        self.bytes_read += len(region)
        self.pos += len(region)
        if self.on_junk is not None:
            self.on_junk(first_lineno, junk, first_line)


class LineScanner(JunkSkipper):
    """Lines of a binary stream, read in large chunks.

    Payloads (runs of TAB lines), blank lines and runs of junk lines are cut out with a few bytes
    operations over the buffer instead of a Python step per line: that is what keeps the reader
    fast on logs of hundreds of MB, and on hostile ones (a gzip of newlines). Every byte is copied a
    bounded number of times, so time is linear however long a line is; a line longer than
    `max_line` is dropped as it streams past (`on_too_long` is told), so memory stays bounded.
    """

    CHUNK = 1 << 22

    def __init__(self, handle: IO[bytes], max_line: int = Limits().max_line):
        self.handle = handle
        self.max_line = max_line
        self.buf = b""
        self.pos = 0
        self.eof = False
        self.lineno = 0
        self.bytes_read = 0
        self.lines_in_parts = 0
        self.on_too_long: Callable[[int, int, bytes], None] | None = None  # (lineno, length, first bytes)
        self.on_junk: Callable[[int, int, bytes], None] | None = None  # (first lineno, lines, first line)

    def _read(self) -> bytes:
        if self.eof:
            return b""
        data = self.handle.read(self.CHUNK)
        if not data:
            self.eof = True
        return data

    def _fill(self) -> bool:
        """Append the next chunk to what is left (callers leave at most a partial line); False at end."""
        data = self._read()
        if not data:
            return False
        self.buf = self.buf[self.pos :] + data if self.pos < len(self.buf) else data
        self.pos = 0
        return True

    def next_line(self) -> bytes | None:
        """The next line without its line ending; None at the end. An over-long line reads as b""."""
        newline = self.buf.find(b"\n", self.pos)
        if newline < 0:
            return self._line_across_chunks()
        line, self.pos = self.buf[self.pos : newline], newline + 1
        return self._counted(line, len(line))

    def _counted(self, line: bytes, length: int) -> bytes:
        self.lineno += 1
        self.bytes_read += length + 1
        if length > self.max_line:
            if self.on_too_long is not None:
                self.on_too_long(self.lineno, length, line[:120])
            return b""
        return line[:-1] if line.endswith(b"\r") else line

    def _line_across_chunks(self) -> bytes | None:
        """A line that does not end in the buffer: gathered chunk by chunk (joined once, so linear),
        and only its first bytes kept once it passes `max_line`."""
        parts = [self.buf[self.pos :]]
        length = len(parts[0])
        self.buf, self.pos = b"", 0
        while data := self._read():
            newline = data.find(b"\n")
            piece = data if newline < 0 else data[:newline]
            length += len(piece)
            if length <= self.max_line:
                parts.append(piece)
            elif len(parts) > 1 or len(parts[0]) > 120:
                parts = [_head(parts, 120)]  # too long: keep what a diagnostic quotes, drop the rest
            if newline >= 0:
                self.buf, self.pos = data, newline + 1
                break
        if length == 0 and self.eof and self.pos >= len(self.buf):
            return None
        return self._counted(b"".join(parts), length)

    def _peek(self) -> int | None:
        if self.pos >= len(self.buf) and not self._fill():
            return None
        return self.buf[self.pos]

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
                self._take_tab_lines(parts)
            elif first in (0x0A, 0x0D) and self._blank_lines_then_tab():
                continue
            else:
                break
        self.lineno += self.lines_in_parts
        return b"\n".join(parts), self.lines_in_parts

    def _take_tab_lines(self, parts: list[bytes]) -> None:
        """The payload lines in the buffer from here: up to the block's end, or to the buffer's
        last complete line (the rest comes with the next chunk)."""
        match = _BLOCK_END.search(self.buf, self.pos)
        if match is not None and (match.start() < len(self.buf) - 2 or self.eof):  # else the next chunk decides
            end = match.start()
        else:
            end = self.buf.rfind(b"\n", self.pos)
        if end < 0:  # one payload line longer than the buffer
            lineno = self.lineno
            self.lineno += self.lines_in_parts  # so an over-long line is reported where it is
            line = self._line_across_chunks()
            self.lineno = lineno
            if line:
                parts.append(line[1:])
            self.lines_in_parts += 1
            return
        chunk = self.buf[self.pos : end]
        self.pos = end + 1
        self.bytes_read += len(chunk) + 1
        if len(chunk) > self.max_line and self._drop_long_lines(chunk, parts):
            return
        self._add_block(chunk, parts)

    def _drop_long_lines(self, chunk: bytes, parts: list[bytes]) -> bool:
        """Payload lines over `max_line` (only possible when it is below the chunk size): dropped."""
        lines = chunk.split(b"\n")
        if max(map(len, lines)) <= self.max_line:
            return False
        for line in lines:
            if len(line) > self.max_line:
                if self.on_too_long is not None:
                    self.on_too_long(self.lineno + self.lines_in_parts + 1, len(line), line[:120])
                self.lines_in_parts += 1
            else:
                self._add_block(line, parts)
        return True

    def _add_block(self, chunk: bytes, parts: list[bytes]) -> None:
        """Split a chunk of TAB lines (and stray blank lines between them) into payload lines."""
        if b"\r" in chunk:
            chunk = _CR_AT_EOL.sub(b"", chunk)
        if b"\n\n" not in chunk and not chunk.endswith(b"\n"):  # the usual case, done in C
            payload = chunk[1:].replace(b"\n\t", b"\n")
            parts.append(payload)
            # every line here starts with its TAB (a block ends at a line that does not), so the
            # replace removed one byte per line but the first: no need to count the newlines
            # (an empty chunk, a blank line from _drop_long_lines, still counts as one line)
            self.lines_in_parts += len(chunk) - len(payload) if chunk else 1
            return
        for line in chunk.split(b"\n"):
            if line:
                parts.append(line[1:])
                self.lines_in_parts += 1
            else:
                self.lineno += 1  # a blank line between payload lines: counted, not kept

    def _blank_lines_then_tab(self) -> bool:
        """Consume the blank lines here (however many: one regex per chunk); whether payload follows.

        Blank lines are skipped wherever they are, so taking them now changes nothing but speed.
        """
        while True:
            end = _blank_prefix(self.buf, self.pos)
            self.lineno += self.buf.count(b"\n", self.pos, end)
            self.bytes_read += end - self.pos
            self.pos = end
            rest = self.buf[end:]
            if (not rest or rest == b"\r") and self._fill():  # the run may go on in the next chunk
                continue
            return rest[:1] == b"\t"


def _head(parts: list[bytes], size: int) -> bytes:
    """The first `size` bytes of the parts, without joining them all."""
    head = b""
    for part in parts:
        head += part[: size - len(head)]
        if len(head) >= size:
            break
    return head


def _tab_line_start(buf: bytes, pos: int) -> int:
    """The start of the first line after `pos` that begins with a TAB, or -1.

    A bare TAB is found at memchr speed; `\n\t` (a two-byte search) is slow over a run of newlines.
    """
    tab = buf.find(b"\t", pos + 1)
    if tab < 0 or buf[tab - 1] == 0x0A:
        return tab
    match = _TAB_LINE.search(buf, tab)
    return match.start() + 1 if match else -1


def _blank_prefix(data: bytes, pos: int = 0) -> int:
    """Where the blank lines (LF or CRLF) that start at `pos` end."""
    end = _CR_LF_RUN.match(data, pos).end()
    if end > pos and data[end - 1] == 0x0D:
        end -= 1  # a CR before something else starts the next line
    run = data[pos:end]
    if b"\r" in run and b"\r" in run.replace(b"\r\n", b""):
        return _BLANK_LINES.match(data, pos).end()  # a line of lone CRs (not blank): the exact, slow way
    return end


def _junk_lines(region: bytes) -> int:
    """How many lines of `region` (whole lines) are not blank, counted with three passes in C."""
    if b"\r" not in region:
        marks = region.translate(_LINE_STARTS)
    elif region.count(b"\r") == region.count(b"\r\n"):
        marks = region.translate(_LINE_STARTS, b"\r")  # every CR ends a line: drop them in the same pass
    else:
        marks = region.replace(b"\r\n", b"\n").translate(_LINE_STARTS)  # lone CRs are line content
    if b"x" not in marks:
        return 0  # only blank lines (padding, a gzip of newlines): memchr speed
    return marks.count(b"\nx") + (marks[:1] == b"x")


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
