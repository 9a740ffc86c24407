"""Facts of the issue-11/13 harness traces, read straight off the raw log text.

Each test parses the committed fixture itself (glog header, JSON envelope, TAB payload lines)
with the small helper below, never through tlparse_py's reader, so these facts hold whatever
the reader does. No torch needed. If the fixtures are regenerated with another torch, these
are the numbers to re-read.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import TRACES

GLOG = re.compile(r"^[VIWEC](\d{4}) (\d\d:\d\d:\d\d\.\d+) +(\d+) ([^:\]]+):(\d+)\] (\{.*\})$")
CONTEXT = {"rank", "compiled_autograd_id", "frame_id", "frame_compile_id", "attempt", "has_payload", "stack",
           "subgraph_name"}


@dataclass
class Rec:
    """One record: its envelope, its kind (first non-context key), its payload text."""

    env: dict
    pid: int
    lines: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"Rec({self.kind} {self.cid} {self.name})".replace("  ", " ")

    @property
    def payload(self) -> str:
        return "\n".join(self.lines)

    @property
    def kind(self) -> str:
        return next((k for k in self.env if k not in CONTEXT), "")

    @property
    def body(self):
        return self.env.get(self.kind)

    @property
    def cid(self) -> str:
        """The compile id as tlparse shows it: [frame/compile] with _attempt when non-zero."""
        env = self.env
        if env.get("frame_id") is None and env.get("compiled_autograd_id") is None:
            return ""
        ca = f"!{env['compiled_autograd_id']}/" if env.get("compiled_autograd_id") is not None else ""
        frame = "-" if env.get("frame_id") is None else env["frame_id"]
        fcid = "-" if env.get("frame_compile_id") is None else env["frame_compile_id"]
        attempt = f"_{env['attempt']}" if env.get("attempt") else ""
        return f"[{ca}{frame}/{fcid}{attempt}]"

    @property
    def name(self) -> str:
        """An artifact's or chromium event's name, else ""."""
        return self.body.get("name", "") if isinstance(self.body, dict) else ""


def read_text(log: Path) -> str:
    data = log.read_bytes()
    if log.name.endswith(".gz"):
        data = gzip.decompress(data)
    return data.decode("utf-8")


def parse(log: Path) -> list[Rec]:
    """Every record of `log`; a header that is not glog+JSON fails the test."""
    recs: list[Rec] = []
    for line in read_text(log).split("\n"):
        if line.startswith("\t"):
            assert recs, "payload line before any header"
            recs[-1].lines.append(line[1:])
        elif line:
            m = GLOG.match(line)
            assert m, f"not a glog record header: {line[:120]!r}"
            recs.append(Rec(json.loads(m.group(6)), int(m.group(3))))
    return recs


def logs(scenario: str) -> list[Path]:
    """The scenario's fixture files, in the order of the README table (creation order)."""
    readme = (TRACES / "README.md").read_text(encoding="utf-8")
    names = re.findall(rf"^\| {scenario} \| `([^`]+)`", readme, flags=re.M)
    assert names, f"no fixture rows for {scenario}"
    return [TRACES / scenario / n for n in names]


def kind(recs: list[Rec], k: str) -> list[Rec]:
    return [r for r in recs if r.kind == k]


def artifacts(recs: list[Rec], name: str) -> list[Rec]:
    return [r for r in recs if r.kind == "artifact" and r.name == name]


def compile_ids(recs: list[Rec], k: str) -> list[str]:
    return [r.cid for r in kind(recs, k)]


SCENARIOS = ["reset_reuse", "train_warm", "hops", "export_failure", "killed_midcompile", "recompile_limit",
             "gb_base", "gb_extra"]


def test_parser_checks_payload_md5s():
    """The helper reads every fixture of this file whole, and each payload matches its md5."""
    import hashlib

    for scenario in SCENARIOS:
        for log in logs(scenario):
            for r in parse(log):
                if "has_payload" in r.env:
                    assert hashlib.md5(r.payload.encode()).hexdigest() == r.env["has_payload"], (log, r.kind)


# ------------------------------------------------------------------------- reset_reuse


