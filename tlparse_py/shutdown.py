"""SIGTERM handled like Ctrl-C: staging folders removed, worker processes stopped, exit 143; forked
helpers that end with the process that forked them.

Without it a `kill` (a CI timeout, a job scheduler) leaves a `.out.partial-*` staging folder and
orphaned pool, fork-server and resource-tracker processes behind.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

EXIT_SIGTERM = 128 + signal.SIGTERM


class Terminated(SystemExit):
    """Raised in the main thread by the SIGTERM handler; unwinds like KeyboardInterrupt would."""

    def __init__(self) -> None:
        super().__init__(EXIT_SIGTERM)


def install() -> object:
    """Handle SIGTERM from now on; returns the previous handler (for `restore`)."""
    try:
        return signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread (an embedding application): leave signals alone
        return None


def restore(previous: object) -> None:
    if previous is not None:
        try:
            signal.signal(signal.SIGTERM, previous)  # type: ignore[arg-type]
        except ValueError:
            pass


_deferring = 0  # how many `deferred()` blocks are open in the main thread
_pending = False  # a SIGTERM arrived while one was open


def _raise_terminated(signum: int, frame: object) -> None:
    global _pending
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not interrupt the clean-up
    if _deferring:
        _pending = True
        return
    raise Terminated()


@contextmanager
def deferred() -> Iterator[None]:
    """A SIGTERM arriving inside the block is raised (as Terminated) once it ends: for what must not
    stop half-way, such as moving a finished report into place and removing the one it replaces
    (stopped there, the old report would be left in a hidden folder beside -o)."""
    global _deferring, _pending
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
        if not _deferring and _pending:
            _pending = False
            raise Terminated()


def die_with_parent(parent: int) -> None:
    """In a child just forked from process `parent`: end it when `parent` ends, however that ends
    (kill -9, the OOM killer), so no helper keeps writing, or keeps the output folder locked, for a
    run that is gone. Linux: PR_SET_PDEATHSIG (SIGKILL when the thread that forked ends: each fork
    site waits for its child in that thread). Elsewhere: a thread that watches the parent's pid."""
    if _set_death_signal():
        if os.getppid() != parent:  # the parent ended before the signal was set
            os._exit(1)
        return
    threading.Thread(target=_watch_parent, args=(parent,), name="tlparse-py parent watch", daemon=True).start()


def become_helper(parent: int) -> None:
    """In a helper just forked from `parent` that ends on its own (a file writer, half of a removal):
    it dies with `parent` (`die_with_parent`), leaves Ctrl-C and SIGTERM to `parent` (which stops or
    waits for it: the parent's SIGTERM handler, inherited, would clean up the parent's report), and
    never runs a full collection over the heap it inherited (that would copy it page by page)."""
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    gc.freeze()


def die_with_starter() -> None:
    """`die_with_parent` for a pool's worker (an `initializer`): it ends with the process that started
    it (a forkserver's worker: with the forkserver, which ends with the run)."""
    die_with_parent(os.getppid())


def _set_death_signal() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(1, signal.SIGKILL, 0, 0, 0) == 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.2)
    os._exit(1)


def descendants(pid: int | None = None) -> list[int]:
    """Every process below `pid` (children first), from /proc; empty where there is no /proc."""
    root = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, queue = [], [root]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def stop_children(grace: float = 2.0) -> None:
    """SIGTERM every descendant (pool workers, forked page builder, fork server, resource tracker),
    then SIGKILL what is left after `grace` seconds, and reap our own children."""
    pids = descendants()
    _signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _reap(pids):
        time.sleep(0.05)
    _signal_all(descendants(), signal.SIGKILL)
    _reap(pids)


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def _reap(pids: list[int]) -> list[int]:
    """The pids still alive (our zombie children reaped on the way)."""
    alive = []
    for pid in pids:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                continue
        except ChildProcessError:
            pass  # not our child (a grandchild): its parent reaps it
        try:
            os.kill(pid, 0)
            alive.append(pid)
        except OSError:
            pass
    return alive


def exit_now(message: str) -> None:
    """Leave without running atexit hooks (they join pools whose workers were just killed)."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    os._exit(EXIT_SIGTERM)
