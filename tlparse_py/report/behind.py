"""Files written by a thread beside the reading (`FolderWriter.write_behind`)."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable


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
        self.ending = False  # the thread is to end once nothing is queued (`close`)

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
        """Drop what is queued; return once no write is under way, and the thread has ended."""
        with self.condition:
            while len(self.queue) > 1:  # the file being written (the first) is finished, the rest dropped
                self.queue.pop()
            while self.queue and self.error is None:
                self._wake()
                self._wait(0.1)
            self.queue.clear()
            self.queued_bytes = 0
        self._end_thread()

    def close(self) -> None:
        """`settle`, then end the thread: a process that writes report after report (a notebook, a
        test session, a server) keeps no thread of each. A later `put` starts another."""
        try:
            self.settle()
        finally:
            self._end_thread()

    def _end_thread(self) -> None:
        thread = self.thread
        if thread is None:
            return
        with self.condition:
            self.ending = True
            self.condition.notify_all()
        thread.join()
        self.thread, self.ending = None, False

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
                    if self.ending:
                        self.writer_idle = False
                        return
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
