"""Which log to read: a file, a `.gz`, or a TORCH_TRACE folder holding one or many logs."""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .reader import open_log

TRACE_PREFIX = "dedicated_log_torch_trace"
LOG_SUFFIXES = (".log", ".log.gz", ".txt", ".txt.gz")
# bounded: int() of thousands of digits raises, and no job has a billion ranks
_RANK_IN_NAME = re.compile(r"rank_(\d{1,9})(?:_|\.|$)")
_RANK_IN_TEXT = re.compile(rb'"rank": ?(\d{1,9})(?!\d)')
PEEK_BYTES = 256 * 1024


class InputError(Exception):
    """The input cannot be used; the message says why and what to do."""


class SeveralRanks(InputError):
    """The folder holds the logs of several ranks: a multi-rank report is the answer."""


@dataclass
class ChosenInput:
    log: Path
    others: list[Path] = field(default_factory=list)  # logs in the same folder that were not chosen
    note: str = ""  # told to the user on stderr when a choice was made for them
    also: list[Path] = field(default_factory=list)  # further logs read into the same report (export)

    @property
    def logs(self) -> list[Path]:
        return [self.log, *self.also]


def candidate_logs(folder: Path) -> list[Path]:
    """Trace logs in a folder (not recursive): torch's own names first, any log-like file otherwise.

    Symlinks are never followed (see `skipped_symlinks`): a link planted in a trace folder could
    point anywhere (/proc/self/environ, ~/.ssh) and raw.log copies what is read.
    """
    files = [p for p in _entries(folder) if _is_regular_file(p) and not p.name.startswith(".")]
    traces = [p for p in files if p.name.startswith(TRACE_PREFIX) and p.name.endswith(LOG_SUFFIXES)]
    return sorted(traces or [p for p in files if p.name.endswith(LOG_SUFFIXES)])


def skipped_symlinks(folder: Path) -> list[str]:
    """One line per log-like symlink in the folder that is not read."""
    try:
        links = [p for p in _entries(folder) if p.is_symlink() and p.name.endswith(LOG_SUFFIXES)]
    except InputError:
        return []
    return [f"skipped symlink {p} (symlinks in a trace folder are not followed; pass its target to read it)" for p in sorted(links)]


def _entries(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError as exc:
        raise InputError(f"cannot list {folder}: {getattr(exc, 'strerror', None) or exc}") from None


def _is_regular_file(path: Path) -> bool:
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
    except (OSError, EOFError):
        return None
    match = _RANK_IN_TEXT.search(head)
    return int(match.group(1)) if match else None


def _real(path: Path) -> Path:
    try:
        return path.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise InputError(f"cannot resolve {path}: {getattr(exc, 'strerror', None) or exc}") from None


def newest(paths: list[Path]) -> Path:
    return max(paths, key=lambda p: (p.stat().st_mtime, p.name))


def choose_input(path: Path, latest: bool = False, export: bool = False) -> ChosenInput:
    """Resolve the PATH argument to the log(s) to read, or explain why it cannot be done.

    With `export`, a folder's logs of one process are all read into one report: draft_export
    writes a second capture log whose file-name ids are defined in the main log.
    """
    if not path.exists():
        raise InputError(f"{path} does not exist")
    if path.is_file():
        if latest:
            raise InputError(f"{path} is a file; --latest picks the newest log in a folder")
        return ChosenInput(_real(path) if path.is_symlink() else path)  # a symlink named by the user: followed, once, here
    if not path.is_dir():
        raise InputError(f"{path} is neither a file nor a folder")
    logs = candidate_logs(path)
    if not logs:
        raise InputError(f"{path} holds no trace logs (expected {TRACE_PREFIX}_*.log, as written by TORCH_TRACE)")
    if len(logs) == 1:
        return ChosenInput(logs[0])
    chosen = newest(logs)
    others = [p for p in logs if p != chosen]
    if latest:
        return ChosenInput(chosen, others, f"--latest: reading {chosen.name}, the newest of {len(logs)} logs")
    ranks = sorted({r for r in map(rank_of, logs) if r is not None})
    if len(ranks) > 1:
        raise SeveralRanks(f"{path} holds logs of {len(ranks)} ranks ({', '.join(map(str, ranks))}): writing a multi-rank report")
    if export:
        # the main log first: it defines the string ids the capture file refers to
        ordered = sorted(logs, key=lambda p: (-p.stat().st_size, p.name))
        names = ", ".join(p.name for p in ordered)
        return ChosenInput(ordered[0], [], f"export: reading {len(logs)} logs of one process together: {names}", ordered[1:])
    names = ", ".join(p.name for p in sorted(others))
    return ChosenInput(chosen, others, f"{path} holds {len(logs)} logs; reading the newest, {chosen.name} (not read: {names})")
