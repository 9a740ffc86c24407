"""Page jobs: render and write pages once reading is done, in this process and forked ones.

Pages are independent once reading is done, and a fork shares the whole analysis without copying
it. The processes take the next few jobs from a shared counter whenever they are free, so they
finish together. The pages kinds asked for need nothing of the compiles, which take this process
0.4 s at 10,000 compile ids: a child forked first starts on them meanwhile (`start_ahead`). A page
that cannot be built is replaced by a page saying why, and counted (in job order, whichever process
built it); a child that dies has the jobs it did not finish rebuilt here.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, ClassVar, NamedTuple

from .. import shutdown
from ..model import HINTS
from .render import Model, render_page
from .views.common import Inputs, Page, page_base
from .folder_writer import FolderWriter

PARALLEL_PAGES = 200  # below this many pages, a second process costs more than it saves
CLAIM_JOBS = 8  # jobs a process takes from the shared counter at a time
Job = Callable[[], None]


class Jobs:
    """Jobs numbered in order, each made when it is taken: parts of (count, run), where `run(i)` does
    the part's job i. A list of closures, two a compile id, held 33 MB at 40,000 compile ids."""

    def __init__(self, *parts: tuple[int, Callable[[int], None]]):
        self.parts = parts

    def __len__(self) -> int:
        return sum(count for count, _ in self.parts)

    def __getitem__(self, index: int) -> Job:
        for count, run in self.parts:
            if 0 <= index < count:
                return functools.partial(run, index)
            index -= count
        raise IndexError(index)

    def __iter__(self) -> Iterator[Job]:
        for count, run in self.parts:
            for index in range(count):
                yield functools.partial(run, index)


class SharedJobs:
    """Which of jobs `start` to `end` are taken and which are done, in memory the processes of a fork share.

    A fixed half each (every other job) left one core idle at the end: the child also builds the
    search index, and pages differ in size. Each process instead takes the next CLAIM_JOBS jobs when
    it is free. A byte per job says it is done, so the jobs of a child that died are known."""

    def __init__(self, start: int, end: int):
        import mmap
        import multiprocessing  # its lock is a semaphore both processes of a fork share

        self.start, self.end = start, end
        self.lock = multiprocessing.Lock()
        self.shared = mmap.mmap(-1, 8 + end - start)  # the next job not taken, then one byte per job (1: done)
        self.shared[:8] = start.to_bytes(8, "little")

    def claim(self) -> range:
        """The next jobs this process is to run (empty: none is left)."""
        with self.lock:
            start = int.from_bytes(self.shared[:8], "little")
            end = min(start + CLAIM_JOBS, self.end)
            self.shared[:8] = end.to_bytes(8, "little")
        return range(start, end)

    def done(self, index: int) -> None:
        self.shared[8 + index - self.start] = 1

    def not_done(self) -> list[int]:
        return [index for index in range(self.start, self.end) if not self.shared[8 + index - self.start]]


class Ahead(NamedTuple):
    """A child started on the first jobs before the rest could be (`PageJobs.start_ahead`)."""

    pid: int
    reader_fd: int
    shared: SharedJobs  # the jobs it shares: the first `shared.end`


class ErrorPage(Page, kw_only=True):
    """In place of a page that could not be built: what it was, and why."""

    template: ClassVar[str] = ""  # rendered by a function, not a template (render.PYTHON_PAGES)
    what: str
    detail: str


