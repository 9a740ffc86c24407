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


def test_symlinks_in_a_trace_folder_are_not_followed(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOKEN=hunter2\n" + line({"export": {}}))
    folder = tmp_path / "trace"
    folder.mkdir()
    (folder / "dedicated_log_torch_trace_abc.log").symlink_to(secret)
    (folder / "dedicated_log_torch_trace_real.log").write_text(line({"export": {}}))
    proc = run_cli(folder, "-o", tmp_path / "out")
    no_traceback(proc)
    assert proc.returncode == 0 and proc.stderr.count(b"skipped symlink") == 1, proc.stderr
    assert b"hunter2" not in (tmp_path / "out" / "raw.log").read_bytes()
    assert (tmp_path / "out" / "raw.log").read_bytes() == (folder / "dedicated_log_torch_trace_real.log").read_bytes()
    only_links = tmp_path / "links"
    only_links.mkdir()
    (only_links / "dedicated_log_torch_trace_abc.log").symlink_to(secret)
    proc = run_cli(only_links, "-o", tmp_path / "out2")
    no_traceback(proc)
    assert proc.returncode == 2 and not (tmp_path / "out2").exists()


def test_a_symlink_named_on_the_command_line_is_read(tmp_path):
    real = tmp_path / "real.log"
    real.write_text(line({"export": {}}))
    link = tmp_path / "link.log"
    link.symlink_to(real)
    proc = run_cli(link, "-o", tmp_path / "out")
    no_traceback(proc)
    assert proc.returncode == 0 and (tmp_path / "out" / "raw.log").read_bytes() == real.read_bytes()


def test_a_gzip_bomb_is_refused_unless_allowed(tmp_path):
    import gzip

    log = tmp_path / "bomb.log.gz"
    log.write_bytes(gzip.compress(line({"export": {}}).encode() + b"\n" * (80 << 20), 9))
    assert log.stat().st_size < 200_000
    proc = run_cli(log, "-o", tmp_path / "out")
    no_traceback(proc)
    assert proc.returncode == 2 and b"decompression bomb" in proc.stderr and b"--no-gunzip-limit" in proc.stderr
    assert not (tmp_path / "out").exists() and [p.name for p in tmp_path.iterdir()] == ["bomb.log.gz"]
    proc = run_cli(log, "-o", tmp_path / "out", "--no-gunzip-limit", "--max-raw-log-mb", "1")
    no_traceback(proc)
    assert proc.returncode == 0 and b"ok: 1" in proc.stderr
    raw_log = (tmp_path / "out" / "raw.log").read_bytes()
    assert raw_log.startswith(b"raw.log is not copied") and str(log).encode() in raw_log


def test_raw_log_is_copied_up_to_the_cap(tmp_path):
    log = tmp_path / "a.log"
    log.write_bytes(line({"export": {}}).encode() + b"x" * (2 << 20) + b"\n")
    proc = run_cli(log, "-o", tmp_path / "small", "--max-raw-log-mb", "1")
    assert proc.returncode == 0 and (tmp_path / "small" / "raw.log").read_bytes().startswith(b"raw.log is not copied")
    proc = run_cli(log, "-o", tmp_path / "big")
    assert proc.returncode == 0 and (tmp_path / "big" / "raw.log").read_bytes() == log.read_bytes()


def test_an_over_long_line_is_a_counted_problem(tmp_path):
    log = tmp_path / "long.log"
    body = line({"export": {}}) + HEADER + '{"a": "' + "y" * (3 << 20) + '"}\n' + line({"dynamo_output_graph": {}, **cid()}, "z" * (3 << 20))
    log.write_text(body + line({"export": {}}))
    proc = run_cli(log, "-o", tmp_path / "out", "--max-line-mb", "1", "-v")
    no_traceback(proc)
    assert proc.returncode == 0 and b"fail_line_too_long: 2" in proc.stderr, proc.stderr
    assert b"longer than --max-line-mb" in proc.stderr and b":2: line of 3.1 MB" in proc.stderr
    proc = run_cli(log, "-o", tmp_path / "strict", "--max-line-mb", "1", "--strict")
    assert proc.returncode == 1


def test_blank_and_junk_lines_are_skipped_in_bulk_and_counted(tmp_path):
    from tlparse_py.model import Stats
    from tlparse_py.reading.records import DiagnosticLog, LogReader

    log = tmp_path / "junk.log"
    log.write_bytes(b"\n" * 3_000_000 + b"x\n" * 2_000_000 + b"\r\n" * 5 + b"ab\r\n" * 20 + line({"export": {}}).encode()
                    + b"junk\n" * 3 + b"\n" * 1000 + line({"export": {}}).encode())
    stats, diagnostics = Stats(), DiagnosticLog()
    records = list(LogReader(log, stats, diagnostics).records())
    assert [r.lineno for r in records] == [5_000_026, 5_001_030]
    assert stats["fail_glog"] == 2_000_023 and stats["ok"] == 2
    # the long run of junk is described once per 4 MB read (not once per line); the short run line by line
    assert 4 <= diagnostics.total <= 7
    assert "lines in a row" in diagnostics.kept[0].problem and diagnostics.kept[0].lineno == 3_000_001
    assert [d.lineno for d in diagnostics.kept[-3:]] == [5_000_027, 5_000_028, 5_000_029]
