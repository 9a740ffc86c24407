"""The only code that touches the output folder.

A report is built in a staging folder beside the target (`.tl_out.partial-XXXX`) and moved into
place only when complete, so an interrupted or failed run never leaves a half report and
`--overwrite` never loses the previous report before the new one exists.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import IO

from .limits import Limits
from .reader import is_gzip, open_log


class OutputError(Exception):
    """The output folder cannot be used (exists, is a file, is not a report...)."""


def looks_like_report(folder: Path) -> bool:
    """A folder we may replace: an earlier tlparse or tlparse-py report (or nothing at all)."""
    try:
        entries = {p.name for p in folder.iterdir()}
    except OSError:
        return False
    if not entries:
        return True
    return "index.html" in entries and bool(entries & {"compile_directory.json", "raw.jsonl", "rank_0", "chromium_events.json"})


def check_target(out: Path, overwrite: bool) -> None:
    """Refuse unusable targets before any work starts."""
    if out.exists() and not out.is_dir():
        raise OutputError(f"output path {out} exists and is not a folder; choose another -o")
    if out.is_dir():
        if not overwrite:
            raise OutputError(f"output folder {out} already exists; pass --overwrite to replace it or use -o OUTDIR")
        if not looks_like_report(out):
            raise OutputError(
                f"refusing to overwrite {out}: it is not empty and does not look like a tlparse report; choose another -o"
            )
    parent = out.parent if str(out.parent) else Path(".")
    if parent.exists() and not parent.is_dir():
        raise OutputError(f"cannot create {out}: {parent} is not a folder")


class FolderWriter:
    """Writes report files under `root` (already inside a staging folder): the only file writer."""

    def __init__(self, root: Path):
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.files_written = 0
        self.bytes_written = 0
        self._dirs: set[Path] = {self.root}

    def sub(self, folder: str) -> FolderWriter:
        """A writer for a sub-report (e.g. `rank_0/`), inside the same staging folder."""
        return FolderWriter(self.path(f"{folder}/.keep").parent)

    def path(self, rel: str) -> Path:
        """The staging path of a relative report path; anything that would leave the report is refused."""
        parts = rel.split("/")
        if not rel or rel.startswith("/") or any(p in ("", ".", "..") or "\\" in p or "\0" in p for p in parts):
            raise ValueError(f"unsafe report path {rel!r}")
        target = self.root.joinpath(*parts)
        parent = target.parent
        if parent not in self._dirs:
            parent.mkdir(parents=True, exist_ok=True)
            self._dirs.add(parent)
        return target

    def write(self, rel: str, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        fd = os.open(self.path(rel), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        self.files_written += 1
        self.bytes_written += len(data)

    def open(self, rel: str) -> IO[bytes]:
        """A binary stream for files written piece by piece (raw.jsonl, chromium_events.json)."""
        self.files_written += 1
        return open(self.path(rel), "wb")

    def read(self, rel: str) -> bytes | None:
        """A file already written to the report (None if it is not there)."""
        try:
            return self.path(rel).read_bytes()
        except (OSError, ValueError):
            return None

    def copy_file(self, source: Path, rel: str) -> None:
        """A byte copy of `source` in the report, made by the kernel."""
        shutil.copyfile(source, self.path(rel))

    def copy_logs(self, logs: list[Path], rel: str, limits: Limits) -> None:
        """raw.log: the logs as read (un-gzipped, concatenated), byte for byte, up to `max_raw_log`.

        Each log is opened as the reader opened it (no symlink followed, gzip bounded), so raw.log
        holds nothing the tool did not read. Beyond the cap raw.log is a short note naming the logs:
        a copy the size of the input is rarely wanted twice.
        """
        cap = limits.max_raw_log
        plain = [log for log in logs if not is_gzip(log)]
        if len(plain) == len(logs) and sum(_size(log) for log in logs) > cap:
            self.write(rel, _raw_log_note(logs, limits))
            return
        fd = os.open(self.path(rel), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            written = 0
            for log in logs:
                with open_log(log, limits) as source:
                    written = _copy_up_to(source, fd, cap - written) + written
                if written > cap:
                    break
        finally:
            os.close(fd)
        self.files_written += 1
        if written > cap:  # a .gz that expands past the cap
            self.write(rel, _raw_log_note(logs, limits))
            return
        self.bytes_written += written

    def scratch(self, in_memory: int = 16 << 20) -> IO[bytes]:
        """A temporary file, gone when closed: in memory up to `in_memory` bytes, then on the report's disk."""
        return tempfile.SpooledTemporaryFile(max_size=in_memory, dir=self.root, prefix=".spool-")


class ReportWriter(FolderWriter):
    """Writes files under a staging root beside `out`; `commit()` moves the finished report to `out`."""

    def __init__(self, out: Path, overwrite: bool):
        check_target(out, overwrite)
        self.out = out.absolute()
        self.overwrite = overwrite
        try:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            root = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.partial-", dir=self.out.parent))
        except OSError as exc:
            raise OutputError(f"cannot create the output folder {out}: {exc.strerror or exc}") from None
        super().__init__(root)

    def commit(self) -> Path:
        """Put the finished report in place, replacing the old one only now."""
        old = None
        if self.out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.old-", dir=self.out.parent))
            os.replace(self.out, old / "report")
        try:
            os.replace(self.root, self.out)
        except OSError:
            if old is not None:
                os.replace(old / "report", self.out)
                shutil.rmtree(old, ignore_errors=True)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        os.chmod(self.out, 0o755 & ~_umask())
        return self.out

    def abort(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _copy_up_to(source: IO[bytes], fd: int, room: int) -> int:
    """Copy `source` to `fd` until it ends or `room` is passed; the bytes copied (room + 1 when cut)."""
    copied = 0
    while data := source.read(1 << 20):
        if copied + len(data) > room:
            return room + 1
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        copied += len(data)
    return copied


def _raw_log_note(logs: list[Path], limits: Limits) -> bytes:
    names = "\n".join(f"  {log.absolute()}" for log in logs)
    return (
        f"raw.log is not copied: the log is larger than --max-raw-log-mb ({limits.max_raw_log_mb:g} MB).\n"
        f"Read it where it is:\n{names}\n"
    ).encode("utf-8", "surrogateescape")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
