"""Plain data shared by every stage: compile ids, records, counters, directory entries.

Nothing here does I/O or knows about HTML; the reader fills `Record`s, the parsers and the
report builder fill the rest, the renderers only read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

from msgspec import Struct, field

# Envelope keys that describe *where* a record belongs rather than *what* it is.
CONTEXT_KEYS = frozenset(
    {"rank", "compiled_autograd_id", "frame_id", "frame_compile_id", "attempt", "has_payload", "stack", "subgraph_name"}
)
COMPILE_ID_KEYS = ("compiled_autograd_id", "frame_id", "frame_compile_id", "attempt")


class CompileId(NamedTuple):
    """`[!ca/frame/frame_compile_id_attempt]`; any part may be missing (None).

    `process` tells apart the processes of one run that logged into one trace folder (a spawned
    child, DataLoader workers): 0 is the run's first process (the only one of most runs), written as
    torch writes ids; the others' ids read `[p1:0/0]` and their folders `p1_-_0_0_0`.
    """

    compiled_autograd_id: int | None = None
    frame_id: int | None = None
    frame_compile_id: int | None = None
    attempt: int | None = None
    process: int = 0

    def __str__(self) -> str:
        ca = f"!{self.compiled_autograd_id}/" if self.compiled_autograd_id is not None else ""
        attempt = f"_{self.attempt}" if self.attempt else ""
        process = f"p{self.process}:" if self.process else ""
        return f"[{process}{ca}{_dash(self.frame_id)}/{_dash(self.frame_compile_id)}{attempt}]"

    @property
    def frame_label(self) -> str:
        """The frame as compile ids write it: `0`, `!1/0`, `p1:0` (a run's second process)."""
        ca = f"!{self.compiled_autograd_id}/" if self.compiled_autograd_id is not None else ""
        return f"{f'p{self.process}:' if self.process else ''}{ca}{_dash(self.frame_id)}"

    @property
    def dirname(self) -> str:
        """Folder name used by tlparse: `-_0_0_0` (no `!`, `-` for a missing part); `p1_-_0_0_0` in process 1."""
        name = "_".join(_dash(part) for part in self[:4])
        return f"p{self.process}_{name}" if self.process else name

    def directory_key(self) -> CompileId:
        """The key records are grouped under: a missing attempt counts as 0 once a frame compile id is known."""
        if self.frame_compile_id is not None and self.attempt is None:
            return CompileId(self.compiled_autograd_id, self.frame_id, self.frame_compile_id, 0, self.process)
        return self

    def frame_key(self) -> CompileId:
        """All attempts of one frame compile share metrics, stacks and specialisations."""
        if self.frame_compile_id is not None and self.attempt != 0:  # attempt 0 is already its own frame key
            return CompileId(self.compiled_autograd_id, self.frame_id, self.frame_compile_id, 0, self.process)
        return self

    @staticmethod
    def parse(text: str) -> CompileId | None:
        """The compile id `str()` wrote (`[0/1]`, `[!0/1/0_2]`, `[-/-]`, `[p1:0/0]`); None for anything else."""
        match = _COMPILE_ID.fullmatch(text)
        if match is None:
            return None
        process, *parts = match.groups()
        ca, frame, compile_, attempt = (None if part in (None, "-") else int(part) for part in parts)
        return CompileId(ca, frame, compile_, attempt, int(process) if process else 0)


# The inverse of CompileId.__str__: every part a number (at most 10 digits: ids are 32-bit) or `-`.
_COMPILE_ID = re.compile(r"\[(?:p([1-9]\d{0,5}):)?(?:!(\d{1,10})/)?(\d{1,10}|-)/(\d{1,10}|-)(?:_(\d{1,10}))?\]")


def _dash(value: int | None) -> str:
    return "-" if value is None else str(value)


def display_key(key: CompileId | None) -> str:
    """How a directory key is shown on pages: `[0/0]`, or `(unknown)` for malformed ids."""
    return "(unknown)" if key is None else str(key)


def generation_label(label: str, generation: int) -> str:
    """A compile id as shown, with its generation after the first: `[0/0]`, `[0/0] (generation 1)`
    (compiled after one `torch._dynamo.reset()`, which makes torch number from `[0/0]` again). Every
    view marks a compile's generation so."""
    return f"{label} (generation {generation})" if generation else label


# Counters, in the order tlparse prints them; ours (after `unknown`) only appear when non-zero.
STAT_NAMES = (
    "ok",
    "other_rank",
    "fail_glog",
    "fail_json",
    "fail_payload_md5",
    "fail_dynamo_guards_json",
    "fail_parser",
    "fail_key_conflict",
    "fail_json_serialization",
    "unknown",
    "fail_utf8",
    "fail_field_type",
    "fail_orphan_payload",
    "fail_vllm_json",
)
# Counters that make `--strict` fail (tlparse's set, plus the problems it could not see).
STRICT_STATS = (
    "fail_glog",
    "fail_json",
    "fail_payload_md5",
    "other_rank",
    "fail_dynamo_guards_json",
    "fail_parser",
    "fail_utf8",
    "fail_field_type",
    "fail_orphan_payload",
    "fail_vllm_json",
)


class Stats(Struct):
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STAT_NAMES, 0))

    def add(self, name: str, amount: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + amount

    def __getitem__(self, name: str) -> int:
        return self.counts.get(name, 0)

    def strict_failures(self) -> int:
        return sum(self[name] for name in STRICT_STATS)

    def format(self) -> str:
        """`Stats { ok: 64, fail_payload_md5: 1 }` exactly as tlparse prints it."""
        parts = [f"{name}: {value}" for name, value in self.counts.items() if value]
        return "Stats { " + ", ".join(parts) + (" }" if parts else "}")


# What a user can do about each kind of problem (shown with -v and in the report's problem list).
HINTS = {
    "fail_glog": "the line is not from a trace log (mixed-in output, or a corrupted file); it is skipped, the rest is read",
    "fail_json": "the record's metadata is not valid JSON (a cut or edited line); the record and its payload are skipped",
    "fail_payload_md5": "the payload was changed after torch wrote it (a cut or edited log); it is shown as read",
    "fail_utf8": "the line holds bytes that are not UTF-8; they are shown as \ufffd",
    "fail_field_type": "a field has an unexpected type (a different torch version?); the record is kept, that field ignored",
    "fail_orphan_payload": "payload lines whose record is missing (a cut log?); they are skipped",
    "fail_vllm_json": "a vLLM record's JSON could not be read (a cut or edited log); its file is kept, the vLLM summary is written without it",
    "fail_dynamo_guards_json": "the guard list is not the JSON torch writes; its raw text is kept in payloads/",
    "fail_parser": "a bug in tlparse-py: please report it with this log; the record's raw data is in raw.jsonl",
    "fail_key_conflict": "the record uses a key raw.jsonl adds; it is left out of raw.jsonl only",
}


class Diagnostic(Struct):
    """One problem found in the input, kept for stderr (-v) and the report."""

    path: str
    lineno: int
    problem: str
    detail: str = ""
    hint: str = ""  # what the user can do about it


MIN_STRING_INDEX_BOUND = 1_000_000
STRING_INDEXES_PER_LINE = 16  # a `str` index beyond max(1M, 16 x lines read) would only inflate raw.jsonl


class DiagnosticLog:
    """Problems found while reading, counted by kind; the first `limit` are kept with details."""

    def __init__(self, limit: int = 500, echo: Callable[[Diagnostic], None] | None = None):
        self.limit = limit
        self.kept: list[Diagnostic] = []
        self.total = 0
        self.echo = echo

    def add(self, path: str, lineno: int, problem: str, detail: str = "", hint: str = "") -> None:
        self.total += 1
        diagnostic = Diagnostic(path, lineno, problem, detail[:300], hint)
        if len(self.kept) < self.limit:
            self.kept.append(diagnostic)
        if self.echo is not None:
            self.echo(diagnostic)


class CompileIds:
    """One `CompileId` per distinct compile id of a report, for every record that names it: the
    tables keyed by compile id (directory, kinds, clocks, metrics...) then share one object, where
    an id made per record cost 89 bytes in each table it reached first. One per report (the logs
    of a run read together share it), gone with it: a long process reading report after report
    keeps none."""

    __slots__ = ("_ids",)

    def __init__(self) -> None:
        self._ids: dict[tuple[Any, ...], CompileId] = {}

    def of(self, parts: tuple[Any, ...]) -> CompileId:
        """The id of these fields (`CompileId`'s, in order), made the first time only."""
        found = self._ids.get(parts)
        if found is None:
            found = CompileId(*parts)
            self._ids[found] = found  # itself the key: a CompileId is a tuple equal to its parts
        return found

    def __len__(self) -> int:
        return len(self._ids)


class StringTable:
    """The `str` intern tables of one process's logs, or of a run's processes (never shared between ranks).

    Process 0's strings are keyed by their index, as torch numbers them; another process's by
    `(process, index)`, the form its stack frames take (`stacks.frames_from_json`). torch numbers a
    process's strings from 0, and a forked process (a DataLoader worker) goes on from the count its
    parent had at the fork, using the parent's strings below it without logging them again: those
    indexes are read in process 0's table (the program that starts workers)."""

    def __init__(self) -> None:
        self.strings: dict[int, str] = {}
        self.others: dict[tuple[int, int], str] = {}
        self.first_own: dict[int, int] = {}  # process → the lowest index it defined itself

    def add(self, value: Any, lines_read: int = 0, process: int = 0) -> str:
        """Intern `value` (`["text", index]`); the reason it is refused, or "" when taken.

        raw.jsonl writes the table as a list up to the largest index, so one record naming index
        10,000,000 would write a 50 MB list of nulls: indexes are bounded by how much log was read
        (torch numbers strings from 0 as it meets them, a few per record at most).
        """
        if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)):
            return "malformed `str` record"
        index = value[1]
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            return "malformed `str` record"
        if index > max(MIN_STRING_INDEX_BOUND, lines_read * STRING_INDEXES_PER_LINE):
            return f"`str` index {short_repr(index)} is far beyond the strings a log this long can define"
        if process:
            self.others[(process, index)] = value[0]
            self.first_own[process] = min(index, self.first_own.get(process, index))
        else:
            self.strings[index] = value[0]
        return ""

    def lookup(self, index: Any) -> str | None:
        if isinstance(index, str):
            return index
        if isinstance(index, tuple):  # (process, index): another process's string
            found = self.others.get(index)
            if found is None and index[1] < self.first_own.get(index[0], index[1] + 1):  # from before a fork
                found = self.strings.get(index[1])
            return found
        return self.strings.get(index) if isinstance(index, int) else None

    def of_process(self, process: int) -> list[str | None]:
        """Another process's table as a list, as raw.jsonl writes it."""
        indexes = [i for p, i in self.others if p == process]
        return [self.others.get((process, i)) for i in range(max(indexes, default=0) + 1)]

    def as_list(self) -> list[str | None]:
        """The table as tlparse writes it at the top of raw.jsonl (`[null]` when empty)."""
        size = max(self.strings, default=0) + 1
        return [self.strings.get(i) for i in range(size)]


