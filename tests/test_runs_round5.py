"""Which logs of a folder form one run, from what the logs say, never from file times or glog times
alone (issue 47, items 9 to 11).

- Containers run each program as pid 1: two logs of one pid are one process only where their
  string tables say so (the later goes on from the earlier's count), and a string table belongs to
  its process: yesterday's file names are never read for today's ids.
- A copy keeps no file times (`scp -r`, a cloud copy, `kubectl cp`): the newest run is the one
  whose records began last.
- Glog times carry no year and no zone: a run across New Year's Eve or the autumn clock change is
  one run; the records' absolute times (chromium `ts`, `start_time`) place the logs where they
  are written, and where no log has one the doubt is told, and the logs read together.

Every log here is written by the test; each case fails with the rules before issue 47.
"""

from __future__ import annotations

import calendar
import json
import os
import time
from pathlib import Path

import pytest

from logs import line, write_log
from tlparse_py import analyze
from tlparse_py.reading.inputs import choose_input

PROGRAM_STACK = [{"line": 9, "name": "main", "filename": 0}, {"line": 4, "name": "step", "filename": 0}]
# a DataLoader worker forked by the program: its stack starts in the parent's interned start-up code
FORKED_STACK = [{"line": 71, "name": "_launch", "filename": 1}, {"line": 314, "name": "_bootstrap", "filename": 2},
                {"line": 4, "name": "load_item", "filename": 3}]


def unix(year: int, stamp: str, utc_offset_h: float = 0.0) -> float:
    """The unix time of a local glog time `MMDD hh:mm:ss` in `year` at a UTC offset."""
    month, day, clock = int(stamp[:2]), int(stamp[2:4]), stamp[5:]
    hour, minute, second = map(int, clock.split(":"))
    return calendar.timegm((year, month, day, hour, minute, second)) - utc_offset_h * 3600


def record(stamp: str, pid: int, meta: dict, payload: str | None = None) -> str:
    """One record at glog time `MMDD hh:mm:ss`, written by `pid`."""
    return line(meta, payload).replace("1202 12:14:23.064000 4242 ", f"{stamp}.000000 {pid} ", 1)


def chromium(stamp: str, pid: int, at: float, phase: str) -> str:
    """A chromium event, as torch writes one for each compile phase: its `ts` is absolute (µs)."""
    event = {"name": "dynamo", "ts": at * 1e6, "args": {"compile_id": "0/0"}, "ph": phase, "cat": "dynamo_timed", "tid": 0, "pid": 0}
    return record(stamp, pid, {"chromium_event": {}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0},
                  json.dumps(event, indent=0))


def program_log(path: Path, pid: int, first: str, last: str, files: list[str], *, stack: list[dict] = PROGRAM_STACK,
                first_index: int = 0, function: str = "step", at: tuple[float, float] | None = None,
                mtime: float | None = None) -> Path:
    """A log of one process: its `str` records (numbered from `first_index`), one compile begun at
    glog time `first` and ended at `last`; `at`: the unix times of both, written as torch writes
    them (chromium events' `ts`, compilation_metrics' `start_time`), else none."""
    lines = [chromium(first, pid, at[0], "B")] if at else []
    lines += [record(first, pid, {"str": [text, first_index + n]}) for n, text in enumerate(files)]
    lines.append(record(first, pid, {"dynamo_start": {"stack": stack}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0}))
    lines.append(record(first, pid, {"dynamo_output_graph": {}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0}, "graph"))
    if at:
        lines.append(chromium(last, pid, at[1], "E"))
    metrics = {"co_name": function, "graph_op_count": 2, "restart_reasons": [], "entire_frame_compile_time_s": 0.5}
    if at:
        metrics["start_time"] = at[0]
    lines.append(record(last, pid, {"compilation_metrics": metrics, "frame_id": 0, "frame_compile_id": 0, "attempt": 0}))
    write_log(path, lines)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def names(paths: list[Path]) -> list[str]:
    return sorted(p.name for p in paths)


