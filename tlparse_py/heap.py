"""Fewer full garbage collections while a report is built.

Reading keeps each compile's facts until the report is written, and the records of a batch live
long enough to reach the oldest generation before they are dropped. CPython then runs a full
collection each time the objects promoted since the last one reach a quarter of those it kept: at
40,000 compile ids, 110 full collections in the reading process and 29 in the page builder, 14.6 s
of the run's 83 s of CPU (2026-12-06), for 1,051 objects found. The young collections, left as
they are, find the short-lived cycles (the other 240,000 objects collected there).

`few_full_collections` lets a full collection wait for FULL_EVERY collections of the middle
generation instead of 10: one at 40,000 compile ids. What a full collection would have found
earlier waits for the next one, or for the first after the report (the thresholds are restored).
Nested and concurrent builds (a notebook's threads, a multi-rank run) share one setting, restored
when the last of them ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

FULL_EVERY = 1000  # collections of the middle generation between two full ones (CPython's default: 10)

_lock = threading.Lock()
_active = 0  # builds under way in this process
_saved: tuple[int, int, int] | None = None  # the thresholds to restore once none is


@contextmanager
def few_full_collections() -> Iterator[None]:
    """While the block runs, a full collection only every FULL_EVERY middle-generation ones."""
    global _active, _saved
    with _lock:
        if _active == 0:
            _saved = gc.get_threshold()
            young, middle, full = _saved
            gc.set_threshold(young, middle, max(full, FULL_EVERY))
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None