def test_reset_reuse_logs_compile_id_0_0_twice():
    (log,) = logs("reset_reuse")
    recs = parse(log)
    assert compile_ids(recs, "dynamo_start") == ["[0/0]", "[0/0]"]
    assert compile_ids(recs, "compilation_metrics") == ["[0/0]", "[0/0]"]
    metrics = [r.body for r in kind(recs, "compilation_metrics")]
    assert [m["co_name"] for m in metrics] == ["first_fn", "second_fn"]
    assert metrics[0]["co_firstlineno"] != metrics[1]["co_firstlineno"]
    assert all(m["fail_type"] is None for m in metrics)
    # the second dynamo_start comes after the first id's compilation_metrics
    order = [r.kind for r in recs if r.kind in ("dynamo_start", "compilation_metrics")]
    assert order == ["dynamo_start", "compilation_metrics", "dynamo_start", "compilation_metrics"]
    # the frames are different functions, seen at the top of each dynamo_start stack
    tops = [r.body["stack"][-1]["name"] for r in kind(recs, "dynamo_start")]
    assert tops == ["first_fn", "second_fn"]
    # and the graphs differ: sin in the first, a matmul in the second
    graphs = [r.payload for r in kind(recs, "dynamo_output_graph")]
    assert len(graphs) == 2 and "sin" in graphs[0] and "matmul" in graphs[1] and "matmul" not in graphs[0]


# ------------------------------------------------------------------------- train_warm


def test_train_warm_cold_then_warm():
    cold, warm = (parse(log) for log in logs("train_warm"))
    assert len({r.pid for r in cold} | {r.pid for r in warm}) == 2  # two processes
    # cold: forward compiled at the call, backward lazily at .backward(): one bwd_compilation_metrics
    assert compile_ids(cold, "compilation_metrics") == ["[0/0]"]
    (bwd,) = kind(cold, "bwd_compilation_metrics")
    assert bwd.cid == "[0/0]" and bwd.body["compile_id"] == "0/0"
    assert isinstance(bwd.body["inductor_compile_time_s"], float) and bwd.body["inductor_compile_time_s"] > 0
    assert bwd.body["fail_type"] is None
    # cold misses both caches, forward and backward graph each miss the FX graph cache
    assert len(artifacts(cold, "fx_graph_cache_miss")) == 2 and len(artifacts(cold, "aotautograd_cache_miss")) == 1
    assert not artifacts(cold, "fx_graph_cache_hit") and not artifacts(cold, "aotautograd_cache_hit")
    # warm hits: the AOTAutograd entry carries the backward, so no lazy backward compile is logged
    assert compile_ids(warm, "compilation_metrics") == ["[0/0]"]
    assert kind(warm, "bwd_compilation_metrics") == []
    assert len(artifacts(warm, "fx_graph_cache_hit")) == 2 and len(artifacts(warm, "aotautograd_cache_hit")) == 1
    assert not artifacts(warm, "fx_graph_cache_miss") and not artifacts(warm, "aotautograd_cache_miss")
    # ... though the warm log still shows the backward graph, logged from the cache entry
    assert compile_ids(cold, "aot_backward_graph") == compile_ids(warm, "aot_backward_graph") == ["[0/0]"]


# ------------------------------------------------------------------------- hops


