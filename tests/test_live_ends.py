"""Live mode always ends, and `run` gives its program what is the program's (issue 34, items 1-7, 10, 11;
issue 33, item 7).

Each test drives the real command in a subprocess (or the tail in-process) on a log written here, and
checks the end against what a one-shot read of the same log gives.
"""

from __future__ import annotations

import os
import random
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import read_json
from logs import cid, line
from test_live import _facts, live_index, one_read, records_of, stderr_of, tlparse, tree, wait_for, writer  # noqa: F401 (writer: a fixture)
from tlparse_py.model import DiagnosticLog, Stats, StringTable
from tlparse_py.pipeline import write_report
from tlparse_py.reading.tail import LogTail

WATCH = ("--no-browser", "--interval", "0.1", "--quiet-s", "0.5")


def finished(process: subprocess.Popen, cwd: Path, timeout: float = 30) -> str:
    """The command's stderr once it ended; a command still running after `timeout` is killed (a failure)."""
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(f"still running after {timeout} s: {stderr_of(cwd)}")
    return stderr_of(cwd)


def dead_pid() -> int:
    """The pid of a process that has exited (and was reaped)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def same_as_one_shot(tmp_path: Path, log: Path, out: Path) -> None:
    write_report(log, tmp_path / "one_shot")
    final, one_shot = tree(out), tree(tmp_path / "one_shot")
    assert sorted(final) == sorted(one_shot)
    assert [p for p in final if final[p] != one_shot[p]] == []


# -- 1. a record never finished does not hold the watch ------------------------------------------------

CUT = {
    "line": '\nV1202 12:14:23.064000 {pid} torch/_dynamo/x.py:7] {{"dynamo_start": {{"stack": [',
    "payload": '\nV1202 12:14:23.064000 {pid} torch/_dynamo/x.py:7] {{"artifact": {{"name": "a"}}, "has_payload": "0123"}}\n\tnever\n\tmatches\n',
}


@pytest.mark.parametrize("cut", sorted(CUT))
def test_watch_ends_on_a_record_its_writer_never_finished(tmp_path, writer, cut):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text(records_of(writer.pid, 0, 2).rstrip("\n") + CUT[cut].format(pid=writer.pid))
    watch = tlparse("watch", str(log), "-o", "out", *WATCH, cwd=tmp_path)
    wait_for(lambda: "2 compiles so far" in live_index(tmp_path / "out"))
    writer.kill()  # killed while it wrote its last record
    writer.wait()
    err = finished(watch, tmp_path, timeout=30)
    assert watch.returncode == 0, err
    assert "is final" in err and "Traceback" not in err
    same_as_one_shot(tmp_path, log, tmp_path / "out")  # the cut record counted as damaged, as a one-shot read counts it
    stats = read_json(tmp_path / "out" / "summary.json")["stats"]
    assert stats.get("fail_json", 0) + stats.get("fail_payload_md5", 0) == 1


def test_run_live_ends_when_its_program_exits_in_the_middle_of_a_record(tmp_path):
    program = tmp_path / "prog.py"
    program.write_text(
        "import os\n"
        "log = open(os.path.join(os.environ['TORCH_TRACE'], 'dedicated_log_torch_trace_p.log'), 'w')\n"
        f"log.write({records_of(0, 0, 1)!r}.replace(' 0 torch', f' {{os.getpid()}} torch') + {CUT['line'].format(pid=1)[1:]!r})\n"
        "log.flush()\n")
    run = tlparse("run", "--live", "-o", "out", "--no-browser", "--", sys.executable, str(program), cwd=tmp_path)
    err = finished(run, tmp_path, timeout=60)
    assert run.returncode == 0, err
    summary = read_json(tmp_path / "out" / "summary.json")
    assert summary["totals"]["compiles"] == 1 and summary["stats"]["fail_json"] == 1
    assert not (tmp_path / "out" / "live.js").exists()


# A launcher whose worker outlives it: the worker writes one compile, then `more` compiles `pause`
# seconds apart, ignoring SIGINT and SIGTERM (the test kills it).
WORKER = """
import os, signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
log = open(os.path.join(os.environ["TORCH_TRACE"], "dedicated_log_torch_trace_w.log"), "w")
def put(text):
    log.write(text.replace(" 0 torch", " %d torch" % os.getpid()))
    log.flush()