def located(folder: Path, **options) -> list[tuple[int, str]]:
    """(process, where its compile's frame is, as the report says) of each compile of the report."""
    return sorted((c["process"], c["user_location"]) for c in analyze(folder, **options).to_dict()["compiles"])


NOW = time.time()


# -- item 9: one pid, several processes ----------------------------------------------------------------


def test_pid_1_in_two_runs_a_day_apart_is_two_runs_and_the_newest_reads_its_own_strings(tmp_path):
    """Two runs of a container (pid 1 both) a day apart: each began its string table at 0."""
    yesterday = program_log(tmp_path / "dedicated_log_torch_trace_aaa.log", 1, "1204 10:00:00", "1204 10:00:05", ["/app/yesterday.py"],
                            mtime=NOW - 86400)
    today = program_log(tmp_path / "dedicated_log_torch_trace_bbb.log", 1, "1205 10:00:00", "1205 10:00:05", ["/app/today.py"],
                        mtime=NOW)
    chosen = choose_input(tmp_path)
    assert chosen.logs == [today] and chosen.others == [yesterday]
    assert "holds logs of 2 runs" in chosen.note and "one process" not in chosen.note
    (left_out,) = chosen.left_out
    assert left_out.logs == [yesterday.name] and "pid 1," in left_out.why
    assert located(tmp_path) == [(0, "/app/today.py:4")]


def test_every_run_read_together_each_pid_1_process_keeps_its_own_string_table(tmp_path):
    """--all-runs: both pid-1 processes read, each compile's frame named from its own log's strings."""
    program_log(tmp_path / "dedicated_log_torch_trace_aaa.log", 1, "1204 10:00:00", "1204 10:00:05", ["/app/yesterday.py"])
    program_log(tmp_path / "dedicated_log_torch_trace_bbb.log", 1, "1205 10:00:00", "1205 10:00:05", ["/app/today.py"])
    assert located(tmp_path, all_runs=True) == [(0, "/app/yesterday.py:4"), (1, "/app/today.py:4")]
    pids = [(p["pid"], p["logs"]) for p in analyze(tmp_path, all_runs=True).to_dict()["processes"]]
    assert pids == [(1, ["dedicated_log_torch_trace_aaa.log"]), (1, ["dedicated_log_torch_trace_bbb.log"])]


def test_two_containers_at_once_with_one_pid_are_two_processes_of_one_run(tmp_path):
    """Two containers (pid 1 each) writing into one mounted folder at the same time: their logs
    overlap, so they are one run, but two processes, each with its own string table."""
    one = program_log(tmp_path / "dedicated_log_torch_trace_one.log", 1, "1205 10:00:00", "1205 10:00:30", ["/app/train.py"],
                      function="train", mtime=NOW - 5)
    other = program_log(tmp_path / "dedicated_log_torch_trace_two.log", 1, "1205 10:00:10", "1205 10:00:20", ["/app/serve.py", "/app/x.py"],
                        function="serve", mtime=NOW)
    chosen = choose_input(tmp_path)
    assert chosen.logs == [one, other] and chosen.others == []
    assert "2 processes of one run" in chosen.note
    assert located(tmp_path) == [(0, "/app/train.py:4"), (1, "/app/serve.py:4")]


def test_a_second_log_of_one_process_goes_on_from_its_string_count_and_shares_its_table(tmp_path):
    """TORCH_DTRACE's second log (or draft_export's capture): same pid, numbering goes on from the
    main log's, ids below it are the main log's. Beside it, yesterday's run of that pid."""
    yesterday = program_log(tmp_path / "dedicated_log_torch_trace_old.log", 1, "1204 09:00:00", "1204 09:00:05", ["/app/old.py"],
                            mtime=NOW)  # its file the newest: a copy's order
    main = program_log(tmp_path / "dedicated_log_torch_trace_main.log", 1, "1205 10:00:00", "1205 10:00:05", ["/app/main.py"],
                       mtime=NOW - 60)
    second = write_log(tmp_path / "dedicated_log_torch_trace_second.log", [
        record("1205 10:00:06", 1, {"str": ["/app/export.py", 1]}),
        record("1205 10:00:06", 1, {"dynamo_start": {"stack": [{"line": 4, "name": "step", "filename": 0},
                                                               {"line": 2, "name": "g", "filename": 1}]},
                                    "frame_id": 1, "frame_compile_id": 0, "attempt": 0}),
        record("1205 10:00:07", 1, {"compilation_metrics": {"co_name": "g"}, "frame_id": 1, "frame_compile_id": 0, "attempt": 0}),
    ])
    os.utime(second, (NOW - 30, NOW - 30))
    chosen = choose_input(tmp_path)
    assert chosen.logs == [main, second] and chosen.others == [yesterday]
    assert "2 logs of one process together (pid 1)" in chosen.note
    assert located(tmp_path) == [(0, "/app/export.py:2"), (0, "/app/main.py:4")]