def test_hops_subgraphs():
    (log,) = logs("hops")
    recs = parse(log)
    metrics = kind(recs, "compilation_metrics")
    assert [(r.cid, r.body["co_name"], r.body["fail_type"]) for r in metrics] == [
        ("[0/0]", "use_cond", None),
        ("[1/0]", "use_while_loop", None),
        ("[2/0]", "use_nested_region", None),
        ("[3/0]", "use_flex_attention", None),
    ]
    dynamo = {r.cid: r.payload for r in kind(recs, "dynamo_output_graph")}
    assert "torch.ops.higher_order.cond" in dynamo["[0/0]"]
    assert {"cond_true_0", "cond_false_0"} <= set(re.findall(r"\w+", dynamo["[0/0]"]))
    assert "torch.ops.higher_order.while_loop" in dynamo["[1/0]"]
    assert {"cond_fn_0", "body_fn_0"} <= set(re.findall(r"\w+", dynamo["[1/0]"]))
    assert "torch.ops.higher_order.invoke_subgraph" in dynamo["[2/0]"]
    assert {"subgraph_0", "subgraph_1"} <= set(re.findall(r"\w+", dynamo["[2/0]"]))
    assert "torch.ops.higher_order.flex_attention" in dynamo["[3/0]"]
    assert {"score_mod_0", "mask_fn_0"} <= set(re.findall(r"\w+", dynamo["[3/0]"]))
    # after AOTAutograd the subgraphs are renamed
    aot = {r.cid: r.payload for r in kind(recs, "aot_inference_graph")}
    assert {"true_graph_0", "false_graph_0"} <= set(re.findall(r"\w+", aot["[0/0]"]))
    assert {"while_loop_cond_graph_0", "while_loop_body_graph_0"} <= set(re.findall(r"\w+", aot["[1/0]"]))
    assert "repeated_subgraph0" in aot["[2/0]"]
    assert {"sdpa_score0", "sdpa_mask0"} <= set(re.findall(r"\w+", aot["[3/0]"]))
    assert sorted(r.cid for r in kind(recs, "inductor_output_code")) == ["[0/0]", "[1/0]", "[2/0]", "[3/0]"]


# ------------------------------------------------------------------------- export_failure


def test_export_failure_constraint_violation():
    (log,) = logs("export_failure")
    recs = parse(log)
    (metrics,) = kind(recs, "compilation_metrics")
    body = metrics.body
    assert metrics.cid == "" and body["compile_id"] is None and body["co_name"] is None
    assert body["fail_type"] == "ConstraintViolationError"
    reason = body["fail_reason"]
    assert reason.startswith("Constraints violated (n)!")
    assert "satisfy the generated guard 3 <= L['x'].size()[0] and L['x'].size()[0] <= 64" in reason
    assert "n = Dim('n', min=3, max=64)" in reason
    # both exports (non-strict, then strict through Dynamo) guard on the branch: s.. > 2
    guards = [r.body["expr"] for r in kind(recs, "guard_added_fast")]
    assert len(guards) == 2 and all(re.fullmatch(r"s\d+ > 2", g) for g in guards)
    created = [(r.body["vr"], r.body["source"]) for r in kind(recs, "create_symbol")]
    assert created == [("[2, 64]", "L['x'].size()[0]"), ("[2, 64]", "L['flat_args'][0].size()[0]")]
    # strict export runs Dynamo on frame 0 but logs no dynamo_start; only TORCH_TRACE records
    assert kind(recs, "dynamo_start") == [] and compile_ids(recs, "dynamo_output_graph") == ["[0/0]"]
    assert kind(recs, "export") == [] and kind(recs, "expression_created") == []


# ------------------------------------------------------------------------- killed_midcompile


def test_killed_midcompile_ends_inside_compile_1_0():
    (log,) = logs("killed_midcompile")
    recs = parse(log)
    assert compile_ids(recs, "dynamo_start") == ["[0/0]", "[1/0]"]
    assert compile_ids(recs, "compilation_metrics") == ["[0/0]"]
    assert [r.cid for r in recs if r.cid][-1] == "[1/0]"
    assert compile_ids(recs, "inductor_output_code") == ["[0/0]"]
    # [1/0] got as far as Inductor's post-grad graph, then codegen killed the process
    last = [r.name or r.kind for r in recs if r.cid == "[1/0]" and r.kind != "chromium_event"]
    assert last[0] == "dynamo_start" and last[-1] == "inductor_post_grad_graph"
    # chromium "B" events of [1/0] without their "E": the compile was never finished
    phases = [json.loads(r.payload)["ph"] for r in recs if r.kind == "chromium_event" and r.cid == "[1/0]"]
    assert phases.count("B") > phases.count("E")
    assert read_text(log).endswith("\n")  # the last record was written whole


# ------------------------------------------------------------------------- recompile_limit


