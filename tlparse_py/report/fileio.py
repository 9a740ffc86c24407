"""Bytes to and from files: the system calls every writer of the report shares (a whole file
written or read in as few calls as it takes, a log copied by the kernel, small writes gathered)."""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path
from typing import IO


class GatheredWrites:
    """Small writes gathered and handed to `handle` `size` bytes at a time: a big log makes 100,000s
    of them (a record's spool entry, its raw.jsonl line, a chromium event), and a write call to a
    buffered or spooled file costs more than the bytes of one."""

    def __init__(self, handle: IO[bytes], size: int):
        self.handle = handle
        self.size = size
        self.pending = bytearray()

    def write(self, *parts: bytes) -> None:
        for part in parts:
            self.pending += part
        if len(self.pending) >= self.size:
            self.flush()

    def flush(self) -> None:
        """Hand what is gathered to the handle (its own buffer is the handle's to flush)."""
        if self.pending:
            self.handle.write(self.pending)
            self.pending.clear()


def read_file(path: str) -> bytes:
    """The whole content of a file: one open, one fstat, one read for a small one."""
    with open(path, "rb", buffering=0) as handle:
        return handle.readall()


def write_file(path: str | Path, data: bytes) -> None:
    """`data` as the whole content of `path` (created or truncated); an error names `path`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data, path)
    finally:
        os.close(fd)


def write_pieces_file(path: str | Path, pieces: list[bytes]) -> None:
    """`pieces`, one after another, as the whole content of `path`: written from where they lie
    (os.writev, IOV_MAX at a time), never joined (a live index: 8 MB in 8,900 pieces, at each update)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for start in range(0, len(pieces), IOV_MAX):
            batch = pieces[start : start + IOV_MAX]
            try:
                written = os.writev(fd, batch)
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, str(path)) from None
            for piece in batch:  # what a short write left: the rest of its piece, then the pieces after it
                if written >= len(piece):
                    written -= len(piece)
                    continue
                write_all(fd, memoryview(piece)[written:], path)
                written = 0
    finally:
        os.close(fd)


IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024) if hasattr(os, "sysconf") and "SC_IOV_MAX" in os.sysconf_names else 16


def write_all(fd: int, data: bytes | bytearray | memoryview, path: str | Path) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:  # ENOSPC, EFBIG: os.write does not say which file
        raise OSError(exc.errno, exc.strerror, str(path)) from None


def copy_up_to(source: IO[bytes], fd: int, room: int, target: Path) -> int:
    """Copy `source` to `fd` (the file `target`) until it ends or `room` bytes are copied; the bytes
    copied, room + 1 when `source` holds more (what was copied then stops at `room`).

    A plain file is copied by the kernel (copy_file_range: no trip through this process, a few
    calls for a log of 100s of MB); a .gz, or a file system that cannot, a MB at a time."""
    copied = _copy_in_kernel(source, fd, room, target)
    if copied is not None:
        return copied
    copied = 0
    while copied < room and (data := source.read(min(1 << 20, room - copied))):
        write_all(fd, data, target)
        copied += len(data)
    return room + 1 if copied == room and source.read(1) else copied


def _copy_in_kernel(source: IO[bytes], fd: int, room: int, target: Path) -> int | None:
    """`copy_up_to` by copy_file_range for a plain file; None where it cannot be used (nothing copied then)."""
    if not hasattr(os, "copy_file_range") or not isinstance(source, io.BufferedReader):
        return None
    try:
        source_fd, offset = source.fileno(), source.tell()
    except (OSError, ValueError):
        return None
    copied = 0
    while copied < room:
        try:
            count = os.copy_file_range(source_fd, fd, min(room - copied, 1 << 30), offset + copied)
        except OSError as exc:
            if copied == 0 and exc.errno in (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EBADF):
                return None  # not between these files: copied the usual way
            raise OSError(exc.errno, exc.strerror, str(target)) from None
        if count == 0:
            return copied
        copied += count
    return room + 1 if os.pread(source_fd, 1, offset + room) else copied


def unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
