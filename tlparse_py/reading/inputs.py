"""Which logs to read: a file, a `.gz`, or a TORCH_TRACE folder holding one or many logs.

A folder is read by process: every trace log in it (and one level of subfolders, where TORCH_TRACE
puts draft_export's `draft_export_capture/` and the harness puts one folder per program) is
grouped by the pid in its first record. A folder made for one run (`run`'s, the notebook's
`trace()`'s), or read with --all-runs, is read whole. Any other folder is split into runs from what
its logs show, and the newest run is read:

- a child process (spawned, forked, by forkserver, a Pool or DataLoader worker,
  torch.multiprocessing) is known by its first compile's stack, which starts in multiprocessing's
  start-up code; it belongs to the run of the program that started it, however long that program
  was quiet before (`_parent_of`);
- processes whose logs overlap in time are one run;
- any other process is a run of its own: a program that neither overlaps another nor was started
  by one. The logs of other runs are left out, and the report says which and why (`LeftOut`).

A pid is no process's own: containers run each program as pid 1. Logs of one pid are one process
only where their string tables say so (`_one_process_each`). When is read from the records: their
absolute times (chromium events' `ts`, compiles' `start_time`) first, glog times (no year, no
zone) only for a log that has none, read across New Year and a change from summer time, with the
doubt told where they cannot settle it (`_timeline`). The newest run is the one that began last;
file times (lost by a copy) only break a tie.
"""

from __future__ import annotations

import calendar
import io
import math
import re
import stat
import time
import zlib
from pathlib import Path
from typing import Any

import orjson
from msgspec import Struct, field

from .. import jsondepth
from ..model import Processes
from .gunzip import GunzipRefused, open_log

TRACE_PREFIX = "dedicated_log_torch_trace"
LOG_SUFFIXES = (".log", ".log.gz")  # what torch names its trace logs (nothing else in a folder is read)
# bounded: int() of thousands of digits raises, and no job has a billion ranks
_RANK_IN_NAME = re.compile(r"rank_(\d{1,9})(?:_|\.|$)")
_RANK_IN_TEXT = re.compile(rb'"rank": ?(\d{1,9})(?!\d)')
PEEK_BYTES = 256 * 1024
# A record line: the glog prefix (reader.GLOG_PREFIX, kept on one line) and a JSON object envelope.
_RECORD = re.compile(
    rb"[VIWEC](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6}) (\d+) (?:[A-Za-z]:)?[^:\]\n]+:\d+\][^ \n]* \{"
)
_ENVELOPE_START = b"] {"  # where every record line's envelope starts: found at memchr speed, then checked
_PREFIX_MAX = 1024  # the most of a line before `] {` that is looked at
SCAN_CHUNK = 1 << 20
GZ_SCAN_CHUNK = 64 << 10
_PID_SHOWN = 20


class InputError(Exception):
    """The input cannot be used; the message says why and what to do."""


class SeveralRanks(InputError):
    """The folder holds the logs of several ranks: a multi-rank report is the answer."""

    def __init__(self, folder: Path, ranks: list[int]):
        self.ranks = ranks
        super().__init__(self.said_of(folder))

    def said_of(self, folder: Path) -> str:
        """What stderr says of it, naming the folder as `folder` (`run` names where it keeps its trace)."""
        return f"{folder} holds logs of {len(self.ranks)} ranks ({', '.join(map(str, self.ranks))}): writing a multi-rank report"


def kept_path(path: Path, kept: tuple[Path, Path] | None) -> Path:
    """`path` as it will be named once its trace is kept elsewhere: `kept` is (where the trace is
    read, where it is kept), for `run`, whose trace moves into the report as trace/ once the report
    is written; a path outside that folder, or no `kept`, is named as it is."""
    if kept is None:
        return path
    read_in, kept_in = kept
    try:
        return kept_in / path.relative_to(read_in)
    except ValueError:
        return path


def ranks_in(folder: Path) -> list[int]:
    """The ranks of the logs in the folder itself (by name, else by their first records): two or
    more make it a folder of rank logs, read as a multi-rank report."""
    return sorted({r for r in map(rank_of, candidate_logs(folder)) if r is not None})


class LeftOut(Struct, frozen=True):
    """Logs of the folder that the report does not read, and why: shown at the top of its index."""

    logs: list[str]  # as named in the folder (`sub/dedicated_log_torch_trace_x.log`)
    why: str


class ChosenInput(Struct):
    log: Path
    others: list[Path] = field(default_factory=list)  # logs in the same folder that were not chosen
    note: str = ""  # told to the user on stderr when a choice was made for them
    also: list[Path] = field(default_factory=list)  # further logs of the same process, read into the same report
    left_out: list[LeftOut] = field(default_factory=list)  # `others`, grouped by why they were not read
    every_log: bool = False  # all_runs: every log of the folder read, whichever run it is of

    @property
    def logs(self) -> list[Path]:
        return [self.log, *self.also]


class LogHead(Struct, frozen=True):
    """What the first record of a log says: the process (glog pid) and when (glog time, no year).

    `pid` is None when the log could not be scanned to the end (a .gz refused as a bomb by the
    default limits): it may hold records, and is left to the reader (and the user's limits)."""

    pid: str | None
    stamp: tuple[int, ...] = ()


def is_trace_name(name: str) -> bool:
    return name.startswith(TRACE_PREFIX) and name.endswith(LOG_SUFFIXES)