def test_recompile_limit_hit_on_third_dtype():
    (log,) = logs("recompile_limit")
    recs = parse(log)
    assert compile_ids(recs, "dynamo_start") == ["[0/0]", "[0/1]"]
    metrics = kind(recs, "compilation_metrics")
    assert [r.cid for r in metrics] == ["[0/0]", "[0/1]", "[0/2]"]
    assert [m.body["fail_type"] for m in metrics] == [None, None, "Unsupported"]
    limit = metrics[2].body
    assert limit["fail_reason"].startswith("Dynamo recompile limit exceeded")
    assert "currently set to 2" in limit["fail_reason"]
    assert limit["co_name"] is None and limit["compile_id"] == "0/2"
    assert [m.body["co_name"] for m in metrics[:2]] == ["scale", "scale"]
    reasons = [r.payload for r in artifacts(recs, "recompile_reasons")]
    assert [r.cid for r in artifacts(recs, "recompile_reasons")] == ["[0/1]", "[0/2]"]
    assert "dtype mismatch. expected Float, actual Double" in reasons[0]
    assert "expected Double, actual Half" in reasons[1] and "expected Float, actual Half" in reasons[1]


# ------------------------------------------------------------------------- gb_base / gb_extra


def frames(recs: list[Rec]) -> list[tuple[str, str, int]]:
    """(compile id, co_name, co_firstlineno) of each compilation_metrics."""
    return [(r.cid, r.body["co_name"], r.body["co_firstlineno"]) for r in kind(recs, "compilation_metrics")]


def user_stack(rec: Rec, files: dict[int, str]) -> list[tuple[str, str, int]]:
    """A dynamo_start stack as (file base name, function, line), the outermost frame dropped
    (the scenario's own wrapper: gb_base.py or gb_extra.py)."""
    return [(files[f["filename"]].rsplit("/", 1)[-1], f["name"], f["line"]) for f in rec.body["stack"][1:]]


def string_table(recs: list[Rec]) -> dict[int, str]:
    return {r.body[1]: r.body[0] for r in kind(recs, "str")}


def test_gb_pair_differs_by_one_graph_break():
    (base_log,) = logs("gb_base")
    (extra_log,) = logs("gb_extra")
    base, extra = parse(base_log), parse(extra_log)
    assert frames(base) == [
        ("[0/0_1]", "step", 34),
        ("[1/0_1]", "prepare", 21),
        ("[2/0]", "torch_dynamo_resume_in_prepare_at_23", 23),
        ("[3/0]", "torch_dynamo_resume_in_step_at_35", 35),
    ]
    assert frames(extra) == frames(base)[:3] + [
        ("[3/0_1]", "torch_dynamo_resume_in_step_at_35", 35),
        ("[4/0_1]", "head", 27),
        ("[5/0]", "torch_dynamo_resume_in_head_at_30", 30),
        ("[6/0]", "torch_dynamo_resume_in_step_at_35", 35),
    ]
    # a break restarts the analysis: the break is logged at attempt 0, the metrics at attempt 1
    breaks = lambda recs: [r.cid for r in artifacts(recs, "dynamo_graph_break_reason")]  # noqa: E731
    assert breaks(base) == ["[0/0]", "[1/0]"]
    assert breaks(extra) == ["[0/0]", "[1/0]", "[3/0]", "[4/0]"]
    restarts = lambda recs: {r.cid: len(r.body["restart_reasons"]) for r in kind(recs, "compilation_metrics")}  # noqa: E731
    assert restarts(base) == {"[0/0_1]": 1, "[1/0_1]": 1, "[2/0]": 0, "[3/0]": 0}
    assert restarts(extra) == {"[0/0_1]": 1, "[1/0_1]": 1, "[2/0]": 0, "[3/0_1]": 1, "[4/0_1]": 1, "[5/0]": 0, "[6/0]": 0}
    # both breaks are the user's torch._dynamo.graph_break()
    reasons = [r.body["restart_reasons"][0] for r in kind(extra, "compilation_metrics") if r.body["restart_reasons"]]
    assert all(reason.startswith("Call to `torch._dynamo.graph_break()`") for reason in reasons)
    # same program file, same user stacks for the frames both logs have
    base_files, extra_files = string_table(base), string_table(extra)
    base_stacks = [user_stack(r, base_files) for r in kind(base, "dynamo_start")]
    extra_stacks = [user_stack(r, extra_files) for r in kind(extra, "dynamo_start")]
    assert extra_stacks[:4] == base_stacks
    assert base_stacks[0][-1] == ("gb_program.py", "step", 34)
    assert [r.body["stack"][0]["line"] for r in kind(base + extra, "dynamo_start")] == [13] * 11
    # graph op counts: the extra break empties [3/0]'s graph and moves its ops into [4/0]..[6/0]
    ops = lambda recs: [r.body["graph_op_count"] for r in kind(recs, "compilation_metrics")]  # noqa: E731
    assert ops(base) == [0, 1, 1, 4]
    assert ops(extra) == [0, 1, 1, 0, 1, 2, 1]