class PageJobs:
    def __init__(self, inputs: Inputs, writer: FolderWriter, label: str):
        self.inputs = inputs
        self.writer = writer
        self.label = label  # the log's name, for diagnostics
        # while jobs run in two processes: (job, url, what, detail) of the pages that could not be built,
        # counted once both are done, in job order
        self.failures: list[tuple[int, str, str, str]] | None = None
        self.job = 0  # the job running now
        self.on_fork: list[Callable[[], None]] = []  # what a child must do first (private file handles)

    def page(self, url: str, what: str, make_model: Callable[[], Model]) -> None:
        """Build, render and write one page; one that cannot be built is replaced by a page saying why."""
        try:
            self.writer.write(url, render_page(make_model()))
        except OSError:
            raise
        except Exception as exc:  # a page that cannot be built must not cost the report
            self.failed(url, what, exc)

    def failed(self, url: str, what: str, exc: Exception) -> None:
        """Count and show a page we could not build, and put a page saying so in its place."""
        detail = f"{type(exc).__name__}: {exc}"
        if self.failures is not None:
            self.failures.append((self.job, url, what, detail))
        else:
            self._count(what, detail)
        page = ErrorPage(**page_base(self.inputs, f"Page of {what}", root="../" * url.count("/")), what=what, detail=detail)
        self.writer.write(url, render_page(page))

    def _count(self, what: str, detail: str) -> None:
        self.inputs.analysis.stats.add("fail_parser")
        self.inputs.analysis.diagnostics.add(self.label, 0, f"could not build the page of {what}", detail, HINTS["fail_parser"])

    def start_ahead(self, first: Jobs) -> Ahead | None:
        """Fork a child that starts on the `first` jobs (pages that ask nothing of what this process
        is still to work out: the pages kinds asked for) while this process readies the rest (the
        compiles, before the compile pages: `analysis.compiles.ready_for_pages`, 0.4 s at 10,000
        compile ids, with the other core idle). `run` is then given every job, these first,
        and this child with them. None where it is not worth a process (or there is no fork)."""
        if not worth_forking(len(first)):
            return None
        try:
            shared = SharedJobs(0, len(first))
        except OSError:  # no shared semaphore here (no /dev/shm)
            return None
        sys.stdout.flush()
        sys.stderr.flush()

        def child() -> Iterable[bytes]:
            self._share([shared], first)
            return ()

        gc.freeze()  # see `run`
        pid, reader_fd = self._fork(child)
        return Ahead(pid, reader_fd, shared)

    def stop_ahead(self, ahead: Ahead | None) -> None:
        """Kill the child `start_ahead` started (something failed before `run` was called)."""
        if ahead is not None:
            self._stop(ahead.pid, ahead.reader_fd)
            gc.unfreeze()

    def run(self, jobs: Jobs, gathered: tuple[Callable[[], Iterable[bytes]], Callable[[IO[bytes]], None]] | None = None,
            meanwhile: Callable[[], None] | None = None, ahead: Ahead | None = None) -> bool:
        """Run the jobs, in this process and a forked child when there are enough of them (each takes
        the next few whenever it is free: `SharedJobs`; no more children than that and the one
        ahead: each fork copies much of the heap it walks). `gathered`: (encode, add) of what the jobs gather besides their pages
        (the search index's pieces): the child's share is encoded at its end and added here.
        `meanwhile`: work this process does first while the child starts on the jobs (it then
        takes fewer of them); whether it was run (not when the jobs all run here). `ahead`: the child
        `start_ahead` started on the first jobs, which the others take too once they are free."""
        stages = [ahead.shared] if ahead is not None else []
        first_end = ahead.shared.end if ahead is not None else 0
        forked = worth_forking(len(jobs))
        if forked:
            try:
                stages.append(SharedJobs(first_end, len(jobs)))
            except OSError:  # no shared semaphore here (no /dev/shm): this process does the rest
                forked = False
        if not forked and ahead is None:
            self._run_here(jobs)
            return False
        left_here = range(first_end if not forked else len(jobs), len(jobs))  # the jobs no child may take
        sys.stdout.flush()
        sys.stderr.flush()

        def child() -> Iterable[bytes]:
            self._share(stages, jobs)
            return gathered[0]() if gathered is not None else ()  # what it gathered, as it keeps it, in pieces

        # a garbage collection in the child would write to every object the two processes share,
        # copying the parent's whole heap page by page: frozen objects are left alone
        gc.freeze()
        self.failures = []
        children: list[tuple[int, int, Callable[[IO[bytes]], None] | None]] = []
        if ahead is not None:
            children.append((ahead.pid, ahead.reader_fd, None))
        try:
            try:
                if forked:
                    pid, reader_fd = self._fork(child)
                    children.append((pid, reader_fd, gathered[1] if gathered is not None else None))
                if meanwhile is not None and forked:
                    meanwhile()
                self._share(stages, jobs)
                for index in left_here:
                    self.job = index
                    jobs[index]()
            except BaseException:  # a full disk, Ctrl-C...: the children must not go on writing into
                for pid, reader_fd, _ in children:  # a staging folder about to be removed
                    self._stop(pid, reader_fd)
                raise
            failures: list[list[Any]] = []
            all_ok = True
            for pid, reader_fd, receive in children:
                ok, theirs = self._wait(pid, reader_fd, receive)
                all_ok = all_ok and ok
                failures += theirs
            if not all_ok:  # a child died: what it did not finish is done here (what it gathered may be cut
                for stage in stages:  # short: the gatherer makes up for pieces it lacks)
                    for index in stage.not_done():
                        self.job = index
                        jobs[index]()
            mine, self.failures = self.failures, None
        finally:
            gc.unfreeze()
            self.failures = None
        for _job, _url, what, detail in sorted([tuple(f) for f in failures] + mine):
            self._count(what, detail)
        return forked

    def _share(self, stages: list[SharedJobs], jobs: Jobs) -> None:
        """The jobs this process takes, stage after stage, until none is left."""
        for stage in stages:
            while taken := stage.claim():
                for index in taken:
                    self.job = index
                    jobs[index]()
                    stage.done(index)

    @staticmethod
    def _run_here(jobs: Jobs) -> None:
        for job in jobs:
            job()

    def _fork(self, work: Callable[[], Iterable[bytes]]) -> tuple[int, int]:
        """Start `work` in a forked child; (its pid, the pipe it reports on: the pages it could not
        build, as a JSON line, then the bytes `work` returned, piece by piece, as they are)."""
        reader_fd, writer_fd = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: do the work, report, exit without cleanup
            code = 1
            try:
                shutdown.die_with_parent(parent)  # killed -9, the parent takes its child with it
                os.close(reader_fd)
                self.failures = []
                for prepare in self.on_fork:
                    prepare()
                result = work()
                with os.fdopen(writer_fd, "wb") as pipe:  # every byte, however many (a write may take part)
                    pipe.write(json.dumps(self.failures).encode() + b"\n")
                    for piece in result:
                        pipe.write(piece)
                code = 0
            finally:
                os._exit(code)
        os.close(writer_fd)
        return pid, reader_fd

    @staticmethod
    def _stop(pid: int, reader_fd: int) -> None:
        """Kill the child and reap it: it wrote its last file once this returns."""
        os.close(reader_fd)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass

    @staticmethod
    def _wait(pid: int, reader_fd: int, receive: Callable[[IO[bytes]], None] | None) -> tuple[bool, list[list[Any]]]:
        """(whether the child finished, the pages it could not build); `receive` reads what its work
        returned from the pipe as it comes (never held whole: at 40,000 compile ids, 20 MB)."""
        with os.fdopen(reader_fd, "rb") as pipe:
            failures = pipe.readline()
            if receive is not None and failures.endswith(b"\n"):
                receive(pipe)
            pipe.read()  # the rest, if any: the child ends once all it wrote is read
        _, status = os.waitpid(pid, 0)
        if status != 0 or not failures.endswith(b"\n"):
            return False, []
        return True, json.loads(failures)


