"""Page jobs: render and write pages once reading is done, in this process and a forked one.

Pages are independent once reading is done, and a fork shares the whole analysis without copying
it. A page that cannot be built is replaced by a page saying why, and counted; a child that dies
has its share rebuilt here.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any, ClassVar

from ..model import HINTS
from .render import Model, render_page
from .views.common import Inputs, Page, page_base
from .writer import FolderWriter

PARALLEL_PAGES = 200  # below this many pages, a second process costs more than it saves
Job = Callable[[], None]


class ErrorPage(Page, kw_only=True):
    """In place of a page that could not be built: what it was, and why."""

    template: ClassVar[str] = "page_error.html.j2"
    what: str
    detail: str


class PageJobs:
    def __init__(self, inputs: Inputs, writer: FolderWriter, label: str):
        self.inputs = inputs
        self.writer = writer
        self.label = label  # the log's name, for diagnostics
        self.child_failures: list[tuple[str, str, str]] | None = None  # set in a forked child
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
        if self.child_failures is not None:
            self.child_failures.append((url, what, detail))
        else:
            self._count(what, detail)
        page = ErrorPage(**page_base(self.inputs, f"Page of {what}", root="../" * url.count("/")), what=what, detail=detail)
        self.writer.write(url, render_page(page))

    def _count(self, what: str, detail: str) -> None:
        self.inputs.analysis.stats.add("fail_parser")
        self.inputs.analysis.diagnostics.add(self.label, 0, f"could not build the page of {what}", detail, HINTS["fail_parser"])

    def run(self, jobs: list[Job], beside: Callable[[], str | None] | None = None) -> str | None:
        """Run the jobs, every other one in a forked child when there are enough of them; the child
        first runs `beside` (one long job, e.g. the search index), so that it overlaps the pages
        this process builds (not a third process: each fork copies much of the heap it walks).
        Returns what `beside` returned (a short text, or None)."""
        if len(jobs) < PARALLEL_PAGES or not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
            for job in jobs:
                job()
            return beside() if beside is not None else None
        sys.stdout.flush()
        sys.stderr.flush()
        # a garbage collection in the child would write to every object the two processes share,
        # copying the parent's whole heap page by page: frozen objects are left alone
        gc.freeze()

        def child() -> str | None:  # the forked share (or, if the child dies, this process does it)
            result = beside() if beside is not None else None
            for job in jobs[1::2]:
                job()
            return result

        try:
            pid, reader_fd = self._fork(child)
            for job in jobs[0::2]:
                job()
            ok, result, failures = self._wait(pid, reader_fd)
        finally:
            gc.unfreeze()
        if not ok:  # the child died: its share is done here
            return child()
        for _url, what, detail in failures:
            self._count(what, detail)
        return result

    def _fork(self, work: Callable[[], Any]) -> tuple[int, int]:
        """Start `work` in a forked child; (its pid, the pipe it reports on: what `work` returned
        and the pages it could not build)."""
        reader_fd, writer_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: do the work, report, exit without cleanup
            code = 1
            try:
                os.close(reader_fd)
                self.child_failures = []
                for prepare in self.on_fork:
                    prepare()
                result = work()
                os.write(writer_fd, json.dumps([result, self.child_failures]).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(writer_fd)
        return pid, reader_fd

    @staticmethod
    def _wait(pid: int, reader_fd: int) -> tuple[bool, Any, list[list[str]]]:
        """(whether the child finished, what its work returned, the pages it could not build)."""
        with os.fdopen(reader_fd, "rb") as pipe:
            reported = pipe.read()
        _, status = os.waitpid(pid, 0)
        if status != 0:
            return False, None, []
        result, failures = json.loads(reported)
        return True, result, failures


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
