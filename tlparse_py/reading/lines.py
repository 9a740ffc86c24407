"""Line scanning: a log's bytes cut into records' lines and payload blocks, 4 MB chunks at a time.

Blank and junk lines are stepped over in bulk with bytes searches, not a Python step per line, so
reading stays linear in the log's size however its lines are shaped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import IO

from ..patterns import lazy
from ..limits import Limits

TAB = 0x09
# A newline not followed by another payload line or a blank (LF or CRLF) line. A line that starts
# with a lone CR is not payload (it may be a record: GLOG_PREFIX searches).
_BLOCK_END = lazy(rb"\n(?!\t|\r?\n)")
# The first newline not followed by a payload line: the block's end, unless a blank line follows it
# (then blank lines lie inside the block, and _BLOCK_END finds its end). Most blocks hold none, and
# this one search then tells so: no second pass over the payload looks for them.
_NOT_TAB_LINE = lazy(rb"\n(?!\t)")
_BLANK_LINE = lazy(rb"\r?\n")
_CR_AT_EOL = lazy(rb"\r(?=\n|$)")
_TAB_LINE = lazy(rb"\n\t")
_BLANK_LINES = lazy(rb"(?:\r?\n)*")  # whole blank lines (LF or CRLF), as next_line sees them
_CR_LF_RUN = lazy(rb"[\r\n]*")  # the same, a hundred times faster, but it also takes lone CRs
# What every glog prefix holds (`:23.064000 5351`), with a literal first byte so the search runs at
# memchr speed; a superset of GLOG_PREFIX: a line it misses cannot be a record.
_GLOG_HINT = lazy(rb":\d\d\.\d{6} \d")
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
                parts = [head_of(parts, 120)]  # too long: keep what a diagnostic quotes, drop the rest
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
        match = _NOT_TAB_LINE.search(self.buf, self.pos)
        blank_lines = False
        if match is not None and _BLANK_LINE.match(self.buf, match.end()) is not None:
            blank_lines = True
            match = _BLOCK_END.search(self.buf, match.start())
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
        self._add_block(chunk, parts, blank_lines)

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

    def _add_block(self, chunk: bytes, parts: list[bytes], blank_lines: bool = True) -> None:
        """Split a chunk of TAB lines (and stray blank lines between them) into payload lines.
        `blank_lines`: False when the caller knows the chunk holds none."""
        if b"\r" in chunk:
            chunk = _CR_AT_EOL.sub(b"", chunk)
        if not (blank_lines and b"\n\n" in chunk) and not chunk.endswith(b"\n"):  # the usual case, done in C
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


def head_of(parts: list[bytes], size: int) -> bytes:
    """The first `size` bytes of the parts, without joining them all (a long line's, a page's)."""
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
    end = _match_end(_CR_LF_RUN, data, pos)
    if end > pos and data[end - 1] == 0x0D:
        end -= 1  # a CR before something else starts the next line
    run = data[pos:end]
    if b"\r" in run and b"\r" in run.replace(b"\r\n", b""):
        return _match_end(_BLANK_LINES, data, pos)  # a line of lone CRs (not blank): the exact, slow way
    return end


def _match_end(pattern: re.Pattern[bytes], data: bytes, pos: int) -> int:
    """Where a pattern that matches the empty string, matched at `pos`, ends."""
    match = pattern.match(data, pos)
    return match.end() if match is not None else pos


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
