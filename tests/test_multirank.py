"""Multi-rank reports: discovery, one report per rank, and every cross-rank diagnostic, diverging or not."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
from click.testing import CliRunner

from conftest import SHARED, TRACES, read_json
from linkcheck import broken_links
from logs import cid, line, metrics, start, write_log
from tlparse_py import multirank
from tlparse_py.analysis import rank_answers, rank_detectors
from tlparse_py.model import CompileId
from tlparse_py.pipeline import Options
from tlparse_py.cli import main
from tlparse_py.reading.inputs import InputError

CORPUS = SHARED / "corpus" / "tlparse"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def rank_log(folder, rank, lines, name=None, gz=False):
    """A rank's log: every record carries the rank, as torch writes them after init_process_group."""
    tagged = [text.replace("{", '{"rank": %d, ' % rank, 1) if not text.startswith("\t") else text for text in lines]
    suffix = ".log.gz" if gz else ".log"
    return write_log(folder / (name or f"dedicated_log_torch_trace_rank_{rank}_x{suffix}"), tagged, gz=gz)


def artifact(name, payload, frame=0, compile=0, encoding="json"):
    return line({"artifact": {"name": name, "encoding": encoding}, **cid(frame, compile, 0)}, payload)


def compile_lines(frame=0, compile=0, cache="miss", extra=()):
    return [
        start(frame, compile),
        line({"dynamo_output_graph": {}, **cid(frame, compile, 0)}, "graph"),
        artifact(f"fx_graph_cache_{cache}", json.dumps({"key": "k", "cache_state": cache}), frame, compile),
        *extra,
        metrics(frame, compile, 0),
    ]


def landing_of(tmp_path, folder, **options):
    out = tmp_path / "out"
    landing, _ = multirank.write_all_ranks(folder, out, False, Options(**options))
    return landing, out


def test_identical_ranks_agree(tmp_path):
    folder = tmp_path / "trace"
    folder.mkdir()
    for rank in (0, 1):
        rank_log(folder, rank, compile_lines() + compile_lines(1, 0))
    landing, out = landing_of(tmp_path, folder)
    assert not landing.diverges
    assert [r.compile_ids for r in landing.ranks] == [["[0/0]", "[1/0]"], ["[0/0]", "[1/0]"]]
    index = (out / "index.html").read_text()
    assert "Yes, as far as the logs tell" in index and 'href="rank_1/index.html"' in index
    assert "collectives_parity.json" not in index.split("<h2")[0]
    assert (out / "rank_0" / "collectives_parity.json").is_file()
    assert broken_links(out) == []


def test_compile_id_and_cache_divergence(tmp_path):
    folder = tmp_path / "trace"
    folder.mkdir()
    rank_log(folder, 0, compile_lines() + compile_lines(1, 0))
    rank_log(folder, 1, compile_lines() + compile_lines(1, 0))
    rank_log(folder, 2, compile_lines(cache="hit"))
    landing, out = landing_of(tmp_path, folder)
    found = landing.comparison
    # no graph break, recompile or failure sets rank 2 apart: its missing compile has no known cause
    assert found.compile_ids == [rank_answers.CompileSetDivergence(2, missing=[CompileId(None, 1, 0, 0)], extra=[],
                                                            groups=[rank_answers.CauseGroup(["[1/0]"], [], None)])]
    assert [(g.ranks, g.items, g.at) for g in found.cache] == [([0, 1], ["miss", "miss"], None), ([2], ["hit"], 0)]
    assert [(d.kind, d.compile_id, d.ranks, d.detail) for d in found.divergences] == [("compile_ids", "[1/0]", [2], "missing [1/0]; extra nothing")]
    [note] = found.notes
    assert (note.compile_id, note.ranks, note.compile_time_s) == ("[0/0]", [2], {"0": 1.0, "1": 1.0, "2": 0.5})
    assert note.detail == "rank 2 took different cache results from the majority (ranks 0 and 1): lookup 1 in [0/0] was a hit where ranks 0 and 1 had a miss"
    index = (out / "index.html").read_text()
    assert "Rank 2 compiled different graphs" in index and "<code>[1/0]</code>" in index
    assert "first different at lookup 1" in index and "<code>[0/0]</code>" in index
    assert "<code>miss miss</code>" in index and "<code>hit</code>" in index  # the results in words, not marks


