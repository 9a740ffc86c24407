"""The raw facts of the `vllm_piecewise` harness fixture, read from the log alone.

The scenario (tlparse_py/harness/scenarios/vllm_piecewise.py) imitates vLLM's piecewise
compile on CPU and logs the records vLLM logs. These tests read the fixture line by line
(no tlparse_py parsing) so that the report's tests can rely on what the log holds. The
helpers are importable: `vllm_records(path)` gives the vLLM records (and torch's
`before_post_grad_graph`) in log order, each with its compile id.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

FIXTURE_DIR = Path(__file__).resolve().parent / "fixtures" / "traces" / "vllm_piecewise"

# The scenario's shape (keep in step with the scenario program).
PIECES = ("submod_0", "submod_2")  # the compiled pieces; submod_1 is the attention call
SPLITTING_SUBMODS = ("submod_1",)
COMPILE_SIZES = (4, 2)
RANGE = (1, 64)
PASSES = ("SinCosFusionPass", "SiluMulFusionPass")
CONFIG_FIELDS = (
    "model",
    "prefix",
    "mode",
    "backend",
    "custom_ops",
    "splitting_ops",
    "cudagraph_mode",
    "compile_sizes",
    "compile_ranges_endpoints",
    "use_inductor_graph_partition",
    "inductor_passes",
    "enabled_passes",
    "dynamic_shapes_type",
    "dynamic_shapes_evaluate_guards",
)
COMPILE_START_FIELDS = (
    "piecewise_index",
    "submod_name",
    "total_piecewise_compiles",
    "compile_range_start",
    "compile_range_end",
    "is_single_size",
    "is_cudagraph_capture_size",
)

# glog prefix: level letter, MMDD, time, thread id, file:line, "] ", then the JSON envelope.
_GLOG = re.compile(r"^[VIWEC]\d{4} [\d:.]+\s+\d+ \S+:\d+\] (\{.*)$")


@dataclass(frozen=True)
class Record:
    """One structured record: its envelope, payload and where it sits."""

    lineno: int  # 1-based line of the envelope
    envelope: dict
    payload: str  # the payload lines without their leading tab, joined by "\n"

    @property
    def kind(self) -> str:
        """The envelope's first key: "artifact", "graph_dump", "dynamo_start", ..."""
        return next(iter(self.envelope))

    @property
    def name(self) -> str | None:
        """`artifact` / `graph_dump` name, else None."""
        meta = self.envelope[self.kind]
        return meta.get("name") if isinstance(meta, dict) else None

    @property
    def compile_id(self) -> str | None:
        """"[frame/compile]" (with "_attempt" when the attempt is not 0), or None."""
        if "frame_id" not in self.envelope:
            return None
        cid = f"[{self.envelope['frame_id']}/{self.envelope['frame_compile_id']}]"
        attempt = self.envelope.get("attempt", 0)
        return f"{cid[:-1]}_{attempt}]" if attempt else cid

    @property
    def data(self):
        """The payload parsed as JSON (for `"encoding": "json"` artifacts)."""
        return json.loads(self.payload)


def log_path(fixture_dir: Path = FIXTURE_DIR) -> Path:
    """The scenario's one trace file (.log or .log.gz)."""
    logs = sorted(fixture_dir.glob("*.log*"))
    assert len(logs) == 1, logs
    return logs[0]


