"""The only code that touches the output folder.

A report is built in a staging folder beside the target (`.tl_out.partial-XXXX`) and moved into
place only when complete, so an interrupted or failed run never leaves a half report and
`--overwrite` never loses the previous report before the new one exists.
"""

from __future__ import annotations

import collections
import errno
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, NamedTuple

from .. import shutdown
from ..limits import Limits
from ..reading.gunzip import LogAsRead


class OutputError(Exception):
    """The output folder cannot be used (exists, is a file, is not a report...)."""


class ReportKeptElsewhere(OutputError):
    """The report is complete, but something appeared at -o while it was written: it was kept beside."""

    def __init__(self, message: str, kept: Path):
        super().__init__(message)
        self.kept = kept


MARKER = ".tlparse-py-report"  # in every report we write: what --overwrite may replace
NEVER_REPLACE = (".git", ".hg", ".svn")  # a folder holding these is someone's work, whatever else it holds
# Scratch files (the record spool, raw.jsonl's body, pending pages, highlighted code) stay in memory
# up to this size, then go to disk: a small log makes no files, and a big one (a compile id with
# millions of records) costs at most this much memory per scratch file, however big it grows.
SCRATCH_IN_MEMORY = 1 << 20
_ACTIVE: set[ReportWriter] = set()  # staging folders of this process, removed by abort_all() on SIGTERM
COMMITTED: set[Path] = set()  # the reports this process put in place (after a late SIGTERM: was it changed?)


def looks_like_report(folder: Path) -> bool:
    """A folder we may replace: one of our reports (marker), tlparse's layout, or nothing at all."""
    try:
        entries = {p.name for p in folder.iterdir()}
    except OSError:
        return False
    if entries & set(NEVER_REPLACE):
        return False
    if not entries or MARKER in entries:
        return True
    single = {"index.html", "compile_directory.json", "raw.jsonl"} <= entries
    multi = "index.html" in entries and any(name.startswith("rank_") and (folder / name / "index.html").is_file() for name in entries)
    return single or multi


class OutputTarget(NamedTuple):
    """What a path the tool is to write names now: told by `classify_output` alone, for every option
    that writes (-o, --markdown, --single-file, pack's FILE.html, diff's -o and --markdown).

    kind: "missing" (nothing there, or a symlink to nothing), "file" (a regular file), "folder",
    "stream" (a character device, pipe or FIFO: /dev/stdout, /dev/null, `>(...)`, or a link to a
    file this process holds open, such as /dev/stdout redirected to a file: written in place, never
    replaced nor removed), or "other" (a socket, a block device: never written).
    link: the path itself is a symlink (kind says what it leads to)."""

    path: Path
    kind: str
    link: bool

    @property
    def in_place(self) -> bool:
        """Written where it is, through the path as given (never replaced, never removed)."""
        return self.kind == "stream"

    def refusal(self) -> str | None:
        """Why no file can be written here (None when it can), as "PATH is ...; give a file name"."""
        if self.kind == "folder":
            return f"{self.path} is a folder; give a file name"
        if self.kind == "other":
            return f"{self.path} is neither a file, a pipe nor a character device; give a file name"
        return None


def classify_output(path: Path) -> OutputTarget:
    """The one place where an output path is told apart (see OutputTarget)."""
    try:
        link = stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return OutputTarget(path, "missing", False)
    try:
        found = os.stat(path)
    except OSError:
        return OutputTarget(path, "missing", link)
    if stat.S_ISCHR(found.st_mode) or stat.S_ISFIFO(found.st_mode):
        kind = "stream"
    elif stat.S_ISDIR(found.st_mode):
        kind = "folder"
    elif stat.S_ISREG(found.st_mode):
        kind = "stream" if link and _held_open(found) else "file"
    else:
        kind = "other"
    return OutputTarget(path, kind, link)