def test_collective_schedule_divergence_and_parity(tmp_path):
    folder = tmp_path / "trace"
    folder.mkdir()
    ops = ["torch.ops._c10d_functional.all_reduce_.default", "torch.ops._c10d_functional.wait_tensor.default"]
    code = "def call(args):\n    buf = torch.ops._c10d_functional.all_reduce_.default(x, 'sum', '0')\n    # torch.ops._c10d_functional.all_gather_into_tensor.default(\n"
    for rank, schedule in ((0, ops), (1, ops), (2, list(reversed(ops)) + ops)):
        rank_log(folder, rank, compile_lines(extra=[artifact("inductor_collective_schedule", json.dumps(schedule)), line({"inductor_output_code": {}, **cid()}, code)]))
    landing, out = landing_of(tmp_path, folder)
    schedules = landing.comparison.schedules
    assert [(g.ranks, g.count, g.at) for g in schedules] == [([0, 1], 2, None), ([2], 4, 0)]
    assert schedules[1].item == ops[1] and schedules[1].expected == ops[0]
    assert [(d.kind, d.ranks) for d in landing.comparison.divergences] == [("collective_schedule", [2])]
    # one all_reduce scheduled and called, but no wait_tensor follows it in the code (the commented call is ignored)
    assert read_json(out / "rank_0" / "collectives_parity.json")["graphs"] == [{"graph": "-_0_0_0", "compile_id": "[0/0]", "offset": 0, "missing_waits": 1}]
    assert read_json(out / "collective_schedules.json")[0] == {"rank": 0, "graph": "-_0_0_0", "ops": ops}


def test_runtime_estimates_deltas_and_tensor_meta(tmp_path):
    folder = tmp_path / "trace"
    folder.mkdir()

    def meta(runtime, shape):
        return json.dumps({"ops": [{"name": "mm", "type": "compute", "estimated_runtime_ns": runtime, "outputs": [{"shape": shape}]}]})

    rank_log(folder, 0, compile_lines(extra=[artifact("inductor_runtime_and_tensor_meta", meta(2_000_000, [4]))]))
    rank_log(folder, 1, compile_lines(extra=[artifact("inductor_runtime_and_tensor_meta", meta(5_000_000, [4]))]))
    rank_log(folder, 2, compile_lines(extra=[artifact("inductor_runtime_and_tensor_meta", meta(2_000_000, [8]))]))
    landing, out = landing_of(tmp_path, folder)
    runtime = landing.comparison.runtime
    assert runtime is not None and runtime.graphs == [rank_answers.RuntimeSpread("-_0_0_0", 3.0, (2, 2.0), (1, 5.0))]
    # runtimes differ between ranks 0 and 1 but their tensor metadata does not (tlparse would call them divergent)
    assert landing.comparison.tensor_meta == [[0, 1], [2]]
    trace = read_json(out / "chromium_trace_with_runtime.json")
    spans = [e for e in trace if e["ph"] == "X"]
    assert {e["pid"] for e in spans} == {0, 1, 2} and all(e["dur"] > 0 and e["args"]["rank"] == e["pid"] for e in spans)
    assert read_json(out / "runtime_estimations.json")[1] == {"rank": 1, "graph": "-_0_0_0", "ops": [{"name": "mm", "estimated_runtime_ns": 5000000}]}


def test_execution_order_analysis_unit():
    """tlparse's own test 39, with the same inputs."""
    orders = {0: ["0/0", "0/1", "0/2"], 1: ["0/1", "0/0", "0/2"]}
    schedules = {(0, "0/0"): ["all_reduce"], (0, "0/1"): ["all_gather"], (1, "0/0"): ["all_reduce"], (1, "0/1"): ["broadcast"]}
    cache = {(0, "0/0"): "hit", (0, "0/1"): "miss", (1, "0/0"): "hit", (1, "0/1"): "hit"}
    rows = rank_detectors.analyze_execution_order(orders, schedules, cache)
    assert [(r.by_rank, r.issues) for r in rows] == [
        ({0: "0/0", 1: "0/1"}, ["schedule"]),
        ({0: "0/1", 1: "0/0"}, ["schedule", "cache"]),  # tlparse's test asks that it "includes" the cache one
        ({0: "0/2", 1: "0/2"}, []),
    ]


def test_execution_order_in_the_landing(tmp_path):
    folder = tmp_path / "trace"
    folder.mkdir()
    for rank, order in ((0, ["0/0", "1/0"]), (1, ["1/0", "0/0"])):
        rank_log(folder, rank, compile_lines() + compile_lines(1, 0) + [line({"artifact": {"name": "graph_execution", "encoding": "json"}}, json.dumps({"graph_execution_order": [{"compile_id": c} for c in order]}))])
    landing, out = landing_of(tmp_path, folder)
    execution = landing.comparison.execution
    assert execution is not None and execution.order_differs is True
    assert "Graph execution order differs across ranks" in (out / "index.html").read_text()


