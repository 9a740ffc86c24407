"""Hostile input, second round: what a log can do to the terminal, the file system and the clock.

Each test runs the command as a user does (a real process where exit codes, signals or stderr
bytes matter) and checks: no traceback, the stated exit code, nothing outside -o touched."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from logs import cid, line

HEADER = "V1202 12:14:23.064000 1 torch/_dynamo/x.py:9] "
ESCAPES = "\x1b]0;PWNED\x07\x1b[2J\x9b31m"


def run_cli(*args: str | Path, **kwargs) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "tlparse_py", *map(str, args), "--no-browser"], capture_output=True, **kwargs)


def no_traceback(proc: subprocess.CompletedProcess[bytes]) -> None:
    assert b"Traceback" not in proc.stderr and b"Traceback" not in proc.stdout, proc.stderr.decode(errors="replace")


def test_escape_sequences_from_the_log_never_reach_the_terminal(tmp_path):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text(
        line({ESCAPES: {"a": 1}, **cid()})  # an unknown kind: named on stderr every run
        + f"junk {ESCAPES}\n"  # a bad line: quoted under -v
        + HEADER + '{"x": "' + ESCAPES + "\n",  # bad JSON: quoted under -v
        encoding="utf-8",
    )
    proc = run_cli(log, "-o", tmp_path / "out", "-v")
    no_traceback(proc)
    assert proc.returncode == 0
    for control in (b"\x1b", b"\x07", "\x9b".encode()):
        assert control not in proc.stderr and control not in proc.stdout
    assert b"\\x1b]0;PWNED\\x07\\x1b[2J\\u009b31m" in proc.stderr  # shown escaped, not dropped


def test_escape_sequences_in_file_names_are_escaped(tmp_path):
    folder = tmp_path / "trace"
    folder.mkdir()
    for name in ("dedicated_log_torch_trace_a\x1b[2J.log", "dedicated_log_torch_trace_b.log"):
        (folder / name).write_text(line({"export": {}}))
    proc = run_cli(folder, "-o", tmp_path / "out")
    no_traceback(proc)
    assert proc.returncode == 0 and b"\x1b" not in proc.stderr and b"a\\x1b[2J.log" in proc.stderr