def _held_open(found: os.stat_result, besides: int = -1) -> bool:
    """Whether this process holds the file open, on another descriptor than `besides` (its stdout
    redirected to it: /dev/stdout, /proc/self/fd/N)."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        fds = [0, 1, 2]
    for fd in fds:
        if fd == besides:
            continue
        try:
            held = os.fstat(fd)
        except OSError:
            continue
        if (held.st_dev, held.st_ino) == (found.st_dev, found.st_ino):
            return True
    return False


def check_target(out: Path, overwrite: bool) -> None:
    """Refuse unusable targets before any work starts."""
    target = classify_output(out)
    if target.link:
        raise OutputError(f"output path {out} is a symlink; choose another -o")
    if target.kind not in ("missing", "folder"):
        raise OutputError(f"output path {out} exists and is not a folder; choose another -o")
    if target.kind == "folder":
        if not overwrite:
            raise OutputError(f"output folder {out} already exists; pass --overwrite to replace it or use -o OUTDIR")
        if not looks_like_report(out):
            raise OutputError(
                f"refusing to overwrite {out}: it does not look like a tlparse report (no {MARKER} or tlparse's files, or it holds .git); choose another -o"
            )
    parent = out.parent if str(out.parent) else Path(".")
    if parent.exists() and not parent.is_dir():
        raise OutputError(f"cannot create {out}: {parent} is not a folder")


def append_output(path: Path, text: str) -> None:
    """Add `text` at the end of `path`, created when missing, as shell `>>` does: a CI job's
    summary file ($GITHUB_STEP_SUMMARY) holds what earlier steps wrote, and it must survive. A
    blank line parts it from earlier text in a plain file. A character device, pipe or FIFO (also
    behind a symlink: /dev/stdout, as root too) is written where it is, never replaced; a symlink to
    anything else is replaced by a plain file, never written through (a link planted where the file
    goes must not make us write into what it names)."""
    target = _writable(path)
    if target.in_place:
        fd = _open_in_place(target)
        with os.fdopen(fd, "ab") as stream:
            stream.write(text.encode("utf-8"))
        return
    if target.link:
        os.unlink(path)  # the link, not what it names
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags, 0o666)  # the umask applies, as for any new file
    with os.fdopen(fd, "ab") as stream:
        stream.write((_separator(fd) + text).encode("utf-8"))


def replace_output(path: Path, fill: Callable[[int], None]) -> None:
    """Write the whole of `path` by `fill(fd)` (which leaves `fd` open). A plain file (or nothing,
    or a symlink) is written beside it and renamed over it once complete: never half a file, and a
    symlink is replaced, not written through. A character device, pipe or FIFO is written in place."""
    target = _writable(path)
    if target.in_place:
        fd = _open_in_place(target)
        try:
            fill(fd)
        finally:
            os.close(fd)
        return
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        try:
            fill(fd)
        finally:
            os.close(fd)
        os.chmod(temp, 0o666 & ~_umask())
        os.replace(temp, path)
    except BaseException:
        _remove(Path(temp))
        raise


def _writable(path: Path) -> OutputTarget:
    target = classify_output(path)
    if target.refusal():
        raise OSError(errno.EISDIR if target.kind == "folder" else errno.EINVAL, "is a folder" if target.kind == "folder" else "is not a file", str(path))
    return target


def _open_in_place(target: OutputTarget) -> int:
    """The stream `target` opened where it is, to append (a file stdout is redirected to keeps
    what was written to it; a FIFO waits for its reader, as `>>` does)."""
    fd = os.open(target.path, os.O_WRONLY | os.O_APPEND)
    found = os.fstat(fd)
    if not (stat.S_ISCHR(found.st_mode) or stat.S_ISFIFO(found.st_mode) or (stat.S_ISREG(found.st_mode) and _held_open(found, besides=fd))):
        os.close(fd)  # not what was classified: a file swapped in since
        raise OSError(errno.EAGAIN, "was replaced while it was opened", str(target.path))
    return fd


def _separator(fd: int) -> str:
    """What goes between a plain file's text and what is appended to it: nothing, or a newline or
    two, so that a blank line parts them."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
        return ""
    os.lseek(fd, max(info.st_size - 2, 0), os.SEEK_SET)  # O_APPEND: the write still goes to the end
    tail = os.read(fd, 2)
    if tail.endswith(b"\n\n") or tail == b"\n":
        return ""
    return "\n" if tail.endswith(b"\n") else "\n\n"