put({first!r})
open({ready!r}, "w").write(str(os.getpid()))
for frame in range(1, {more} + 1):
    time.sleep({pause})
    put({each!r}.replace('"frame_id": 1,', '"frame_id": %d,' % frame))
"""
LAUNCHER = """
import os, subprocess, sys
subprocess.Popen([sys.executable, {worker!r}])
while not os.path.exists({ready!r}):
    pass
"""


def launcher(tmp_path: Path, more: int, pause: float) -> tuple[Path, Path]:
    ready = tmp_path / "worker.pid"
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER.format(first=records_of(0, 0, 1), each=records_of(0, 1, 1), ready=str(ready), more=more, pause=pause))
    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER.format(worker=str(worker), ready=str(ready)))
    return script, ready


def kill(pid_file: Path) -> None:
    try:
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
    except (OSError, ValueError):
        pass


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_run_live_after_its_program_exited_ends_the_live_loop(tmp_path, sig):
    script, ready = launcher(tmp_path, more=10_000, pause=0.1)
    run = tlparse("run", "--live", "-o", "out", "--no-browser", "--", sys.executable, str(script), cwd=tmp_path)
    try:
        wait_for(lambda: "compiles so far" in live_index(tmp_path / "out"))  # the launcher has exited; its worker writes on
        run.send_signal(sig)
        err = finished(run, tmp_path, timeout=8)  # at once: not after a grace period for a program that has exited
    finally:
        kill(ready)
        run.kill()
    assert run.returncode == 128 + sig, err
    assert "Traceback" not in err and not (tmp_path / "out" / "live.js").exists()
    assert read_json(tmp_path / "out" / "summary.json")["totals"]["compiles"] >= 2


# -- 2. pids that cannot be a process -------------------------------------------------------------------


@pytest.mark.parametrize("pid", ["0", "9999999999", "123456789012345678901"])
def test_a_pid_that_cannot_be_a_process_leaves_the_quiet_rule_to_decide(tmp_path, pid):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text(records_of(4242, 0, 1).replace(" 4242 ", f" {pid} "))
    watch = tlparse("watch", str(log), "-o", "out", *WATCH, cwd=tmp_path)
    err = finished(watch, tmp_path, timeout=30)
    assert watch.returncode == 0, err
    assert "Traceback" not in err and "OverflowError" not in err and "is final" in err
    assert not (tmp_path / "out" / "live.js").exists()


def test_no_pid_is_ever_signalled_unless_it_can_be_a_process(monkeypatch):
    from tlparse_py.commands import watch

    signalled: list[int] = []
    monkeypatch.setattr(watch.os, "kill", lambda pid, sig: signalled.append(pid))
    assert not watch.any_alive({0, -1, 9999999999, 10**20, watch.pid_max() + 1})
    assert signalled == []
    assert watch.valid_pid(1) and watch.valid_pid(watch.pid_max())


# -- 3. a FIFO at the log's path -------------------------------------------------------------------------


def test_a_fifo_put_in_place_of_the_log_is_never_opened(tmp_path, writer):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text(records_of(writer.pid, 0, 1))
    watch = tlparse("watch", str(log), "-o", "out", *WATCH, cwd=tmp_path)
    wait_for(lambda: "1 compile so far" in live_index(tmp_path / "out"))
    log.unlink()
    os.mkfifo(log)
    wait_for(lambda: "is not a regular file" in stderr_of(tmp_path))
    writer.kill()
    writer.wait()
    err = finished(watch, tmp_path, timeout=30)
    assert watch.returncode == 1 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith(f"Error: cannot read {log} for the final report")


# -- 4. stray payload lines split across reads -----------------------------------------------------------


def strays() -> bytes:
    """Stray payload lines after a record without a payload, after a string, and after nothing."""
    text = line({"dynamo_start": {"stack": []}, **cid()})
    text += "\tstray one\n\tstray two\n\n\tstray three\n"
    text += 'V1202 12:14:23.064000 4242 torch/_dynamo/x.py:7] {"str": ["a.py", 0]}\n\tswallowed\n\tlines\n'
    text += line({"dynamo_start": {"stack": []}, **cid(1)}) + "\n\tafter a blank\n\tand more\n"
    text += line({"compilation_metrics": {"co_name": "f"}, **cid(1)})
    return text.encode()


@pytest.mark.parametrize("seed", range(6))
def test_stray_payload_lines_split_across_reads_are_counted_once(tmp_path, seed):
    data = strays()
    whole = tmp_path / "whole.log"
    whole.write_bytes(data)
    expected = one_read(whole)
    assert expected[1]["fail_orphan_payload"] == 2
    growing = tmp_path / "growing.log"
    growing.write_bytes(b"")
    stats, diagnostics = Stats(), DiagnosticLog()
    tail = LogTail(growing, stats, diagnostics, StringTable())
    records, position, pieces = [], 0, random.Random(seed)
    cuts = sorted({0, len(data), *(data.index(b) + d for b in (b"\tstray two", b"\tstray three", b"\tlines", b"\tand more") for d in (0, 1))})
    cuts += sorted(pieces.sample(range(len(data)), 6))
    for cut in sorted(set(cuts)):  # a read after every stray line, and at random places
        with open(growing, "ab") as handle:
            handle.write(data[position:cut])
        position = max(position, cut)
        records += [_facts(r) for r in tail.read()]
    records += [_facts(r) for r in tail.read(final=True)]
    assert (records, dict(stats.counts), [(d.lineno, d.problem, d.detail) for d in diagnostics.kept]) == expected


# -- 5. a huge line costs watch no more memory than a one-shot read ----------------------------------------

# The command in a fresh process, which prints the largest peak resident size of what it ran (KB).
PEAK = """
import resource, subprocess, sys
subprocess.run([sys.executable, "-m", "tlparse_py", *sys.argv[1:]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def peak_kb(*args: str, cwd: Path) -> int:
    done = subprocess.run([sys.executable, "-c", PEAK, *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    return int(done.stdout.strip())


def test_a_huge_line_costs_watch_no_more_memory_than_the_one_shot_read(tmp_path):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    pid = dead_pid()
    with open(log, "wb") as handle:
        handle.write(records_of(pid, 0, 2).encode())
        handle.write(f'V1202 12:14:23.064000 {pid} torch/_dynamo/x.py:7] {{"artifact": {{"name": "'.encode())
        handle.write(b"x" * (120 << 20))  # the log's last line: what the watch checks for being whole
        handle.write(b'"}}\n')
    one_shot = peak_kb(str(log), "-o", "one_shot", "--no-browser", "--max-line-mb", "1", cwd=tmp_path)
    watch = peak_kb("watch", str(log), "-o", "out", *WATCH, "--max-line-mb", "1", cwd=tmp_path)
    assert read_json(tmp_path / "out" / "summary.json")["stats"]["fail_line_too_long"] == 1
    assert watch <= one_shot + 16 * 1024, (watch, one_shot)  # KB: nowhere near the line's 120 MB


# -- 6. -o swapped for a symlink to another report -----------------------------------------------------------


def test_an_output_folder_swapped_for_a_symlink_to_another_report_is_not_written(tmp_path, writer):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text(records_of(writer.pid, 0, 1))
    write_report(log, tmp_path / "other")
    before = tree(tmp_path / "other")
    watch = tlparse("watch", str(log), "-o", "out", *WATCH, cwd=tmp_path)
    wait_for(lambda: "1 compile so far" in live_index(tmp_path / "out"))
    (tmp_path / "out").rename(tmp_path / "moved")
    (tmp_path / "out").symlink_to(tmp_path / "other")
    with open(log, "a") as handle:
        handle.write(records_of(writer.pid, 1, 2))
    err = finished(watch, tmp_path, timeout=30)
    assert watch.returncode == 1 and "deleted or replaced while watching" in err and "Traceback" not in err
    assert tree(tmp_path / "other") == before


# -- 7. a disk that fills --------------------------------------------------------------------------------------


def limited(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # a write past it fails with EFBIG (SIGXFSZ is ignored)

    return apply


def temporary_files(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob("*") if p.name.endswith(".tmp")]


def test_a_live_update_that_cannot_be_written_leaves_no_temporary_file_and_names_the_page(tmp_path):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text(records_of(dead_pid(), 0, 1))
    watch = tlparse("watch", str(log), "-o", "out", *WATCH, cwd=tmp_path, preexec_fn=limited(8 << 10))  # the static files are larger
    err = finished(watch, tmp_path, timeout=30)
    assert watch.returncode == 1 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"Error: could not write the live report ({tmp_path / 'out'}/") and str(log) not in last
    assert temporary_files(tmp_path / "out") == []


def test_a_final_report_that_cannot_be_written_names_the_file_and_leaves_no_cut_raw_log(tmp_path):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text(records_of(dead_pid(), 0, 1) + "junk line\n" * 30_000)  # 300 KB: raw.log is the one file over the limit
    watch = tlparse("watch", str(log), "-o", "out", *WATCH, cwd=tmp_path, preexec_fn=limited(128 << 10))
    err = finished(watch, tmp_path, timeout=30)
    assert watch.returncode == 1 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert f"could not write the final report ({tmp_path / 'out' / 'raw.log'}: File too large)" in last, last
    assert not (tmp_path / "out" / "raw.log").exists() and temporary_files(tmp_path / "out") == []


# -- run: COMMAND's words are the program's; workers that outlive it; the kept trace named -------------------

ARGV = """
import json, os, sys
open({argv!r}, "w").write(json.dumps(sys.argv[1:]))
with open(os.path.join(os.environ["TORCH_TRACE"], "dedicated_log_torch_trace_p.log"), "w") as log:
    log.write({text!r}.replace(" 4242 ", " %d " % os.getpid()))
"""


@pytest.mark.parametrize("dashes", [[], ["--"]])
def test_every_word_after_command_is_the_programs(tmp_path, dashes):
    script = tmp_path / "prog.py"
    script.write_text(ARGV.format(argv=str(tmp_path / "argv.json"), text=records_of(4242, 0, 1)))
    done = subprocess.run([sys.executable, "-m", "tlparse_py", "run", "--no-browser", "-o", "report", *dashes,
                           sys.executable, "prog.py", "-o", "ckpt", "-v", "--steps", "2", "--live"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert read_json(tmp_path / "argv.json") == ["-o", "ckpt", "-v", "--steps", "2", "--live"]
    assert (tmp_path / "report" / "index.html").is_file() and not (tmp_path / "ckpt").exists()


def test_an_unknown_option_before_command_is_a_usage_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "tlparse_py", "run", "--no-such-option", sys.executable, "-c", "pass"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "No such option" in done.stderr


def test_run_waits_for_a_worker_that_outlives_its_program(tmp_path):
    script, ready = launcher(tmp_path, more=3, pause=0.7)
    try:
        done = subprocess.run([sys.executable, "-m", "tlparse_py", "run", "--no-browser", "-o", "out", sys.executable, str(script)],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
    finally:
        kill(ready)
    assert done.returncode == 0, done.stderr
    assert "waiting for the processes still writing its trace" in done.stderr
    summary = read_json(tmp_path / "out" / "summary.json")
    kept = sorted((tmp_path / "out" / "trace").glob("dedicated_log*"))
    assert summary["totals"]["compiles"] == 4 == one_read(kept[0])[1]["ok"] // 3  # each compile: 3 records


@pytest.mark.parametrize("live", [["--live"], []], ids=["live", "one-shot"])
def test_a_report_written_by_run_names_the_kept_trace(tmp_path, live):
    script = tmp_path / "prog.py"
    script.write_text(ARGV.format(argv=str(tmp_path / "argv.json"), text=records_of(4242, 0, 1)))
    done = subprocess.run([sys.executable, "-m", "tlparse_py", "run", "--no-browser", "-o", "out", *live, sys.executable, "prog.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    kept = tmp_path / "out" / "trace" / "dedicated_log_torch_trace_p.log"
    assert kept.is_file()
    assert f"From <code>{kept}</code>" in (tmp_path / "out" / "index.html").read_text()
    assert read_json(tmp_path / "out" / "summary.json")["inputs"][0]["path"] == str(kept)
