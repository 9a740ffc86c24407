"""Exact model-level facts of each committed harness trace, read off the traces themselves.

If the fixtures are regenerated with another torch, these are the numbers to re-read (and the
diff is the changelog of what torch now logs).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import TRACES


def fixture(scenario: str, marker: str = "") -> Path:
    logs = sorted(p for p in (TRACES / scenario).iterdir() if p.name.startswith("dedicated_log") and marker in p.name)
    assert logs, f"no fixture for {scenario}"
    return logs[0]


def by_label(report):
    return {str(k): k for k in report.directory}


def statuses(report):
    return {str(k): report.status_of(k) for k in report.directory if k is not None and k.frame_id is not None}


def suffixes(report, label):
    return "".join(a.suffix for a in report.directory[by_label(report)[label]])


def first_lines(report):
    return [(str(r.compile_id), r.failure_type, r.description.splitlines()[0]) for r in report.failures]


def file_kinds(report, label):
    return {a.kind for a in report.directory[by_label(report)[label]]}


def test_inference(report_of):
    report, out = report_of(fixture("inference"))
    assert [str(k) for k in report.directory] == ["[0/0]", "[-/-]"]
    assert statuses(report) == {"[0/0]": "ok"}
    assert suffixes(report, "[0/0]") == "❌❌"  # AOTAutograd cache miss, FX graph cache miss
    assert report.failures == []
    assert {"aot_inference_graph", "inductor_output_code", "compilation_metrics"} <= file_kinds(report, "[0/0]")
    assert report.metrics[by_label(report)["[0/0]"]][0].get("co_name") == "forward"
    assert report.metrics[by_label(report)["[0/0]"]][0].get("graph_op_count") == 5


def test_training(report_of):
    report, _ = report_of(fixture("training"))
    assert statuses(report) == {"[0/0]": "ok"}
    assert suffixes(report, "[0/0]") == "❌❌❌"
    assert {"aot_joint_graph", "aot_forward_graph", "aot_backward_graph", "bwd_compilation_metrics"} <= file_kinds(report, "[0/0]")


def test_graph_break(report_of):
    report, _ = report_of(fixture("graph_break"))
    assert [str(k) for k in report.directory] == ["[0/0]", "[-/-]", "[0/0_1]", "[1/0]", "[1/0_1]", "[2/0]", "[2/0_1]", "[3/0]", "[4/0]"]
    assert statuses(report) == {
        "[0/0]": "break", "[0/0_1]": "break", "[1/0]": "break", "[1/0_1]": "break",
        "[2/0]": "break", "[2/0_1]": "break", "[3/0]": "ok", "[4/0]": "ok",
    }
    assert first_lines(report) == [
        ("[0/0_1]", "RestartAnalysis", "Failed to trace builtin operator"),
        ("[1/0_1]", "RestartAnalysis", "Failed to trace builtin operator"),
        ("[2/0_1]", "RestartAnalysis", "Call to `torch._dynamo.graph_break()`"),
    ]
    names = [m.get("co_name") for entries in report.metrics.values() for m in entries]
    assert names == ["fn", "helper", "torch_dynamo_resume_in_helper_at_23", "torch_dynamo_resume_in_helper_at_25", "torch_dynamo_resume_in_fn_at_32"]
    breaks = [a.url for arts in report.directory.values() for a in arts if "dynamo_graph_break_reason" in a.url]
    assert len(breaks) == 3


def test_recompile(report_of):
    report, out = report_of(fixture("recompile"))
    assert [str(k) for k in report.directory] == ["[0/0]", "[-/-]", "[0/1]", "[0/2]", "[1/0]", "[1/1]", "[1/2]", "[1/3]"]
    assert statuses(report) == {"[0/0]": "ok", "[0/1]": "ok", "[0/2]": "ok", "[1/0]": "ok", "[1/1]": "ok", "[1/2]": "ok", "[1/3]": "limit"}
    assert first_lines(report) == [("[1/3]", "Unsupported", "Dynamo recompile limit exceeded")]
    reasons = {
        str(k): (out / a.url).read_text()
        for k, arts in report.directory.items()
        for a in arts
        if a.name.startswith("recompile_reasons")
    }
    assert list(reasons) == ["[0/1]", "[0/2]", "[1/1]", "[1/2]", "[1/3]"]
    assert reasons["[0/1]"] == "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8"
    assert "0/1: tensor 'x' dtype mismatch. expected Float, actual Double" in reasons["[0/2]"]
    assert reasons["[1/1]"].startswith("1/0: tag == 'a'")
    assert report.kinds[by_label(report)["[0/1]"]]["create_symbol"] >= 1  # automatic dynamic kicked in


def test_failure(report_of):
    report, _ = report_of(fixture("failure"))
    assert statuses(report) == {"[0/0]": "error", "[1/0]": "error", "[2/0]": "error"}
    assert first_lines(report) == [
        ("[0/0]", "BackendCompilerFailed", "backend='exploding_backend' raised:"),
        ("[1/0]", "Unsupported", "Call to `torch._dynamo.graph_break()`"),
        ("[2/0]", "BackendCompilerFailed", "backend='exploding_backend' raised:"),
    ]
    assert "HarnessBackendError: harness: backend refuses graph with 4 nodes" in report.failures[0].description


def test_cache_misses_then_hits(report_of):
    logs = sorted((TRACES / "cache").glob("dedicated_log*"), key=lambda p: p.stat().st_size)
    sequences = sorted(suffixes(report_of(log)[0], "[0/0]") for log in logs)
    assert sequences == ["✅✅✅", "❌❌❌"]  # cold cache: FX, AOT and backward misses; warm: hits


def test_compiled_autograd(report_of):
    report, out = report_of(fixture("compiled_autograd"))
    labels = [str(k) for k in report.directory]
    assert labels == ["[0/0]", "[-/-]", "[0/0_1]", "[!0/-/-]", "[!0/1/0]", "[2/0]", "[0/1]", "[0/1_1]", "[!1/-/-]", "[!1/3/0]"]
    assert file_kinds(report, "[!0/-/-]") == {"artifact", "compiled_autograd_graph"}
    assert statuses(report)["[!1/3/0]"] == "ok"
    assert suffixes(report, "[!0/1/0]") == "❓❌"
    dump_files = sorted(p.relative_to(out).as_posix() for p in (out / "dump_file").iterdir())
    assert dump_files == ["dump_file/eval_with_key_27.html", "dump_file/eval_with_key_7.html"]


def test_unbacked(report_of):
    report, _ = report_of(fixture("unbacked"))
    keys = by_label(report)
    assert statuses(report) == {"[0/0]": "ok", "[1/0]": "ok"}
    assert report.kinds[keys["[0/0]"]]["create_unbacked_symbol"] == 3
    assert report.kinds[keys["[1/0]"]]["create_unbacked_symbol"] == 5


@pytest.mark.parametrize("marker, rank", [("rank_0", 0), ("rank_1", 1)])
def test_distributed_rank_logs(report_of, marker, rank):
    report, _ = report_of(fixture("distributed", marker))
    assert report.rank == rank and report.stats["other_rank"] == 0
    assert statuses(report)["[4/0]"] == "ok"
    children = [a.name for arts in report.directory.values() for a in arts if a.kind == "optimize_ddp_split_child"]
    assert len(children) == 3
    assert suffixes(report, "[4/0]") == "❓❌❓❌❓✅❌✅❌"


def test_transformer(report_of):
    report, _ = report_of(fixture("transformer"))
    assert [str(k) for k in report.directory] == ["[0/0]", "[-/-]", "[0/1]"]
    assert statuses(report) == {"[0/0]": "ok", "[0/1]": "ok"}
    assert report.recompile_reasons_of(by_label(report)["[0/1]"]) == ["0/0: tensor 'args[0]' size mismatch at index 1. expected 4, actual 8"]
    assert suffixes(report, "[0/0]") == "❌❌❌" and suffixes(report, "[0/1]") == "❌❌❌"
    assert {"aot_joint_graph", "aot_forward_graph", "aot_backward_graph", "bwd_compilation_metrics"} <= file_kinds(report, "[0/0]")
    assert {"aot_joint_graph", "aot_forward_graph", "aot_backward_graph"} <= file_kinds(report, "[0/1]")
