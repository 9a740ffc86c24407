"""A log that is still being written, read a piece at a time (`tlparse-py watch`).

Each `LogTail.read` reads only the bytes appended since the last one, up to the end of the last
complete record: a record whose line or payload is still being written waits for the next read.
The records come out exactly as one read of the whole log would give them (the same line numbers,
the same problems), so a report built from the pieces equals the one-shot report.

A log that shrinks, is replaced by another file, or whose bytes before the read position change
(truncated and written again: its first bytes, or those just before the read position, differ)
cannot be continued: `LogReset` says so, and the caller starts over.

A piece never ends inside a run of payload lines that may go on: payload lines with no record of
their own (orphans) wait for the next record's line, and a record line without a payload is read at
once but the orphans after it are counted as the one-shot read counts them (once, after that
record). Only regular files are opened, without blocking (a FIFO at the log's path is refused), and
the search for the last whole record reads at most what the one-shot reader holds (`max_line`).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, cast

from ..model import DiagnosticLog, Record, Stats, StringTable
from .lines import TAB
from .gunzip import LogAsRead
from .records import JUNK, PROBLEM, RECORD, STRING, Event, EventScanner, LogReader, Window

SEAM_BYTES = 64  # the bytes just before the read position, checked at each read: still the same log?
BACK_BLOCK = 1 << 16  # the tail is searched backwards for the last record's line this much at a time


class LogReset(Exception):
    """The log cannot be continued from where reading stopped; the message says why."""


class NotRegular(OSError):
    """The log's path holds something other than a regular file (a FIFO, a device, a folder)."""


ORPHAN_AFTER_RECORD = "payload lines after a record without has_payload"
ORPHAN_ALONE = "payload lines with no record"


def open_regular(path: Path) -> IO[bytes]:
    """Open a log for reading only if it is a regular file: never blocks (a FIFO is opened with
    O_NONBLOCK, then refused), never follows a symlink at the last step."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegular(exc.errno, "is a symbolic link now, not the log", str(path)) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(errno.EINVAL, "is not a regular file now (a FIFO, a device or a folder)", str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


class LogTail:
    """Reads a growing plain log piece by piece; `reader` holds what reading has learnt (the rank, strings)."""

    def __init__(self, path: Path, stats: Stats, diagnostics: DiagnosticLog, strings: StringTable, reader: LogReader | None = None):
        self.path = path
        self.reader = reader or LogReader(path, stats, diagnostics, strings=strings, scanning_child=False)
        self.offset = 0  # bytes read so far (always the end of a complete record, or of the log)
        self.lineno = 0  # lines read so far
        self.identity: tuple[int, int] | None = None
        self.seam = b""  # the SEAM_BYTES before `offset`, as read
        self.head = b""  # the log's first SEAM_BYTES (a rewritten log starts with another time), as read
        # what the last line read was, for payload lines that follow it in the next piece: "bare" (a
        # record without has_payload: they are its orphans), "swallowed" (a string or a bad envelope:
        # the one-shot reader skips them), or "" (nothing special)
        self.before = ""
        # the file last read, up to `offset`: what raw.log copies (the path may hold more, or another file, by then)
        self.as_read: LogAsRead | None = None

    def read(self, final: bool = False) -> Iterator[Record]:
        """The records appended since the last read, up to the last complete one; with `final`
        (its writer is gone), everything to the end of the log, as a one-shot read ends it.

        Raises LogReset before yielding anything when the log is not the one read so far.
        """
        with open_regular(self.path) as handle:
            size = self._check(handle)
            if self.as_read is not None:
                self.as_read.close()
            self.as_read = LogAsRead(self.path, handle)
            self.as_read.length = self.offset
            end = size if final else complete_end(handle, self.offset, size, self.reader.max_line)
            if end <= self.offset:
                return
            handle.seek(self.offset)
            window = cast(IO[bytes], Window(handle, end - self.offset))
            events = self._in_context(self.reader.events_of(window, end - self.offset, self.lineno, self.offset, file=handle))
            yield from self.reader.records_of(events)
            self.lineno = self.reader.lines_read
            self.offset = self.as_read.length = end
            handle.seek(max(0, end - SEAM_BYTES))
            self.seam = handle.read(end - max(0, end - SEAM_BYTES))
            handle.seek(0)
            self.head = handle.read(min(SEAM_BYTES, end))

    def _in_context(self, events: Iterator[Event]) -> Iterator[Event]:
        """The piece's events as a one-shot read gives them: payload lines at the piece's start that
        follow the last line read are counted as that line's (`before`); notes what the piece ends with."""
        first = True
        for event in events:
            tag = event[0]
            if first:
                first = False
                if tag == PROBLEM and event[1] == "fail_orphan_payload" and event[3] == ORPHAN_ALONE:
                    if self.before == "swallowed":
                        continue  # a string's or a bad envelope's payload lines: skipped, not counted
                    if self.before == "bare" and event[2] == self.lineno + 1:
                        event = (PROBLEM, event[1], event[2], ORPHAN_AFTER_RECORD, event[4])
            if tag == RECORD:
                self.before = "bare" if event[4] is None and "has_payload" not in event[3] else ""
            elif tag == STRING or (tag == PROBLEM and event[1] == "fail_json"):
                self.before = "swallowed"
            elif tag == JUNK or (tag == PROBLEM and event[1] in ("fail_glog", "fail_orphan_payload", "fail_line_too_long")):
                self.before = ""
            yield event

    def size_now(self) -> int:
        """The log's size now (-1 when it cannot be told): what says whether it still grows."""
        try:
            return os.lstat(self.path).st_size
        except OSError:
            return -1

    def appended(self) -> int:
        """Bytes in the log past what was read (0 when it cannot be told)."""
        try:
            return max(0, self.path.stat().st_size - self.offset)
        except OSError:
            return 0

    def _check(self, handle: IO[bytes]) -> int:
        """The log's size now; LogReset if it is not the log read so far."""
        stat = os.fstat(handle.fileno())
        identity = (stat.st_dev, stat.st_ino)
        if self.identity is not None and identity != self.identity:
            raise LogReset(f"{self.path} was replaced by another file (rotated?)")
        if stat.st_size < self.offset:
            raise LogReset(f"{self.path} shrank from {self.offset:,} to {stat.st_size:,} bytes (truncated?)")
        if self.seam:
            handle.seek(self.offset - len(self.seam))
            seam = handle.read(len(self.seam))
            handle.seek(0)
            if seam != self.seam or handle.read(len(self.head)) != self.head:
                raise LogReset(f"{self.path} changed before byte {self.offset:,} (truncated and written again?)")
        self.identity = identity
        return stat.st_size


