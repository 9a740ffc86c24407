"""chromium_events.json, and the compile-phase times the compile pages show, from chromium events."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import IO, Any

import orjson

from ..analysis import facts
from ..model import Record
from ..analysis.store import Store


class ChromiumEvents:
    """Appends events to chromium_events.json (a JSON array, one event per line) and times B/E pairs.

    tlparse indents every event; one line per event keeps the same array at half the size, which
    matters when a big log holds hundreds of thousands of events.
    """

    def __init__(self, out: IO[bytes], analysis: Store, problem: Callable[[Record, str | None, str], None]):
        self.out = out
        self.analysis = analysis
        self.problem = problem
        self.open_events: dict[tuple[Any, ...], list[float]] = {}  # B events awaiting their E (none kept once closed)
        self.bytes_written = 0  # of the events array, to decide whether a script copy is worth writing
        self.open_names: dict[tuple[Any, ...], list[str]] = {}  # (compile, tid) → names of the open spans, outermost first
        self._last_compile: tuple[Any, Any] = (None, None)  # (args.compile_id text, its parse): see _compile_id
        out.write(b"[")

    def add(self, record: Record) -> None:
        payload = record.payload or b""
        try:
            event = orjson.loads(payload)
            # valid JSON has no raw newline inside a string: dropping them gives compact JSON as is
            text = payload.replace(b"\n", b"").replace(b"\r", b"")
        except orjson.JSONDecodeError:
            try:
                event = json.loads(record.payload_text())
                text = orjson.dumps(event, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)  # NaN becomes null
            except (ValueError, RecursionError, TypeError, orjson.JSONEncodeError):
                self.problem(record, None, "chromium_event payload is not JSON (skipped)")
                return
        self.out.write(b"\n" if not self.analysis.chromium_events else b",\n")
        self.out.write(text)
        self.bytes_written += len(text) + 2
        self.analysis.chromium_events += 1
        if isinstance(event, dict):
            self._time_phase(event, record)

    def _time_phase(self, event: dict[str, Any], record: Record) -> None:
        """Add a B/E pair's duration to its frame compile's phase times (only small totals are kept)."""
        phase, name, ts = event.get("ph"), event.get("name"), event.get("ts")
        if phase not in ("B", "E") or not isinstance(name, str) or not isinstance(ts, (int, float)):
            return
        args = event.get("args")
        compile_id = self._compile_id(args.get("compile_id")) if isinstance(args, dict) else None
        if compile_id is None and record.compile_id is not None:
            compile_id = record.compile_id.frame_key()
        if compile_id is None:
            return
        tid = event.get("tid")
        key = (compile_id, name, tid)
        thread = (compile_id, tid)
        nesting = self.open_names.setdefault(thread, [])
        if phase == "B":
            self.open_events.setdefault(key, []).append(ts)
            nesting.append(name)
        elif self.open_events.get(key):
            opened = self.open_events[key]
            started = opened.pop()
            if not opened:  # closed spans leave nothing behind: a big log has 100,000s of them
                del self.open_events[key]
            duration = max(0.0, ts - started)
            depth = _last_index(nesting, name)
            path = tuple(nesting[: depth + 1]) if depth is not None else (name,)
            if depth is not None:
                del nesting[depth:]
            generation = self.analysis.generation_at(compile_id, record.lineno)
            self.analysis.note_span(compile_id, generation, name, path, duration)
        if not nesting:
            del self.open_names[thread]

    def _compile_id(self, text: Any) -> Any:
        """facts.parse_compile_id(text), parsed once per run of events naming the same compile
        (a compile's events come together, and there are 100,000s of them in a big log)."""
        if type(text) is not str or text != self._last_compile[0]:
            self._last_compile = (text, facts.parse_compile_id(text))
        return self._last_compile[1]

    def close(self) -> None:
        self.out.write(b"\n]" if self.analysis.chromium_events else b"]")
        self.out.close()


def _last_index(names: list[str], name: str) -> int | None:
    for index in range(len(names) - 1, -1, -1):
        if names[index] == name:
            return index
    return None


# The "Open in Perfetto" button reads the events from a script copy (a page opened from file://
# cannot read a JSON file, and the CSP allows no fetch); past this size the reader picks the file.
EVENTS_SCRIPT_LIMIT = 32 << 20
EVENTS_SCRIPT = "static/chromium_events.js"


def events_script(events_json: bytes) -> bytes:
    """chromium_events.json as a script: a JSON array is a JavaScript literal as it is."""
    return b"window.TLPARSE_CHROMIUM_EVENTS = " + events_json + b";\n"
