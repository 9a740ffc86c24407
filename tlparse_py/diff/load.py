"""Each side of a diff as the analysis' typed summary: from a trace (log or folder) or a report folder.

A report folder is read through its `summary.json` (`analysis.summary_load.load_summary`, the typed
loader); a trace is analysed (nothing is written). A folder of several ranks' logs becomes a
multi-rank summary, like `--all-ranks-html` writes.

A diff may compare runs of 100,000s of compiles, so each side holds only what the comparison reads:
a report's compiles are decoded a batch at a time (never the whole file as one tree of dicts), and
past the first COMPILES_IN_MEMORY they go to a scratch file (`analysis.spools.SpooledCompiles`, 8
bytes of memory a compile); those kept in memory share equal values (file names, reasons, cache
lookups, graph breaks: `compact`). Page urls and headlines are dropped: a diff links to no report page.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
from msgspec import Struct
import orjson

from .. import jsondepth
from ..jsondepth import OWN_FILE_DEPTH, TooDeep
from ..reading.inputs import InputError, SeveralRanks, candidate_logs, choose_input, rank_of
from ..analysis.kinds import load_plugins
from ..pipeline import Options, analyze_logs, source_of
from ..analysis.spools import SpooledCompiles
from ..analysis.summary import CompileSummary, RankEntry, RanksSummary, Summary
from ..analysis.summary_load import SummaryError, load_summary
from ..reading.gunzip import GunzipRefused
from ..report.targets import looks_like_report


class LoadError(Exception):
    """One side cannot be read; the message says why and what to do."""


class Side(Struct):
    path: Path
    kind: str  # "trace" or "report"
    summary: Summary | RanksSummary
    note: str = ""  # which logs were read, when a choice was made


def load(path: Path, role: str = "") -> Side:
    """BASE or NEW: a trace log, a trace folder, a report folder, or a report's summary.json."""
    label = f"{role} {path}" if role else str(path)
    if not path.exists():
        raise LoadError(f"{label} does not exist")
    if path.is_file() and path.name == "summary.json":
        return Side(path, "report", read_summary(path, label))
    if path.is_dir():
        summary = path / "summary.json"
        if summary.is_file():
            return Side(path, "report", read_summary(summary, label))
        if looks_like_report(path) and any(path.iterdir()) and not candidate_logs(path):
            raise LoadError(f"{label} is a report folder without summary.json (written by tlparse, or an older tlparse-py): "
                            "point at the trace instead")
    return _trace(path, label)


def read_summary(file: Path, label: str) -> Summary | RanksSummary:
    try:
        with file.open("rb") as handle:
            streamed = _streamed(handle)
        if streamed is not None:
            return streamed
        raw = file.read_bytes()
        loaded = _in_batches(raw)
        if loaded is not None:
            return loaded
        # a multi-rank summary, or one the batches refused: read whole, for load_summary's own words
        data = jsondepth.loads(raw, OWN_FILE_DEPTH)
    except OSError as exc:
        raise LoadError(f"cannot read {file}: {exc.strerror or exc}") from None
    except TooDeep:  # refused as soon as a batch is found too deep: never decoded whole, never a traceback
        raise LoadError(f"{label}: {file.name} nests JSON deeper than {OWN_FILE_DEPTH} levels (tlparse-py writes none so deep); "
                        "point at the trace instead") from None
    except orjson.JSONDecodeError as exc:
        raise LoadError(f"{label}: {file.name} is not valid JSON ({exc}); point at the trace instead") from None
    try:
        return compact(load_summary(data))
    except SummaryError as exc:
        raise LoadError(f"{label}: {file.name} is not a tlparse-py summary.json ({exc}); point at the trace instead") from None


BATCH = 2000  # compiles of a summary.json turned into objects at a time
COMPILES_IN_MEMORY = 5000  # compiles of a side held as objects; the rest are in a scratch file
_DECODE_ERRORS = (msgspec.DecodeError, orjson.JSONDecodeError, SummaryError, UnicodeDecodeError)


def _streamed(handle: BinaryIO) -> Summary | None:
    """A report's summary.json read a compile at a time, never whole: as tlparse-py writes it
    (orjson, indented by 2), where the compiles array is the top-level line `  "compiles": [`, each
    compile starts at `    {` and ends at the next line that is `    }` (no JSON string holds a
    newline, and a compile's own parts are indented deeper). None when the file is laid out otherwise
    or is not a single report's summary (the caller reads it whole)."""
    reader = _Reader(handle)
    try:
        found = reader.find(_COMPILES_KEY)
        if found < 0:
            return None
        before = reader.take(found)
        reader.pos += len(_COMPILES_KEY)
        version = _SCHEMA_VERSION.search(before)
        if version is None:
            return None
        loaded = _load_compiles(jsondepth.loads(version.group(1)), _batches(_compile_texts(reader)))
        head = jsondepth.loads(before + _COMPILES_KEY + b"]" + reader.rest(), OWN_FILE_DEPTH)
        if not isinstance(head, dict) or "ranks" in head:
            return None
        summary = load_summary(head)
    except TooDeep:
        raise
    except (*_DECODE_ERRORS, _NotLaidOut):
        return None
    if not isinstance(summary, Summary):
        return None
    summary.compiles, summary.cache_known = loaded
    return summary


