"""Which logs of a folder are one run, from what the logs show (issue 43 item 1).

A program that compiles, goes quiet and then starts children logs nothing while they run: its log
ends before theirs begin. Time overlap alone called it an older run and dropped it. The children
are known by their stacks (multiprocessing's start-up code) and read with their program; a
program that neither overlaps another nor started one is a run of its own, and the index says
which logs were left out and why. A folder `run` (or the notebook's `trace()`) made is read whole.

The fixtures are real torch 2.13 traces (harness scenarios `quiet_parent` and `parent_after_child`).
The expected facts are computed here from the raw logs (glog prefixes and envelopes parsed by this
file) and from the fixtures README, which names the harness process (the run) that wrote each log.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import TRACES, read_json
from logs import line, metrics, start, write_log
from tlparse_py import analyze, build
from tlparse_py.cli import main
from tlparse_py.reading.inputs import choose_input

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")

QUIET = TRACES / "quiet_parent"
AFTER = TRACES / "parent_after_child"
PREFIX = re.compile(r"^[VIWEC]\d{4} (\d\d:\d\d:\d\d\.\d{6}) (\d+) [^\]]*\] (\{.*)$")
ROW = re.compile(r"^\| (\w+) \| `([^`]+)` \|.*\| ([^|]*) \|$")
# what each child of quiet_parent compiles, and the start-up code its stack passes through
FORMS = {
    "spawn": ("spawned_step", "multiprocessing/spawn.py"),
    "fork": ("forked_step", "multiprocessing/popen_fork.py"),
    "forkserver": ("forkserver_step", "multiprocessing/forkserver.py"),
    "pool": ("pool_step", "multiprocessing/pool.py"),
    "dataloader": ("load_item", "torch/utils/data/_utils/worker.py"),
}


# -- the truth, from the raw logs ------------------------------------------------------------------


def records(log: Path) -> list[tuple[str, int, dict]]:
    """(glog time, pid, envelope) of each record of a log."""
    opener = gzip.open if log.name.endswith(".gz") else open
    found = []
    with opener(log, "rt", encoding="utf-8") as handle:
        for text in handle:
            match = PREFIX.match(text.rstrip("\n"))
            if match:
                found.append((match.group(1), int(match.group(2)), json.loads(match.group(3))))
    return found


def compiles_in(logs: list[Path]) -> int:
    return sum(1 for log in logs for _, _, envelope in records(log) if "compilation_metrics" in envelope)


def pids_in(logs: list[Path]) -> set[int]:
    return {pid for log in logs for _, pid, _ in records(log)}


def first_pid(log: Path) -> int:
    return records(log)[0][1]


def compiled_function(log: Path) -> str:
    (name,) = {envelope["compilation_metrics"]["co_name"] for _, _, envelope in records(log) if "compilation_metrics" in envelope}
    return name


def harness_process(scenario: str) -> dict[str, int]:
    """Each fixture log of a scenario → the harness process (one run of the program) that wrote it,
    from the fixtures README's notes (`process 2 of 2: ...`; no note: the only one)."""
    found = {}
    for text in (TRACES / "README.md").read_text().splitlines():
        match = ROW.match(text)
        if match and match.group(1) == scenario:
            number = re.match(r"process (\d+) of", match.group(3).strip())
            found[match.group(2)] = int(number.group(1)) if number else 1
    return found


def logs_of(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.endswith((".log", ".log.gz")))


def copy_runs(folder: Path, groups: list[list[Path]]) -> list[list[Path]]:
    """The logs copied into `folder`, each group's a minute newer than the group before (as the runs
    of one folder are: a run's logs are written after the previous run's)."""
    folder.mkdir(parents=True, exist_ok=True)
    now, copied = time.time(), []
    for age, group in zip(range(len(groups), 0, -1), groups):
        copied.append([])
        for log in group:
            target = folder / log.name
            shutil.copyfile(log, target)
            os.utime(target, (now - 60 * age, now - 60 * age))
            copied[-1].append(target)
    return copied