def test_a_forked_worker_goes_on_from_its_program_s_strings_beside_yesterday_s_run_of_the_same_pid(tmp_path):
    """A container's program (pid 1) forks a DataLoader worker (pid 7), which uses the file names
    its program interned before the fork and goes on from its count: one run, read together;
    yesterday's run of the container (pid 1 again, its own strings) is left out."""
    yesterday = program_log(tmp_path / "dedicated_log_torch_trace_y.log", 1, "1204 10:00:00", "1204 10:00:05", ["/app/old.py"],
                            mtime=NOW)
    program = program_log(tmp_path / "dedicated_log_torch_trace_p.log", 1, "1205 10:00:00", "1205 10:00:01",
                          ["/app/train.py", "/usr/lib/python3.12/multiprocessing/popen_fork.py",
                           "/usr/lib/python3.12/multiprocessing/process.py"], mtime=NOW - 100)
    worker = program_log(tmp_path / "dedicated_log_torch_trace_w.log", 7, "1205 10:00:03", "1205 10:00:04", ["/app/data.py"],
                         stack=FORKED_STACK, first_index=3, function="load_item", mtime=NOW - 90)
    chosen = choose_input(tmp_path)
    assert chosen.logs == [program, worker] and chosen.others == [yesterday]
    assert located(tmp_path) == [(0, "/app/train.py:4"), (1, "/app/data.py:4")]


# -- item 10: a copy keeps no file times ------------------------------------------------------------------


@pytest.mark.parametrize("absolute", [False, True], ids=["glog-times", "absolute-times"])
def test_a_copied_folder_reads_the_run_that_began_last_whatever_its_files_times(tmp_path, absolute):
    """The later run began an hour after the other ended; the copy gave the older run's file the newer time."""
    early = ("1205 09:00:00", "1205 09:10:00")
    late = ("1205 10:10:00", "1205 10:20:00")
    older = program_log(tmp_path / "dedicated_log_torch_trace_a.log", 300, *early, ["/app/a.py"], mtime=NOW,
                        at=(unix(2026, early[0]), unix(2026, early[1])) if absolute else None)
    newer = program_log(tmp_path / "dedicated_log_torch_trace_b.log", 400, *late, ["/app/b.py"], mtime=NOW - 1,
                        at=(unix(2026, late[0]), unix(2026, late[1])) if absolute else None)
    chosen = choose_input(tmp_path)
    assert chosen.logs == [newer] and chosen.others == [older]
    assert chosen.left_out[0].logs == [older.name] and "records from 12-05 09:00:00 to 12-05 09:10:00" in chosen.left_out[0].why


def test_absolute_times_outrank_glog_times_from_another_zone(tmp_path):
    """Two runs on hosts in other zones: glog times say the UTC+9 run (17:00) is the later; the
    records' absolute times say it began two hours before the UTC run (10:00)."""
    tokyo = program_log(tmp_path / "dedicated_log_torch_trace_tokyo.log", 10, "1205 17:00:00", "1205 17:05:00", ["/app/t.py"],
                        at=(unix(2026, "1205 17:00:00", 9), unix(2026, "1205 17:05:00", 9)), mtime=NOW)
    london = program_log(tmp_path / "dedicated_log_torch_trace_london.log", 20, "1205 10:00:00", "1205 10:05:00", ["/app/l.py"],
                         at=(unix(2026, "1205 10:00:00"), unix(2026, "1205 10:05:00")), mtime=NOW)
    chosen = choose_input(tmp_path)
    assert chosen.logs == [london] and chosen.others == [tokyo]


