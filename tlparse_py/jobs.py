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
from typing import Any

from .model import HINTS
from .render import render
from .store import Store
from .views.common import base_context
from .writer import FolderWriter

PARALLEL_PAGES = 200  # below this many pages, a second process costs more than it saves
Job = Callable[[], None]


class PageJobs:
    def __init__(self, analysis: Store, writer: FolderWriter, label: str):
        self.analysis = analysis
        self.writer = writer
        self.label = label  # the log's name, for diagnostics
        self.child_failures: list[tuple[str, str, str]] | None = None  # set in a forked child
        self.on_fork: list[Callable[[], None]] = []  # what a child must do first (private file handles)

    def page(self, url: str, what: str, template: str, make_context: Callable[[], dict[str, Any]]) -> None:
        """Render and write one page; one that cannot be built is replaced by a page saying why."""
        try:
            self.writer.write(url, render(template, make_context()))
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
        context = base_context(self.analysis, f"Page of {what}", root="../" * url.count("/"))
        context.update(what=what, detail=detail)
        self.writer.write(url, render("page_error.html.j2", context))

    def _count(self, what: str, detail: str) -> None:
        self.analysis.stats.add("fail_parser")
        self.analysis.diagnostics.add(self.label, 0, f"could not build the page of {what}", detail, HINTS["fail_parser"])

    def run(self, jobs: list[Job]) -> None:
        """Run the jobs, every other one in a forked child when there are enough of them."""
        if len(jobs) < PARALLEL_PAGES or not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
            for job in jobs:
                job()
            return
        reader_fd, writer_fd = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        # a garbage collection in the child would write to every object the two processes share,
        # copying the parent's whole heap page by page: frozen objects are left alone
        gc.freeze()
        try:
            pid = os.fork()
        except BaseException:
            gc.unfreeze()
            raise
        if pid == 0:  # the child: build the odd pages, report failures, exit without cleanup
            code = 1
            try:
                os.close(reader_fd)
                self.child_failures = []
                for prepare in self.on_fork:
                    prepare()
                for job in jobs[1::2]:
                    job()
                os.write(writer_fd, json.dumps(self.child_failures).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(writer_fd)
        try:
            for job in jobs[0::2]:
                job()
            with os.fdopen(reader_fd, "rb") as pipe:
                reported = pipe.read()
            _, status = os.waitpid(pid, 0)
        finally:
            gc.unfreeze()
        if status != 0:
            for job in jobs[1::2]:
                job()
            return
        for _url, what, detail in json.loads(reported or b"[]"):
            self._count(what, detail)


def private_reader(handle: Any) -> Any:
    """A read handle on the same temporary file with its own offset (in memory: already private)."""
    if isinstance(handle, tempfile.SpooledTemporaryFile) and not getattr(handle, "_rolled", False):
        return handle
    return open(f"/proc/self/fd/{handle.fileno()}", "rb")