def cli(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


# -- the fixtures are what the tests say they are ----------------------------------------------------


def test_the_quiet_parent_fixture_holds_every_form_and_no_two_logs_overlap_its_program():
    logs = logs_of(QUIET)
    assert set(harness_process("quiet_parent")) == {p.name for p in logs}  # one harness process: one run
    program = min(logs, key=lambda p: records(p)[0][0])
    assert compiled_function(program) == "main_step"
    end = records(program)[-1][0]
    children = [p for p in logs if p != program]
    assert all(records(p)[0][0] > end for p in children)  # the program was quiet while each child ran
    functions = sorted(compiled_function(p) for p in children)
    assert functions == sorted(["spawned_step", "forked_step", "forkserver_step", "pool_step", "load_item", "load_item"])
    for function, startup in FORMS.values():
        texts = [gzip.decompress(p.read_bytes()).decode() for p in children if compiled_function(p) == function]
        assert texts and all(startup in text and "/stdlib/multiprocessing/process.py" in text for text in texts), function


# -- a folder the user gives ----------------------------------------------------------------------------


def test_a_quiet_program_and_every_child_it_started_are_one_run(tmp_path):
    logs = logs_of(QUIET)
    folder = tmp_path / "trace"
    copy_runs(folder, [logs])
    chosen = choose_input(folder)
    assert sorted(p.name for p in chosen.logs) == sorted(p.name for p in logs) and chosen.others == [] and chosen.left_out == []
    summary = analyze(folder).to_dict()
    assert summary["totals"]["compiles"] == compiles_in(logs) == 7
    program = min(logs, key=lambda p: records(p)[0][0])
    assert [p["pid"] for p in summary["processes"]][0] == first_pid(program)  # process 0: the program
    assert {p["pid"] for p in summary["processes"]} == pids_in(logs) and len(summary["processes"]) == 7


@pytest.mark.parametrize("form", list(FORMS))
def test_each_kind_of_child_is_read_with_its_quiet_program(tmp_path, form):
    """The bug: a program, then (its log ended) a child of each kind: both read, not the child alone."""
    logs = logs_of(QUIET)
    program = min(logs, key=lambda p: records(p)[0][0])
    children = [p for p in logs if compiled_function(p) == FORMS[form][0]]
    folder = tmp_path / form
    copy_runs(folder, [[program], children])
    chosen = choose_input(folder)
    assert [p.name for p in chosen.logs][0] == program.name
    assert sorted(p.name for p in chosen.logs) == sorted(p.name for p in [program, *children]) and chosen.others == []
    summary = analyze(folder).to_dict()
    assert summary["totals"]["compiles"] == compiles_in([program, *children]) == 1 + len(children)
    assert len(summary["processes"]) == len(pids_in([program, *children]))


def test_a_program_that_compiles_only_after_its_child_is_one_run_with_it(tmp_path):
    runs = harness_process("parent_after_child")
    first = [AFTER / name for name, run in runs.items() if run == 1]
    program = next(p for p in first if compiled_function(p) == "main_step")
    (child,) = [p for p in first if p != program]
    assert records(child)[-1][0] < records(program)[0][0]  # the child ended before its program logged
    folder = tmp_path / "trace"
    copy_runs(folder, [first])
    chosen = choose_input(folder)
    assert [p.name for p in chosen.logs] == [program.name, child.name] and chosen.others == []  # the program first: process 0
    summary = analyze(folder).to_dict()
    assert summary["totals"]["compiles"] == compiles_in(first) == 2
    assert [p["pid"] for p in summary["processes"]] == [first_pid(program), first_pid(child)]


@pytest.mark.parametrize("newest", [1, 2])
def test_two_runs_in_one_folder_are_told_apart(tmp_path, newest):
    """Four logs, none overlapping another: two runs of a child and its program. Which run is newer
    is what the records say (run 2's began later), not the files' times, which a copy does not keep
    (here the copy order makes either run's files the newer); each run's logs are read together."""
    runs = harness_process("parent_after_child")
    by_run = {run: [AFTER / name for name, r in runs.items() if r == run] for run in (1, 2)}
    older = 3 - newest
    folder = tmp_path / "trace"
    copy_runs(folder, [by_run[older], by_run[newest]])
    chosen = choose_input(folder)
    assert sorted(p.name for p in chosen.logs) == sorted(p.name for p in by_run[2])
    assert sorted(p.name for p in chosen.others) == sorted(p.name for p in by_run[1])
    (left_out,) = chosen.left_out
    assert left_out.logs == sorted(p.name for p in by_run[1]) and left_out.why.startswith("another run")
    pids = sorted(pids_in(by_run[1]))
    assert f"pids {pids[0]}, {pids[1]}" in left_out.why
    summary = analyze(folder).to_dict()
    assert summary["totals"]["compiles"] == compiles_in(by_run[2]) == 2
    assert {p["pid"] for p in summary["processes"]} == pids_in(by_run[2])


def test_three_runs_with_children_the_newest_is_read_and_the_others_named_with_why(tmp_path):
    runs = harness_process("parent_after_child")
    first = [AFTER / name for name, r in runs.items() if r == 1]
    second = [AFTER / name for name, r in runs.items() if r == 2]
    quiet = logs_of(QUIET)  # logged before parent_after_child ran: the oldest run
    assert max(records(p)[-1][0] for p in quiet) < min(records(p)[0][0] for p in first)
    folder = tmp_path / "trace"
    copy_runs(folder, [quiet, first, second])
    chosen = choose_input(folder)
    assert sorted(p.name for p in chosen.logs) == sorted(p.name for p in second)
    assert [entry.logs for entry in chosen.left_out] == [sorted(p.name for p in quiet), sorted(p.name for p in first)]
    assert "holds logs of 3 runs" in chosen.note and "--all-runs" in chosen.note
    everything = analyze(folder, all_runs=True).to_dict()
    assert everything["totals"]["compiles"] == compiles_in(quiet + first + second) == 11
    assert len(everything["processes"]) == len(pids_in(quiet + first + second)) == 11


def test_the_index_says_at_its_top_which_logs_were_left_out_and_why(tmp_path):
    runs = harness_process("parent_after_child")
    by_run = {run: [AFTER / name for name, r in runs.items() if r == run] for run in (1, 2)}
    folder = tmp_path / "trace"
    copy_runs(folder, [by_run[1], by_run[2]])
    out = tmp_path / "out"
    result = cli(folder, "-o", out, "--no-browser")
    assert result.exit_code == 0, result.stderr
    assert "--all-runs reads every run" in result.stderr
    html = (out / "index.html").read_text()
    note = html[html.index('id="left-out"'):html.index("</div>", html.index('id="left-out"'))]
    assert html.index('id="left-out"') < html.index('class="cards"')  # at the top, before the totals
    for log in by_run[1]:
        assert f"<code>{log.name}</code>" in note
    for log in by_run[2]:
        assert log.name not in note
    assert "another run" in note and "--all-runs" in note
    assert read_json(out / "summary.json")["totals"]["compiles"] == compiles_in(by_run[2])


def test_all_runs_reads_every_log_and_leaves_nothing_out(tmp_path):
    logs = logs_of(AFTER)
    folder = tmp_path / "trace"
    copy_runs(folder, [logs])
    out = tmp_path / "out"
    result = cli(folder, "-o", out, "--no-browser", "--all-runs")
    assert result.exit_code == 0, result.stderr
    assert "reading every log, 4 logs of 4 processes together" in result.stderr
    summary = read_json(out / "summary.json")
    assert summary["totals"]["compiles"] == compiles_in(logs) == 4
    assert {p["pid"] for p in summary["processes"]} == pids_in(logs)
    index = (out / "index.html").read_text()
    assert 'id="left-out"' not in index
    # two runs read together: the index does not call them one run
    assert "4 processes logged into this trace, every log of the folder read together" in index
    assert "of one run" not in index
    built = build(folder, tmp_path / "api", all_runs=True)
    assert built.to_dict()["totals"]["compiles"] == 4
    assert 'id="left-out"' not in (tmp_path / "api" / "index.html").read_text()


def test_the_python_api_names_what_it_left_out_too(tmp_path):
    runs = harness_process("parent_after_child")
    by_run = {run: [AFTER / name for name, r in runs.items() if r == run] for run in (1, 2)}
    folder = tmp_path / "trace"
    copy_runs(folder, [by_run[1], by_run[2]])
    build(folder, tmp_path / "out")
    html = (tmp_path / "out" / "index.html").read_text()
    assert 'id="left-out"' in html and all(log.name in html for log in by_run[1])


def test_latest_and_all_runs_together_are_refused(tmp_path):
    folder = tmp_path / "trace"
    copy_runs(folder, [logs_of(AFTER)])
    result = cli(folder, "-o", tmp_path / "out", "--no-browser", "--latest", "--all-runs")
    assert result.exit_code == 2 and "--all-runs" in result.stderr
    assert not (tmp_path / "out").exists()


# -- the evidence, in written logs: every form of it tried -----------------------------------------------


def written(path: Path, pid: int, clock: str, stack: list[dict], strings: list[str] = (), version: str = "2.13.0+cpu",
            gz: bool = False) -> Path:
    """A log of one process: torch's version, the file names it interns, then one compile whose
    start has `stack` (a frame's `filename` an index into `strings`, or one not among them)."""
    lines = [line({"artifact": {"name": "torch_version", "encoding": "json"}},
                  json.dumps({"pytorch_version": version, "commit": "cf30153c", "oss": True}, indent=0))]
    lines += [line({"str": [text, index]}) for index, text in enumerate(strings)]
    lines += [line({"dynamo_start": {"stack": stack}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0}), metrics()]
    write_log(path, [text.replace("12:14:23.064000 4242 ", f"{clock} {pid} ", 1) for text in lines], gz=gz)
    return path


PROGRAM_STACK = [{"line": 9, "name": "main", "filename": 0}]
SPAWNED_STACK = [{"line": 122, "name": "spawn_main", "filename": 1}, {"line": 314, "name": "_bootstrap", "filename": 2},
                 {"line": 3, "name": "f", "filename": 0}]
SPAWNED_FILES = ["/src/prog.py", "/stdlib/multiprocessing/spawn.py", "/stdlib/multiprocessing/process.py"]


def test_a_forked_child_whose_file_names_are_its_program_s_is_known_by_its_functions(tmp_path):
    """A forked child does not log again the file names its program interned before the fork: its
    stack's start-up frames are known by their function names (here in a .gz)."""
    program = written(tmp_path / "dedicated_log_torch_trace_p.log", 100, "12:00:00.000000", PROGRAM_STACK, ["/src/prog.py"])
    forked = [{"line": 71, "name": "_launch", "filename": 5}, {"line": 314, "name": "_bootstrap", "filename": 6},
              {"line": 3, "name": "f", "filename": 0}]
    child = written(tmp_path / "dedicated_log_torch_trace_c.log.gz", 101, "12:00:10.000000", forked, gz=True)
    assert sorted(choose_input(tmp_path).logs) == sorted([program, child])


def test_a_child_of_another_torch_build_is_not_the_program_s(tmp_path):
    now = time.time()
    program = written(tmp_path / "dedicated_log_torch_trace_p.log", 100, "12:00:00.000000", PROGRAM_STACK, ["/src/prog.py"])
    child = written(tmp_path / "dedicated_log_torch_trace_c.log", 101, "12:00:10.000000", SPAWNED_STACK, SPAWNED_FILES,
                    version="2.14.0+cpu")
    os.utime(program, (now - 60, now - 60))
    chosen = choose_input(tmp_path)
    assert chosen.logs == [child] and chosen.others == [program]
    assert [entry.logs for entry in chosen.left_out] == [[program.name]]


def test_a_thread_s_start_up_is_not_a_child_s(tmp_path):
    """threading.py's `_bootstrap` starts a thread, not a process: a program that compiled in a
    thread, after another program ended, is a run of its own."""
    now = time.time()
    first = written(tmp_path / "dedicated_log_torch_trace_a.log", 100, "12:00:00.000000", PROGRAM_STACK, ["/src/prog.py"])
    threaded = [{"line": 995, "name": "_bootstrap", "filename": 1}, {"line": 3, "name": "f", "filename": 0}]
    second = written(tmp_path / "dedicated_log_torch_trace_b.log", 200, "12:00:10.000000", threaded, ["/src/prog.py", "/stdlib/threading.py"])
    os.utime(first, (now - 60, now - 60))
    chosen = choose_input(tmp_path)
    assert chosen.logs == [second] and chosen.others == [first]


def test_children_whose_program_logged_nothing_are_one_run(tmp_path):
    """A launcher that never compiles: its children are read together, and a later program that
    started after them (a higher pid) is not taken for their parent."""
    now = time.time()
    workers = [written(tmp_path / f"dedicated_log_torch_trace_w{n}.log", 300 + n, f"12:00:0{n}.000000", SPAWNED_STACK, SPAWNED_FILES)
               for n in range(2)]
    later = written(tmp_path / "dedicated_log_torch_trace_later.log", 900, "12:05:00.000000", PROGRAM_STACK, ["/src/prog.py"])
    os.utime(later, (now - 60, now - 60))  # an older file time, which decides nothing: its records began last
    chosen = choose_input(tmp_path)
    assert chosen.logs == [later] and chosen.left_out[0].logs == sorted(w.name for w in workers)  # the workers: one run of their own


# -- the folder `run` makes is one run ------------------------------------------------------------------

# A stand-in for a quiet program and a child that shows nothing of where it came from (started by
# subprocess, not multiprocessing): the program logs a compile, then waits for the child, which
# logs its own a few seconds later (in glog time). Each names its own pid, as torch does.
QUIET_FAKE = """
import os, subprocess, sys
trace = os.environ["TORCH_TRACE"]
name, text = sys.argv[1], sys.argv[2]
with open(os.path.join(trace, "dedicated_log_torch_trace_" + name + ".log"), "w") as f:
    f.write(text.replace(" 4242 ", " %d " % os.getpid()))
if name == "program":
    later = text.replace("12:14:23.064000", "12:14:30.000000")
    subprocess.run([sys.executable, __file__, "child", later], check=True)
"""


def test_run_reads_every_log_of_the_folder_it_made(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(QUIET_FAKE)
    text = start() + line({"str": ["/src/prog.py", 0]}) + metrics()
    proc = subprocess.run([sys.executable, "-m", "tlparse_py", "run", "-o", "out", "--no-browser", "--", sys.executable, str(script),
                           "program", text], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    logs = logs_of(out / "trace")
    assert len(logs) == 2
    summary = read_json(out / "summary.json")
    assert summary["totals"]["compiles"] == compiles_in(logs) == 2
    assert {p["pid"] for p in summary["processes"]} == pids_in(logs)
    assert 'id="left-out"' not in (out / "index.html").read_text()
    # the same folder given by the user: nothing says the second process is the first's child, and
    # their logs do not overlap: two runs, and the index says which log was left out
    again = cli(out / "trace", "-o", tmp_path / "again", "--no-browser")
    assert again.exit_code == 0, again.stderr
    assert read_json(tmp_path / "again" / "summary.json")["totals"]["compiles"] == 1
    assert 'id="left-out"' in (tmp_path / "again" / "index.html").read_text()


QUIET_SPAWN = """
import multiprocessing, time, torch

def f(x):
    return torch.sin(x) + 1

def child():
    torch.compile(f, backend="eager")(torch.randn(4))

def g(x):
    return torch.cos(x) * 2

if __name__ == "__main__":
    torch.compile(g, backend="eager")(torch.randn(4))
    time.sleep(1)
    process = multiprocessing.get_context("spawn").Process(target=child)
    process.start()
    process.join()
    assert process.exitcode == 0
"""


@pytest.mark.torch
@needs_torch
def test_run_of_a_quiet_program_with_a_spawned_child_reports_both(tmp_path):
    script = tmp_path / "spawn_quiet.py"
    script.write_text(QUIET_SPAWN)
    proc = subprocess.run([sys.executable, "-m", "tlparse_py", "run", "-o", "out", "--no-browser", "--", sys.executable, str(script)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    logs = logs_of(out / "trace")
    program = min(logs, key=lambda p: records(p)[0][0])
    (child,) = [p for p in logs if p != program]
    assert records(program)[-1][0] < records(child)[0][0]  # quiet: the program's log ended first
    summary = read_json(out / "summary.json")
    assert summary["totals"]["compiles"] == compiles_in(logs) == 2
    assert [p["pid"] for p in summary["processes"]] == [first_pid(program), first_pid(child)]
    # given as a folder, the child is known by its stack: the same two compiles
    assert analyze(out / "trace").to_dict()["totals"]["compiles"] == 2


# -- the notebook's trace() folder is one run ----------------------------------------------------------

TRACE_BLOCK = """
import json, os, sys, time
import torch
import tlparse_py

def g(x):
    return torch.cos(x) * 2

def f(x):
    return torch.sin(x) + 1

with tlparse_py.trace(sys.argv[1]) as t:
    torch.compile(g, backend="eager")(torch.ones(3))
    time.sleep(0.5)
    pid = os.fork()  # a child that shows nothing of where it came from (no multiprocessing start-up)
    if pid == 0:
        try:
            torch.compile(f, backend="eager")(torch.ones(3))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
print(json.dumps(sorted(c.frame for c in t.analysis.summary().compiles)))
"""


@pytest.mark.torch
@needs_torch
def test_a_trace_block_s_folder_is_read_whole(tmp_path):
    script = tmp_path / "block.py"
    script.write_text(TRACE_BLOCK)
    folder = tmp_path / "block"
    result = subprocess.run([sys.executable, str(script), str(folder)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    logs = logs_of(folder)
    assert len(logs) == 2 and len(pids_in(logs)) == 2
    assert json.loads(result.stdout.strip().splitlines()[-1]) == sorted(compiled_function(p) for p in logs) == ["f", "g"]
