"""The only file writer of a report: every file under the report's root (already inside a staging
folder, or the live report's folder), by a relative path that cannot leave it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from collections.abc import Iterable
from typing import IO, Any

from ..limits import Limits
from ..reading.gunzip import LogAsRead
from .behind import BehindWrites, ForkedWrites
from .fileio import copy_up_to, read_file, unlink_quietly, write_all, write_file


# Scratch files (the record spool, raw.jsonl's body, pending pages, highlighted code) stay in memory
# up to this size, then go to disk: a small log makes no files, and a big one (a compile id with
# millions of records) costs at most this much memory per scratch file, however big it grows.
SCRATCH_IN_MEMORY = 1 << 20
# A page written in pieces (`write_pieces`) is encoded and written this many characters or so at a time
WRITE_CHUNK = 1 << 20


class FolderWriter:
    """Writes report files under `root` (already inside a staging folder): the only file writer."""

    _behind: BehindWrites | ForkedWrites | None = None  # what writes `write_behind`'s files, once one is asked for
    _behind_in_a_process = False  # a forked child writes them, not a thread (`write_behind_in_a_process`)

    def __init__(self, root: Path):
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.bytes_written = 0
        self._root = os.fspath(root)
        self._behind: BehindWrites | ForkedWrites | None = None

    def write_behind(self, rel: str, data: bytes | str) -> None:
        """`write`, done by a thread (or a forked child) while the caller goes on: for files nothing
        reads before `settle` (payloads and outputs written while the log is read). `read` settles first."""
        if self._behind is None:
            self._behind = BehindWrites(self.write)  # (a forked one is made by write_behind_in_a_process)
        data = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
        self._behind.put(rel, data)
        if self._behind_in_a_process:  # counted here: the child's count is its own
            self.bytes_written += len(data)

    def write_behind_in_a_process(self) -> None:
        """Have a forked child write `write_behind`'s files from now on (behind.ForkedWrites): for a big
        log, where a fork and a second core are there. Not for a writer whose `write` keeps state in
        this process (the live report's)."""
        if (self._behind is None and type(self).write is FolderWriter.write and hasattr(os, "fork")
                and (os.cpu_count() or 1) >= 2):
            self._behind_in_a_process = True
            self._behind = ForkedWrites(self.write)
            self._behind.start()  # now: before the reading starts threads (its read-ahead)

    def drop_behind(self) -> None:
        """Stop writing what is queued (the report is abandoned); returns once no write is under way."""
        if self._behind is not None:
            self._behind.stop()

    def settle(self) -> None:
        """Every `write_behind` done (before reading files back, forking, or finishing)."""
        if self._behind is not None:
            self._behind.settle()

    def close_behind(self) -> None:
        """Every `write_behind` done and its thread ended (the report is written)."""
        if self._behind is not None:
            self._behind.close()

    def sub(self, folder: str) -> FolderWriter:
        """A writer for a sub-report (e.g. `rank_0/`), inside the same staging folder."""
        return FolderWriter(self.path(f"{folder}/.keep").parent)

    def path(self, rel: str) -> Path:
        """The staging path of a relative report path, its folder made; anything that would leave the report is refused."""
        place = self._place(rel)
        self._make_folder(rel)
        return Path(place)

    def _place(self, rel: str) -> str:
        """`path` as a string, its folder not made: a report of 10,000s of small compiles asks this for
        every file it writes and reads, and pathlib's joins cost more than the file's system calls. A
        path of plain names (most) is told safe by a few substring tests."""
        if rel[:1] in ("", "/", ".") or "/." in rel or "//" in rel or "\\" in rel or "\0" in rel or rel[-1] == "/":
            self._check_relative(rel)
        return f"{self._root}/{rel}"

    def _make_folder(self, rel: str) -> None:
        """The folders of `rel` below the root, each made where it is missing. Folders are made when a
        write finds its folder missing, not remembered: a set of every folder made held 110 bytes a
        compile id (docs/limits.md). The root itself is never made again: gone, the write fails."""
        parts = rel.split("/")[:-1]
        for end in range(1, len(parts) + 1):
            try:
                os.mkdir(f"{self._root}/{'/'.join(parts[:end])}")
            except FileExistsError:
                continue

    @staticmethod
    def _check_relative(rel: str) -> None:
        parts = rel.split("/")
        if not rel or rel.startswith("/") or any(p in ("", ".", "..") or "\\" in p or "\0" in p for p in parts):
            raise ValueError(f"unsafe report path {rel!r}")

    def write(self, rel: str, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        path = self._place(rel)
        try:
            write_file(path, data)
        except FileNotFoundError:  # its folder not made yet
            self._make_folder(rel)
            write_file(path, data)
        self.bytes_written += len(data)

    def write_pieces(self, rel: str, pieces: Iterable[str] | Iterable[bytes]) -> None:
        """`write` of a text (or bytes) made in pieces (the index of 10,000s of compiles: 10s of MB),
        written as they come, about `WRITE_CHUNK` characters at a time, so the whole text is never
        held. A writer whose `write` does more than write the file (the live report's: atomic, and
        not when the page is unchanged) is given the whole text."""
        if type(self).write is not FolderWriter.write:
            whole: list[Any] = list(pieces)
            self.write(rel, b"".join(whole) if whole and isinstance(whole[0], bytes) else "".join(whole))
            return
        path = self._place(rel)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        except FileNotFoundError:  # its folder not made yet
            self._make_folder(rel)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            chunk: list[Any] = []
            size = 0
            for piece in pieces:
                chunk.append(piece)
                size += len(piece)
                if size >= WRITE_CHUNK:
                    self._write_chunk(fd, chunk, path)
                    chunk.clear()
                    size = 0
            self._write_chunk(fd, chunk, path)
        except BaseException:
            os.close(fd)
            unlink_quietly(Path(path))  # no page cut short is left behind
            raise
        os.close(fd)

    def _write_chunk(self, fd: int, chunk: list[Any], path: str) -> None:
        data = _joined(chunk)
        write_all(fd, data, path)
        self.bytes_written += len(data)

    def open(self, rel: str) -> IO[bytes]:
        """A binary stream for files written piece by piece (raw.jsonl, chromium_events.json)."""
        return open(self.path(rel), "wb")

    def read(self, rel: str) -> bytes | None:
        """A file already written to the report (None if it is not there)."""
        self.settle()
        try:
            return read_file(self._place(rel))
        except (OSError, ValueError):
            return None

    def copy_logs(self, logs: list[LogAsRead], rel: str, limits: Limits) -> None:
        """raw.log: what the readers read of the logs (un-gzipped, concatenated), byte for byte, up to `max_raw_log`.

        Each log is copied from the file its reader read, as far as it read (`LogAsRead`), so raw.log
        is what the report was made of: not the records a log still being written gained since, not
        another file renamed over it. Beyond the cap raw.log is a short note naming the logs: a copy
        the size of the input is rarely wanted twice. The logs are closed here.
        """
        try:
            if sum(log.length for log in logs) > limits.max_raw_log:
                self.write(rel, _raw_log_note([log.path for log in logs], limits))
                return
            self.bytes_written += self._copy_as_read(logs, rel, limits)
        finally:
            for log in logs:
                log.close()

    def _copy_as_read(self, logs: list[LogAsRead], rel: str, limits: Limits) -> int:
        """`copy_logs` under the cap: the bytes written."""
        target = self.path(rel)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            written = 0
            for log in logs:
                with log.open(limits) as source:
                    written += min(copy_up_to(source, fd, log.length, target), log.length)  # more: appended since
        except BaseException:
            os.close(fd)
            unlink_quietly(target)  # no raw.log cut short is left behind
            raise
        os.close(fd)
        return written

    def scratch(self, in_memory: int = SCRATCH_IN_MEMORY) -> IO[bytes]:
        """A temporary file, gone when closed: in memory up to `in_memory` bytes, then on the report's disk."""
        return tempfile.SpooledTemporaryFile(max_size=in_memory, mode="w+b", dir=str(self.root), prefix=".spool-")


class NullWriter(FolderWriter):
    """A writer that writes nothing: `analyze()` runs the pipeline through it to build the analysis alone."""

    def __init__(self) -> None:
        self.root = Path(tempfile.gettempdir())
        self.bytes_written = 0

    def sub(self, folder: str) -> FolderWriter:
        return self

    def write(self, rel: str, data: bytes | str) -> None:
        pass

    def write_behind(self, rel: str, data: bytes | str) -> None:
        pass

    def open(self, rel: str) -> IO[bytes]:
        return open(os.devnull, "wb")

    def read(self, rel: str) -> bytes | None:
        return None

    def scratch(self, in_memory: int = SCRATCH_IN_MEMORY) -> IO[bytes]:
        return tempfile.SpooledTemporaryFile(max_size=in_memory, prefix=".tlparse-py-spool-")


def _raw_log_note(logs: list[Path], limits: Limits) -> bytes:
    names = "\n".join(f"  {log.absolute()}" for log in logs)
    return (
        f"raw.log is not copied: the log is larger than --max-raw-log-mb ({limits.max_raw_log_mb:g} MB).\n"
        f"Read it where it is:\n{names}\n"
    ).encode("utf-8", "surrogateescape")


def _joined(pieces: list[Any]) -> bytes:
    """Pieces of text, or of bytes (all of one type), as the bytes of a file."""
    if pieces and isinstance(pieces[0], bytes):
        return b"".join(pieces)
    return "".join(pieces).encode("utf-8", "surrogatepass")