class Processes:
    """The processes of one run that logged into its trace: numbered from 0 in the order their
    first record was read (the logs are read earliest first, so 0 is the program that started the
    others), each with its glog pid (torch writes the process id there) and the logs it wrote to."""

    def __init__(self) -> None:
        self.pids: list[int] = []
        self.logs: list[list[str]] = []
        self._index: dict[int, int] = {}

    def index_of(self, pid: int, log: str) -> int:
        index = self._index.get(pid)
        if index is None:
            index = self._index[pid] = len(self.pids)
            self.pids.append(pid)
            self.logs.append([])
        if log not in self.logs[index]:
            self.logs[index].append(log)
        return index

    def __len__(self) -> int:
        return len(self.pids)


def short_repr(value: Any) -> str:
    """repr() for diagnostics: bounded, and never the digits of a huge int (slow, or it raises)."""
    if type(value) is int and value.bit_length() > 64:
        return f"an integer of {value.bit_length():,} bits"
    return repr(value)[:80]


class Record(Struct):
    """One envelope line and its payload, as read from the log."""

    lineno: int  # physical line number of the envelope in the log file (1-based)
    envelope: dict[str, Any]
    kinds: list[str]  # envelope keys that are record types (usually exactly one)
    compile_id: CompileId | None  # None: a compile-id field was present but malformed
    rank: int | None
    payload: bytes | None  # None when the envelope has no has_payload
    payload_md5: str | None  # the md5 the envelope claims
    timestamp: str  # ISO form of the glog time
    pid: int
    pathname: str
    source_line: int
    other_rank: bool = False
    process: int = 0  # which process of the run logged it (`CompileId.process`)
    # its raw.jsonl line but the payload file's name, encoded by a scanning child (`reading.raw_line`)
    raw_pieces: tuple[bytes, bytes] | None = None

    @property
    def has_payload(self) -> bool:
        return self.payload_md5 is not None

    def payload_text(self) -> str:
        return (self.payload or b"").decode("utf-8", "replace")

    def meta(self, kind: str) -> Any:
        return self.envelope.get(kind)