def candidate_logs(folder: Path) -> list[Path]:
    """Trace logs in a folder itself (not its subfolders): `dedicated_log_torch_trace*.log[.gz]`.

    Symlinks are never followed (see `skipped_symlinks`): a link planted in a trace folder could
    point anywhere (/proc/self/environ, ~/.ssh) and raw.log copies what is read.
    """
    return sorted(p for p in _entries(folder) if is_trace_name(p.name) and _is_regular_file(p))


def trace_logs(folder: Path) -> list[Path]:
    """Trace logs in a folder and in its subfolders one level down (never through a symlink)."""
    found = candidate_logs(folder)
    for sub in sorted(_subfolders(folder)):
        try:
            found.extend(candidate_logs(sub))
        except InputError:  # an unreadable subfolder is not the folder's main content
            continue
    return found


def skipped_symlinks(folder: Path) -> list[str]:
    """One line per trace-log symlink in the folder (or a subfolder) that is not read."""
    try:
        folders = [folder, *sorted(_subfolders(folder))]
    except InputError:
        return []
    links: list[Path] = []
    for each in folders:
        try:
            links.extend(p for p in _entries(each) if p.is_symlink() and is_trace_name(p.name))
        except InputError:
            continue
    return [f"skipped symlink {p} (symlinks in a trace folder are not followed; pass its target to read it)" for p in sorted(links)]