_COMPILES_KEY = b'\n  "compiles": ['
_COMPILE_END = b"\n    }"
_SCHEMA_VERSION = re.compile(rb'\n  "schema_version": ("[^"\n]*")')
_CHUNK = 1 << 20


class _NotLaidOut(Exception):
    """The summary.json is not laid out as tlparse-py writes it."""


class _Reader:
    """A file read a chunk at a time, with what has been read and not yet taken."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.buffer = b""
        self.pos = 0

    def _more(self) -> bool:
        more = self.handle.read(_CHUNK)
        if more:
            self.buffer = self.buffer[self.pos :] + more  # what was taken is dropped once a chunk, not once an item
            self.pos = 0
        return bool(more)

    def find(self, marker: bytes) -> int:
        """Where `marker` starts at or after the position, reading on as needed; -1 at the end."""
        start = self.pos
        while (at := self.buffer.find(marker, start)) < 0:
            searched = max(len(self.buffer) - len(marker) + 1, self.pos) - self.pos
            if not self._more():
                return -1
            start = searched
        return at

    def peek(self, count: int) -> bytes:
        while len(self.buffer) - self.pos < count and self._more():
            pass
        return self.buffer[self.pos : self.pos + count]

    def take(self, end: int) -> bytes:
        taken = self.buffer[self.pos : end]
        self.pos = end
        return taken

    def rest(self) -> bytes:
        return self.buffer[self.pos :] + self.handle.read()


def _compile_texts(reader: _Reader) -> Iterator[bytes]:
    """The text of each compile of the array, from just after its `[`."""
    if reader.peek(1) == b"]":
        reader.pos += 1
        return
    while True:
        end = reader.find(_COMPILE_END)
        if end < 0:
            raise _NotLaidOut
        yield reader.take(end + len(_COMPILE_END))
        after = reader.peek(4)
        if after[:1] == b",":
            reader.pos += 1
        elif after == b"\n  ]":
            reader.pos += 4
            return
        else:
            raise _NotLaidOut


def _batches(texts: Iterable[bytes]) -> Iterator[list[Any]]:
    """The compiles' JSON, decoded BATCH at a time."""
    batch: list[bytes] = []
    for text in texts:
        batch.append(text)
        if len(batch) == BATCH:
            yield jsondepth.loads(b"[" + b",".join(batch) + b"]", OWN_FILE_DEPTH)
            batch = []
    if batch:
        yield jsondepth.loads(b"[" + b",".join(batch) + b"]", OWN_FILE_DEPTH)


def _load_compiles(schema_version: Any, batches: Iterable[list[Any]]) -> tuple[list[CompileSummary] | SpooledCompiles, bool]:
    """(the compiles, whether they say what their cache lookups found), a batch at a time: the first
    COMPILES_IN_MEMORY as compacted objects, and past them all in a scratch file."""
    shared: dict[Any, Any] = {}
    compiles: list[CompileSummary] | SpooledCompiles = []
    cache_known = True
    for batch in batches:
        part = load_summary({"schema_version": schema_version, "compiles": batch})
        assert isinstance(part, Summary)
        if isinstance(compiles, list) and len(compiles) + len(part.compiles) > COMPILES_IN_MEMORY:
            compiles = SpooledCompiles(compiles)
            shared.clear()
        if isinstance(compiles, list):
            compiles += compact_compiles(part.compiles, shared)
        else:
            compiles.extend(map(_slimmed, part.compiles))
        cache_known = cache_known and part.cache_known
    return compiles, cache_known


def _in_batches(raw: bytes) -> Summary | None:
    """A report's summary.json laid out otherwise (a tool re-wrote it), its compiles decoded BATCH at
    a time from the file's text (a tree of dicts for 100,000s of compiles costs several times the
    objects made from it). None when it is not a valid single-report summary.json (the caller reads
    it whole, for the error load_summary words)."""
    try:
        top = jsondepth.split(raw, dict[str, msgspec.Raw], OWN_FILE_DEPTH)
        if "ranks" in top or "compiles" not in top:
            return None
        entries = jsondepth.split(top["compiles"], list[msgspec.Raw], OWN_FILE_DEPTH)
        head = {key: jsondepth.loads(bytes(value), OWN_FILE_DEPTH) for key, value in top.items() if key != "compiles"}
        summary = load_summary({**head, "compiles": []})
        if not isinstance(summary, Summary):
            return None
        texts = (bytes(entry) for entry in entries)
        summary.compiles, summary.cache_known = _load_compiles(head.get("schema_version"), _batches(texts))
    except TooDeep:
        raise
    except _DECODE_ERRORS:
        return None
    return summary


