"""What a PATH reads: trace logs only, grouped by process, the newest run's logs read together."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import TRACES
from logs import cid, line, metrics, start, write_log
from tlparse_py import analyze
from tlparse_py.cli import main
from tlparse_py.reading.inputs import InputError, choose_input, first_record

MAIN = "dedicated_log_torch_trace_64lrfb0l.log.gz"  # the export scenario's main log
CAPTURE = "dedicated_log_torch_trace_oy6s2p0n.log"  # draft_export's capture log, same process
COLD = "dedicated_log_torch_trace__3ber2k8.log.gz"  # cache scenario: first process
WARM = "dedicated_log_torch_trace_wykq40jt.log"  # cache scenario: second process, a warm cache
# independent of the reader: a glog-prefixed line whose envelope is a JSON object
RECORD = re.compile(rb"^[VIWEC]\d{4} \d\d:\d\d:\d\d\.\d{6} (\d+) [^\]\n]+\]\S* (\{.*)$")


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def cli(*args):
    return run(*args, "--no-browser")


def envelopes(log: Path) -> list[dict]:
    data = log.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return [json.loads(m.group(2)) for m in map(RECORD.match, data.split(b"\n")) if m]


def truth(*logs: Path) -> tuple[int, set[str]]:
    """Records (less the string-table entries, which are not records of their own) and compile ids."""
    found = [env for log in logs for env in envelopes(log) if "str" not in env]
    ids = {"-" if env.get("frame_id") is None else f"{env['frame_id']}/{env['frame_compile_id']}" for env in found}
    return len(found), ids


def report_truth(out: Path) -> tuple[int, set[str]]:
    summary = json.loads((out / "summary.json").read_text())
    directory = json.loads((out / "compile_directory.json").read_text())
    ids = {key.strip("[]").replace("-/-", "-") for key in directory}
    return summary["stats"]["ok"], ids | {c["id"].strip("[]") for c in summary["compiles"]}


def log_of(path: Path, frame: int, pid: int, clock: str = "12:14:23.064000", mtime: float | None = None, gz: bool = False) -> Path:
    lines = [start(frame, 0), line({"dynamo_output_graph": {}, **cid(frame, 0, 0)}, "g"), metrics(frame, 0, 0)]
    lines = [text.replace("12:14:23.064000 4242 ", f"{clock} {pid} ", 1) for text in lines]
    write_log(path, lines, gz=gz)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def copy(src: Path, dst: Path, mtime: float) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    os.utime(dst, (mtime, mtime))
    return dst


# ------------------------------------------------------------------------------------------------
# one process, several logs


def test_real_draft_export_main_and_capture_logs_are_read_together_by_default(tmp_path):
    folder = TRACES / "export"
    out = tmp_path / "out"
    result = cli(folder, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert "reading 2 logs of one process together (pid 13898)" in result.stderr
    assert f"{MAIN}, {CAPTURE}" in result.stderr  # the main log first: it defines the string table
    records, ids = truth(folder / MAIN, folder / CAPTURE)
    assert truth(folder / CAPTURE)[0] > 0 and records > truth(folder / MAIN)[0]
    assert report_truth(out) == (records, ids)
    chosen = choose_input(folder)
    assert chosen.logs == [folder / MAIN, folder / CAPTURE] and chosen.others == []
    assert analyze(folder).stats["ok"] == records


def test_torch_dtrace_second_log_is_read_with_the_main_log_even_when_newer_and_smaller(tmp_path):
    """The old rule (the newest log) read only the capture, and the main log's compile ids vanished."""
    now = time.time()
    main_log = log_of(tmp_path / "dedicated_log_torch_trace_main.log", 0, 77, "12:00:00.000000", now - 60)
    with open(main_log, "a") as handle:  # the main log is the bigger one
        handle.write(line({"dynamo_output_graph": {}, **cid(1, 0, 0)}, "x" * 5000).replace(" 4242 ", " 77 "))
    second = write_log(tmp_path / "dedicated_log_torch_trace_capture.log", [line({"exported_program": {}}, "ep", pid=77)])
    os.utime(second, (now, now))
    chosen = choose_input(tmp_path)
    assert chosen.logs == [main_log, second] and chosen.others == []
    out = tmp_path.parent / f"{tmp_path.name}-out"  # beside the trace folder: an output inside it is refused
    assert cli(tmp_path, "-o", out).exit_code == 0
    assert report_truth(out) == truth(main_log, second)
    assert {"0/0", "1/0", "-"} <= report_truth(out)[1]


def test_earliest_log_of_a_process_is_read_first_whatever_its_size(tmp_path):
    first = log_of(tmp_path / "dedicated_log_torch_trace_b.log.gz", 0, 5, "12:00:00.000000", gz=True)  # small: gzip
    later = log_of(tmp_path / "dedicated_log_torch_trace_a.log", 1, 5, "12:00:09.000000")
    assert first.stat().st_size < later.stat().st_size
    assert choose_input(tmp_path).logs == [first, later]