class OutputRef(Struct):
    """A numbered output of a record: its url, and whether it is an external link."""

    url: str
    external: bool = False


class RecordSummary(Struct):
    """What a compile page needs of one record, spooled while reading and read back per compile id."""

    line: int
    kinds: list[str]
    meta: dict[str, Any]  # each kind's metadata
    context: dict[str, Any]  # subgraph_name / rank, when present
    payload: str | None  # the payload's file in the report (None: no payload)
    payload_bytes: int | None
    outputs: list[OutputRef]

    def kind_meta(self, kind: str) -> dict[str, Any]:
        value = self.meta.get(kind)
        return value if isinstance(value, dict) else {}

    def to_json(self) -> dict[str, Any]:
        return {
            "line": self.line, "kinds": self.kinds, "meta": self.meta, "context": self.context, "payload": self.payload,
            "payload_bytes": self.payload_bytes, "outputs": [[o.url, o.external] for o in self.outputs],
        }


class Artifact(Struct):
    """One entry of compile_directory.json: a numbered file (or external link) of a compile id."""

    url: str
    name: str
    number: int
    suffix: str = ""
    readable_url: str | None = None
    kind: str = ""  # the record kind that made it (for our pages; not in compile_directory.json)
    is_link: bool = False
    raw: str | None = None  # the file holding the record's raw payload (itself, for payload files)
    subgraph: str | None = None  # its record's `subgraph_name`: the index groups a compile's files by it

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "number": self.number,
            "readable_url": self.readable_url,
            "suffix": self.suffix,
            "url": self.url,
        }


def cache_suffix(path: str) -> str:
    """The cache-status mark tlparse derives from an output's path."""
    if "cache_miss" in path:
        return "❌"
    if "cache_hit" in path:
        return "✅"
    if "cache_bypass" in path:
        return "❓"
    return ""
