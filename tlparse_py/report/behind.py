"""Files written beside the reading (`FolderWriter.write_behind`): by a thread, or for a big log by a forked child."""

from __future__ import annotations

import collections
import errno
import os
import pickle
import signal
import struct
import threading
from collections.abc import Callable

from .. import shutdown
from ..reading.forked import picklable_error, widen_pipe
from .fileio import write_all


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


def _ended_early() -> OSError:
    return OSError(errno.EIO, "the process writing the report's files ended early")


class ForkedWrites:
    """`BehindWrites` done by a forked child process: on a log of 10,000s of small compiles the
    thread's Python around each file's system calls took the reader's GIL, a fifth of the reading
    (3.5 s against 2.9 s without the files, 10,000 compiles). The child writes on the second core,
    which the scanning child leaves idle half the time; this process only gathers each file into a
    batch sent down a pipe. For a big log only (`FolderWriter.write_behind_in_a_process`): a fork
    costs milliseconds, and a writer whose `write` keeps state of its own (the live report's) must
    write in its own process.

    Files are sent SEND_BYTES at a time (a bigger one on its own, not copied); `settle` sends what is
    gathered and waits for the child to say it is all written. The first error stops the child's
    writes (it reads on, so a send never blocks on a full pipe) and is raised by `settle` and by
    every call after; a child that died is found by the next send."""

    SEND_BYTES = 1 << 18
    _HEAD = struct.Struct("<BIQ")  # what, len(path), len(data)
    _WRITE, _SETTLE, _END = range(3)
    _REPLY = struct.Struct("<Q")  # the length of a pickled reply: None (all written) or the error

    def __init__(self, write: Callable[[str, bytes], None]):
        self.write = write
        self.pid: int | None = None
        self.pipe = -1  # where files are sent
        self.replies = -1  # where the child says all is written (or why not)
        self.gathered = bytearray()
        self.unsettled = False  # files sent or gathered since the child last said all is written
        self.error: BaseException | None = None

    def put(self, rel: str, data: bytes) -> None:
        self._raise()
        self.start()
        name = rel.encode("utf-8", "surrogatepass")
        self.gathered += self._HEAD.pack(self._WRITE, len(name), len(data))
        self.gathered += name
        self.unsettled = True
        if len(data) >= self.SEND_BYTES:  # sent as it is, after what was gathered
            self._send()
            self._send_bytes(data)
            return
        self.gathered += data
        if len(self.gathered) >= self.SEND_BYTES:
            self._send()

    def settle(self) -> None:
        """Wait until every file put is written; raise the error that stopped the writes, if any."""
        if self.unsettled and self.error is None:
            self.gathered += self._HEAD.pack(self._SETTLE, 0, 0)
            self._send()
            self._take_reply()
            self.unsettled = False
        self._raise()

    def stop(self) -> None:
        """Drop what is gathered; return once the child has ended (no write is under way)."""
        self.gathered = bytearray()
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._end()

    def close(self) -> None:
        """`settle`, then end the child: a process that writes report after report keeps no child of each."""
        try:
            self.settle()
        finally:
            if self.pid is not None and self.error is None:
                self.gathered += self._HEAD.pack(self._END, 0, 0)
                try:
                    self._send()
                except OSError:
                    pass
            self._end()

    def start(self) -> None:
        """Fork the child now (`put` does, if not done): before the reading starts threads of its own."""
        if self.pid is not None:
            return
        pipe_out, pipe_in = os.pipe()
        widen_pipe(pipe_in)
        replies_out, replies_in = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            os.close(pipe_in)
            os.close(replies_out)
            self._serve(pipe_out, replies_in, parent)
        os.close(pipe_out)
        os.close(replies_in)
        self.pid, self.pipe, self.replies = pid, pipe_in, replies_out

    def _serve(self, pipe: int, replies: int, parent: int) -> None:
        """In the forked child: write what comes down the pipe, say when all is written; exit without
        any clean-up of the parent's."""
        code = 1
        try:
            shutdown.become_helper(parent)
            failed: BaseException | None = None
            with open(pipe, "rb", buffering=1 << 20) as source:
                while len(head := source.read(self._HEAD.size)) == self._HEAD.size:
                    what, name_size, size = self._HEAD.unpack(head)
                    if what == self._SETTLE:
                        reply = pickle.dumps(picklable_error(failed) if failed is not None else None, pickle.HIGHEST_PROTOCOL)
                        write_all(replies, self._REPLY.pack(len(reply)) + reply, "the report's file writer")
                        continue
                    if what != self._WRITE:
                        break
                    rel = source.read(name_size).decode("utf-8", "surrogatepass")
                    data = source.read(size)
                    if failed is None:
                        try:
                            self.write(rel, data)
                        except Exception as exc:  # noqa: BLE001 - the parent's to raise
                            failed = exc
            code = 0
        finally:
            os._exit(code)

    def _send(self) -> None:
        if self.gathered:
            # a new buffer, not cleared: a send that failed leaves the old one exported (its memoryview
            # is held by the traceback), and an exported bytearray cannot be resized
            gathered, self.gathered = self.gathered, bytearray()
            self._send_bytes(gathered)

    def _send_bytes(self, data: bytes | bytearray) -> None:
        try:
            write_all(self.pipe, data, "the report's file writer")
        except OSError:  # the child died: the error it gave, if it said one
            self._take_reply()
            raise (self.error or _ended_early()) from None

    def _take_reply(self) -> None:
        """Wait for the child's reply: the error it gives kept in `self.error`. The pipe's end, the
        child gone, is an error too."""
        head = _read_up_to(self.replies, self._REPLY.size)
        reply = _read_up_to(self.replies, self._REPLY.unpack(head)[0]) if len(head) == self._REPLY.size else b""
        try:
            error = pickle.loads(reply) if reply else _ended_early()  # noqa: S301 - our own child's
        except Exception:  # noqa: BLE001 - a reply cut short
            error = _ended_early()
        if error is not None and self.error is None:
            self.error = error

    def _raise(self) -> None:
        if self.error is not None:
            self.gathered = bytearray()
            raise self.error

    def _end(self) -> None:
        """Reap the child and close the pipes; a later `put` forks another."""
        for fd in (self.pipe, self.replies):
            if fd >= 0:
                os.close(fd)
        self.pipe = self.replies = -1
        if self.pid is not None:
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
        self.pid = None
        self.unsettled = False


def _read_up_to(fd: int, size: int) -> bytes:
    """`size` bytes from a blocking `fd`, fewer at its end."""
    data = b""
    while len(data) < size and (piece := os.read(fd, size - len(data))):
        data += piece
    return data

