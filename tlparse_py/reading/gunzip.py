"""Bounded gunzip: opening a log, un-gzipping `.gz` files without letting a decompression bomb cost
unbounded time, memory or disk (docs/limits.md)."""

from __future__ import annotations

import errno
import os
import io
import weakref
import zlib
from pathlib import Path
from typing import IO, Any

from ..limits import GUNZIP_GRACE_MB, MB, Limits


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


# Descriptors held at once for raw.log (one per log read, until it is copied): far under the usual
# limit of open files (1024; 256 on macOS), so a report of thousands of logs still opens the next one
HELD_MAX = 64
_held = [0]


def _release(fd: int) -> None:
    os.close(fd)
    _held[0] -= 1


class LogAsRead:
    """What a reader read of one log: the file it opened and how many bytes of it were read (the
    un-gzipped bytes of a .gz): raw.log copies exactly these (`FolderWriter.copy_logs`).

    The file is held by a descriptor of its own (a dup of the reader's, closed by `close` or when
    this is dropped), so the copy is of the very bytes read: a log appended to after reading holds
    more than was read, and a log renamed over holds another file. Past HELD_MAX logs held, or where
    no descriptor is left, the log is opened again by its path for the copy, and must still be the
    file read (its device and inode): else the copy fails, naming it.
    """

    def __init__(self, path: Path, handle: IO[bytes]):
        self.path = path
        self.gzipped = isinstance(handle, BoundedGunzip)
        self.length = 0  # bytes read so far (`ended` sets it from the reader's file)
        raw = handle.raw if isinstance(handle, BoundedGunzip) else handle
        found = os.fstat(raw.fileno())
        self.identity = (found.st_dev, found.st_ino)
        self._fd: int | None = None
        if _held[0] < HELD_MAX:
            try:
                self._fd = os.dup(raw.fileno())
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE):
                    raise
        if self._fd is not None:
            _held[0] += 1
        self._closer = weakref.finalize(self, _release, self._fd) if self._fd is not None else None

    def ended(self, handle: IO[bytes]) -> None:
        """Reading `handle` (the reader's, read to its end) is over: what it read is what raw.log copies.

        A plain log's file offset is what its readers were given: a scanning child (records.py)
        reads through the same open file, so its reads move it too."""
        if isinstance(handle, BoundedGunzip):
            self.length = handle.expanded
        else:
            self.length = os.lseek(handle.fileno(), 0, os.SEEK_CUR)

    def open(self, limits: Limits) -> IO[bytes]:
        """The log's bytes from its first, un-gzipped as they were read (the caller closes it, and
        reads no more than `length`: a log still being written has more)."""
        handle: IO[bytes]
        if self._fd is not None:
            handle = os.fdopen(os.dup(self._fd), "rb")
            handle.seek(0)  # a duplicate shares the reader's file offset: it is past the end read
        else:
            handle = open_file(self.path)
            found = os.fstat(handle.fileno())
            if (found.st_dev, found.st_ino) != self.identity:
                handle.close()
                raise OSError(errno.ESTALE, "was replaced after it was read (raw.log cannot copy what was read)", str(self.path))
        return BoundedGunzip(handle, self.path, limits) if self.gzipped else handle  # type: ignore[return-value]

    def close(self) -> None:
        if self._closer is not None:
            self._closer()


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