def _entries(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError as exc:
        raise InputError(f"cannot list {folder}: {getattr(exc, 'strerror', None) or exc}") from None


def _subfolders(folder: Path) -> list[Path]:
    """Real (not symlinked), not hidden folders inside `folder`."""
    found = []
    for p in _entries(folder):
        if p.name.startswith("."):
            continue
        try:
            if stat.S_ISDIR(p.lstat().st_mode):
                found.append(p)
        except OSError:
            continue
    return found


def _is_regular_file(path: Path) -> bool:
    if path.name.startswith("."):
        return False
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def rank_of(log: Path) -> int | None:
    """The rank a log belongs to: from its name (`..._rank_3_abc.log`) or else its first records."""
    match = _RANK_IN_NAME.search(log.name)
    if match:
        return int(match.group(1))
    try:
        with open_log(log) as handle:
            head = handle.read(PEEK_BYTES)
    except (OSError, EOFError, zlib.error, GunzipRefused):
        return None
    found = _RANK_IN_TEXT.search(head)
    return int(found.group(1)) if found else None


def last_stamp(log: Path) -> tuple[int, ...]:
    """The glog time of a log's last record (no year), or () when none is found."""
    return _ending(log)[0]


def _ending(log: Path) -> tuple[tuple[int, ...], bytes]:
    """The glog time of a log's last record (no year; () when none is found) and the log's last
    bytes (up to _TIMES_BYTES: where its last absolute times are).

    A plain log is read from its end, a chunk at a time back to its last record; a .gz is read
    through (under the default bomb limits), keeping the last record seen."""
    try:
        handle = open_log(log)
    except OSError:
        return (), b""
    with handle:
        if isinstance(handle, io.BufferedReader):
            return _last_stamp_plain(handle), _last_bytes(handle)
        last: tuple[int, ...] = ()
        kept = b""
        while True:
            try:
                chunk = handle.read(GZ_SCAN_CHUNK)
            except (GunzipRefused, EOFError, zlib.error, OSError):
                return last, kept
            if not chunk:
                return last, kept
            found = _last_record(kept[-_PREFIX_MAX:] + chunk)
            if found:
                last = found
            kept = (kept + chunk)[-_TIMES_BYTES:]


def _last_bytes(handle: io.BufferedReader) -> bytes:
    try:
        end = handle.seek(0, io.SEEK_END)
        handle.seek(max(0, end - _TIMES_BYTES))
        return handle.read(_TIMES_BYTES)
    except OSError:
        return b""


def _last_stamp_plain(handle: io.BufferedReader) -> tuple[int, ...]:
    try:
        end = handle.seek(0, io.SEEK_END)
    except OSError:
        return ()
    position = end
    following = b""
    while position > 0:
        start = max(0, position - SCAN_CHUNK)
        handle.seek(start)
        buf = handle.read(position - start) + following[:_PREFIX_MAX]
        found = _last_record(buf)
        if found:
            return found
        following = buf
        position = start
    return ()


def _last_record(buf: bytes) -> tuple[int, ...]:
    """The glog time of the last record line that starts in `buf`."""
    hit = len(buf)
    while True:
        hit = buf.rfind(_ENVELOPE_START, 0, hit)
        if hit < 0:
            return ()
        found = _find_record(buf[max(0, buf.rfind(b"\n", max(0, hit - _PREFIX_MAX), hit) + 1) : hit + len(_ENVELOPE_START)])
        if found:
            return tuple(int(g) for g in found.groups()[:6])


def first_record(log: Path) -> LogHead | None:
    """The first record of a log (None: it holds none), found by a cheap scan of its bytes.

    A log torch wrote has a record on its first line, so only its first chunk is read; a file with
    no record is read to its end (a .gz through gzip, under the default bomb limits).
    Raises InputError when the file cannot be opened or read.
    """
    try:
        handle = open_log(log)
    except OSError as exc:
        raise InputError(f"cannot read {log}: {exc.strerror or exc}") from None
    tail = b""
    # a .gz in small reads: one cut short loses its last read, and what comes before it stands
    size = SCAN_CHUNK if isinstance(handle, io.BufferedReader) else GZ_SCAN_CHUNK
    with handle:
        while True:
            try:
                chunk = handle.read(size)
            except (GunzipRefused, EOFError, zlib.error):  # a bomb, a truncated or damaged .gz: the reader decides
                return LogHead(None)
            except OSError as exc:
                if exc.errno is None:  # gzip.BadGzipFile
                    return LogHead(None)
                raise InputError(f"cannot read {log}: {exc.strerror or exc}") from None
            if not chunk:
                return LogHead(None) if getattr(handle, "damaged", "") else None
            buf = tail + chunk
            match = _find_record(buf)
            if match:
                pid = match.group(7).decode("ascii")
                return LogHead(pid, tuple(int(g) for g in match.groups()[:6]))
            tail = buf[-_PREFIX_MAX:]  # a record split between two chunks is still found


def _find_record(buf: bytes) -> re.Match[bytes] | None:
    """The first record line's prefix in `buf`: each `] {` checked against the glog prefix before it."""
    pos = 0
    while True:
        hit = buf.find(_ENVELOPE_START, pos)
        if hit < 0:
            return None
        end = hit + len(_ENVELOPE_START)
        start = buf.rfind(b"\n", max(0, hit - _PREFIX_MAX), hit) + 1 or max(0, hit - _PREFIX_MAX)
        for match in _RECORD.finditer(buf, start, end):
            if match.end() == end:
                return match
        pos = hit + 1


def _real(path: Path) -> Path:
    try:
        return path.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise InputError(f"cannot resolve {path}: {getattr(exc, 'strerror', None) or exc}") from None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def file_size(path: Path) -> int:
    """A file's size in bytes; 0 when it cannot be asked (gone, unreadable)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def newest(paths: list[Path]) -> Path:
    return max(paths, key=lambda p: (_mtime(p), p.name))


def not_a_trace(path: Path) -> InputError:
    return InputError(f"{path} is not a TORCH_TRACE log: no record could be read")


def choose_input(path: Path, latest: bool = False, export: bool = False, all_runs: bool = False) -> ChosenInput:
    """Resolve the PATH argument to the log(s) to read, or explain why it cannot be done.

    A folder: the logs of its newest run (its processes; one process's logs: the main log,
    draft_export's capture log, TORCH_DTRACE's second log) are read together, main log first (it
    defines the string table the others use); the others are named, with why (`left_out`).
    `all_runs`: every log of a folder is read, as one report: the caller made the folder for one
    run (`run`, the notebook's `trace()`), or the user asked for every run (--all-runs). `export`
    no longer changes the choice (it used to be what read a process's logs together); it is kept
    for callers.
    """
    del export
    if latest and all_runs:
        raise InputError("--latest reads the newest log and --all-runs every log: give one of them")
    if not path.exists():
        raise InputError(f"{path} does not exist")
    if path.is_file():
        if latest:
            raise InputError(f"{path} is a file; --latest picks the newest log in a folder")
        log = _real(path) if path.is_symlink() else path  # a symlink named by the user: followed, once, here
        if first_record(log) is None:
            raise not_a_trace(path)
        return ChosenInput(log)
    if not path.is_dir():
        raise InputError(f"{path} is neither a file nor a folder")
    logs = trace_logs(path)
    if not logs:
        raise InputError(f"{path} holds no trace logs (expected {TRACE_PREFIX}_*.log, as written by TORCH_TRACE)")
    if not latest and sum(p.parent == path for p in logs) > 1:
        ranks = ranks_in(path)
        if len(ranks) > 1:
            raise SeveralRanks(path, ranks)
    scanned = {log: first_record(log) for log in logs}
    heads = {log: head for log, head in scanned.items() if head is not None}
    empty = [log for log in logs if log not in heads]
    if not heads:
        raise not_a_trace(path)
    empty_note = f" (no records, not read: {_names(path, empty)})" if empty else ""
    no_records = [LeftOut(_shown_all(path, empty), "no trace record could be read in it")] if empty else []
    if latest:
        chosen = newest(list(heads))
        others = [p for p in logs if p != chosen]
        note = f"--latest: reading {_shown(path, chosen)}, the newest of {len(logs)} logs{empty_note}" if others else ""
        older = [p for p in others if p in heads]
        left_out = [LeftOut(_shown_all(path, older), "--latest reads the newest log only")] if older else []
        return ChosenInput(chosen, others, note, left_out=left_out + no_records)
    processes, doubt, slack = _processes(path, heads)
    runs = [processes] if all_runs else _runs(processes, slack)
    # the newest run: the one that began last, by what its records say (`_place`); its files' times
    # only where the records cannot tell (a copy keeps no file times: `scp -r`, `kubectl cp`)
    run = max(runs, key=lambda r: (max((proc.begin for proc in r if proc.begin < math.inf), default=-math.inf),
                                   max(_mtime(p) for proc in r for p in proc.logs), max(p.name for proc in r for p in proc.logs)))
    ordered = [p for proc in _in_order(run) for p in proc.logs]
    read = set(ordered)
    others = sorted((p for p in logs if p not in read), key=str)
    if len(ordered) == 1 and not others:
        return ChosenInput(ordered[0])
    left_out = [LeftOut(_shown_all(path, [p for proc in _in_order(other) for p in proc.logs]), _why_not_read(other))
                for other in sorted(runs, key=_run_start) if other is not run]
    doubt_note = f"; {doubt}" if doubt else ""
    return ChosenInput(ordered[0], others, _note(path, runs, run, all_runs) + empty_note + doubt_note, ordered[1:], left_out + no_records,
                       all_runs)


def _note(folder: Path, runs: list[list[_Process]], run: list[_Process], all_runs: bool) -> str:
    """What stderr says of the logs read, and of the other runs' logs left out."""
    ordered = _in_order(run)
    logs = [p for proc in ordered for p in proc.logs]
    pids = [_pid_shown(proc.pid) for proc in ordered]
    if len(run) > 1 and all_runs:
        body = f"{len(logs)} logs of {len(run)} processes together (pids {', '.join(pids)}): {_names(folder, logs, sort=False)}"
    elif len(run) > 1:
        body = (f"{len(logs)} logs of {len(run)} processes of one run together (pids {', '.join(pids)}, the first started"
                f" the others): {_names(folder, logs, sort=False)}")
    elif len(logs) > 1:
        body = f"{len(logs)} logs of one process together{f' (pid {pids[0]})' if pids[0] else ''}: {_names(folder, logs, sort=False)}"
    else:
        body = _shown(folder, logs[0])
    if all_runs:
        return f"{folder}: reading every log, {body}"
    if len(runs) > 1:
        older = _names(folder, [p for other in runs if other is not run for proc in other for p in proc.logs])
        return f"{folder} holds logs of {len(runs)} runs; reading the newest, {body} (not read, older runs: {older}); --all-runs reads every run"
    return f"{folder}: reading {body}"


def _why_not_read(run: list[_Process]) -> str:
    """Why the logs of a run other than the one read are left out (the index says it)."""
    if not all(proc.end for proc in run):
        return ("its first or last record could not be read within the default limits (a large or damaged .gz), so which run it "
                "belongs to is not known; name the log to read it alone")
    ordered = _in_order(run)
    pids = ", ".join(_pid_shown(proc.pid) for proc in ordered)
    span = f"{_clock(_run_start(run))} to {_clock(max(run, key=lambda proc: proc.finish).end)}"
    return (f"another run (pid{'s' if len(run) > 1 else ''} {pids}, records from {span}): its logs do not overlap this run's in "
            "time, and none of its processes is a child started by this run's program (a child is known by its first compile's "
            "stack, which starts in multiprocessing's start-up code)")


def _clock(stamp: tuple[int, ...]) -> str:
    """A glog time (month, day, hour, minute, second, microsecond) as `12-05 23:39:17`."""
    month, day, hour, minute, second = stamp[:5]
    return f"{month:02}-{day:02} {hour:02}:{minute:02}:{second:02}"


def _pid_shown(pid: str | None) -> str:
    return "" if pid is None else pid if len(pid) <= _PID_SHOWN else pid[:_PID_SHOWN] + "…"


# Where a child process's stack starts, (file, function): its start-up code, which calls the target
# it was given. Every multiprocessing child (spawn, fork, forkserver; Pool, DataLoader and
# torch.multiprocessing workers too) passes through process.py's _bootstrap; the others name how.
_CHILD_FRAMES = (
    ("multiprocessing/process.py", "_bootstrap"),
    ("multiprocessing/spawn.py", "spawn_main"),
    ("multiprocessing/popen_fork.py", "_launch"),
    ("multiprocessing/pool.py", "worker"),
    ("torch/multiprocessing/spawn.py", "_wrap"),
    ("torch/utils/data/_utils/worker.py", "_worker_loop"),
)
# A frame whose file the log does not name: a forked child uses the file names its parent interned
# before the fork without logging them again. Its function alone then says it, where the name is
# not a common one.
_CHILD_FUNCTIONS = frozenset({"_bootstrap", "spawn_main", "_worker_loop"})
_STR_ENVELOPE = b'{"str": '
_START_ENVELOPE = b'{"dynamo_start": '
_START_LINE = b"] " + _START_ENVELOPE  # the glog prefix's end, then the envelope
_BUILD_RECORD = b'"name": "torch_version"'
_BUILD_FIELD = re.compile(rb'"(pytorch_version|commit)": "([^"\\\n]{1,100})"')
_BUILD_BYTES = 1024  # the torch_version record and its payload, from its name on
_HEAD_CHUNK = 16 << 10


class _Process(Struct):
    """One process's logs in a folder, and what their heads say of it."""

    logs: list[Path]  # earliest first (the main log: it defines the string table), the largest on a tie
    where: Path  # the folder its logs lie in: runs are found within one folder
    pid: str | None  # None: its log's pid could not be read (a .gz refused by the default limits)
    start: tuple[int, ...]  # the glog time of its first record
    child: bool = False  # its first compile's stack starts in a child's start-up code (`_CHILD_FRAMES`)
    build: str = ""  # torch's version and commit (its `torch_version` record); "" when not in its head
    end: tuple[int, ...] = ()  # the glog time of its last record; () when not known (or not needed)
    begin: float = math.inf  # its first and last record on the folder's one timeline (`_Timeline`); not known: inf, -inf
    finish: float = -math.inf


def _processes(folder: Path, heads: dict[Path, LogHead]) -> tuple[list[_Process], str, float]:
    """The folder's processes (`_by_process`); where there are several, what each one's first log
    says of where it came from, and when each began and ended (`_place`, with the doubt about
    those times and how uncertain they are)."""
    found = []
    for group in _by_process(folder, heads):
        logs = sorted(group, key=lambda p: (heads[p].stamp or (99,), -file_size(p), str(p)))
        where = logs[0].parent if all(p.parent == logs[0].parent for p in logs) else folder
        found.append(_Process(logs, where, heads[logs[0]].pid, min((heads[p].stamp for p in logs if heads[p].stamp), default=())))
    if len(found) < 2:
        return found, "", 0.0
    for process in found:
        process.child, process.build = _origin(process.logs[0])
    return found, *_place(found, heads)


def _in_order(run: list[_Process]) -> list[_Process]:
    """A run's processes as they are read and numbered: its programs, then its children, each the
    earliest first (so process 0 is the program that started the others, whose strings a forked
    child uses)."""
    return sorted(run, key=lambda p: (p.child, p.begin, str(p.logs[0])))


def _run_start(run: list[_Process]) -> tuple[int, ...]:
    """The glog time of the run's first record (as shown: the stamp of its earliest process)."""
    first = min(run, key=lambda p: p.begin)
    return first.start or min((proc.start for proc in run if proc.start), default=())


def _run_begin(run: list[_Process]) -> float:
    return min(proc.begin for proc in run)


def _runs(processes: list[_Process], slack: float = 0.0) -> list[list[_Process]]:
    """The runs of a folder's processes, found from what their logs show.

    A child (its first compile's stack says so) belongs to the program that started it
    (`_parent_of`), however long that program was quiet before it began; the children whose
    program is not found belong together, per folder. Those families whose time spans overlap
    (from the first record of their earliest log to the last record of their latest, on the
    folder's timeline: `_place`) are one run, within one folder; a family that began after the
    others had ended is a run of its own. `slack`: how far apart in time two families may be and
    still be read as one run, where the logs' times are uncertain by that much. A process whose
    span is not known (a log whose pid could not be read) is a run of its own.
    """
    if len(processes) == 1:  # one process: no end to read (a big .gz would be read through for it)
        return [processes]
    known = [p for p in processes if p.end]
    families = {id(p): [p] for p in known if not p.child}
    parentless: dict[Path, list[_Process]] = {}
    for child in (p for p in known if p.child):
        parent = _parent_of(child, known)
        (families[id(parent)] if parent is not None else parentless.setdefault(child.where, [])).append(child)
    return _overlapping([*families.values(), *parentless.values()], slack) + [[p] for p in processes if not p.end]


def _parent_of(child: _Process, processes: list[_Process]) -> _Process | None:
    """The program (a process that is not a child) that started `child`, among those of its folder
    with the same torch build: the latest to begin logging before the child did, however long it
    was quiet since. Or a program that began logging only after the child, but was started before
    it: pids count up, so a pid between that latest program's and the child's is a program
    started after the one and before the other (a parent that compiles only after its child
    ended). None: no program of the folder can be its parent (its own logged nothing)."""
    programs = [p for p in processes if not p.child and p.where == child.where and _same_build(p, child)]
    parent = max((p for p in programs if p.begin <= child.begin), key=lambda p: p.begin, default=None)
    pid = _pid_number(child.pid)
    floor = 0 if parent is None else _pid_number(parent.pid)
    if pid is None or floor is None:
        return parent
    later = [(number, p) for p in programs if p.begin > child.begin and floor < (number := _pid_number(p.pid) or 0) < pid]
    return max(later, key=lambda found: found[0])[1] if later else parent


def _same_build(one: _Process, other: _Process) -> bool:
    """Whether two processes may run one torch: the same version and commit, or one not known."""
    return not one.build or not other.build or one.build == other.build


def _pid_number(pid: str | None) -> int | None:
    return int(pid) if pid is not None and pid.isdigit() and len(pid) <= 19 else None


def _overlapping(families: list[list[_Process]], slack: float = 0.0) -> list[list[_Process]]:
    """Families joined into runs where their time spans overlap (or come within `slack` seconds),
    within one folder."""
    runs: list[list[_Process]] = []
    open_runs: dict[Path, tuple[float, list[_Process]]] = {}  # per folder: the run being grown, and its end
    for family in sorted(families, key=lambda f: (_run_begin(f), str(f[0].logs[0]))):
        start, end, where = _run_begin(family), max(p.finish for p in family), family[0].where
        current = open_runs.get(where)
        if current is not None and start <= current[0] + slack:
            current[1].extend(family)
            open_runs[where] = (max(current[0], end), current[1])
            continue
        run = list(family)
        runs.append(run)
        open_runs[where] = (end, run)
    return runs


# -- when: the logs' times on one timeline -----------------------------------------------------------
#
# A glog time has no year and no zone, and a file's mtime is when it was last copied as often as
# when it was written (`scp -r`, a cloud copy, `kubectl cp` keep no file times). The records say
# when in absolute (unix) time: a chromium event's `ts` (µs) and a compile's `start_time` (s),
# which torch writes from the first compile on. A log's first and last such time, moved by the
# glog time between that record and its first (last) record, are when it began and ended. A log
# with none is placed by its glog times: through the UTC offset the other logs' records show,
# or, where no log has one, on a calendar whose year turns where the folder's times show their
# longest pause (a run that starts on 12-31 and ends on 01-01 is one night, not one year back).
# A log whose last glog time is up to an hour before its first went through a change from summer
# time: glog times in that folder are uncertain by an hour, and the doubt is told.

_ABSOLUTE = re.compile(rb'"(ts|start_time)": ?(\d{9,17}(?:\.\d{1,9})?)(?![\d.])')
_UNIX_FIRST, _UNIX_LAST = 1e9, 4102444800.0  # 2001 to 2100: what a real record's absolute time can be
_TIMES_BYTES = 64 << 10  # the head and the tail of a log looked at for absolute times
_HOUR, _DAY = 3600.0, 86400.0
_YEAR = 366 * _DAY  # a glog time's place in the year is taken in a leap year (02-29 is a day of it)
_ZONE_STEP = 900.0  # UTC offsets are whole quarter hours
_SAME_PROCESS_GAP = _HOUR  # a same-pid log with no string-table evidence is the process's only if it begins within this of its end


class _LogTimes(Struct, frozen=True):
    """When a log's records were written: glog times (no year) and, where its records hold one,
    absolute unix times of its first and last record."""

    start: tuple[int, ...]
    end: tuple[int, ...]
    first_at: float | None = None
    last_at: float | None = None


def _log_times(log: Path, start: tuple[int, ...]) -> _LogTimes:
    end, tail = _ending(log)
    first = _absolute_times(_head_bytes(log, _TIMES_BYTES))
    last = _absolute_times(tail)
    # the earliest and the latest each time says (a compile's `start_time` is written at its end)
    first_at = min(at - max(0.0, _glog_gap(start, stamp)) for stamp, at in first) if first and start else None
    last_at = max(at + max(0.0, _glog_gap(stamp, end)) for stamp, at in last) if last and end else None
    return _LogTimes(start, end or start, first_at, last_at if last_at is None or first_at is None or last_at >= first_at else first_at)


def _absolute_times(buf: bytes) -> list[tuple[tuple[int, ...], float]]:
    """(glog time of the record, unix time) of each absolute time in the records of `buf`, in order."""
    found: list[tuple[tuple[int, ...], float]] = []
    stamp: tuple[int, ...] = ()
    for text in buf.split(b"\n"):
        match = _RECORD.match(text)
        if match:
            stamp = tuple(int(g) for g in match.groups()[:6])
        if not stamp or (b'"ts"' not in text and b'"start_time"' not in text):
            continue
        for hit in _ABSOLUTE.finditer(text):
            value = float(hit.group(2)) / (1e6 if hit.group(1) == b"ts" else 1.0)
            if _UNIX_FIRST <= value <= _UNIX_LAST:
                found.append((stamp, value))
    return found


def _head_bytes(log: Path, size: int) -> bytes:
    try:
        with open_log(log) as handle:
            return handle.read(size)
    except (OSError, EOFError, zlib.error, GunzipRefused):
        return b""


def _in_year(stamp: tuple[int, ...], year: int = 2000) -> float | None:
    """A glog time as seconds, read in `year` (as if UTC); None when it is no date."""
    try:
        month, day, hour, minute, second, micro = stamp[:6]
        return calendar.timegm((year, month, day, hour, minute, second)) + micro / 1e6 if 1 <= month <= 12 and 1 <= day <= 31 else None
    except (ValueError, OverflowError):
        return None


def _glog_gap(earlier: tuple[int, ...], later: tuple[int, ...]) -> float:
    """Seconds from one glog time to a later one of the same log: across a new year when the later's
    date is the smaller; negative (to an hour) across a change from summer time."""
    one, other = _in_year(earlier), _in_year(later)
    if one is None or other is None:
        return 0.0
    gap = other - one
    return gap + _YEAR if gap < -_HOUR - 1 else gap


def _utc_offset(stamp: tuple[int, ...], at: float) -> tuple[float, int] | None:
    """The UTC offset (whole quarter hours) and the year a glog time shows, given its unix time."""
    year = time.gmtime(at).tm_year
    readings = [(local - at, candidate) for candidate in (year - 1, year, year + 1) if (local := _in_year(stamp, candidate)) is not None]
    if not readings:
        return None
    offset, year = min(readings, key=lambda reading: abs(reading[0]))
    return (round(offset / _ZONE_STEP) * _ZONE_STEP, year) if abs(offset) <= _DAY else None


def _unix_of(stamp: tuple[int, ...], offset: float, near: float) -> float | None:
    """A glog time as unix time, read at `offset`, in the year that puts it nearest `near`."""
    year = time.gmtime(near).tm_year
    readings = [local - offset for candidate in (year - 1, year, year + 1) if (local := _in_year(stamp, candidate)) is not None]
    return min(readings, key=lambda at: abs(at - near)) if readings else None


def _calendar(stamps: list[tuple[int, ...]]) -> dict[tuple[int, ...], float]:
    """Glog times with no absolute time anywhere in the folder, as seconds on one calendar: the year
    turns where the times show their longest pause (the times before it, in the year's order, are
    the next year's)."""
    places = sorted({at for stamp in stamps if (at := _in_year(stamp)) is not None})
    if not places:
        return {}
    pauses = [(later - earlier, later) for earlier, later in zip(places, places[1:])]
    longest = max(pauses, default=(0.0, places[0]))
    turn = longest[1] if longest[0] > places[0] + _YEAR - places[-1] else places[0]
    return {stamp: at + (_YEAR if at < turn else 0.0) for stamp in stamps if (at := _in_year(stamp)) is not None}


def _timeline(times: dict[Path, _LogTimes]) -> tuple[dict[Path, tuple[float, float]], str, float]:
    """Each log's first and last record on one timeline, the doubt about it ("" when none) and how
    uncertain (seconds) the placing of the logs with no absolute time is."""
    anchors = [(t.start, t.first_at) for t in times.values() if t.first_at is not None]
    anchors += [(t.end, t.last_at) for t in times.values() if t.last_at is not None]
    zones = {found: at for stamp, at in anchors if (found := _utc_offset(stamp, at)) is not None}
    offsets = sorted({offset for offset, _ in zones})
    calendar_at = _calendar([s for t in times.values() for s in (t.start, t.end)]) if not anchors else {}
    placed: dict[Path, tuple[float, float]] = {}
    set_back = False
    for log, t in times.items():
        first, last = t.first_at, t.last_at
        glog_first, glog_last = _glog_placed(t, zones, calendar_at)
        if first is None and last is not None:
            first = last - max(0.0, _glog_gap(t.start, t.end))
        first = first if first is not None else glog_first
        if last is None:
            gap = _glog_gap(t.start, t.end)
            set_back |= gap < 0 and t.first_at is None
            last = first + (gap + _HOUR if gap < 0 else gap) if first is not None else glog_last
        placed[log] = (first if first is not None else math.inf, last if last is not None else -math.inf)
    uncertain = any(t.first_at is None and t.last_at is None for t in times.values())
    if uncertain and len(offsets) > 1:
        return placed, ("some logs hold no absolute time, and the others' glog times show "
                        f"{len(offsets)} UTC offsets (a clock change, or hosts in other zones): their logs are placed within "
                        f"{_span_words(offsets[-1] - offsets[0])} of each other"), offsets[-1] - offsets[0]
    if set_back:
        return placed, ("a log's glog times go back by up to an hour (a change from summer time), and glog times carry no zone: "
                        "logs within an hour of each other are read as one run"), _HOUR
    return placed, "", 0.0


def _glog_placed(t: _LogTimes, zones: dict[tuple[float, int], float], calendar_at: dict[tuple[int, ...], float]) -> tuple[float | None, float | None]:
    """A log's first and last glog times on the timeline, where it holds no absolute time of its own:
    read at the earliest of the folder's UTC offsets (the widest reading at the latest), or on the
    folder's calendar."""
    if zones:
        readings = [(_unix_of(t.start, offset, near), _unix_of(t.end, offset, near)) for (offset, _), near in zones.items()]
        firsts = [first for first, _ in readings if first is not None]
        lasts = [last for _, last in readings if last is not None]
        return min(firsts, default=None), max(lasts, default=None)
    return calendar_at.get(t.start), calendar_at.get(t.end)


def _span_words(seconds: float) -> str:
    return f"{seconds / _HOUR:g} hour{'s' if seconds != _HOUR else ''}"


def _place(processes: list[_Process], heads: dict[Path, LogHead]) -> tuple[str, float]:
    """Each process's first and last record on the folder's timeline (`begin`, `finish`) and the
    glog time of its last record (`end`, shown); the doubt about those times ("" when none) and
    how uncertain they are (seconds: `_runs`'s slack)."""
    known = [p for p in processes if p.pid is not None and p.start]
    times = {log: _log_times(log, heads[log].stamp) for p in known for log in p.logs if heads[log].stamp}
    placed, doubt, slack = _timeline(times)
    for process in known:
        spans = [placed[log] for log in process.logs if log in placed]
        process.begin = min(first for first, _ in spans)
        process.finish = max(max(last for _, last in spans), process.begin)
        last_log = max((log for log in process.logs if log in placed), key=lambda log: placed[log][1])
        process.end = times[last_log].end
    return doubt, slack



def _origin(log: Path) -> tuple[bool, str]:
    """Whether a log's process is a child, and its torch build, from the head of the log: its first
    compile's stack (`dynamo_start`), read with the file names interned before it, and its
    `torch_version` record. (False, "") when the log cannot be read."""
    try:
        head = _head(log)
    except (OSError, EOFError, zlib.error, GunzipRefused):
        return False, ""
    return _starts_as_child(head), _build(head)


def _head(log: Path) -> bytes:
    """A log's first bytes, up to the end of its first compile's start record: a few KB in a log
    torch wrote (the record comes first, after torch's version and the file names it interns),
    never more than PEEK_BYTES."""
    head, at = b"", -1
    with open_log(log) as handle:
        while len(head) < PEEK_BYTES:
            chunk = handle.read(min(_HEAD_CHUNK, PEEK_BYTES - len(head)))
            if not chunk:
                break
            searched = max(0, len(head) - len(_START_LINE))  # a start split between two reads is still found
            head += chunk
            if at < 0:
                at = head.find(_START_LINE, searched)
            if at >= 0 and head.find(b"\n", at) >= 0:
                break
    return head


def _starts_as_child(head: bytes) -> bool:
    """Whether the first `dynamo_start` stack in `head` passes through a child's start-up code."""
    strings: dict[int, str] = {}
    for text in head.split(b"\n"):
        match = _RECORD.match(text)
        if match is None:
            continue
        envelope = text[match.end() - 1 :]
        if envelope.startswith(_STR_ENVELOPE):
            entry = _json(envelope).get("str")
            if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and type(entry[1]) is int:
                strings[entry[1]] = entry[0]
        elif envelope.startswith(_START_ENVELOPE):
            start = _json(envelope).get("dynamo_start")
            stack = start.get("stack") if isinstance(start, dict) else None
            return isinstance(stack, list) and any(_child_frame(frame, strings) for frame in stack)
    return False


def _child_frame(frame: Any, strings: dict[int, str]) -> bool:
    if not isinstance(frame, dict):
        return False
    name, file = frame.get("name"), frame.get("filename")
    path = strings.get(file) if type(file) is int else file if isinstance(file, str) else None
    if path is None:
        return name in _CHILD_FUNCTIONS
    path = path.replace("\\", "/")
    return any(name == function and (path == suffix or path.endswith("/" + suffix)) for suffix, function in _CHILD_FRAMES)


def _build(head: bytes) -> str:
    """torch's version and commit from the `torch_version` record in `head`; "" when it is not there."""
    at = head.find(_BUILD_RECORD)
    if at < 0:
        return ""
    fields = dict(_BUILD_FIELD.findall(head, at, at + _BUILD_BYTES))
    return " ".join(fields[key].decode("utf-8", "replace") for key in (b"pytorch_version", b"commit") if key in fields)


def _json(envelope: bytes) -> dict[str, Any]:
    """An envelope's JSON object; {} when it is not one (a line cut off at the end of the head)."""
    try:
        found = jsondepth.loads(envelope)
    except orjson.JSONDecodeError:
        return {}
    return found if isinstance(found, dict) else {}


def _by_process(folder: Path, heads: dict[Path, LogHead]) -> list[list[Path]]:
    """Logs grouped by process: same pid, and in the folder itself or in one same subfolder, and
    one process by what their string tables show (`_one_process_each`).

    A subfolder's logs join the folder's own logs of their pid (TORCH_TRACE's `draft_export_capture/`);
    the same pid in two subfolders (one program each, as the harness writes) is two runs: containers
    reuse pids. A log whose pid could not be read is a run of its own.
    """
    groups: dict[tuple[str, str], list[Path]] = {}
    top_pids = {head.pid for log, head in heads.items() if log.parent == folder}
    for log, head in heads.items():
        if head.pid is None:
            key = ("", str(log))
        elif log.parent == folder or head.pid in top_pids:
            key = (head.pid, "")
        else:
            key = (head.pid, log.parent.name)
        groups.setdefault(key, []).append(log)
    return [process for group in groups.values() for process in _one_process_each(group, heads)]


def _one_process_each(logs: list[Path], heads: dict[Path, LogHead]) -> list[list[Path]]:
    """Logs of one pid, split into the processes that wrote them: a pid is no process's own
    (containers run each program as pid 1, and two runs a day apart share a folder mounted in each).

    Each process numbers its strings from 0 (`model.StringTable`), and never defines one index
    twice: a log whose string table starts at 0 is a process of its own; one whose table goes on
    from a count begun elsewhere (draft_export's capture log, TORCH_DTRACE's second log) is the
    latest such process's before it. A log with no string in its head is the process's whose last
    record came at most _SAME_PROCESS_GAP before its first (`_timeline`), else one of its own.
    """
    if len(logs) < 2:
        return [logs]
    counts = {log: _first_string(log) for log in logs}
    if sum(counts[log] == 0 for log in logs) <= 1 and None not in counts.values():  # one count, the others go on from it
        return [logs]
    placed = _timeline({log: _log_times(log, heads[log].stamp) for log in logs})[0]
    processes: list[list[Path]] = []
    finish = -math.inf
    for log in sorted(logs, key=lambda p: (placed[p][0], str(p))):
        count, (first, last) = counts[log], placed[log]
        goes_on = count is not None and count > 0 or count is None and first <= finish + _SAME_PROCESS_GAP
        if processes and goes_on:
            processes[-1].append(log)
            finish = max(finish, last)
        else:
            processes.append([log])
            finish = last
    return processes


def _first_string(log: Path) -> int | None:
    """The index of the first `str` record in a log's head: 0 where its process began its string
    table in this log, more where it goes on from a count begun in another; None: none there."""
    for text in _head_bytes(log, _TIMES_BYTES).split(b"\n"):
        match = _RECORD.match(text)
        if match is None or not text.startswith(_STR_ENVELOPE, match.end() - 1):
            continue
        entry = _json(text[match.end() - 1 :]).get("str")
        if isinstance(entry, list) and len(entry) == 2 and type(entry[1]) is int:
            return entry[1]
    return None


def process_of_each(logs: list[Path]) -> list[int]:
    """Which of the logs' processes wrote each log (numbered from 0, first met first), by the rule a
    folder's logs are grouped by (`_by_process`): for a reader of several logs, whose string tables
    are one only where the logs are one process's."""
    heads: dict[Path, LogHead] = {}
    for log in logs:
        try:
            heads[log] = first_record(log) or LogHead(None)
        except InputError:
            heads[log] = LogHead(None)
    found = {log: number for number, group in enumerate(_by_process(logs[0].parent, heads)) for log in group}
    numbers: dict[int, int] = {}
    return [numbers.setdefault(found[log], len(numbers)) for log in logs]


class LogProcesses(Processes):
    """The run's processes (`model.Processes`) as the reader of one log numbers them, where the
    logs read together may hold two processes of one pid (`_one_process_each`: containers run each
    program as pid 1): the first to log a pid keeps its number; another gets a number of its own,
    so its compile ids are its own and its `str` records a table of their own (`StringTable` keys
    a process's strings by its number)."""

    def __init__(self, run: Processes, process: int, owners: dict[int, int], numbers: dict[tuple[int, int], int]):
        super().__init__()
        self.run = run  # the table the report shows; this one only numbers
        self.process = process  # which of the logs' processes (`process_of_each`) wrote this log
        self.owners = owners  # pid → the process that logged it first (shared by the readers of the logs)
        self.numbers = numbers  # (process, pid) → its number, for a pid another process had first

    def index_of(self, pid: int, log: str) -> int:
        if self.owners.setdefault(pid, self.process) == self.process:
            return self.run.index_of(pid, log)
        number = self.numbers.get((self.process, pid))
        if number is None:
            number = self.numbers[(self.process, pid)] = len(self.run.pids)
            self.run.pids.append(pid)
            self.run.logs.append([])
        if log not in self.run.logs[number]:
            self.run.logs[number].append(log)
        return number


def _shown(folder: Path, log: Path) -> str:
    try:
        return log.relative_to(folder).as_posix()
    except ValueError:
        return log.name


def _shown_all(folder: Path, logs: list[Path]) -> list[str]:
    return sorted(_shown(folder, p) for p in logs)


def _names(folder: Path, logs: list[Path], sort: bool = True) -> str:
    shown = [_shown(folder, p) for p in logs]
    return ", ".join(sorted(shown) if sort else shown)
