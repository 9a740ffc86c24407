"""Which logs to read: a file, a `.gz`, or a TORCH_TRACE folder holding one or many logs.

A folder is read by process: every trace log in it (and one level of subfolders, where TORCH_TRACE
puts draft_export's `draft_export_capture/` and the harness puts one folder per program) is
grouped by the pid in its first record. Processes of one folder whose logs overlap in time (a
program and the children it started: a spawned process, DataLoader workers) are one run, and the
logs of the newest run are read together.
"""

from __future__ import annotations

import io
import re
import stat
import zlib
from pathlib import Path

from msgspec import Struct, field

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


class ChosenInput(Struct):
    log: Path
    others: list[Path] = field(default_factory=list)  # logs in the same folder that were not chosen
    note: str = ""  # told to the user on stderr when a choice was made for them
    also: list[Path] = field(default_factory=list)  # further logs of the same process, read into the same report

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
    """The glog time of a log's last record (no year), or () when none is found.

    A plain log is read from its end, a chunk at a time back to its last record; a .gz is read
    through (under the default bomb limits), keeping the last record seen."""
    try:
        handle = open_log(log)
    except OSError:
        return ()
    with handle:
        if isinstance(handle, io.BufferedReader):
            return _last_stamp_plain(handle)
        last: tuple[int, ...] = ()
        tail = b""
        while True:
            try:
                chunk = handle.read(GZ_SCAN_CHUNK)
            except (GunzipRefused, EOFError, zlib.error, OSError):
                return last
            if not chunk:
                return last
            buf = tail + chunk
            found = _last_record(buf)
            if found:
                last = found
            tail = buf[-_PREFIX_MAX:]


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


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def newest(paths: list[Path]) -> Path:
    return max(paths, key=lambda p: (_mtime(p), p.name))


def not_a_trace(path: Path) -> InputError:
    return InputError(f"{path} is not a TORCH_TRACE log: no record could be read")


def choose_input(path: Path, latest: bool = False, export: bool = False) -> ChosenInput:
    """Resolve the PATH argument to the log(s) to read, or explain why it cannot be done.

    A folder: the logs of its newest run (one process: the main log, draft_export's capture log,
    TORCH_DTRACE's second log) are read together, main log first (it defines the string table the
    others use); older runs' logs are named. `export` no longer changes the choice (it used to be
    what read a process's logs together); it is kept for callers.
    """
    del export
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
    top = [p for p in logs if p.parent == path]
    if not latest and len(top) > 1:
        ranks = sorted({r for r in map(rank_of, top) if r is not None})
        if len(ranks) > 1:
            raise SeveralRanks(f"{path} holds logs of {len(ranks)} ranks ({', '.join(map(str, ranks))}): writing a multi-rank report")
    scanned = {log: first_record(log) for log in logs}
    heads = {log: head for log, head in scanned.items() if head is not None}
    empty = [log for log in logs if log not in heads]
    if not heads:
        raise not_a_trace(path)
    empty_note = f" (no records, not read: {_names(path, empty)})" if empty else ""
    if latest:
        chosen = newest(list(heads))
        others = [p for p in logs if p != chosen]
        note = f"--latest: reading {_shown(path, chosen)}, the newest of {len(logs)} logs{empty_note}" if others else ""
        return ChosenInput(chosen, others, note)
    runs = _runs(path, heads)
    # the newest run: its newest file (then its latest record start) is the newest
    run = max(runs, key=lambda r: (max(_mtime(p) for g in r for p in g), max(heads[p].stamp for g in r for p in g),
                                   max(p.name for g in r for p in g)))
    # process by process, the earliest first (the program that started the others); within one, its
    # earliest log first (the main log: it defines the string table), the largest on a tie
    ordered = [p for group in run for p in sorted(group, key=lambda p: (heads[p].stamp or (99,), -_size(p), str(p)))]
    others = sorted((p for p in logs if p not in ordered), key=str)
    if len(ordered) == 1 and not others:
        return ChosenInput(ordered[0])
    pids = [_pid_shown(heads[group[0]].pid) for group in run]
    if len(run) > 1:
        body = (f"{len(ordered)} logs of {len(run)} processes of one run together (pids {', '.join(pids)}, the first started"
                f" the others): {_names(path, ordered, sort=False)}")
    elif len(ordered) > 1:
        body = f"{len(ordered)} logs of one process together{f' (pid {pids[0]})' if pids[0] else ''}: {_names(path, ordered, sort=False)}"
    else:
        body = _shown(path, ordered[0])
    if len(runs) > 1:
        older = _names(path, [p for p in others if p in heads])
        note = f"{path} holds logs of {len(runs)} runs; reading the newest, {body} (not read, older runs: {older})"
    else:
        note = f"{path}: reading {body}"
    return ChosenInput(ordered[0], others, note + empty_note, ordered[1:])


def _pid_shown(pid: str | None) -> str:
    return "" if pid is None else pid if len(pid) <= _PID_SHOWN else pid[:_PID_SHOWN] + "…"


def _runs(folder: Path, heads: dict[Path, LogHead]) -> list[list[list[Path]]]:
    """Runs, each a list of processes (their logs), the earliest-starting process first.

    Processes whose logs lie in one folder and whose time spans overlap (from the first record of
    their earliest log to the last record of their latest) are one run: a child runs within its
    parent's life. One that ended before another began is another run. A process whose span is
    not known (a log whose pid could not be read) is a run of its own.
    """
    groups = _by_process(folder, heads)
    if len(groups) == 1:  # one process: no end to read (a big .gz would be read through for it)
        return [groups]
    spans = []
    for group in groups:
        starts = [heads[p].stamp for p in group if heads[p].stamp]
        ends = [stamp for stamp in map(last_stamp, group) if stamp]
        known = bool(starts and ends) and all(heads[p].pid is not None for p in group)
        start = min(starts) if starts else ()
        spans.append((known, group[0].parent if all(p.parent == group[0].parent for p in group) else folder, start,
                      max([*ends, start]) if known else (), group))
    runs: list[list[list[Path]]] = []
    open_runs: dict[Path, tuple[tuple[int, ...], list[list[Path]]]] = {}  # per folder: the run being grown, and its end
    for known, where, start, end, group in sorted(spans, key=lambda s: (not s[0], s[2], str(s[4][0]))):
        if not known:
            runs.append([group])
            continue
        current = open_runs.get(where)
        if current is not None and start <= current[0]:
            current[1].append(group)
            open_runs[where] = (max(current[0], end), current[1])
            continue
        run = [group]
        runs.append(run)
        open_runs[where] = (end, run)
    return runs


def _by_process(folder: Path, heads: dict[Path, LogHead]) -> list[list[Path]]:
    """Logs grouped by process: same pid, and in the folder itself or in one same subfolder.

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
    return list(groups.values())


def _shown(folder: Path, log: Path) -> str:
    try:
        return log.relative_to(folder).as_posix()
    except ValueError:
        return log.name


def _names(folder: Path, logs: list[Path], sort: bool = True) -> str:
    shown = [_shown(folder, p) for p in logs]
    return ", ".join(sorted(shown) if sort else shown)
