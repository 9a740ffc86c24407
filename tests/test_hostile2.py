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


def test_numbers_with_thousands_of_digits_are_counted_bad_fields(tmp_path):
    folder = tmp_path / "trace"
    folder.mkdir()
    digits = "7" * 5000
    log = folder / f"dedicated_log_torch_trace_rank_{digits[:200]}_x.log"  # a rank in the name (names stop at 255)
    log.write_text(
        f"V1202 12:14:23.064000 {digits} torch/x.py:{digits}] " + '{"export": {}}\n'  # pid and line
        + line({"export": {}, "rank": 10**40})
        + line({"export": {}}),
    )
    (folder / "dedicated_log_torch_trace_y.log").write_text(HEADER + '{"export": {}, "rank": ' + digits + "}\n")  # in the text
    (folder / "dedicated_log_torch_trace_z.log").write_text(line({"export": {}, "rank": 1}))
    proc = run_cli(log, "-o", tmp_path / "out", "-v")
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert b"glog pid has 5,000 digits" in proc.stderr and b"glog line number has 5,000 digits" in proc.stderr
    assert b"ok: 3" in proc.stderr and b"fail_field_type: 3" in proc.stderr
    proc = run_cli(folder, "-o", tmp_path / "all")  # ranks read from names: one is bounded out
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr


def test_deeply_nested_artifacts_are_bad_input_not_a_bug(tmp_path):
    deep = "[" * 50_000 + "]" * 50_000
    names = ["recompile_reasons", "fx_graph_cache_hit", "aotautograd_cache_bypass", "inductor_collective_schedule",
             "inductor_runtime_and_tensor_meta", "graph_execution"]
    log = tmp_path / "deep.log"
    text = "".join(line({"artifact": {"name": name, "encoding": "json"}, **cid()}, deep) for name in names)
    text += line({"artifact": {"name": "inductor_runtime_and_tensor_meta", "encoding": "json"}, **cid()},
                 '{"ops": [{"name": "a", "estimated_runtime_ns": Infinity}, {"name": "b", "estimated_runtime_ns": 1e400}]}')
    log.write_text(text)
    proc = run_cli(log, "-o", tmp_path / "out", "-v", "--strict")
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert b"fail_parser" not in proc.stderr and b"a bug in tlparse-py" not in proc.stderr


def test_a_huge_string_table_index_is_a_counted_problem(tmp_path):
    log = tmp_path / "str.log"
    log.write_text(HEADER + '{"str": ["x", 10000000]}\n' + HEADER + '{"str": ["y", 3]}\n' + line({"export": {}}))
    proc = run_cli(log, "-o", tmp_path / "out", "-v")
    no_traceback(proc)
    assert proc.returncode == 0 and b"fail_field_type: 1" in proc.stderr and b"far beyond" in proc.stderr
    assert (tmp_path / "out" / "raw.jsonl").stat().st_size < 10_000
