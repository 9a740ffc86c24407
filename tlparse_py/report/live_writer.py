"""The writer of a live report (`tlparse-py watch`): straight into the output folder while the log
is still being read, each page replaced atomically and only when it changed."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

from .. import shutdown
from ..reading.lines import head_of
from .fileio import current_umask, unlink_quietly, write_pieces_file
from .folder_writer import FolderWriter
from .lock import OutputLock
from .staging import remove_stale_staging, remove_staging, staging_folder
from .targets import MARKER, OutputError, check_target


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
            self._lock: OutputLock | None = OutputLock(self.out)
        except OSError as exc:
            raise OutputError(f"cannot create the output folder {out}: {exc.strerror or exc}") from None
        try:
            remove_stale_staging(self.out)
            if self.out.is_dir():  # --overwrite of a report (check_target refused anything else)
                with shutdown.deferred():  # a SIGTERM here must not leave the old report hidden beside
                    old = staging_folder(self.out, "old")
                    os.replace(self.out, old / "report")
                    remove_staging(old)
            os.mkdir(self.out, 0o755 & ~current_umask())
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
        folders = {rel[:end] for rel in self.written for end in range(len(rel)) if rel[end] == "/"}  # each folder above a file
        for folder in sorted(folders, key=lambda f: f.count("/"), reverse=True):  # the deepest first
            try:
                os.rmdir(f"{self._root}/{folder}")  # only if empty: a folder of files this process did not write stays
            except OSError:
                continue
        self.written.clear()
        self.digests.clear()
        self.live_pages.clear()

    def write(self, rel: str, data: bytes | str | list[bytes], digest: bytes | None = None) -> None:
        """`data`: the content, or its pieces (written one after another, never joined: a live index
        of 4,000 compiles is 8 MB). `digest`: what tells this content from another, when the caller
        has one (a live page's version: a big page is not hashed twice); by default a digest of `data`."""
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        pieces = data if isinstance(data, list) else [data]
        if digest is None:
            digest = content_digest(*pieces)
        if self.digests.get(rel) == digest:
            return
        target = self.path(rel)
        temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            write_pieces_file(temporary, pieces)
            os.replace(temporary, target)
        except OSError as exc:  # the disk is full...: no temporary file is left, and the error names the page
            unlink_quietly(temporary)
            raise OSError(exc.errno, exc.strerror, str(target)) from None
        except BaseException:
            unlink_quietly(temporary)
            raise
        self.digests[rel] = digest
        if LIVE_MARK in head_of(pieces, 4096):
            self.live_pages.add(rel)
        self.bytes_written += sum(map(len, pieces))

    def write_behind(self, rel: str, data: bytes | str) -> None:
        """A file written once (a payload, a numbered output), now: a live page links files, which must
        be there when it is written. In place, as a one-shot report writes it: no page links it yet,
        and it is never written again, so no temporary file and no digest (kept, one a file, they
        grew with the log)."""
        self._check_same()
        self.written.add(rel)
        FolderWriter.write(self, rel, data)

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
        """Let the folder go: what was queued written (the thread that writes it ended), the lock released."""
        try:
            self.close_behind()
        finally:
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


def content_digest(*pieces: bytes) -> bytes:
    """What tells one content from another (16 bytes), given whole or as its pieces in order (the
    same digest): SHA-256, which current x86 and Arm cores run in hardware, 2.5x faster here than
    BLAKE2b over the index a live update writes again (megabytes)."""
    hashed = hashlib.sha256()
    for piece in pieces:
        hashed.update(piece)
    return hashed.digest()[:16]


def _identity(folder: Path) -> tuple[int, int] | None:
    """The folder itself (not what a symlink there points to); None when it is no folder."""
    try:
        found = os.lstat(folder)
    except OSError:
        return None
    return (found.st_dev, found.st_ino) if stat.S_ISDIR(found.st_mode) else None
