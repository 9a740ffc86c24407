"""One output file written safely (a Markdown summary, a single-file report, a diff's summary):
appended to as shell `>>` does, or replaced whole; a pipe or character device written in place."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from .fileio import current_umask, unlink_quietly
from .targets import OutputTarget, classify_output, held_open


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
        os.chmod(temp, 0o666 & ~current_umask())
        os.replace(temp, path)
    except BaseException:
        unlink_quietly(Path(temp))
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
    if not (stat.S_ISCHR(found.st_mode) or stat.S_ISFIFO(found.st_mode) or (stat.S_ISREG(found.st_mode) and held_open(found, besides=fd))):
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
