"""The output folder's life: a report is built in a staging folder beside the target
(`.tl_out.partial-XXXX`) and moved into place only when complete, so an interrupted or failed run
never leaves a half report and `--overwrite` never loses the previous report before the new one
exists. The staging folders of earlier runs (killed, out of memory, the disk full) are removed
once the output's lock is held (`lock.py`)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from .. import shutdown
from .fileio import current_umask, unlink_quietly
from .folder_writer import FolderWriter
from .lock import OutputLock
from .targets import MARKER, OutputError, ReportKeptElsewhere, check_target, classify_output, looks_like_report


_ACTIVE: set[ReportWriter] = set()  # staging folders of this process, removed by abort_all() on SIGTERM
COMMITTED: set[Path] = set()  # the reports this process put in place (after a late SIGTERM: was it changed?)


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
            self._lock = OutputLock(self.out)
        except OSError as exc:
            raise OutputError(f"cannot create the output folder {out}: {exc.strerror or exc}") from None
        try:
            remove_stale_staging(self.out)
            root = staging_folder(self.out, "partial")
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
                os.chmod(self.out, 0o755 & ~current_umask())
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
        old = staging_folder(self.out, "old")
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


def staging_folder(out: Path, role: str) -> Path:
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
            remove_tree(entry.path)
        else:
            unlink_quietly(Path(entry.path))
    unlink_quietly(folder / MARKER)
    try:
        folder.rmdir()
    except OSError:
        pass


# A big report's removal is shared with a forked child: unlink and rmdir are the kernel's work, and two
# processes take 0.20 s where one takes 0.31 (10,000 compile ids on tmpfs; 0.51-0.88 against
# 0.89-1.3 s on a journaled ext4). Two threads did not: each of the 40,000 calls hands the GIL over, and on tmpfs two
# threads took twice one's time (0.60 against 0.31 s). Below this many folders a fork costs more than
# it saves.
SHARED_REMOVAL_FOLDERS = 64


def remove_tree(path: str, shared: bool = True) -> None:
    """`shutil.rmtree(path, ignore_errors=True)`, each folder's entries removed as they are read, not
    listed first: a report's folder holds a folder a compile id, and the list of 40,000 of them cost
    31 MB (75 MB at 100,000) at the end of a run that replaced its last report. Where `path` holds
    many folders (`shared`), a forked child removes half of its entries (by the hash of their names,
    which a fork shares) while this process removes the rest. Links are removed, never followed; a
    folder that is not empty after its pass (entries added meanwhile) is left to `shutil.rmtree`."""
    helper = _removal_helper(path) if shared else None
    if helper == 0:
        _remove_half_and_exit(path)
    try:
        _remove_entries(path, 0 if helper is not None else None)
    finally:
        if helper is not None:
            _reap(helper)
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError:
        shutil.rmtree(path, ignore_errors=True)


def _remove_entries(path: str, half: int | None) -> None:
    """The entries of `path` removed as they are read: all of them, or those whose name's hash has
    parity `half` (the other process takes the rest)."""
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if half is None or hash(entry.name) & 1 == half:
                    _remove_entry(entry)
    except OSError:
        pass


def _remove_entry(entry: os.DirEntry[str]) -> None:
    try:
        if entry.is_dir(follow_symlinks=False):
            remove_tree(entry.path, False)  # positional: a test wraps remove_tree as (path, *rest)
        else:
            os.unlink(entry.path)
    except OSError:
        pass


def _removal_helper(path: str) -> int | None:
    """A forked child's pid (0 in the child) to share the removal of `path`; None where it is not worth
    one: few folders in it (a folder's link count is its sub-folders and 2), no fork or one core."""
    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
        return None
    try:
        if os.stat(path, follow_symlinks=False).st_nlink < SHARED_REMOVAL_FOLDERS + 2:
            return None
    except OSError:
        return None
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:
        shutdown.become_helper(parent)
    return pid


def _remove_half_and_exit(path: str) -> None:
    """In the forked child: its half of `path`'s entries; exits without any clean-up of the parent's."""
    try:
        _remove_entries(path, 1)
    finally:
        os._exit(0)


def _reap(pid: int) -> None:
    """Wait for the removal's child, whatever interrupts the wait (SIGTERM, Ctrl-C): its half must be
    gone before the folder is; what interrupted is raised once it is."""
    interrupted: BaseException | None = None
    while True:
        try:
            os.waitpid(pid, 0)
            break
        except ChildProcessError:
            break
        except BaseException as exc:  # noqa: BLE001 - raised below, once the child has ended
            interrupted = interrupted or exc
    if interrupted is not None:
        raise interrupted


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