def test_torch_trace_layout_with_a_draft_export_capture_subfolder(tmp_path):
    now = time.time()
    folder = tmp_path / "trace"
    main_log = copy(TRACES / "export" / MAIN, folder / MAIN, now - 5)
    capture = copy(TRACES / "export" / CAPTURE, folder / "draft_export_capture" / CAPTURE, now)
    out = tmp_path / "out"
    result = cli(folder, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert f"{MAIN}, draft_export_capture/{CAPTURE}" in result.stderr
    assert report_truth(out) == truth(main_log, capture)
    # the capture's kinds are in the report without -e
    raw = (out / "raw.jsonl").read_text()
    for kind in ("propagate_real_tensors_provenance", "exported_program", "create_unbacked_symbol"):
        assert kind in raw, kind


def test_harness_out_layout_reads_the_newest_program_and_never_the_output_txt(tmp_path):
    """`--out DIR`: one subfolder per program (its TORCH_TRACE folder) and `<program>.output.txt`."""
    now = time.time()
    root = tmp_path / "harness"
    export_main = copy(TRACES / "export" / MAIN, root / "export" / MAIN, now - 10)
    export_capture = copy(TRACES / "export" / CAPTURE, root / "export" / CAPTURE, now - 9)
    cold = copy(TRACES / "cache" / COLD, root / "cache" / COLD, now - 30)
    warm = copy(TRACES / "cache" / WARM, root / "cache" / WARM, now - 20)
    for name in ("export", "cache"):
        (root / f"{name}.output.txt").write_text("V1202 12:00:00.000000 1 x.py:1] {}\nscenario ok\n")
        os.utime(root / f"{name}.output.txt", (now, now))  # the newest files: still never read
    out = tmp_path / "out"
    result = cli(root, "-o", out)
    assert result.exit_code == 0, result.stderr
    # the newest run is the one whose records began last (the warm cache run, 13:35:00-13:35:21, after
    # export's 13:34:56), whatever the file times say: a copied folder does not keep them
    assert report_truth(out) == truth(warm)
    assert "holds logs of 3 runs" in result.stderr
    assert f"cache/{COLD}" in result.stderr and f"export/{MAIN}" in result.stderr
    assert ".output.txt" not in result.stderr
    chosen = choose_input(root)
    assert chosen.logs == [warm] and sorted(chosen.others) == sorted([export_main, export_capture, cold])


def test_same_pid_in_two_program_folders_is_two_runs(tmp_path):
    """Containers reuse pids: a subfolder's logs join the folder's own logs of their pid, not another subfolder's."""
    now = time.time()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    old = log_of(tmp_path / "a" / "dedicated_log_torch_trace_x.log", 1, 1, mtime=now - 50)
    new = log_of(tmp_path / "b" / "dedicated_log_torch_trace_y.log", 2, 1, mtime=now)
    chosen = choose_input(tmp_path)
    assert chosen.logs == [new] and chosen.others == [old]


def test_subfolders_two_levels_down_and_symlinks_are_not_read(tmp_path):
    folder = tmp_path / "trace"
    (folder / "sub" / "deeper").mkdir(parents=True)
    top = log_of(folder / "dedicated_log_torch_trace_top.log", 0, 9, mtime=time.time() - 100)
    log_of(folder / "sub" / "deeper" / "dedicated_log_torch_trace_deep.log", 1, 9)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    log_of(elsewhere / "dedicated_log_torch_trace_linked.log", 2, 9)
    (folder / "linked_folder").symlink_to(elsewhere)
    (folder / "sub" / "dedicated_log_torch_trace_link.log").symlink_to(elsewhere / "dedicated_log_torch_trace_linked.log")
    chosen = choose_input(folder)
    assert chosen.logs == [top] and chosen.others == []
    result = cli(folder, "-o", tmp_path / "out")
    assert result.exit_code == 0 and result.stderr.count("skipped symlink") == 1, result.stderr
    assert "sub/dedicated_log_torch_trace_link.log" in result.stderr


# ------------------------------------------------------------------------------------------------
# several runs


def test_two_runs_the_newest_is_read_and_the_older_named(tmp_path):
    now = time.time()
    # the old run ended (12:10) before the new one began (12:14): two runs, not two processes of one
    old = log_of(tmp_path / "dedicated_log_torch_trace_zzz.log", 1, 100, clock="12:10:00.000000", mtime=now - 100)
    new = log_of(tmp_path / "dedicated_log_torch_trace_aaa.log", 2, 200, mtime=now)
    out = tmp_path.parent / f"{tmp_path.name}-out"  # beside the trace folder: an output inside it is refused
    result = cli(tmp_path, "-o", out)
    assert result.exit_code == 0
    assert f"holds logs of 2 runs; reading the newest, {new.name} (not read, older runs: {old.name})" in result.stderr
    assert report_truth(out) == truth(new)
    assert old.name in (out / "index.html").read_text()  # named in the report too


def test_real_cache_scenario_warm_run_is_read_and_cold_named(tmp_path):
    now = time.time()
    folder = tmp_path / "cache"
    cold = copy(TRACES / "cache" / COLD, folder / COLD, now - 60)
    warm = copy(TRACES / "cache" / WARM, folder / WARM, now)
    out = tmp_path / "out"
    result = cli(folder, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert f"reading the newest, {WARM} (not read, older runs: {COLD})" in result.stderr
    assert report_truth(out) == truth(warm)
    assert choose_input(folder).others == [cold]


def test_latest_still_reads_the_newest_single_log(tmp_path):
    now = time.time()
    main_log = log_of(tmp_path / "dedicated_log_torch_trace_a.log", 0, 7, "12:00:00.000000", now - 10)
    second = log_of(tmp_path / "dedicated_log_torch_trace_b.log", 1, 7, "12:00:05.000000", now)
    chosen = choose_input(tmp_path, latest=True)
    assert chosen.logs == [second] and chosen.others == [main_log]


# ------------------------------------------------------------------------------------------------
# not a trace


@pytest.mark.parametrize(
    "name, data",
    [
        ("notes.txt", b"just some text\nwith lines ] { but no glog prefix\n"),
        ("dedicated_log_torch_trace_x.log", b""),
        ("dedicated_log_torch_trace_x.log", b"\x00\x01binary" * 1000),
        ("dedicated_log_torch_trace_x.log.gz", gzip.compress(b"no records here\n" * 1000)),
        ("app.log", b"V1202 12:14:23.064000 1 torch/x.py:3] not json\n"),  # a glog line without a JSON object
    ],
)
def test_a_file_with_no_record_exits_2_and_writes_nothing(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    out = tmp_path / "out"
    result = cli(path, "-o", out)
    assert result.exit_code == 2
    assert result.stderr.strip() == f"Error: {path} is not a TORCH_TRACE log: no record could be read"
    assert not out.exists()
    with pytest.raises(InputError, match="no record could be read"):
        analyze(path)


def test_a_folder_whose_trace_logs_hold_no_record_exits_2(tmp_path):
    folder = tmp_path / "trace"
    folder.mkdir()
    (folder / "dedicated_log_torch_trace_a.log").write_bytes(b"")
    (folder / "dedicated_log_torch_trace_b.log").write_text("hello\n")
    result = cli(folder, "-o", tmp_path / "out")
    assert result.exit_code == 2 and f"{folder} is not a TORCH_TRACE log: no record could be read" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_folder_of_other_files_holds_no_trace_logs(tmp_path):
    (tmp_path / "program.output.txt").write_text(line({"export": {}}))  # even a trace-like .txt: not by its name
    (tmp_path / "notes.log").write_text(line({"export": {}}))
    result = cli(tmp_path, "-o", tmp_path.parent / f"{tmp_path.name}-out")
    assert result.exit_code == 2 and "holds no trace logs" in result.stderr


def test_an_empty_log_beside_the_real_one_is_named_not_read(tmp_path):
    real = log_of(tmp_path / "dedicated_log_torch_trace_real.log", 0, 3, mtime=time.time() - 100)
    empty = tmp_path / "dedicated_log_torch_trace_empty.log"
    empty.write_bytes(b"")
    chosen = choose_input(tmp_path)
    assert chosen.logs == [real] and chosen.others == [empty] and "no records, not read" in chosen.note


@pytest.mark.parametrize("gz", [False, True])
def test_a_trace_log_named_otherwise_on_the_command_line_is_read(tmp_path, gz):
    log = log_of(tmp_path / ("mylog.txt.gz" if gz else "mylog.txt"), 4, 11, gz=gz)
    out = tmp_path / "out"
    assert cli(log, "-o", out).exit_code == 0
    assert report_truth(out) == truth(log)


def test_the_first_record_is_found_past_junk_and_across_chunks(tmp_path):
    from tlparse_py.reading import inputs

    log = tmp_path / "a.log"
    junk = b"x" * (inputs.SCAN_CHUNK - 10) + b"\n"  # the record starts just before a chunk ends
    log.write_bytes(junk + b"[rank0]:V1203 01:02:03.000004 31337 torch/a.py:5][0/0] {\"export\": {}}\n")
    assert first_record(log) == inputs.LogHead("31337", (12, 3, 1, 2, 3, 4))
    log.write_bytes(b"] {" * 100_000 + b"\n")
    assert first_record(log) is None


def test_a_cut_off_gz_is_not_refused_for_its_damage(tmp_path):
    """A .gz cut short (a partial copy) still shows the records before the cut; it is left to the reader."""
    text = "".join(line({"export": {}}, f"payload {i} " + "abcdefgh"[i % 8] * (i % 97)) for i in range(20_000))
    data = gzip.compress(text.encode())
    log = tmp_path / "dedicated_log_torch_trace_cut.log.gz"
    log.write_bytes(data[: len(data) // 2])
    assert first_record(log) is not None
    choose_input(log)  # no InputError