def complete_end(handle: IO[bytes], start: int, size: int, max_line: int) -> int:
    """Where the complete records that follow `start` end: the log's complete lines, less the last
    record unless it is whole (a payload that matches its md5), and less the payload lines after a
    record without one (orphans: more may follow, and the one-shot read counts a run once). A line
    still being written (no newline yet) is never read. Reads at most what the one-shot reader
    holds: a line over `max_line` is not read at all (it is dropped as too long)."""
    newline = _last_newline(handle, start, size)
    if newline < 0:
        return start
    region_end = newline + 1
    last = _last_line_start(handle, start, region_end)
    if last < 0:
        return start  # nothing but payload lines and blanks: orphans that may go on; the next record's line ends them
    line_end = _line_end(handle, last, region_end)
    if line_end - last - 1 > max_line:
        return line_end  # too long to be read: dropped as one; what follows it waits like orphans
    handle.seek(last)
    whole = _whole_record(cast(IO[bytes], Window(handle, region_end - last)), max_line)
    if whole is None:
        return line_end  # not a record with a payload: read it, and let the lines after it wait
    return region_end if whole else last


def _last_newline(handle: IO[bytes], start: int, size: int) -> int:
    position = size
    while position > start:
        begin = max(start, position - BACK_BLOCK)
        handle.seek(begin)
        found = handle.read(position - begin).rfind(b"\n")
        if found >= 0:
            return begin + found
        position = begin
    return -1


def _last_line_start(handle: IO[bytes], start: int, end: int) -> int:
    """The start of the last line in [start, end) that is neither blank nor payload (TAB); -1 if none.

    `end - 1` is a newline. Read backwards a block at a time; a line starts at `start` and after
    every newline."""
    position, after = end, b""  # `after`: the byte at `position`
    while position > start:
        begin = max(start, position - BACK_BLOCK)
        handle.seek(begin)
        block = handle.read(position - begin)
        index = len(block)
        while (index := block.rfind(b"\n", 0, index)) >= 0:
            line_start = begin + index + 1
            first = block[index + 1 : index + 2] or after
            if line_start < end and first not in _NOT_A_RECORD_START:
                return line_start
        if begin == start and block[:1] not in _NOT_A_RECORD_START:
            return start
        position, after = begin, block[:1]
    return -1


_NOT_A_RECORD_START = (b"\n", b"\r", bytes([TAB]))


def _line_end(handle: IO[bytes], start: int, end: int) -> int:
    """Just past the newline that ends the line starting at `start` (there is one before `end`)."""
    position = start
    while position < end:
        handle.seek(position)
        block = handle.read(min(BACK_BLOCK, end - position))
        found = block.find(b"\n")
        if found >= 0:
            return position + found + 1
        position += len(block)
    return end


def _whole_record(tail: IO[bytes], max_line: int) -> bool | None:
    """Whether `tail` (a line and the payload lines after it) is a whole record with a payload as
    written; None when its first line is no record with a payload (no payload, a string, junk)."""
    scanner = EventScanner(max_line)
    for event in scanner.events(tail):
        if event[0] == RECORD:
            envelope, payload, md5 = event[3], event[4], event[5]
            if "has_payload" not in envelope:
                return None
            return payload is not None and hashlib.md5(payload).hexdigest() == md5
        if event[0] != PROBLEM or event[1] not in ("fail_utf8", "fail_payload_md5"):
            return None  # a string, a bad envelope, junk: nothing to wait for
    return None