def read_lines(path: Path) -> list[str]:
    """The log's lines, decompressing .gz."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def read_records(path: Path) -> list[Record]:
    """Every structured record of the log, in order (string-table records included)."""
    records: list[Record] = []
    pending: tuple[int, dict, list[str]] | None = None
    for lineno, line in enumerate(read_lines(path), start=1):
        if line.startswith("\t"):
            assert pending is not None, f"payload line {lineno} without an envelope"
            pending[2].append(line[1:])
            continue
        if pending is not None:
            records.append(Record(pending[0], pending[1], "\n".join(pending[2])))
            pending = None
        match = _GLOG.match(line)
        if match:
            pending = (lineno, json.loads(match.group(1)), [])
    if pending is not None:
        records.append(Record(pending[0], pending[1], "\n".join(pending[2])))
    return records


def is_vllm(record: Record) -> bool:
    """A record vLLM logs, or torch's `before_post_grad_graph` (the first pass's baseline)."""
    name = record.name or ""
    if record.kind == "artifact":
        return name.startswith("vllm_") or name == "before_post_grad_graph"
    return record.kind == "graph_dump" and name.startswith("vllm_")


def vllm_records(path: Path | None = None) -> list[Record]:
    """The vLLM records (and `before_post_grad_graph`) of the log, in log order."""
    return [r for r in read_records(path or log_path()) if is_vllm(r)]


def named(records: list[Record], name: str) -> list[Record]:
    return [r for r in records if r.name == name]


def compile_groups(records: list[Record]) -> list[tuple[Record, list[Record]]]:
    """Each `vllm_piecewise_compile_start` with the vLLM records up to the next one."""
    groups: list[tuple[Record, list[Record]]] = []
    for r in records:
        if r.name == "vllm_piecewise_compile_start":
            groups.append((r, []))
        elif groups:
            groups[-1][1].append(r)
    return groups


@pytest.fixture(scope="module")
def records() -> list[Record]:
    return vllm_records()


def test_the_fixture_is_there_and_gzipped():
    path = log_path()
    assert path.name.startswith("dedicated_log_torch_trace_") and path.name.endswith(".log.gz")


def test_record_names_in_order(records):
    names = [r.name for r in records]
    per_compile = ["before_post_grad_graph"] + [f"vllm_post_grad.{i}.{p}" for i, p in enumerate(PASSES)]
    expected = ["vllm_compile_event", "vllm_compilation_config"]
    expected += [f"vllm_patterns.{p}" for p in PASSES]
    expected += ["vllm_piecewise_split_graph"]
    for piece in PIECES:
        for n in range(len(COMPILE_SIZES) + 1):
            expected.append("vllm_piecewise_compile_start")
            if n == 0:
                expected.append(f"vllm_{piece}")
            expected += per_compile
    assert names == expected


def test_compile_ids(records):
    event, *rest = records
    assert event.compile_id is None  # logged before the compiled model's first call
    assert {r.compile_id for r in rest} == {"[0/0]"}
    # Everything about compile [0/0] sits between its dynamo_start and compilation_metrics.
    everything = read_records(log_path())
    start = next(r.lineno for r in everything if r.kind == "dynamo_start")
    end = next(r.lineno for r in everything if r.kind == "compilation_metrics")
    assert all(start < r.lineno < end for r in rest)
    assert event.lineno < start


def test_compile_event(records):
    (event,) = named(records, "vllm_compile_event")
    assert event.kind == "artifact" and event.envelope["artifact"]["encoding"] == "json"
    assert event.data == {"type": "fresh_compile"}


def test_compilation_config(records):
    (config,) = named(records, "vllm_compilation_config")
    assert config.kind == "artifact" and config.envelope["artifact"]["encoding"] == "json"
    data = config.data
    assert tuple(data) == CONFIG_FIELDS
    bools = {"use_inductor_graph_partition", "dynamic_shapes_evaluate_guards"}
    assert all(isinstance(data[k], bool) for k in bools)
    assert all(isinstance(data[k], str) for k in CONFIG_FIELDS if k not in bools)
    assert data["mode"] == "3" and data["backend"] == "inductor"
    assert data["splitting_ops"] == "harness_vllm::attention"
    assert data["cudagraph_mode"] == "PIECEWISE"
    assert data["compile_sizes"] == ", ".join(map(str, COMPILE_SIZES))
    assert data["compile_ranges_endpoints"] == str(RANGE[1])
    assert data["dynamic_shapes_type"] == "DynamicShapesType.BACKED"


def test_split_graph(records):
    (split,) = named(records, "vllm_piecewise_split_graph")
    assert split.kind == "graph_dump" and split.envelope["graph_dump"] == {"name": "vllm_piecewise_split_graph"}
    for submod in PIECES + SPLITTING_SUBMODS:
        assert f"class {submod}(torch.nn.Module)" in split.payload
        assert f"= self.{submod}(" in split.payload
    assert "submod_3" not in split.payload
    assert "torch.ops.harness_vllm.attention" in split.payload


def test_pattern_dumps(records):
    for p in PASSES:
        (dump,) = named(records, f"vllm_patterns.{p}")
        assert dump.kind == "graph_dump"
        assert dump.payload.startswith(f"# Patterns for {p}\n")
        assert "pattern_0 = CallFunction(" in dump.payload


def test_compile_starts(records):
    starts = [r.data for r in named(records, "vllm_piecewise_compile_start")]
    assert all(tuple(s) == COMPILE_START_FIELDS for s in starts)
    expected = []
    for index, piece in enumerate(PIECES):
        ranges = [(size, size) for size in COMPILE_SIZES] + [RANGE]
        for start, end in ranges:
            expected.append(
                {
                    "piecewise_index": index,
                    "submod_name": piece,
                    "total_piecewise_compiles": len(PIECES),
                    "compile_range_start": start,
                    "compile_range_end": end,
                    "is_single_size": start == end,
                    "is_cudagraph_capture_size": start in COMPILE_SIZES,
                }
            )
    assert starts == expected


def test_each_piece_graph_follows_its_first_compile_start(records):
    groups = compile_groups(records)
    assert len(groups) == len(PIECES) * (len(COMPILE_SIZES) + 1)
    seen: set[str] = set()
    for start, following in groups:
        piece = start.data["submod_name"]
        dumps = [r for r in following if (r.name or "").startswith("vllm_submod_")]
        if piece in seen:
            assert dumps == []
        else:
            seen.add(piece)
            assert [r.name for r in dumps] == [f"vllm_{piece}"]
            assert following[0] is dumps[0]
            assert dumps[0].envelope["graph_dump"] == {"name": f"vllm_{piece}"}
            assert dumps[0].payload.startswith("class GraphModule(torch.nn.Module):")
    assert seen == set(PIECES)


def test_post_grad_dumps_follow_each_compile(records):
    for start, following in compile_groups(records):
        passes = [r for r in following if r.name == "before_post_grad_graph" or (r.name or "").startswith("vllm_post_grad.")]
        assert [r.name for r in passes] == ["before_post_grad_graph"] + [f"vllm_post_grad.{i}.{p}" for i, p in enumerate(PASSES)]
        before, sincos, silu = (r.payload for r in passes)
        assert all(r.compile_id == start.compile_id for r in passes)
        if start.data["submod_name"] == "submod_0":
            # SinCosFusionPass rewrites sin + cos; SiluMulFusionPass finds nothing.
            assert "torch.ops.aten.sin.default" in before and "fused_sincos" not in before
            assert "torch.ops.aten.sin.default" not in sincos and "harness_vllm.fused_sincos" in sincos
            assert silu == sincos
        else:
            # SinCosFusionPass finds nothing; SiluMulFusionPass rewrites silu * mul.
            assert "silu_and_mul" not in before and "silu_and_mul" not in sincos
            assert "harness_vllm.silu_and_mul" in silu


def test_shapes_of_the_compiles(records):
    """The range compiles are symbolic (s77), the size compiles concrete."""
    for start, following in compile_groups(records):
        before = next(r for r in following if r.name == "before_post_grad_graph").payload
        if start.data["is_single_size"]:
            assert f"f32[{start.data['compile_range_start']}, 16]" in before
            assert "s77" not in before
        else:
            assert "f32[s77, 16]" in before