# ------------------------------------------------------------------------- collectives


def ranks(scenario: str) -> list[list[Rec]]:
    """The scenario's two rank logs, rank 0 first; every record but the string table and the
    torch_version artifact (written before the process group existed) carries its rank."""
    out = [parse(log) for log in logs(scenario)]
    assert len(out) == 2
    for rank, recs in enumerate(out):
        records = [r for r in recs if r.kind != "str"]
        assert [r.name for r in records if "rank" not in r.env] == ["torch_version"]
        assert {r.env.get("rank") for r in records if r.name != "torch_version"} == {rank}
    return out


def summary(recs: list[Rec]) -> list[tuple]:
    """(compile id, co_name, graph_op_count, fail_type) of each compilation_metrics."""
    return [(r.cid, r.body["co_name"], r.body["graph_op_count"], r.body["fail_type"])
            for r in kind(recs, "compilation_metrics")]


def collective_payloads(recs: list[Rec]) -> list[tuple[str, str]]:
    return [(r.cid, r.payload) for r in artifacts(recs, "compiler_collective")]


def graph_sizes(recs: list[Rec]) -> list[tuple[str, dict]]:
    return [(r.cid, r.body["sizes"]) for r in kind(recs, "dynamo_output_graph")]


def test_collectives_sync_one_dynamic_graph_from_different_sizes():
    rank0, rank1 = ranks("collectives")
    for recs in (rank0, rank1):
        # the collective restarts the analysis: dynamo_start at attempt 0, graph and metrics at attempt 1
        assert compile_ids(recs, "dynamo_start") == ["[0/0]"]
        assert summary(recs) == [("[0/0_1]", "sync_fn", 2, None)]
        (restart,) = kind(recs, "compilation_metrics")[0].body["restart_reasons"]
        assert "CompileCollectiveRestartAnalysis" in restart
        assert graph_sizes(recs) == [("[0/0_1]", {"l_x_": ["s77"], "sin": ["s77"], "add": ["s77"]})]
    # what differs per rank: the local state each one contributed, and its symbol's hint
    assert collective_payloads(rank0) == [("[0/0]", "L['x']: tensor size=[4] stride=[1]")]
    assert collective_payloads(rank1) == [("[0/0]", "L['x']: tensor size=[5] stride=[1]")]
    assert [(r.body["symbol"], r.body["val"]) for r in kind(rank0, "create_symbol")] == [("s77", "4")]
    assert [(r.body["symbol"], r.body["val"]) for r in kind(rank1, "create_symbol")] == [("s77", "5")]


def test_collectives_desync_same_id_different_code():
    rank0, rank1 = ranks("collectives_desync")
    assert compile_ids(rank0, "dynamo_start") == compile_ids(rank1, "dynamo_start") == ["[0/0]", "[1/0]"]
    assert summary(rank0) == [("[0/0_1]", "sync_fn", 2, None), ("[1/0_1]", "rank0_fn", 2, None)]
    assert summary(rank1) == [("[0/0_1]", "sync_fn", 2, None), ("[1/0_1]", "rank1_fn", 3, None)]
    assert dict(graph_sizes(rank0))["[1/0_1]"] == {"l_x_": ["s77"], "sin": ["s77"], "add": ["s77"]}
    assert dict(graph_sizes(rank1))["[1/0_1]"] == {"l_x_": ["s77"], "cos": ["s77"], "mul": ["s77"], "sum_1": []}
    tops = lambda recs: [r.body["stack"][-1]["name"] for r in kind(recs, "dynamo_start")]  # noqa: E731
    assert tops(rank0) == ["sync_fn", "rank0_fn"] and tops(rank1) == ["sync_fn", "rank1_fn"]
    # one collective per compile on each rank, so the ranks stay in step though the code differs
    assert [c for c, _ in collective_payloads(rank0)] == [c for c, _ in collective_payloads(rank1)] == ["[0/0]", "[1/0]"]
    # rank0_fn's graph is sync_fn's: rank 0 finds it in the FX graph / AOTAutograd caches
    assert [r.cid for r in artifacts(rank0, "fx_graph_cache_hit")] == ["[1/0_1]"]
    assert [r.cid for r in artifacts(rank0, "aotautograd_cache_hit")] == ["[1/0_1]"]
    assert artifacts(rank1, "fx_graph_cache_hit") == []