def worth_forking(jobs: int) -> bool:
    """Whether so many jobs are worth a forked process (there being a fork and a second core)."""
    return jobs >= PARALLEL_PAGES and hasattr(os, "fork") and (os.cpu_count() or 1) >= 2


@contextlib.contextmanager
def started_ahead(page_jobs: PageJobs, first: Jobs) -> Iterator[Ahead | None]:
    """`page_jobs.start_ahead(first)` for the time of the `with`: its child is stopped if what this
    process does meanwhile fails."""
    ahead = page_jobs.start_ahead(first)
    try:
        yield ahead
    except BaseException:
        page_jobs.stop_ahead(ahead)
        raise


_REPLACED: list[Any] = []  # the handles private_reader replaced in a forked child: never closed there


def private_reader(handle: Any) -> Any:
    """A read handle on the same temporary file with its own offset (in memory: already private).

    The handle it replaces is kept: closed in the child (when nothing refers to it any more), its
    buffer would seek the file offset it shares with the parent back over its read-ahead, and the
    parent's next read would then start elsewhere than it thinks (a page spool read back garbled)."""
    if isinstance(handle, tempfile.SpooledTemporaryFile) and not getattr(handle, "_rolled", False):
        return handle
    _REPLACED.append(handle)
    return open(f"/proc/self/fd/{handle.fileno()}", "rb")
