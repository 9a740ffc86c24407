"""chromium_events.json: the chromium events of a log, as one file (their spans are timed in `analysis.phases`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO

import orjson

from .. import jsondepth
from ..analysis.phases import PhaseTimer
from ..analysis.store import Store
from ..model import Record
from .fileio import GatheredWrites


WRITE_BYTES = 1 << 18  # the events gathered before a write


class ChromiumEvents:
    """Appends events to chromium_events.json (a JSON array, one event per line) and hands each to the
    analysis' phase timer (`analysis.phases`), which times B/E pairs.

    tlparse indents every event; one line per event keeps the same array at half the size, which
    matters when a big log holds hundreds of thousands of events.
    """

    def __init__(self, out: IO[bytes], analysis: Store, problem: Callable[[Record, str | None, str], None]):
        self.out = out
        self.analysis = analysis
        self.problem = problem
        self.phases = PhaseTimer(analysis)
        self.bytes_written = 0  # of the events array, to decide whether a script copy is worth writing
        self.gathered = GatheredWrites(out, WRITE_BYTES)
        self.gathered.write(b"[")

    def add(self, record: Record) -> None:
        payload = record.payload or b""
        try:
            event = jsondepth.loads(payload)
            # valid JSON has no raw newline inside a string: dropping them gives compact JSON as is
            text = payload.replace(b"\n", b"").replace(b"\r", b"")
        except orjson.JSONDecodeError:
            try:
                event = jsondepth.loads_text(record.payload_text())
                text = orjson.dumps(event, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)  # NaN becomes null
            except (ValueError, RecursionError, TypeError, orjson.JSONEncodeError):
                self.problem(record, None, "chromium_event payload is not JSON (skipped)")
                return
        self.gathered.write(b"\n" if not self.analysis.chromium_events else b",\n", text)
        self.bytes_written += len(text) + 2
        self.analysis.chromium_events += 1
        if isinstance(event, dict):
            self.phases.add(event, record)

    def close(self) -> None:
        self.gathered.write(b"\n]" if self.analysis.chromium_events else b"]")
        self.gathered.flush()
        self.out.close()


# The "Open in Perfetto" button reads the events from a script copy (a page opened from file://
# cannot read a JSON file, and the CSP allows no fetch); past this size the reader picks the file.
EVENTS_SCRIPT_LIMIT = 32 << 20
EVENTS_SCRIPT = "static/chromium_events.js"


def events_script(events_json: bytes) -> bytes:
    """chromium_events.json as a script: a JSON array is a JavaScript literal as it is."""
    return b"window.TLPARSE_CHROMIUM_EVENTS = " + events_json + b";\n"