def compact(summary: Summary | RanksSummary) -> Summary | RanksSummary:
    """The summary with equal values shared between its compiles (`compact_compiles`)."""
    shared: dict[Any, Any] = {}
    for one in [entry.summary for entry in summary.ranks] if isinstance(summary, RanksSummary) else [summary]:
        if one is not None:
            one.compiles = compact_compiles(one.compiles, shared)
    return summary


def compact_compiles(compiles: Sequence[CompileSummary], shared: dict[Any, Any]) -> list[CompileSummary]:
    """Compiles as the comparison reads them, in less memory: strings interned, equal lists and
    immutable parts (cache lookups, graph breaks, failures) one object shared by every compile that
    has them, and what a diff never reads (page urls, headlines) dropped. Only values of one type
    are shared (a float is never replaced by an equal int), and nothing shared is changed after."""

    def one(value: Any) -> Any:
        return shared.setdefault((type(value), value), value)

    def many(values: list[Any]) -> list[Any]:
        items = _Shared(sys.intern(v) if isinstance(v, str) else one(v) for v in values)
        return shared.setdefault(items, items)

    for c in map(_slimmed, compiles):
        c.pages = many([])
        c.attempts = [sys.intern(a) for a in c.attempts]
        c.frame = sys.intern(c.frame) if c.frame is not None else None
        c.user_location = sys.intern(c.user_location) if c.user_location is not None else None
        c.status = sys.intern(c.status)
        c.cause = sys.intern(c.cause)
        c.graph_breaks = many(c.graph_breaks)
        c.recompile_reasons = many(c.recompile_reasons)
        c.restart_reasons = many(c.restart_reasons)
        c.cache = many(c.cache)
        c.failure = one(c.failure) if c.failure is not None else None
    return list(compiles)


def _slimmed(compile_: CompileSummary) -> CompileSummary:
    """The compile without what a diff never reads: its page urls and headline."""
    compile_.url = None
    compile_.headline = ""
    compile_.pages = []
    return compile_


class _Shared(list[Any]):
    """A list shared by every compile that holds the same values (never changed once made): equal
    to another only when their items are of the same types too."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Shared):
            return len(self) == len(other) and all(type(a) is type(b) and a == b for a, b in zip(self, other))
        return list.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other


def _trace(path: Path, label: str) -> Side:
    load_plugins()
    try:
        chosen = choose_input(path)
    except SeveralRanks:
        return Side(path, "trace", _ranks(path))
    except InputError as exc:
        raise LoadError(f"{label}: {exc}" if label != str(path) else str(exc)) from None
    return Side(path, "trace", _analyze(chosen.logs), chosen.note)


def _analyze(logs: list[Path]) -> Summary:
    try:
        summary = compact(analyze_logs(logs, Options(), source_of(logs)).summary())
        assert isinstance(summary, Summary)
        return summary
    except GunzipRefused as exc:
        raise LoadError(str(exc)) from None
    except OSError as exc:
        raise LoadError(f"cannot read {exc.filename or logs[0]}: {exc.strerror or exc}") from None


def _ranks(folder: Path) -> RanksSummary:
    """A summary per rank (its biggest log; the others as rank_N_extra_K), as a multi-rank report holds."""
    by_rank: dict[int | None, list[Path]] = {}
    for log in candidate_logs(folder):
        by_rank.setdefault(rank_of(log), []).append(log)
    jobs: list[tuple[int | None, str, Path]] = []
    for number in sorted(r for r in by_rank if r is not None):
        ordered = sorted(by_rank[number], key=lambda p: (-p.stat().st_size, p.name))
        jobs.append((number, f"rank_{number}", ordered[0]))
        jobs += [(number, f"rank_{number}_extra_{i}", log) for i, log in enumerate(ordered[1:], start=1)]
    jobs += [(None, f"unranked_{i}", log) for i, log in enumerate(sorted(by_rank.get(None, [])), start=1)]
    ranks = []
    for rank, name, log in jobs:
        summary: Summary | None
        try:
            summary, error = _analyze([log]), None
        except LoadError as exc:
            summary, error = None, str(exc)
        ranks.append(RankEntry(rank, name, error, summary))
    return RanksSummary(ranks, inputs=[{"path": str(log), "rank": rank} for rank, _, log in jobs])