def test_compiler_collectives_and_dynamic_decisions(tmp_path):
    folder = tmp_path / "trace"
    folder.mkdir()
    for rank, decision, dynamic in ((0, "save: a, b", True), (1, "save: a", False)):
        extra = [artifact("aot_joint_graph_sync_decision_cross_ranks", decision, encoding="string")]
        if dynamic:
            extra.append(line({"create_symbol": {"symbol": "s0", "source": "L['x'].size()[0]"}, **cid()}))
        rank_log(folder, rank, compile_lines(extra=extra))
    landing, out = landing_of(tmp_path, folder)
    found = landing.comparison
    assert [(r.compile_id, r.name, [g.ranks for g in r.groups]) for r in found.agreements] == [
        ("[0/0]", "aot_joint_graph_sync_decision_cross_ranks", [[0], [1]])
    ]
    assert found.dynamic == [rank_answers.DynamicDivergence("[0/0]", [rank_answers.DynamicGroup([0], ["L['x'].size()[0]"]), rank_answers.DynamicGroup([1], [])])]
    index = (out / "index.html").read_text()
    assert "Ranks disagree on <code>aot_joint_graph_sync_decision_cross_ranks</code>" in index
    assert "different dynamic-shape decisions" in index
    assert broken_links(out) == []


def test_discovery_by_content_forked_children_gz_and_unranked(tmp_path):
    folder = tmp_path / "trace"
    folder.mkdir()
    # a log started before init_process_group: no rank in its name, ranked records later
    write_log(folder / "dedicated_log_torch_trace_early.log", [line({"export": {}}), line({"export": {}, "rank": 1})])
    rank_log(folder, 0, compile_lines(), gz=True)
    rank_log(folder, 0, [line({"export": {}})], name="dedicated_log_torch_trace_rank_0_child.log")  # a forked worker
    write_log(folder / "dedicated_log_torch_trace_worker.log", [line({"export": {}})])
    jobs = multirank.discover(folder, Options())
    assert [(j.rank, j.folder, j.log.name) for j in jobs] == [
        (0, "rank_0", "dedicated_log_torch_trace_rank_0_x.log.gz"),
        (0, "rank_0_extra_1", "dedicated_log_torch_trace_rank_0_child.log"),
        (1, "rank_1", "dedicated_log_torch_trace_early.log"),
        (None, "unranked_1", "dedicated_log_torch_trace_worker.log"),
    ]
    landing, out = landing_of(tmp_path, folder)
    assert [r.rank for r in landing.ranks] == [0, 1]
    assert (out / "rank_0_extra_1" / "index.html").is_file() and (out / "unranked_1" / "index.html").is_file()
    assert broken_links(out) == []


def test_string_tables_do_not_leak_between_ranks(tmp_path):
    folder = tmp_path / "trace"
    folder.mkdir()
    rank_log(folder, 0, [line({"str": ["/rank0/only.py", 0]})] + compile_lines())
    rank_log(folder, 1, compile_lines())  # uses file id 0 without defining it
    _, out = landing_of(tmp_path, folder)
    assert "/rank0/only.py" in (out / "rank_0" / "index.html").read_text()
    rank1 = (out / "rank_1" / "index.html").read_text()
    assert "/rank0/only.py" not in rank1 and "(unknown)" in rank1
    assert json.loads((out / "rank_1" / "raw.jsonl").read_text().splitlines()[0]) == {"string_table": [None]}


