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
import os
import re
import stat
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, cast

import orjson

from .forked import ForkedServer, forked_items
from .. import jsondepth
from ..limits import MB, Limits
from .gunzip import BoundedGunzip, LogAsRead, open_log
from .lines import TAB, LineScanner
from .raw_line import pieces_of
from ..model import (
    COMPILE_ID_KEYS,
    CONTEXT_KEYS,
    HINTS,
    CompileId,
    CompileIds,
    DiagnosticLog,
    Record,
    Processes,
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



def parse_envelope(data: bytes) -> tuple[Any, bool]:
    """Decode one JSON envelope. Returns (value, had_invalid_utf8); raises ValueError when it is not JSON.

    orjson is the fast path; Python's json is the fallback because torch writes `NaN`/`Infinity`
    (json.dumps' default) and logs may hold invalid UTF-8, both of which orjson refuses.
    """
    try:
        return jsondepth.loads(data), False
    except orjson.JSONDecodeError:
        pass
    text = data.decode("utf-8", "replace")
    bad_utf8 = "\ufffd" in text and b"\xef\xbf\xbd" not in data
    try:
        return jsondepth.loads_text(text), bad_utf8
    except (ValueError, RecursionError) as exc:
        raise ValueError(str(exc)[:200]) from None


def compile_id_of(envelope: dict[str, Any], process: int = 0, ids: CompileIds | None = None) -> CompileId | None:
    """The record's compile id in its process, the one object `ids` holds for it (a new one without
    `ids`); None when an id field is present but not a small non-negative int."""
    parts: tuple[Any, ...] = tuple(envelope.get(key) for key in COMPILE_ID_KEYS)
    for value in parts:  # checked first: True == 1 as a dict key, and a list is no key at all
        if value is not None and (type(value) is not int or not 0 <= value <= MAX_ID):
            return None
    parts = (*parts, process)  # the id's every field
    return ids.of(parts) if ids is not None else CompileId(*parts)


# A record's glog prefix as read: (ISO timestamp, pid, source path, source line).
GlogFields = tuple[str, int, str, int]
# What `EventScanner.events` yields: tuples tagged with one of these.
RECORD, STRING, PROBLEM, JUNK, END = range(5)
Event = tuple[Any, ...]
# From this size a plain log is scanned in a forked child while this process builds its records
# (a sixth faster on a 200 MB log on two cores); below it the fork and the pipe cost about what
# they save.
SCANNING_CHILD_MIN_BYTES = 8 * MB
_PIECE = struct.Struct("<QQQQQ")  # a piece of the log to scan: offset, size, first line's number, st_dev, st_ino


def _sendable(events: Iterator[Event], scanned: Callable[[], int],
              glog_fields: Callable[[re.Match[bytes]], GlogFields | None]) -> Iterator[Event]:
    """Events as a scanning child sends them: a record's glog prefix as the fields read from it
    (`glog_fields`; where a number there is too long to be real, the prefix's bytes, which
    `records_of` matches again and counts), how far the scan is (`scanned()`) for the progress bar,
    and its raw.jsonl line but the payload file's name (`raw_line.pieces_of`). The child has a core
    of its own and the analysing process does not: what one record's bytes alone decide is done here."""
    for event in events:
        if event[0] == RECORD:
            envelope, fields = event[3], glog_fields(event[2])
            raw = pieces_of(envelope, *fields) if fields is not None and type(envelope) is dict else None
            event = (RECORD, event[1], fields if fields is not None else event[2].group(0), *event[3:], scanned(), raw)
        yield event


def _event_size(event: Event) -> int:
    return len(event[4] or b"") + 256 if event[0] == RECORD else 256


class LogReader:
    """Streams the records of one log file.

    Usage: `for record in LogReader(path, stats, diagnostics).records(): ...`. `strings` holds the
    file's intern table afterwards; `records()` yields other-rank records too (flagged), because
    they still belong in raw.jsonl. `as_read` holds, once reading is over, the file read and how far
    (what raw.log copies).
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
        processes: Processes | None = None,
        compile_ids: CompileIds | None = None,
    ):
        self.path = path
        self.scanning_child = scanning_child  # may a big log be scanned in a forked child
        self.label = path.name
        self.stats = stats
        self.diagnostics = diagnostics
        self.strings = strings if strings is not None else StringTable()
        # the run's processes, shared by the readers of its logs
        self.processes = processes if processes is not None else Processes()
        self.compile_ids = compile_ids if compile_ids is not None else CompileIds()  # the run's, shared likewise
        self._pid: int | None = None  # the pid of the last record, and its process
        self._process = 0
        self.expected_rank: int | None = None
        self.bytes_read = 0
        self.lines_read = 0  # lines of the log read, once reading ended
        self.year = year if year is not None else _file_year(path)
        self._year_prefix = f"{self.year:04d}-"
        self.on_time: Callable[[str], None] | None = None  # told the glog time of records the caller never sees (string table)
        self._paths: dict[bytes, str] = {}
        self.on_rank_detected: Callable[[int], None] | None = None
        self.limits = limits or Limits()
        self.max_line = self.limits.max_line
        self.as_read: LogAsRead | None = None
        self.server: PieceServer | None = None  # scans the pieces of a live report's log

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
            self.as_read = LogAsRead(self.path, handle)
            scanner = self._scanner = EventScanner(self.max_line)
            if self._worth_a_scanning_child(handle):
                events = forked_items(lambda: _sendable(scanner.events(handle), scanner.bytes_read, self._glog_fields), _event_size)
            else:
                events = scanner.events(handle)
            yield from self.records_of(events)
            self.as_read.ended(handle)

    def _worth_a_scanning_child(self, handle: IO[bytes]) -> bool:
        """A big plain log is scanned in a forked child (see `EventScanner`) when there is a core for it."""
        try:
            return not isinstance(handle, BoundedGunzip) and self.may_fork(os.fstat(handle.fileno()).st_size)
        except (OSError, ValueError):
            return False

    def may_fork(self, size: int) -> bool:
        """Whether `size` bytes of plain log are worth a scanning child, and one may be forked."""
        return self.scanning_child and hasattr(os, "fork") and (os.cpu_count() or 1) >= 2 and size >= SCANNING_CHILD_MIN_BYTES

    def events_of(self, handle: IO[bytes], size: int, lineno: int = 0, offset: int = 0, file: IO[bytes] | None = None) -> Iterator[Event]:
        """The events of the `size` bytes `handle` reads (at `offset` of `file`): scanned in a forked child when worth it, or a live report's `PieceServer`."""
        scanner = self._scanner = EventScanner(self.max_line)
        if self.may_fork(size):
            return forked_items(lambda: _sendable(scanner.events(handle, lineno, offset), scanner.bytes_read, self._glog_fields), _event_size)
        served = self.server.events(file, offset, size, lineno) if self.server is not None and file is not None else None
        return served if served is not None else scanner.events(handle, lineno, offset)

    def records_of(self, events: Iterator[Event]) -> Iterator[Record]:
        """Records, with the problems met on the way counted in log order, from a scanner's events."""
        for event in events:
            tag = event[0]
            if tag == RECORD:
                lineno, header, envelope, payload, md5 = event[1:6]
                raw = None
                if type(header) is not re.Match:  # sent by a scanning child: its fields (a match does not pickle), or its bytes
                    if type(header) is bytes:
                        header = GLOG_PREFIX.match(header)
                    self.bytes_read, raw = event[6], event[7]
                yield self._record(envelope, header, lineno, payload, md5, raw)
            elif tag == PROBLEM:
                self._problem(*event[1:])
            elif tag == STRING:
                _, value, lineno, record_line, snippet, when, pid = event
                refused = self.strings.add(value, lineno, self._process_of(self._number(pid, "glog pid", record_line)))
                if refused:
                    self._problem("fail_field_type", record_line, refused, snippet)
                if self.on_time is not None:
                    self.on_time(self._timestamp(when.decode("ascii", "replace")))
            elif tag == JUNK:
                _, lineno, count, first = event
                self.stats.add("fail_glog", count)
                self.diagnostics.add(self.label, lineno, f"{count:,} lines in a row are not trace lines (no glog prefix); the first",
                                     _snippet(first), HINTS["fail_glog"])
            else:  # END
                self.bytes_read, self.lines_read = event[1], event[2]

    def _process_of(self, pid: int) -> int:
        """The run's number for the process that wrote a record (0 in a log of one process)."""
        if pid == self._pid:
            return self._process
        process = self.processes.index_of(pid, self.label)
        self._pid, self._process = pid, process
        return process

    def _timestamp(self, when: str) -> str:
        """`V1203 14:47:50.325000` → ISO time (glog writes no year: the log's is assumed)."""
        return f"{self._year_prefix}{when[1:3]}-{when[3:5]}T{when[6:14]}.{when[15:21]}Z"

    def _read_glog(self, header: re.Match[bytes], lineno: int) -> GlogFields:
        """A record's glog prefix read, a number too long to be real counted (and read as 0)."""
        g = header.group
        pid = self._number(g("pid"), "glog pid", lineno)
        source_line = self._number(g("line"), "glog line number", lineno)
        # "V1203 14:47:50.325000": one decode, then slices (the groups are fixed-width digits)
        when = header.string[header.start() : header.start() + 21].decode("ascii")
        return self._timestamp(when), pid, self._pathname(g("path")), source_line

    def _number(self, digits: bytes, what: str, lineno: int) -> int:
        """A glog number; a counted bad field (read as 0) when it is too long to be real."""
        if len(digits) <= MAX_DIGITS:
            return int(digits)
        self._problem("fail_field_type", lineno, f"{what} has {len(digits):,} digits", _snippet(digits, 40))
        return 0

    def _pathname(self, path: bytes) -> str:
        pathname = self._paths.get(path)
        if pathname is None:
            pathname = path.decode("utf-8", "replace")
            if len(self._paths) < 4096:  # a log names a few hundred source files: each decoded once
                self._paths[path] = pathname
        return pathname

    def _glog_fields(self, header: re.Match[bytes]) -> GlogFields | None:
        """In a scanning child: what `_record` reads from a glog prefix; None where only `_record`
        can say (a number too long to be real is a counted problem there)."""
        if len(header.group("pid")) > MAX_DIGITS or len(header.group("line")) > MAX_DIGITS:
            return None
        return self._read_glog(header, 0)  # (nothing there to count)

    def _record(
        self, envelope: dict[str, Any], header: re.Match[bytes] | GlogFields, lineno: int, payload: bytes | None, md5: str | None,
        raw_pieces: tuple[bytes, bytes] | None = None,
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
        if isinstance(header, tuple):  # read by a scanning child
            timestamp, pid, pathname, source_line = header
        else:
            timestamp, pid, pathname, source_line = self._read_glog(header, lineno)
        process = self._process_of(pid)
        return Record(
            lineno=lineno,
            envelope=envelope,
            kinds=[key for key in envelope if key not in CONTEXT_KEYS],
            compile_id=compile_id_of(envelope, process, self.compile_ids),
            rank=rank,
            payload=payload,
            payload_md5=md5,
            timestamp=timestamp,
            pid=pid,
            pathname=pathname,
            source_line=source_line,
            other_rank=other,
            process=process,
            raw_pieces=raw_pieces,
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

    def lines_read(self) -> int:
        return self._lines.lineno if self._lines is not None else 0

    def events(self, handle: IO[bytes], lineno: int = 0, offset: int = 0) -> Iterator[Event]:
        """The events of the log `handle` reads, in log order (each step queues them as it meets them).

        `lineno` and `offset`: the lines and bytes of the log before what `handle` reads (a log read
        a piece at a time as it grows, `tail.LogTail`)."""
        lines = self._lines = LineScanner(handle, self.max_line)
        lines.lineno, lines.bytes_read = lineno, offset
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
        events.append((END, lines.bytes_read, lines.lineno))
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
            # its glog time too: a log's first line is usually a string-table record, and the run starts there
            emit((STRING, envelope["str"], lines.lineno, record_line, _snippet(line), line[header.start() : header.start() + 21],
                  header.group("pid")))
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



def _snippet(data: bytes, limit: int = 120) -> str:
    text = data[:limit].decode("utf-8", "replace")
    return text + ("…" if len(data) > limit else "")


def _file_year(path: Path) -> int:
    """glog lines carry no year; the log file's modification time is the best guess."""
    try:
        return time.gmtime(path.stat().st_mtime).tm_year
    except OSError:
        return time.gmtime().tm_year


class PieceServer:
    """Scans the pieces a live report reads of its log (`LogReader.events_of`) in a process forked
    once (`forked.ForkedServer`), before the report's heap grows, while this process builds records
    from what it sends. A piece it cannot scan (its process gone, another file at the path) is
    scanned here."""

    def __init__(self, reader: LogReader):
        self.path, self.max_line, self.glog_fields = reader.path, reader.max_line, reader._glog_fields
        self.server = ForkedServer(self._scan, _event_size)

    @staticmethod
    def start(reader: LogReader) -> None:
        """Give `reader` a server where there is a fork and a second core, and it may fork."""
        if reader.server is None and reader.scanning_child and hasattr(os, "fork") and (os.cpu_count() or 1) >= 2:
            reader.server = PieceServer(reader)

    @staticmethod
    def stop(reader: LogReader) -> None:
        if reader.server is not None:
            reader.server.server.close()
            reader.server = None

    def events(self, file: IO[bytes], offset: int, size: int, lineno: int) -> Iterator[Event] | None:
        """The events of the `size` bytes at `offset` of `file` (the log, its line `lineno` first), or
        None where the server cannot scan them."""
        found = os.fstat(file.fileno())
        return self.server.answer(_PIECE.pack(offset, size, lineno, found.st_dev, found.st_ino))

    def _scan(self, request: bytes) -> Iterator[Event]:
        """In the server: the events of one piece (`_PIECE`), of the file at the path, which must
        be the one the report reads."""
        offset, size, lineno, device, inode = _PIECE.unpack(request)
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)  # (a FIFO put at the path is not waited on)
        with open(fd, "rb") as handle:
            found = os.fstat(fd)
            if not stat.S_ISREG(found.st_mode) or (found.st_dev, found.st_ino) != (device, inode):
                raise OSError(errno.ESTALE, "not the log being read", str(self.path))
            handle.seek(offset)
            scanner = EventScanner(self.max_line)
            yield from _sendable(scanner.events(cast(IO[bytes], Window(handle, size)), lineno, offset), scanner.bytes_read, self.glog_fields)


class Window(io.RawIOBase):
    """The next `size` bytes of a file and nothing past them (a record being written is not read)."""

    def __init__(self, handle: IO[bytes], size: int):
        self.handle = handle
        self.left = size

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if self.left <= 0:
            return b""
        want = self.left if size < 0 else min(size, self.left)
        data = self.handle.read(want)
        self.left -= len(data)
        return data
