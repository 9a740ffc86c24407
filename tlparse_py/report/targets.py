"""What a path the tool is to write names now, and whether a report may be written there.

Every option that writes (-o, --markdown, --single-file, pack's FILE.html, diff's -o) is told
apart here (`classify_output`); an output folder is refused before any work starts unless it is
free, or one of our reports that --overwrite may replace (`check_target`)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import NamedTuple


class OutputError(Exception):
    """The output folder cannot be used (exists, is a file, is not a report...)."""


class ReportKeptElsewhere(OutputError):
    """The report is complete, but something appeared at -o while it was written: it was kept beside."""

    def __init__(self, message: str, kept: Path):
        super().__init__(message)
        self.kept = kept


MARKER = ".tlparse-py-report"  # in every report we write: what --overwrite may replace
NEVER_REPLACE = (".git", ".hg", ".svn")  # a folder holding these is someone's work, whatever else it holds


def looks_like_report(folder: Path) -> bool:
    """A folder we may replace: one of our reports (marker), tlparse's layout, or nothing at all.
    Its entries are read as they come, not gathered: a report holds a folder a compile id (100,000s)."""
    never, single_names = set(NEVER_REPLACE), {"index.html", "compile_directory.json", "raw.jsonl"}
    seen: set[str] = set()  # of single_names, and the marker
    ranks = False  # a rank_N folder with its own index.html
    empty = True
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                empty, name = False, entry.name
                if name in never:
                    return False
                if name in single_names or name == MARKER:
                    seen.add(name)
                elif not ranks and name.startswith("rank_"):
                    ranks = (folder / name / "index.html").is_file()
    except OSError:
        return False
    if empty or MARKER in seen:
        return True
    return single_names <= seen or ("index.html" in seen and ranks)


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
        kind = "stream" if link and held_open(found) else "file"
    else:
        kind = "other"
    return OutputTarget(path, kind, link)


def held_open(found: os.stat_result, besides: int = -1) -> bool:
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
