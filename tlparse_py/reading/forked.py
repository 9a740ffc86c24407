"""A generator run in a forked child process, its items streamed back through a pipe.

The reader uses it on big logs: the child scans the bytes (lines, payloads, their md5s) while this
process turns what it sends into records, so reading a log uses two cores instead of one.
"""

from __future__ import annotations

import collections
import errno
import fcntl
import gc
import marshal
import os
import pickle
import signal
import struct
import threading
from collections.abc import Callable, Iterator
from typing import IO, Any, TypeVar

from .. import shutdown

Item = TypeVar("Item")
BATCH_BYTES = 1 << 20  # items are sent in batches of about this size: few system calls, little held
PIPE_BUFFER = 1 << 20
AHEAD_BYTES = 2 << 20  # messages read out of the pipe before they are used, at most (`ReadAhead`): two batches
_LENGTH = struct.Struct("<Q")
_ITEMS, _DONE, _FAILED = 0, 1, 2


class ChildStopped(OSError):
    """The child ended before its generator did (killed, out of memory)."""


def forked_items(produce: Callable[[], Iterator[Item]], size: Callable[[Item], int]) -> Iterator[Item]:
    """The items of `produce()`, run in a forked child; an exception it raises is raised here.

    `size(item)` is roughly how many bytes an item holds (for batching). Items must marshal or
    pickle (`_send`). The child holds at most one batch, and blocks while this process has not read
    it: memory stays flat. Stopping early (an exception here, or the generator closed) kills the child.
    """
    read_fd, write_fd = os.pipe()
    widen_pipe(write_fd)
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        _child(produce, size, read_fd, write_fd, parent)
    os.close(write_fd)
    pipe = open(read_fd, "rb", buffering=PIPE_BUFFER)
    ahead = ReadAhead(pipe)
    done = False
    try:
        while (data := ahead.next()) is not None:
            kind, value = _decode(data)
            if kind == _ITEMS:
                yield from value
            elif kind == _FAILED:
                raise value
            else:
                done = True
                return
        raise ChildStopped(errno.EIO, "the process reading the log stopped before the end of the log")
    finally:
        _reap(pid, kill=not done)  # the child gone, the pipe ends: the read-ahead thread returns
        ahead.stop()
        pipe.close()


class ReadAhead:
    """The child's messages taken out of the pipe by a thread as soon as they are written, up to
    AHEAD_BYTES before they are used.

    The two processes' work varies along a log (a stretch of big payloads to check is the child's,
    one of many records or chromium events is this process's): with only the pipe between them, each
    waited for the other in turn (0.3 to 0.5 s each on a 200 MB log). The thread waits in a read
    of the pipe, the GIL released, and holds at most AHEAD_BYTES of messages, still encoded."""

    def __init__(self, pipe: IO[bytes]):
        self.pipe = pipe
        self.ready: collections.deque[bytes] = collections.deque()
        self.held = 0
        self.ended = False  # the pipe's end was read (or a read failed: `error`)
        self.stopping = False
        self.error: BaseException | None = None
        self.condition = threading.Condition()
        self.thread = threading.Thread(target=self._run, name="tlparse-py-read-ahead", daemon=True)
        self.thread.start()

    def next(self) -> bytes | None:
        """The next message, still encoded; None once the pipe ended (raises what a read of it raised)."""
        with self.condition:
            while not self.ready and not self.ended:
                self.condition.wait()
            if self.ready:
                data = self.ready.popleft()
                self.held -= len(data)
                self.condition.notify()
                return data
            if self.error is not None:
                raise self.error
            return None

    def stop(self) -> None:
        """End the thread (the caller has ended the pipe's writer: a read under way returns)."""
        with self.condition:
            self.stopping = True
            self.condition.notify()
        self.thread.join()

    def _run(self) -> None:
        try:
            while (data := _receive(self.pipe)) is not None:
                with self.condition:
                    while self.held >= AHEAD_BYTES and not self.stopping:
                        self.condition.wait()
                    if self.stopping:
                        return
                    self.ready.append(data)
                    self.held += len(data)
                    self.condition.notify()
        except BaseException as exc:  # noqa: BLE001 - raised where the messages are used
            self.error = exc
        with self.condition:
            self.ended = True
            self.condition.notify()


def widen_pipe(fd: int) -> None:
    """Make the pipe hold a whole batch where the system allows (Linux: 64 KB by default, up to
    /proc/sys/fs/pipe-max-size): the writer then writes a batch in one go, and the reader takes it in
    one read, instead of the two taking turns 16 times a batch."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is None:
        return
    for size in (2 * BATCH_BYTES, BATCH_BYTES):
        try:
            fcntl.fcntl(fd, set_size, size)
            return
        except OSError:  # over the system's limit for an unprivileged process: the default stays
            continue


def _child(produce: Callable[[], Iterator[Any]], size: Callable[[Any], int], read_fd: int, write_fd: int, parent: int) -> None:
    """In the forked child: run the generator, send its items, exit without any clean-up of the parent's."""
    code = 1
    try:
        shutdown.die_with_parent(parent)  # not only at its next write into the closed pipe
        os.close(read_fd)
        # objects inherited from the parent are never scanned: a full collection would touch them
        # all, copying the parent's heap into this process page by page
        gc.freeze()
        with open(write_fd, "wb") as out:
            try:
                batch: list[Any] = []
                held = 0
                for item in produce():
                    batch.append(item)
                    held += size(item)
                    if held >= BATCH_BYTES:
                        _send(out, (_ITEMS, batch))
                        batch, held = [], 0
                _send(out, (_ITEMS, batch))
                _send(out, (_DONE, None))
            except Exception as exc:  # noqa: BLE001 - any failure of the generator is the parent's to raise
                _send(out, (_FAILED, picklable_error(exc)))
        code = 0
    finally:
        os._exit(code)