def test_collectives_gloo_fail_type_error_on_every_rank():
    for rank, recs in enumerate(ranks("collectives_gloo_fail")):
        assert compile_ids(recs, "dynamo_start") == ["[0/0]"]
        assert summary(recs) == [("[0/0]", "sync_fn", None, "TypeError")]
        body = kind(recs, "compilation_metrics")[0].body
        assert body["fail_reason"] == "sequence item 0: expected str instance, torch.device found"
        assert collective_payloads(recs) == [("[0/0]", f"L['x']: tensor size=[{4 + rank}] stride=[1]")]
        (error,) = artifacts(recs, "dynamo_error")
        assert error.cid == "[0/0]" and "run_compiler_collective" in error.payload
        assert "\nTypeError: sequence item 0: expected str instance, torch.device found\n" in error.payload
        assert kind(recs, "dynamo_output_graph") == []  # failed before any graph was logged


def test_collectives_shapes_static_graph_per_rank():
    rank0, rank1 = ranks("collectives_shapes")
    for recs in (rank0, rank1):
        assert summary(recs) == [("[0/0]", "sync_fn", 2, None)]
        assert artifacts(recs, "compiler_collective") == [] and kind(recs, "create_symbol") == []
    assert graph_sizes(rank0) == [("[0/0]", {"l_x_": [4], "sin": [4], "add": [4]})]
    assert graph_sizes(rank1) == [("[0/0]", {"l_x_": [5], "sin": [5], "add": [5]})]
    sizes = lambda recs: [r.body["size"] for r in kind(recs, "describe_tensor")]  # noqa: E731
    assert sizes(rank0) == [[4]] and sizes(rank1) == [[5]]


# ------------------------------------------------------------------------- runner: expect_killed


KILLS_ITSELF = """
import os, signal
trace = os.environ["TORCH_TRACE"]
os.makedirs(trace, exist_ok=True)
with open(os.path.join(trace, "dedicated_log_torch_trace_fake.log"), "w") as f:
    f.write('V1202 12:00:00.000000 1 torch/_dynamo/convert_frame.py:1] {"dynamo_start": {"stack": []}}\\n')
if os.environ.get("FAKE_EXIT") != "clean":
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("exit_mode, status", [("killed", "ok"), ("clean", "FAILED")])
def test_runner_takes_sigkill_as_success_for_expect_killed(tmp_path, monkeypatch, exit_mode, status):
    """No torch: a stand-in program that writes a log line, then kills itself (or exits 0)."""
    from tlparse_py.harness import registry, runner

    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "fake_killed.py").write_text(KILLS_ITSELF)
    monkeypatch.setattr(registry, "SCENARIO_DIR", tmp_path / "scenarios")
    monkeypatch.setenv("FAKE_EXIT", exit_mode)
    scenario = registry.Scenario("fake_killed", "test", expect_killed=True, expect=('{"dynamo_start": ',))
    result = runner.run_scenario(scenario, tmp_path / "out", "cpu", timeout=60)
    try:
        assert result.status == status, result.problem
        assert len(result.logs) == 1
        if status == "FAILED":
            assert result.returncode == 0 and "expected death by SIGKILL" in result.problem
    finally:
        runner.cleanup(result)


def test_killed_midcompile_is_declared_expect_killed():
    from tlparse_py.harness.registry import BY_NAME

    assert [s.name for s in BY_NAME.values() if s.expect_killed] == ["killed_midcompile"]
