"""SIGTERM handled like Ctrl-C: staging folders removed, worker processes stopped, exit 143.

Without it a `kill` (a CI timeout, a job scheduler) leaves a `.out.partial-*` staging folder and
orphaned pool, fork-server and resource-tracker processes behind.
"""

from __future__ import annotations

import os
import signal
import sys
import time
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


def _raise_terminated(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not interrupt the clean-up
    raise Terminated()


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
