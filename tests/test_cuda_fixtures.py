"""The CUDA traces (torch 2.11 on an H200: tlparse_py/harness/scenarios/{triton,cudagraphs,autotune,cuda_training}.py)
read as every trace is: each fact checked against the raw log, on a machine without a GPU."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

import tlparse_py
from logs import envelopes_of

TRACES = Path(__file__).parent / "fixtures" / "traces"


def raw_text(scenario: str) -> str:
    (log,) = sorted((TRACES / scenario).glob("dedicated_log*"))
    data = log.read_bytes()
    return (gzip.decompress(data) if log.suffix == ".gz" else data).decode("utf-8")


def raw_records(scenario: str, kind: str) -> list[dict]:
    """Every `kind` envelope of the raw log."""
    return envelopes_of(TRACES / scenario, kind)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    out = tmp_path_factory.mktemp("cuda")
    return {name: (out / name, tlparse_py.build(TRACES / name, out / name)) for name in ("triton", "cudagraphs", "autotune", "cuda_training")}


def chromium_names(report: Path) -> list[str]:
    return [event.get("name") for event in json.loads((report / "chromium_events.json").read_text())]


def test_the_triton_kernels_are_in_the_output_code_page(reports):
    report, analysis = reports["triton"]
    kernels = len(re.findall(r"@triton\.jit", raw_text("triton")))
    assert kernels > 0
    [page] = list(report.glob("*/inductor_output_code_*.html"))
    assert page.read_text().count("triton.jit") >= kernels
    assert analysis.to_dict()["totals"]["failed"] == 0


@pytest.mark.parametrize("scenario, event", [("cudagraphs", "CUDAGraphNode.record"), ("autotune", "mm_template_autotuning")])
def test_cuda_only_events_reach_the_chromium_trace(reports, scenario, event):
    report, _ = reports[scenario]
    expected = len(re.findall(r'"name": "%s"' % re.escape(event), raw_text(scenario)))
    assert expected > 0 and chromium_names(report).count(event) == expected


def test_the_dynamic_recompile_on_cuda(reports):
    _, analysis = reports["cuda_training"]
    metrics = raw_records("cuda_training", "compilation_metrics")
    totals = analysis.to_dict()["totals"]
    assert totals["compiles"] == len(metrics) == 2
    assert totals["recompiles"] == sum(1 for m in metrics if not m["compile_id"].endswith("/0")) == 1
    forward = sum(m["entire_frame_compile_time_s"] for m in metrics)
    backward = sum(m["inductor_compile_time_s"] or 0 for m in raw_records("cuda_training", "bwd_compilation_metrics"))
    assert totals["compile_time_s"] == pytest.approx(forward + backward, abs=1e-5)