class BehindWrites:
    """Files written by a thread beside the reading: on a log of 200 MB the ~8,000 payload and
    output files cost seconds of system calls (which release the GIL), while the second core waits.

    At most MAX_BEHIND_BYTES are queued, each file counted with ENTRY_BYTES more for its name and
    queue entry (a new file waits for room: memory stays flat, even for a million tiny files); the first
    error stops the thread and is raised by every later `put` and `settle`. Wake-ups are only sent
    to whoever waits, and a full queue wakes its caller once it is half empty (a thread switch per
    file would cost what the thread saves)."""

    MAX_BEHIND_BYTES = 8 << 20
    ENTRY_BYTES = 512  # what a queued file costs besides its bytes (its path, the tuple, the bytes object)
    # The idle thread is woken once this many files (or bytes) wait, not for each: a log of 10,000s of
    # small compiles queues a few small files each, and a wake-up per file cost a thread switch (and a
    # GIL hand-over) per file; `settle` and `stop` wake it for whatever waits.
    WAKE_FILES = 64
    WAKE_BYTES = 1 << 20

    def __init__(self, write: Callable[[str, bytes], None]):
        self.write = write
        self.queue: collections.deque[tuple[str, bytes]] = collections.deque()
        self.queued_bytes = 0
        self.error: BaseException | None = None
        self.condition = threading.Condition()
        self.writer_idle = False  # the thread waits for work
        self.waiting = 0  # callers waiting for room, or for the queue to empty
        self.thread: threading.Thread | None = None

    def put(self, rel: str, data: bytes) -> None:
        with self.condition:
            while self.queue and self.queued_bytes + len(data) + self.ENTRY_BYTES > self.MAX_BEHIND_BYTES and self.error is None:
                self._wait()
            self._raise()
            self.queue.append((rel, data))
            self.queued_bytes += len(data) + self.ENTRY_BYTES
            if self.writer_idle and (len(self.queue) >= self.WAKE_FILES or self.queued_bytes >= self.WAKE_BYTES):
                self.condition.notify_all()
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="tlparse-py-writes", daemon=True)
            self.thread.start()

    def settle(self) -> None:
        """Wait until every queued file is written; raise the error that stopped the writes, if any."""
        with self.condition:
            while self.queue and self.error is None:
                self._wake()
                self._wait()
            self._raise()

    def stop(self) -> None:
        """Drop what is queued; return once no write is under way."""
        with self.condition:
            while len(self.queue) > 1:  # the file being written (the first) is finished, the rest dropped
                self.queue.pop()
            while self.queue and self.error is None:
                self._wake()
                self._wait(0.1)
            self.queue.clear()
            self.queued_bytes = 0

    def _wake(self) -> None:
        """The thread, if it waits for work (called holding the condition)."""
        if self.writer_idle:
            self.condition.notify_all()

    def _wait(self, timeout: float | None = None) -> None:
        self.waiting += 1
        try:
            self.condition.wait(timeout)
        finally:
            self.waiting -= 1

    def _raise(self) -> None:
        """The write error, once there was one: raised again by every later call (the thread has
        stopped, so nothing queued will ever be written)."""
        if self.error is not None:
            self.queue.clear()
            self.queued_bytes = 0
            raise self.error

    def _run(self) -> None:
        while True:
            with self.condition:
                while not self.queue:
                    self.writer_idle = True
                    self.condition.wait()
                self.writer_idle = False
                rel, data = self.queue[0]
            try:
                self.write(rel, data)
            except BaseException as exc:  # noqa: BLE001 - handed to the reading thread
                with self.condition:
                    self.error = exc
                    self.condition.notify_all()
                return
            with self.condition:
                self.queue.popleft()
                self.queued_bytes -= len(data) + self.ENTRY_BYTES
                if self.waiting and (not self.queue or self.queued_bytes <= self.MAX_BEHIND_BYTES // 2):
                    self.condition.notify_all()


class FolderWriter:
    """Writes report files under `root` (already inside a staging folder): the only file writer."""

    def __init__(self, root: Path):
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.bytes_written = 0
        self._root = os.fspath(root)
        self._dirs: set[str] = {""}  # the report's folders already made (relative; "" is the root)
        self._behind: BehindWrites | None = None

    def write_behind(self, rel: str, data: bytes | str) -> None:
        """`write`, done by a thread while the caller goes on: for files nothing reads before
        `settle` (payloads and outputs written while the log is read). `read` settles first."""
        if self._behind is None:
            self._behind = BehindWrites(self.write)
        self._behind.put(rel, data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)

    def drop_behind(self) -> None:
        """Stop writing what is queued (the report is abandoned); returns once no write is under way."""
        if self._behind is not None:
            self._behind.stop()

    def settle(self) -> None:
        """Every `write_behind` done (before reading files back, forking, or finishing)."""
        if self._behind is not None:
            self._behind.settle()

    def sub(self, folder: str) -> FolderWriter:
        """A writer for a sub-report (e.g. `rank_0/`), inside the same staging folder."""
        return FolderWriter(self.path(f"{folder}/.keep").parent)

    def path(self, rel: str) -> Path:
        """The staging path of a relative report path; anything that would leave the report is refused."""
        return Path(self._place(rel))

    def _place(self, rel: str) -> str:
        """`path` as a string, its folder made: a report of 10,000s of small compiles asks this for
        every file it writes and reads, and pathlib's joins cost more than the file's system calls."""
        folder, _, name = rel.rpartition("/")
        if folder not in self._dirs or name in ("", ".", "..") or "\\" in name or "\0" in name or rel[0] == "/":
            self._check_relative(rel)
            if folder not in self._dirs:
                os.makedirs(f"{self._root}/{folder}", exist_ok=True)
                self._dirs.add(folder)
        return f"{self._root}/{rel}"

    @staticmethod
    def _check_relative(rel: str) -> None:
        parts = rel.split("/")
        if not rel or rel.startswith("/") or any(p in ("", ".", "..") or "\\" in p or "\0" in p for p in parts):
            raise ValueError(f"unsafe report path {rel!r}")

    def write(self, rel: str, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        _write_file(self._place(rel), data)
        self.bytes_written += len(data)

    def open(self, rel: str) -> IO[bytes]:
        """A binary stream for files written piece by piece (raw.jsonl, chromium_events.json)."""
        return open(self.path(rel), "wb")

    def read(self, rel: str) -> bytes | None:
        """A file already written to the report (None if it is not there)."""
        self.settle()
        try:
            return _read_file(self._place(rel))
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
                    written += min(_copy_up_to(source, fd, log.length, target), log.length)  # more: appended since
        except BaseException:
            os.close(fd)
            _remove(target)  # no raw.log cut short is left behind
            raise
        os.close(fd)
        return written

    def scratch(self, in_memory: int = SCRATCH_IN_MEMORY) -> IO[bytes]:
        """A temporary file, gone when closed: in memory up to `in_memory` bytes, then on the report's disk."""
        return tempfile.SpooledTemporaryFile(max_size=in_memory, mode="w+b", dir=str(self.root), prefix=".spool-")


LIVE_MARK = b'<meta name="tlparse-live"'  # in every page a live report writes (report.js polls live.js)


class LiveWriter(FolderWriter):
    """Writes a report straight into `out` while its log is still being read (`tlparse-py watch`).

    A page is replaced atomically (written beside, then renamed: a browser reloading it never reads
    half of it) and only when its content changed. `out` is claimed as `ReportWriter` claims it:
    the same lock, the same refusals, an old report replaced only with --overwrite. `finish_live`
    removes what only the live report had (live.js, pages the final report does not write), so the
    folder ends as a one-shot report of the same logs.
    """

    def __init__(self, out: Path, overwrite: bool):
        check_target(out, overwrite)
        self.out = out.absolute()
        try:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            self._lock: _OutputLock | None = _OutputLock(self.out)
        except OSError as exc:
            raise OutputError(f"cannot create the output folder {out}: {exc.strerror or exc}") from None
        try:
            remove_stale_staging(self.out)
            if self.out.is_dir():  # --overwrite of a report (check_target refused anything else)
                with shutdown.deferred():  # a SIGTERM here must not leave the old report hidden beside
                    old = _staging_folder(self.out, "old")
                    os.replace(self.out, old / "report")
                    remove_staging(old)
            os.mkdir(self.out, 0o755 & ~_umask())
            (self.out / MARKER).write_bytes(b"written by tlparse-py; --overwrite may replace this folder\n")
        except OSError as exc:
            self.release()
            raise OutputError(f"cannot create the output folder {out}: {exc.strerror or exc}") from None
        except BaseException:  # a SIGTERM, deferred until the old report was removed
            self.release()
            raise
        super().__init__(self.out)
        self.identity = _identity(self.out)  # the folder made here: every write checks it is still the one
        self.digests: dict[str, bytes] = {}  # what each page written holds (a digest), to skip rewriting it
        self.live_pages: set[str] = set()  # pages written with the live mark
        self.written: set[str] = set()  # every file written (by this process), for `forget_written`

    def path(self, rel: str) -> Path:
        self._check_same()
        self.written.add(rel)
        return super().path(rel)

    def _check_same(self) -> None:
        """OSError when `out` is no longer the folder made at the start (deleted, or replaced by a
        symlink or another folder): nothing is written into what took its place."""
        if _identity(self.out) != self.identity:
            raise OSError(errno.ESTALE, "the report folder was deleted or replaced while it was written", str(self.out))

    def read(self, rel: str) -> bytes | None:
        try:
            return (self.root / rel).read_bytes() if rel in self.written else None
        except OSError:
            return None

    def forget_written(self) -> None:
        """Remove every file written so far, and the folders made for them (the log is read again
        from its start: nothing of the earlier reading may stay)."""
        self._check_same()
        for rel in self.written:
            try:
                (self.root / rel).unlink()
            except OSError:
                continue
        for folder in sorted(self._dirs - {""}, key=lambda f: f.count("/"), reverse=True):  # the deepest first
            try:
                os.rmdir(f"{self._root}/{folder}")
            except OSError:
                continue
        self._dirs = {""}
        self.written.clear()
        self.digests.clear()
        self.live_pages.clear()

    def write(self, rel: str, data: bytes | str, digest: bytes | None = None) -> None:
        """`digest`: what tells this content from another, when the caller has one (a live page's
        version: a big page is not hashed twice); by default a digest of `data`."""
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        if digest is None:
            digest = hashlib.blake2b(data, digest_size=16).digest()
        if self.digests.get(rel) == digest:
            return
        target = self.path(rel)
        temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            _write_file(temporary, data)
            os.replace(temporary, target)
        except OSError as exc:  # the disk is full...: no temporary file is left, and the error names the page
            _remove(temporary)
            raise OSError(exc.errno, exc.strerror, str(target)) from None
        except BaseException:
            _remove(temporary)
            raise
        self.digests[rel] = digest
        if LIVE_MARK in data[:4096]:
            self.live_pages.add(rel)
        self.bytes_written += len(data)

    def write_behind(self, rel: str, data: bytes | str) -> None:
        self.write(rel, data)  # a live page links files: they must be there when it is written

    def still_there(self) -> bool:
        """Whether the report folder is still the one this run made (not deleted, not replaced by a
        symlink or by another folder, even another report)."""
        return _identity(self.out) == self.identity and (self.out / MARKER).is_file()

    def finish_live(self) -> None:
        """Once the final report is written: remove what only the live report had. A page still
        carrying the live mark was not rewritten by the final report (pages may be written by a
        forked child, so what is on disk decides, not what this process remembers)."""
        for rel in sorted(self.live_pages):
            path = self.root / rel
            try:
                with open(path, "rb") as handle:
                    if LIVE_MARK in handle.read(4096):
                        path.unlink()
            except OSError:
                continue
        try:
            (self.root / "live.js").unlink()
        except OSError:
            pass

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None


class LiveSubWriter(LiveWriter):
    """The writer of a sub-report (a rank's `rank_N/`) inside a live report's folder: claimed with
    that folder (its lock and marker are the folder's), and written only while the folder is still
    the one its live report made."""

    def __init__(self, parent: LiveWriter, folder: str):
        parent._check_same()
        FolderWriter.__init__(self, parent.path(f"{folder}/.keep").parent)
        self.parent = parent
        self.out = self.root
        self._lock = None
        self.identity = parent.identity
        self.digests = {}
        self.live_pages = set()
        self.written = set()

    def _check_same(self) -> None:
        self.parent._check_same()

    def still_there(self) -> bool:
        return self.parent.still_there()


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


class ReportWriter(FolderWriter):
    """Writes files under a staging root beside `out`; `commit()` moves the finished report to `out`.

    Beside `out` while it works: `.NAME.lock` (one run per output folder; flock, so a killed run
    never leaves it held) and `.NAME.partial-PID-XXXX` (the staging folder); while it commits,
    `.NAME.old-PID-XXXX` (the report it replaces). Once the lock is held, no other run can be
    using such folders: those of earlier runs (killed, out of memory, the disk full) are removed
    first, so a killed run leaves nothing for good.
    """

    def __init__(self, out: Path, overwrite: bool):
        check_target(out, overwrite)
        self.out = out.absolute()
        self.overwrite = overwrite
        try:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            self._lock = _OutputLock(self.out)
        except OSError as exc:
            raise OutputError(f"cannot create the output folder {out}: {exc.strerror or exc}") from None
        try:
            remove_stale_staging(self.out)
            root = _staging_folder(self.out, "partial")
        except OSError as exc:
            self._lock.release()
            raise OutputError(f"cannot create the output folder {out}: {exc.strerror or exc}") from None
        super().__init__(root)
        _ACTIVE.add(self)

    def commit(self) -> Path:
        """Put the finished report in place; never delete or replace what this run did not write.

        Without --overwrite the target must still not exist: claimed with mkdir (atomic), then the
        report renamed onto that empty folder of ours. If something appeared there meanwhile, the
        report is kept under a new name (ReportKeptElsewhere says where).
        """
        try:
            with shutdown.deferred():  # a SIGTERM stops the run once the report is in place, not half-way
                there = classify_output(self.out)
                if self.overwrite and there.kind == "folder" and not there.link and looks_like_report(self.out):
                    self._replace_old_report()
                else:
                    self._claim_and_rename()
                COMMITTED.add(self.out)
                os.chmod(self.out, 0o755 & ~_umask())
        finally:
            self._done()
        return self.out

    def _claim_and_rename(self) -> None:
        try:
            os.mkdir(self.out, 0o700)
        except FileExistsError:
            self._keep_elsewhere(f"{self.out} appeared while the report was being written (and is not a report --overwrite may replace)")
        try:
            os.replace(self.root, self.out)  # onto our own empty folder: fails if anything was put in it
        except OSError:
            self._keep_elsewhere(f"something was put in {self.out} while the report was being moved there")

    def _replace_old_report(self) -> None:
        old = _staging_folder(self.out, "old")
        os.replace(self.out, old / "report")
        try:
            self._claim_and_rename()
        except BaseException:
            if not self.out.exists():  # put the old report back; if something took its place, it stays in `old`
                os.replace(old / "report", self.out)
                remove_staging(old)
            raise
        remove_staging(old)

    def _keep_elsewhere(self, why: str) -> None:
        for attempt in range(1000):
            kept = self.out.with_name(f"{self.out.name}.tlparse-py-{os.getpid()}" + (f"-{attempt}" if attempt else ""))
            try:
                os.mkdir(kept, 0o700)
                os.replace(self.root, kept)
                break
            except OSError:
                continue
        else:
            raise OutputError(f"{why}; could not keep the report either (staging folder {self.root})")
        raise ReportKeptElsewhere(f"{why}; nothing there was changed: the report is in {kept}", kept)

    def abort(self) -> None:
        self.drop_behind()  # no write may recreate the staging folder once it is removed
        remove_staging(self.root)  # gone already once committed (moved to `out`)
        self._done()

    def _done(self) -> None:
        _ACTIVE.discard(self)
        self._lock.release()


def abort_all() -> None:
    """Remove this process's staging folders (a SIGTERM arrived; also called twice harmlessly)."""
    for writer in list(_ACTIVE):
        writer.abort()


def _staging_folder(out: Path, role: str) -> Path:
    """A new hidden folder beside `out` (`.NAME.ROLE-PID-XXXX`), marked as ours before anything
    is put in it: whatever stops the run later, the next run for `out` knows it may remove it."""
    folder = Path(tempfile.mkdtemp(prefix=f".{out.name}.{role}-{os.getpid()}-", dir=out.parent))
    (folder / MARKER).write_bytes(b"written by tlparse-py; --overwrite may replace this folder\n")
    return folder


def remove_staging(folder: Path) -> None:
    """Remove a staging folder of ours, its marker last (stopped half-way, what is left is still
    known as ours); a SIGTERM arriving meanwhile does not stop it (the handler ignores a second)."""
    try:
        _remove_marked(folder)
    except BaseException:
        _remove_marked(folder)
        raise


def _remove_marked(folder: Path) -> None:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if entry.name == MARKER:
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            _remove(Path(entry.path))
    _remove(folder / MARKER)
    try:
        folder.rmdir()
    except OSError:
        pass


def remove_stale_staging(out: Path) -> None:
    """Staging folders of earlier runs for `out`, called with `out`'s lock held: no live run can be
    using them, whatever their pid says (pids are reused, in a container most of all). Only ours
    (the name, and our marker or nothing at all) are removed."""
    pattern = re.compile(rf"^\.{re.escape(out.name)}\.(?:partial|old)-(\d{{1,9}})-[^/]+$")
    try:
        entries = list(out.parent.iterdir())
    except OSError:
        return
    mine = {writer.root for writer in _ACTIVE}
    for entry in entries:
        if not pattern.match(entry.name) or entry in mine or entry.is_symlink() or not entry.is_dir():
            continue
        if (entry / MARKER).is_file() or (entry / "report" / MARKER).is_file() or not any(entry.iterdir()):
            remove_staging(entry)


class _OutputLock:
    """`.NAME.lock` beside the output folder, held with flock: a second run for the same -o fails
    at once, and a killed run's lock is released by the kernel.

    The lock file says which run holds it (`_holder`). Forked children close their copy of it (a
    helper left running by a killed run would otherwise keep it locked); a lock still held though
    the run named in it is gone is taken over: the file is unlinked and a new one locked."""

    def __init__(self, out: Path):
        self.path = out.with_name(f".{out.name}.lock")
        took_over = False
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                if not took_over and _take_over(self.path):
                    took_over = True
                    continue
                raise OutputError(f"another tlparse-py run is writing {out} ({self.path} is locked); wait for it or use another -o") from None
            if _same_file(fd, self.path):  # not a lock file a finishing run just unlinked
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, (json.dumps(_holder()) + "\n").encode())
        self.fd: int | None = fd
        _LOCKS.add(self)

    def release(self) -> None:
        if self.fd is None:
            return
        _LOCKS.discard(self)
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None

    def forget_in_child(self) -> None:
        """In a forked child: close this process's copy of the lock (flock: the parent still holds it)."""
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None


_LOCKS: set[_OutputLock] = set()


def _forget_locks() -> None:
    for lock in list(_LOCKS):
        lock.forget_in_child()
    _LOCKS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_locks)


