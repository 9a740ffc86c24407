"""One run per output folder: `.NAME.lock` beside it, held with flock."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path

from .targets import OutputError


class OutputLock:
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


_LOCKS: set[OutputLock] = set()


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