def test_crashed_two_rank_run(tmp_path):
    """Logs cut mid-record (the processes were killed): every rank still gets its report."""
    folder = tmp_path / "trace"
    folder.mkdir()
    for source in sorted((TRACES / "distributed").glob("*.log.gz")):
        data = gzip.decompress(source.read_bytes())
        (folder / source.name.removesuffix(".gz")).write_bytes(data[: len(data) * 2 // 3])
    result = run(folder, "-o", tmp_path / "out", "--no-browser")
    assert result.exit_code == 0 and "Traceback" not in result.output
    index = (tmp_path / "out" / "index.html").read_text()
    assert 'href="rank_0/index.html"' in index and 'href="rank_1/index.html"' in index
    for rank in (0, 1):
        directory = read_json(tmp_path / "out" / f"rank_{rank}" / "compile_directory.json")
        assert "[0/0]" in directory and "[1/0]" in directory


def test_real_two_rank_trace_every_compile_id_present(tmp_path, report_of):
    landing, out = landing_of(tmp_path, TRACES / "distributed")
    for result in landing.ranks:
        single, _ = report_of(sorted((TRACES / "distributed").glob(f"*rank_{result.rank}_*"))[0])
        # every compile (not the [-/-] bucket of records outside any compile)
        assert result.compile_ids == list(dict.fromkeys(str(k.frame_key()) for k in single.directory if k is not None and k.frame_id is not None))
    assert not landing.diverges
    assert broken_links(out) == []


def test_cli_errors(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run(empty, "--all-ranks-html", "-o", tmp_path / "o1", "--no-browser")
    assert result.exit_code == 2 and "No rank log files found" in result.stderr
    result = run(empty, "--all-ranks-html", "--latest", "-o", tmp_path / "o2", "--no-browser")
    assert result.exit_code == 2 and "--latest cannot be used with --all-ranks-html" in result.stderr
    log = write_log(tmp_path / "a.log", [line({"export": {}})])
    result = run(log, "--all-ranks-html", "-o", tmp_path / "o3", "--no-browser")
    assert result.exit_code == 2 and "must be a folder" in result.stderr
    with pytest.raises(InputError):
        multirank.discover(empty, Options())


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared corpus not present")
def test_tlparse_multi_rank_anchors(tmp_path):
    """tlparse's tests 21, 24 (pristine fixture: pids 0-3), 31/33, 36 and 40 on the same inputs."""
    result = run(CORPUS / "multi_rank_logs", "--all-ranks-html", "-o", tmp_path / "logs", "--no-browser")
    assert "Multi-rank report generated" in result.output and str(tmp_path / "logs") in result.output
    events = read_json(tmp_path / "logs" / "chromium_events.json")
    assert {e["pid"] for e in events} == {0, 1, 2, 3}
    for rank in range(4):
        assert len(read_json(tmp_path / "logs" / f"rank_{rank}" / "chromium_events.json")) == sum(e["pid"] == rank for e in events)
    schedules = read_json(run_and_path(tmp_path, "multi_rank_schedule") / "collective_schedules.json")
    by_rank = {s["rank"]: s["ops"] for s in schedules if s["graph"] == "-_0_0_0"}
    assert by_rank[0] == by_rank[2] != by_rank[1] and len(by_rank[0]) == 6 and len(by_rank[1]) == 4
    runtime_index = (run_and_path(tmp_path, "multi_rank_runtime") / "index.html").read_text()
    assert "Graph Runtime Analysis".lower() in runtime_index.lower() and "ms delta" in runtime_index
    parity = read_json(run_and_path(tmp_path, "collectives_parity") / "rank_0" / "collectives_parity.json")
    assert sorted((g["graph"], g["compile_id"], g["offset"], g["missing_waits"]) for g in parity["graphs"]) == [
        ("-_0_0_0", "[0/0]", 0, 1), ("-_0_1_0", "[0/1]", 0, 3)
    ]


def run_and_path(tmp_path, case):
    out = tmp_path / case
    assert run(CORPUS / case, "--all-ranks-html", "-o", out, "--no-browser").exit_code == 0
    return out


def test_parallel_and_serial_give_the_same_reports(tmp_path):
    folder = tmp_path / "trace"
    folder.mkdir()
    for rank in range(3):
        rank_log(folder, rank, compile_lines() + compile_lines(rank + 1, 0))
    jobs = multirank.discover(folder, Options())
    serial = multirank.build_all(jobs, tmp_path / "serial", workers=1)
    parallel = multirank.build_all(jobs, tmp_path / "parallel", workers=2)
    assert [r.compile_ids for r in serial] == [r.compile_ids for r in parallel]
    assert serial == parallel and all(r.summary is not None for r in parallel)  # typed results come back from the workers whole
    assert (tmp_path / "serial" / "rank_2" / "compile_directory.json").read_text() == (tmp_path / "parallel" / "rank_2" / "compile_directory.json").read_text()
    shutil.rmtree(tmp_path / "serial")


def test_fingerprints_only_for_the_multi_rank_comparison(tmp_path):
    """Fingerprinting every graph is costly and only the landing page's comparison reads it: a
    one-log analysis skips it, every rank of an --all-ranks-html report has it."""
    import tlparse_py

    log = next((TRACES / "distributed").glob("*rank_0*.log.gz"))
    single = tlparse_py.analyze(log)
    assert single.distributed.fingerprints == {}
    assert single.distributed.code_collectives  # the other distributed facts are still noted
    landing, _ = landing_of(tmp_path, TRACES / "distributed")
    fingerprint = landing.ranks[0].distributed.fingerprints["[4/0]"]
    assert set(fingerprint.graphs) == {"dynamo", "post_grad", "output_code"} and fingerprint.inputs