def _holder(pid: int | None = None) -> dict[str, str | int]:
    """Who holds a lock, so that another run can tell whether that run is gone: the pid, when it
    started (pids are reused), and the machine and pid namespace it runs in (a pid means nothing
    in another container or on another host sharing the folder)."""
    pid = os.getpid() if pid is None else pid
    return {"pid": pid, "started": _read(f"/proc/{pid}/stat", lambda t: t.rsplit(")", 1)[1].split()[19]),
            "host": os.uname().nodename, "boot": _read("/proc/sys/kernel/random/boot_id", str.strip),
            "pids": _read_link("/proc/self/ns/pid")}


def _take_over(path: Path) -> bool:
    """Unlink the lock file `path` when the run it names is gone (its helpers may hold it still);
    whether it was. Done under a lock on the folder, so two runs never take over the same lock."""
    try:
        folder = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        try:
            with open(path, "rb") as handle:
                held = json.loads(handle.read(4096))
            pid = int(held["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return False  # being written by a starting run, or not ours: wait for it
        if not _gone(held, pid):
            return False
        os.unlink(path)
        return True
    except OSError:
        return False
    finally:
        os.close(folder)


def _gone(held: dict, pid: int) -> bool:
    """Whether the run described by `held` (`_holder`) surely ended."""
    mine = _holder()
    if any(held.get(key) != mine[key] for key in ("host", "boot", "pids")):
        return False  # another machine, another boot or another container: its pids are not ours to judge
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        pass
    if _read(f"/proc/{pid}/stat", lambda t: t.rsplit(")", 1)[1].split()[0]) == "Z":
        return True  # killed, not yet reaped by its parent
    return held.get("started", "") != _holder(pid)["started"]  # the pid now names another process


def _read(path: str, parse: Callable[[str], str]) -> str:
    try:
        with open(path) as handle:
            return parse(handle.read())
    except (OSError, IndexError):
        return ""


def _read_link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def _same_file(fd: int, path: Path) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _identity(folder: Path) -> tuple[int, int] | None:
    """The folder itself (not what a symlink there points to); None when it is no folder."""
    try:
        found = os.lstat(folder)
    except OSError:
        return None
    return (found.st_dev, found.st_ino) if stat.S_ISDIR(found.st_mode) else None


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


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


def _read_file(path: str) -> bytes:
    """The whole content of a file: one open, one fstat, one read for a small one."""
    with open(path, "rb", buffering=0) as handle:
        return handle.readall()


def _write_file(path: str | Path, data: bytes) -> None:
    """`data` as the whole content of `path` (created or truncated); an error names `path`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _write_all(fd, data, path)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes, path: str | Path) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:  # ENOSPC, EFBIG: os.write does not say which file
        raise OSError(exc.errno, exc.strerror, str(path)) from None


def _copy_up_to(source: IO[bytes], fd: int, room: int, target: Path) -> int:
    """Copy `source` to `fd` (the file `target`) until it ends or `room` bytes are copied; the bytes
    copied, room + 1 when `source` holds more (what was copied then stops at `room`).

    A plain file is copied by the kernel (copy_file_range: no trip through this process, a few
    calls for a log of 100s of MB); a .gz, or a file system that cannot, a MB at a time."""
    copied = _copy_in_kernel(source, fd, room, target)
    if copied is not None:
        return copied
    copied = 0
    while copied < room and (data := source.read(min(1 << 20, room - copied))):
        _write_all(fd, data, target)
        copied += len(data)
    return room + 1 if copied == room and source.read(1) else copied


def _copy_in_kernel(source: IO[bytes], fd: int, room: int, target: Path) -> int | None:
    """`_copy_up_to` by copy_file_range for a plain file; None where it cannot be used (nothing copied then)."""
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


def _raw_log_note(logs: list[Path], limits: Limits) -> bytes:
    names = "\n".join(f"  {log.absolute()}" for log in logs)
    return (
        f"raw.log is not copied: the log is larger than --max-raw-log-mb ({limits.max_raw_log_mb:g} MB).\n"
        f"Read it where it is:\n{names}\n"
    ).encode("utf-8", "surrogateescape")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