# -- item 11: no year, no zone in glog times --------------------------------------------------------------


@pytest.mark.parametrize("absolute", [False, True], ids=["glog-times", "absolute-times"])
def test_a_worker_started_after_midnight_on_new_year_s_eve_is_read_with_its_program(tmp_path, absolute):
    """The program (a launcher: its worker is no multiprocessing child) starts on 12-31 and ends on
    01-01; its worker runs from 00:00:05. One run, whatever month-day order says."""
    span = ("1231 23:59:50", "0101 00:00:40")
    work = ("0101 00:00:05", "0101 00:00:20")
    program = program_log(tmp_path / "dedicated_log_torch_trace_p.log", 100, *span, ["/app/launch.py"], mtime=NOW,
                          at=(unix(2026, span[0]), unix(2027, span[1])) if absolute else None)
    worker = program_log(tmp_path / "dedicated_log_torch_trace_w.log", 101, *work, ["/app/work.py"], function="work", mtime=NOW - 20,
                         at=(unix(2027, work[0]), unix(2027, work[1])) if absolute else None)
    chosen = choose_input(tmp_path)
    assert chosen.logs == [program, worker] and chosen.left_out == []
    assert "2 processes of one run" in chosen.note


def test_the_run_after_new_year_is_the_newest(tmp_path):
    """Two runs either side of New Year, their files copied at one time: 01-01 is after 12-31."""
    old = program_log(tmp_path / "dedicated_log_torch_trace_z.log", 50, "1231 23:00:00", "1231 23:10:00", ["/app/a.py"], mtime=NOW)
    new = program_log(tmp_path / "dedicated_log_torch_trace_a.log", 60, "0101 00:30:00", "0101 00:40:00", ["/app/b.py"], mtime=NOW)
    chosen = choose_input(tmp_path)
    assert chosen.logs == [new] and chosen.others == [old]


def test_a_worker_across_the_autumn_clock_change_is_read_with_its_program(tmp_path):
    """Europe/Berlin, 2026-10-25: at 03:00 CEST the clock goes back to 02:00 CET. The program starts
    at 02:30 CEST and logs last at 02:20 CET; its worker runs 02:05 to 02:15 CET, inside it. The
    records' absolute times say so; the glog times alone would put the worker before it."""
    program = program_log(tmp_path / "dedicated_log_torch_trace_p.log", 200, "1025 02:30:00", "1025 02:20:00", ["/app/launch.py"],
                          at=(unix(2026, "1025 02:30:00", 2), unix(2026, "1025 02:20:00", 1)), mtime=NOW)
    worker = program_log(tmp_path / "dedicated_log_torch_trace_w.log", 201, "1025 02:05:00", "1025 02:15:00", ["/app/work.py"],
                         function="work", at=(unix(2026, "1025 02:05:00", 1), unix(2026, "1025 02:15:00", 1)), mtime=NOW - 300)
    chosen = choose_input(tmp_path)
    assert chosen.logs == [program, worker] and chosen.left_out == []
    assert "doubt" not in chosen.note and "summer time" not in chosen.note  # the records settle it


def test_across_the_clock_change_with_glog_times_only_both_are_read_and_the_doubt_told(tmp_path):
    """No absolute time in either log: 02:05 may be before the program began (CEST) or within it
    (CET). Both are read, and the note says why."""
    program = program_log(tmp_path / "dedicated_log_torch_trace_p.log", 200, "1025 02:30:00", "1025 02:20:00", ["/app/launch.py"],
                          mtime=NOW)
    worker = program_log(tmp_path / "dedicated_log_torch_trace_w.log", 201, "1025 02:05:00", "1025 02:15:00", ["/app/work.py"],
                         function="work", mtime=NOW - 300)
    chosen = choose_input(tmp_path)
    assert sorted(chosen.logs) == [program, worker] and chosen.left_out == []
    assert "summer time" in chosen.note and "within an hour" in chosen.note