# A message is marshalled where it can be (the events: tuples, dicts, lists, strings, bytes, numbers),
# pickled where not (an exception): marshal writes a batch in half pickle's time and reads it back in
# a tenth less (1 MB batches of a log of 10,000 small compiles: 3.4 against 6.9 ms to write).
_MARSHALLED, _PICKLED = b"M", b"P"


def _send(out: IO[bytes], message: tuple[int, Any]) -> None:
    try:
        how, data = _MARSHALLED, marshal.dumps(message)
    except ValueError:  # not all built-in types
        how, data = _PICKLED, pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_LENGTH.pack(len(how) + len(data)))
    out.write(how)
    out.write(data)
    out.flush()


def _decode(data: bytes) -> tuple[int, Any]:
    """A message `_send` wrote (by our own child: trusted as this process's own data)."""
    body = memoryview(data)[1:]
    if data[:1] == _MARSHALLED:
        return marshal.loads(body)
    return pickle.loads(body)  # noqa: S301 - written by our own child


def _receive(pipe: IO[bytes]) -> bytes | None:
    """The next message, still encoded; None at the pipe's end (or a message cut short)."""
    head = pipe.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (length,) = _LENGTH.unpack(head)
    data = pipe.read(length)
    if len(data) < length:
        return None
    return data


def picklable_error(exc: BaseException) -> BaseException:
    """`exc` if it pickles and unpickles (to be raised in the parent), else an OSError that says what it was."""
    try:
        pickle.loads(pickle.dumps(exc))  # noqa: S301 - our own bytes
        return exc
    except Exception:  # noqa: BLE001 - an exception class that does not round-trip
        return OSError(errno.EIO, f"{type(exc).__name__}: {exc}")


def _reap(pid: int, kill: bool) -> None:
    try:
        if kill:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


class ForkedServer:
    """A process forked once that answers requests with items, streamed back in batches: a live
    report's scanner, which scans each piece appended to the log while this process builds records
    from what it sent. Forked before the report's heap grows, it shares little of it: a fork per
    piece would copy the page tables of a heap of 100s of MB, and then each page this process wrote
    to while the child lived (an update's pages, 30 ms more at 436 compiles).

    `serve(request)` runs in the child; its items must marshal (or pickle). A request whose child is
    gone before it answered anything is refused (`answer` returns None: the caller does the work
    itself), as is every request after one that was not read to its end; one whose child stops half
    way raises ChildStopped."""

    def __init__(self, serve: Callable[[bytes], Iterator[Item]], size: Callable[[Item], int], batch_bytes: int = 1 << 16):
        self.batch_bytes = batch_bytes
        request_read, self.request_fd = os.pipe()
        answer_read, answer_write = os.pipe()
        widen_pipe(answer_write)
        parent = os.getpid()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self.request_fd)
            os.close(answer_read)
            self._serve(serve, size, request_read, answer_write, parent)
        os.close(request_read)
        os.close(answer_write)
        self.answers: IO[bytes] | None = open(answer_read, "rb", buffering=PIPE_BUFFER)
        self.busy = False  # an answer is being read

    def answer(self, request: bytes) -> Iterator[Item] | None:
        """The items `serve(request)` gives, as they come; None where this server cannot answer (the
        caller does the work itself: it then also meets what made `serve` fail at once)."""
        if self.answers is None or self.busy:  # (an answer never read: what is left of it is in the pipe)
            self.close()
            return None
        try:
            os.write(self.request_fd, _LENGTH.pack(len(request)) + request)
            first = _receive(self.answers)
        except OSError:
            first = None
        if first is None:  # gone (killed; or ended with the thread that forked it): nothing was read
            self.close()
            return None
        message = _decode(first)
        if message[0] == _FAILED:  # before any item
            return None
        self.busy = True
        return self._items(message)

    def _items(self, message: tuple[int, Any]) -> Iterator[Item]:
        done = False
        try:
            while True:
                kind, value = message
                if kind == _ITEMS:
                    yield from value
                elif kind == _FAILED:
                    done, self.busy = True, False
                    raise value
                else:
                    done, self.busy = True, False
                    return
                assert self.answers is not None
                data = _receive(self.answers)
                if data is None:
                    raise ChildStopped(errno.EIO, "the process scanning the log stopped before the end of a piece")
                message = _decode(data)
        finally:
            if not done:  # stopped half way (by the caller, or the child): what is left in the pipe is no answer to the next request
                self.close()

    def close(self) -> None:
        """End the child (it holds nothing of the parent's that needs a clean-up)."""
        if self.answers is None:
            return
        self.answers.close()
        self.answers = None
        os.close(self.request_fd)
        _reap(self.pid, kill=True)

    def _serve(self, serve: Callable[[bytes], Iterator[Item]], size: Callable[[Item], int], request_fd: int, answer_fd: int,
               parent: int) -> None:
        """In the forked child: answer each request until the parent closes its end."""
        code = 1
        try:
            shutdown.become_helper(parent)  # dies with the parent; Ctrl-C is the parent's to handle
            with open(request_fd, "rb") as requests, open(answer_fd, "wb") as out:
                while (request := _receive(requests)) is not None:
                    try:
                        batch: list[Any] = []
                        held = 0
                        for item in serve(request):
                            batch.append(item)
                            held += size(item)
                            if held >= self.batch_bytes:
                                _send(out, (_ITEMS, batch))
                                batch, held = [], 0
                        _send(out, (_ITEMS, batch))
                        _send(out, (_DONE, None))
                    except Exception as exc:  # noqa: BLE001 - raised in the parent, where the items are used
                        _send(out, (_FAILED, picklable_error(exc)))
            code = 0
        finally:
            os._exit(code)
