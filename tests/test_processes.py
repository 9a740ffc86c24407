"""Processes that share a trace folder (issue 33): a program, its forked DataLoader worker and a
spawned child, read as one run.

The expected facts are computed here from the raw logs (glog prefixes and envelopes parsed by this
file), never from the analysis: which pids logged, which compiles each made, which are recompiles,
and where each frame's code is.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from tlparse_py import analyze, build
from tlparse_py.model import CompileId
from tlparse_py.reading.inputs import choose_input

from logs import cid, line, metrics, start, write_log

FIXTURE = Path(__file__).parent / "fixtures" / "traces" / "processes"
PREFIX = re.compile(r"^[VIWEC](\d{4} \d\d:\d\d:\d\d\.\d{6}) (\d+) [^\]]*\] (\{.*)$")


def raw_records(folder: Path) -> list[tuple[str, int, dict]]:
    """(glog time, pid, envelope) of every record of every log in the folder."""
    found = []
    for log in sorted(folder.glob("*.log*")):
        opener = gzip.open if log.suffix == ".gz" else open
        with opener(log, "rt", encoding="utf-8") as handle:
            for text in handle:
                match = PREFIX.match(text)
                if match:
                    found.append((match.group(1), int(match.group(2)), json.loads(match.group(3))))
    return found


def truth(folder: Path) -> dict:
    records = raw_records(folder)
    first_seen: dict[int, str] = {}
    for when, pid, _ in records:
        first_seen[pid] = min(when, first_seen.get(pid, when))
    order = sorted(first_seen, key=first_seen.get)  # the first to log is the program that started the others
    compiles = {}
    for _, pid, envelope in records:
        if "compilation_metrics" in envelope:
            key = (pid, envelope["frame_id"], envelope["frame_compile_id"])
            compiles[key] = envelope["compilation_metrics"]
    return {"order": order, "compiles": compiles}


def test_a_program_its_worker_and_its_spawned_child_are_one_run():
    expected = truth(FIXTURE)
    assert len(expected["order"]) == 3  # the fixture is what this test is about
    chosen = choose_input(FIXTURE)
    assert len(chosen.logs) == 3 and chosen.others == []
    analysis = analyze(FIXTURE)
    summary = analysis.to_dict()
    pids = [p["pid"] for p in summary["processes"]]
    assert pids == expected["order"]
    got = {(pids[c["process"]], CompileId.parse(c["id"]).frame_id, CompileId.parse(c["id"]).frame_compile_id): c
           for c in summary["compiles"]}
    assert set(got) == set(expected["compiles"])
    assert summary["totals"]["compiles"] == len(expected["compiles"])
    assert summary["totals"]["recompiles"] == sum(1 for (_, _, fcid) in expected["compiles"] if fcid > 0)
    assert summary["totals"]["frames"] == len({(pid, frame) for pid, frame, _ in expected["compiles"]})
    for key, metrics_ in expected["compiles"].items():
        compile_ = got[key]
        assert compile_["frame"] == metrics_["co_name"]
        assert compile_["compile_time_s"]["forward"] == metrics_["entire_frame_compile_time_s"]
        # the user location resolves in the process's own string table, or, in a forked worker,
        # in the one it inherited from its parent
        assert compile_["user_location"].endswith(f"processes.py:{metrics_['co_firstlineno']}")
        process = compile_["process"]
        assert compile_["id"].startswith(f"[p{process}:" if process else "[")
    for process in summary["processes"]:
        assert process["compiles"] == sum(1 for (pid, _, _) in expected["compiles"] if pid == process["pid"])


def test_the_index_names_the_processes(tmp_path):
    out = tmp_path / "out"
    build(FIXTURE, out)
    html = (out / "index.html").read_text()
    expected = truth(FIXTURE)
    assert "3 processes of one run logged into this trace" in html
    for pid in expected["order"]:
        assert f"pid {pid}," in html
    assert "(a single process)" not in html
    # each process's compile pages are apart: [0/0] of the first and of p2 are two pages
    assert (out / "-_0_0_0" / "index.html").is_file() and (out / "p2_-_0_0_0" / "index.html").is_file()


# ------------------------------------------------------------------------------------------------
# what makes a run: written logs, so every form is tried


def _log(path: Path, pid: int, clocks: list[str], frame: int = 0) -> Path:
    """A log of one process: a compile of `frame` per clock (frame compile ids 0, 1, ...)."""
    lines = []
    for number, clock in enumerate(clocks):
        lines += [text.replace("12:14:23.064000 4242 ", f"{clock} {pid} ", 1)
                  for text in (start(frame, number), line({"dynamo_output_graph": {}, **cid(frame, number, 0)}, "g"), metrics(frame, number, 0))]
    write_log(path, lines)
    return path


def test_overlapping_logs_are_one_run_and_a_finished_one_is_older(tmp_path):
    now = time.time()
    old = _log(tmp_path / "dedicated_log_torch_trace_old.log", 10, ["11:00:00.000000", "11:00:05.000000"])
    parent = _log(tmp_path / "dedicated_log_torch_trace_parent.log", 20, ["12:00:00.000000", "12:00:30.000000"])
    child = _log(tmp_path / "dedicated_log_torch_trace_child.log", 30, ["12:00:10.000000", "12:00:20.000000"])
    for age, log in ((300, old), (1, parent), (2, child)):
        os.utime(log, (now - age, now - age))
    chosen = choose_input(tmp_path)
    assert chosen.logs == [parent, child]
    assert chosen.others == [old]
    assert "reading the newest, 2 logs of 2 processes of one run together (pids 20, 30" in chosen.note
    assert "older runs: dedicated_log_torch_trace_old.log" in chosen.note
    summary = analyze(tmp_path).to_dict()
    assert [c["id"] for c in summary["compiles"]] == ["[0/0]", "[0/1]", "[p1:0/0]", "[p1:0/1]"]
    assert summary["totals"]["compiles"] == 4 and summary["totals"]["recompiles"] == 2 and summary["totals"]["frames"] == 2


def test_a_child_that_began_after_its_parent_s_last_record_is_another_run(tmp_path):
    first = _log(tmp_path / "dedicated_log_torch_trace_a.log", 20, ["12:00:00.000000"])
    second = _log(tmp_path / "dedicated_log_torch_trace_b.log", 30, ["12:00:10.000000"])
    chosen = choose_input(tmp_path)
    assert chosen.logs == [second] and chosen.others == [first]


def test_a_worker_writing_into_its_parent_s_log_is_a_process_of_its_own(tmp_path):
    """Two pids in one log (a forked worker whose handler is the parent's): two processes; the
    worker's interned file name below its own first index is its parent's."""
    log = tmp_path / "dedicated_log_torch_trace_mixed.log"
    parent = [text.replace(" 4242 ", " 100 ", 1) for text in (line({"str": ["/src/model.py", 0]}), start(0, 0), metrics(0, 0, 0))]
    worker = [text.replace(" 4242 ", " 101 ", 1) for text in (start(0, 0), metrics(0, 0, 0))]
    write_log(log, parent + worker)
    summary = analyze(log).to_dict()
    assert [c["id"] for c in summary["compiles"]] == ["[0/0]", "[p1:0/0]"]
    assert [p["pid"] for p in summary["processes"]] == [100, 101]
    assert summary["compiles"][0]["user_location"] == summary["compiles"][1]["user_location"] == "/src/model.py:3"


def test_one_process_keeps_its_labels_and_lists_one_process():
    folder = Path(__file__).parent / "fixtures" / "traces" / "graph_break"
    summary = analyze(folder).to_dict()
    assert len(summary["processes"]) == 1 and summary["processes"][0]["process"] == 0
    assert all(c["process"] == 0 and not c["id"].startswith("[p") for c in summary["compiles"])


@pytest.mark.parametrize("text", ["[p1:0/0]", "[p2:!0/1/0_1]", "[p12:-/-]"])
def test_process_ids_read_back_as_written(text):
    key = CompileId.parse(text)
    assert key is not None and str(key) == text and key.process > 0
    assert key.dirname.startswith(f"p{key.process}_")


@pytest.mark.parametrize("text", ["[p0:0/0]", "[p:0/0]", "[p1 0/0]", "[1:0/0]"])
def test_malformed_process_ids_are_refused(text):
    assert CompileId.parse(text) is None


def test_a_copied_fixture_folder_reads_the_same(tmp_path):
    """Fixture copies lose their mtimes: the run is still found by the records' times."""
    copy = tmp_path / "copy"
    shutil.copytree(FIXTURE, copy)
    assert len(choose_input(copy).logs) == 3
