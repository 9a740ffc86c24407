"""Multi-rank verdicts from content: per compile id, the ranks' graphs, output code and input shapes
(normalised), and compiler collectives read as what they are (local state before an exchange)."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import msgspec
import pytest

from conftest import TRACES, read_json
from linkcheck import broken_links
from logs import cid, line, metrics, start
from test_multirank import artifact, landing_of, rank_log
from tlparse_py.analysis import facts, rank_answers
from tlparse_py.model import CompileId
from tlparse_py.multirank import analyse

GRAPH = '''class GraphModule(torch.nn.Module):
    def forward(self, L_x_: "f32[{n}][1]cpu"):
        l_x_ = L_x_

        # File: /home/{user}/job.py:{lineno} in g, code: {code}
{body}'''
SIN = ('return x.sin() + 1', '        sin: "f32[{n}][1]cpu" = l_x_.sin();  l_x_ = None\n        add: "f32[{n}][1]cpu" = sin + 1;  sin = None\n        return (add,)')
COS = ('return (x.cos() * 3).sum()', '        cos: "f32[{n}][1]cpu" = l_x_.cos();  l_x_ = None\n        mul: "f32[{n}][1]cpu" = cos * 3;  cos = None\n'
       '        sum_1: "f32[][]cpu" = mul.sum();  mul = None\n        return (sum_1,)')
CODE = '''# AOT ID: ['0_inference']
# kernel path: /tmp/torchinductor_{user}/ab/cabx{hash}.py
cpp_fused_{op}_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r\'\'\'
extern "C" void kernel(const float* in_ptr0, float* out_ptr0)
{{ for(int64_t x0=0; x0<{n}L; x0++) {{ out_ptr0[x0] = std::{op}(in_ptr0[x0]); }} }}
\'\'\')
def call(args):
    buf0 = empty_strided_cpu(({n}, ), (1, ), torch.float32)
    cpp_fused_{op}_0(arg0_1, buf0)
    return (buf0, )


def get_args():
    from torch._dynamo.testing import rand_strided
    arg0_1 = rand_strided(({hint}, ), (1, ), device='cpu', dtype=torch.float32)
    return [arg0_1]
'''


def tensor(size, describer=0, source="L['x']", frame=0, compile=0, attempt=0):
    meta = {"id": 0, "ndim": len(size), "dtype": "torch.float32", "device": "device(type='cpu')", "size": size, "stride": [1],
            "view_func": "<built-in method _view_func_unsafe of Tensor object at 0x7f4ca5b12bc0>", "describer_id": describer}
    return [line({"describe_tensor": meta, **cid(frame, compile, attempt)}),
            line({"describe_source": {"describer_id": describer, "id": 0, "source": source}, **cid(frame, compile, attempt)})]


def compiled(frame=0, compile=0, attempt=0, n="4", hint=None, graph=SIN, user="a", lineno=19, cache="miss", size=None, extra_before=()):
    """One compile as torch 2.13 logs it on CPU: inputs, Dynamo graph, post-grad graph, output code, cache, metrics."""
    code, body = graph
    op = "sin" if graph is SIN else "cos"
    size = size if size is not None else [int(n)]
    return [
        *tensor(size, describer=attempt, frame=frame, compile=compile, attempt=attempt),
        *extra_before,
        line({"dynamo_output_graph": {}, **cid(frame, compile, attempt)},
             GRAPH.format(n=n, user=user, lineno=lineno, code=code, body=body.format(n=n))),
        artifact("inductor_post_grad_graph", f'def forward(self, arg0_1: "f32[{n}][1]cpu"):\n    {op} = torch.ops.aten.{op}.default(arg0_1)',
                 frame, compile, encoding="string") if attempt == 0 else
        line({"artifact": {"name": "inductor_post_grad_graph", "encoding": "string"}, **cid(frame, compile, attempt)},
             f'def forward(self, arg0_1: "f32[{n}][1]cpu"):\n    {op} = torch.ops.aten.{op}.default(arg0_1)'),
        line({"inductor_output_code": {"filename": f"/tmp/torchinductor_{user}/ab/cab{user * 40}.py"}, **cid(frame, compile, attempt)},
             CODE.format(n=n, op=op, user=user, hash=user * 50, hint=hint or n)),
        line({"artifact": {"name": f"fx_graph_cache_{cache}", "encoding": "json"}, **cid(frame, compile, attempt)},
             json.dumps({"key": "k", "cache_state": cache})),
    ]


def frame(frame=0, **kwargs):
    return [start(frame, 0), *compiled(frame, **kwargs), metrics(frame, 0, 0)]


def two_ranks(tmp_path, rank0, rank1):
    folder = tmp_path / "trace"
    folder.mkdir()
    rank_log(folder, 0, rank0)
    rank_log(folder, 1, rank1)
    landing, out = landing_of(tmp_path, folder)
    return landing, out, read_json(out / "summary.json"), (out / "index.html").read_text()


# ------------------------------------------------------------------------------------------------
# normalisers (pure)


def test_normalise_graph_strips_addresses_ids_and_file_locations():
    a = '    # File: /home/a/job.py:19 in g, code: return x.sin() + 1\n    x = f(<object at 0x7f4ca5b12bc0>)  # ___check_obj_id(L[\'m\'], 140234234234)\n'
    b = '    # File: /srv/b/job.py:23 in g, code: return x.sin() + 1\n    x = f(<object at 0x55d0aa01>)  # ___check_obj_id(L[\'m\'], 139999999999)'
    assert facts.normalise_graph(a) == facts.normalise_graph(b)
    assert facts.normalise_graph(a).splitlines()[0] == "    # File: <file> in g, code: return x.sin() + 1"
    assert facts.normalise_graph('File "/x/y.py", line 3, in f') == 'File "<file>", in f'
    # what the graph computes still counts
    assert facts.normalise_graph("sin = l_x_.sin()") != facts.normalise_graph("cos = l_x_.cos()")
    assert facts.normalise_graph('x: "f32[4]"') != facts.normalise_graph('x: "f32[5]"')


def test_normalise_code_strips_cache_paths_hashes_and_the_benchmark_harness():
    a = CODE.format(n=4, op="sin", user="a", hash="0" * 10 + "q" * 40, hint=4)
    b = CODE.format(n=4, op="sin", user="b", hash="1" * 10 + "z" * 40, hint=5)  # another user's cache, another example size
    assert a != b and facts.normalise_code(a) == facts.normalise_code(b)
    normalised = facts.normalise_code(a)
    assert "kernel path" not in normalised and "get_args" not in normalised and "cpp_fused_sin_0" in normalised
    assert facts.normalise_code("open('/tmp/torchinductor_u/4n/c4noxgmujwznpnmk7xmkhosyxtrofp4rln5jm2ssa76gijpxbrkb.py')") == "open('<cache path>')"
    assert facts.normalise_code("inductor_meta={'backend_hash': 'C3A1F0E9B8D7C6A5B4C3D2E1F0A9B8C7D6E5F4A3B2C1D0E9F8A7B6C5D4E3F2A1'}") == \
        "inductor_meta={'backend_hash': '<hash>'}"
    assert facts.normalise_code(CODE.format(n=4, op="sin", user="a", hash="x", hint=4)) != facts.normalise_code(CODE.format(n=5, op="sin", user="a", hash="x", hint=5))


def test_input_signature_masks_dynamic_dimensions_and_differing_lines():
    inputs = [facts.tensor_input({"dtype": "torch.float32", "size": [4, 512], "describer_id": 0, "id": 0}),
              facts.tensor_input({"dtype": "torch.int64", "size": [7], "describer_id": 0, "id": 1})]
    inputs[0]["source"] = "L['x']"
    assert facts.input_signature(inputs) == ["f32[4, 512]", "i64[7]"]
    assert facts.input_signature(inputs, {"L['x'].size()[0]"}) == ["f32[*, 512]", "i64[7]"]
    assert facts.differing_lines(["a", "b", "c"], ["a", "B", "c", "d"]) == [(2, "b", 2, "B"), (None, "", 4, "d")]
    assert facts.differing_lines(["a"], ["a"]) == []
    assert facts.sync_decision("picked_rank_idx=1, saved_nodes of current rank={'x': 4}") == "picked_rank_idx=1"


# ------------------------------------------------------------------------------------------------
# verdicts


def test_identical_ranks_no_divergence(tmp_path):
    # different users' cache paths, checkouts and line numbers: run-to-run noise, not divergence
    landing, out, summary, index = two_ranks(tmp_path, frame() + frame(1, graph=COS), frame(user="b", lineno=23) + frame(1, graph=COS, user="b", lineno=23))
    assert summary["divergences"] == [] and not landing.diverges and landing.comparison.content == []
    assert summary["compiler_collectives"] == []
    assert "Yes, as far as the logs tell" in index and "with the same graphs, output code and input shapes" in index
    assert broken_links(out) == []


def test_different_input_shape_diverges_at_the_first_compile(tmp_path):
    landing, out, summary, index = two_ranks(tmp_path, frame(n="4") + frame(1), frame(n="5") + frame(1))
    assert [(d["kind"], d["compile_id"], d["ranks"]) for d in summary["divergences"]] == [("compile_content", "[0/0]", [1])]
    detail = summary["divergences"][0]["detail"]
    assert detail.startswith("Dynamo graph, post-grad graph, output code and input shapes differ from rank 0's")
    assert 'f32[4][1]cpu' in detail and 'f32[5][1]cpu' in detail
    assert landing.comparison.first is not None and landing.comparison.first.compile_id == "[0/0]"
    assert "as far as the logs tell" not in index
    assert "No: the ranks diverge, first at <code>[0/0]</code>" in index
    assert "First differing lines of the Dynamo graph" in index
    assert "f32[4][1]cpu" in index and "f32[5][1]cpu" in index
    assert broken_links(out) == []


def test_same_compile_id_different_graph(tmp_path):
    landing, out, summary, index = two_ranks(tmp_path, frame() + frame(1, graph=SIN), frame() + frame(1, graph=COS))
    assert [(d["kind"], d["compile_id"], d["ranks"]) for d in summary["divergences"]] == [("compile_content", "[1/0]", [1])]
    [row] = landing.comparison.content
    [departure] = row.departures
    assert row.reference == [0] and departure.differs == ["Dynamo graph", "post-grad graph", "output code"]
    view = departure.side_by_side
    assert view is not None and (view.what, view.left, view.right) == ("Dynamo graph", 0, 1)
    left = [text for _, text, _, _ in view.rows]
    right = [text for _, _, _, text in view.rows]
    assert any("l_x_.sin()" in t for t in left) and any("l_x_.cos()" in t for t in right) and any("mul.sum()" in t for t in right)
    assert "In <code>[1/0]</code>" in index and "l_x_.sin()" in index and "mul.sum()" in index
    assert "return x.sin() + 1" in summary["divergences"][0]["detail"]


def collective_frame(rank):
    """enable_compiler_collectives with a size per rank: the local state is exchanged, the compile
    restarts, and every rank compiles the same dynamic graph."""
    size = 4 + rank
    before = artifact("compiler_collective", f"L['x']: tensor size=[{size}] stride=[1]", encoding="string")
    symbol = line({"create_symbol": {"symbol": "s77", "val": str(size), "source": "L['x'].size()[0]"}, **cid(0, 0, 1)})
    return [
        start(0, 0),
        *tensor([size]),
        before,
        *compiled(0, 0, 1, n="s77", hint=str(size), size=[size], extra_before=[symbol]),
        metrics(0, 0, 1, restart_reasons=["<class 'torch._dynamo.exc.CompileCollectiveRestartAnalysis'>"]),
    ]


def test_compiler_collectives_differing_local_state_is_not_a_divergence(tmp_path):
    landing, out, summary, index = two_ranks(tmp_path, collective_frame(0), collective_frame(1))
    assert summary["divergences"] == [] and not landing.diverges
    assert summary["compiler_collectives"] == [
        {"compile_id": "[0/0]", "ranks": [0, 1], "exchanges": 1, "local_states_differ": True,
         "dynamic_sources": ["L['x'].size()[0]"], "dynamic_by_rank": {"0": ["L['x'].size()[0]"], "1": ["L['x'].size()[0]"]}, "agreed": True}
    ]
    assert "The ranks diverge" not in index and "Ranks disagree" not in index
    assert "Compiler collectives" in index and "exchanged different local states" in index
    assert "Shared decision: <code>L[&#39;x&#39;].size()[0]</code> dynamic on every rank" in index
    assert "After the exchange the ranks agree on it." in index
    assert "Success with restart (e.g. graph break)" not in index.split('id="ranks"')[1]
    assert broken_links(out) == []


def test_compiler_collectives_with_a_remaining_desync(tmp_path):
    rank1 = collective_frame(1)
    rank1 = [text.replace("x.sin()", "x.cos()").replace("l_x_.sin()", "l_x_.cos()") for text in rank1]
    landing, out, summary, index = two_ranks(tmp_path, collective_frame(0), rank1)
    assert [(d["kind"], d["compile_id"], d["ranks"]) for d in summary["divergences"]] == [("compile_content", "[0/0]", [1])]
    assert summary["compiler_collectives"][0]["agreed"] is False
    assert "A desync remains after the exchange" in index


def test_sync_decision_compared_on_the_picked_rank(tmp_path):
    def ranked(rank, picked):
        payload = f"picked_rank_idx={picked}, saved_nodes of current rank={{'mm': {100 + rank}, 'total size': {100 + rank}}}"
        return frame(extra_before=[artifact("aot_joint_graph_sync_decision_cross_ranks", payload, encoding="string")])

    _, _, summary, _ = two_ranks(tmp_path, ranked(0, 1), ranked(1, 1))
    assert summary["divergences"] == []  # each rank lists its own saved nodes; the decision is shared
    folder = tmp_path / "again"
    folder.mkdir()
    _, _, summary, _ = two_ranks(folder, ranked(0, 0), ranked(1, 1))
    assert [(d["kind"], d["compile_id"], d["ranks"]) for d in summary["divergences"]] == [("shared_decision", "[0/0]", [1])]
    assert summary["divergences"][0]["detail"].startswith("aot_joint_graph_sync_decision_cross_ranks differs: picked_rank_idx=1")


def test_spmd_graph_mismatch_is_a_divergence(tmp_path):
    report = artifact("inductor_spmd_graph_mismatch", "SPMD graph mismatch detected on rank 0", encoding="string")
    landing, _, summary, index = two_ranks(tmp_path, frame(extra_before=[report]), frame())
    assert [(d["kind"], d["compile_id"]) for d in summary["divergences"]] == [("spmd_graph_mismatch", "[0/0]")]
    assert "SPMD check found the ranks' graphs differ" in index


def test_real_distributed_fixture_agrees(tmp_path):
    landing, out = landing_of(tmp_path, TRACES / "distributed")
    summary = read_json(out / "summary.json")
    assert summary["divergences"] == [] and landing.comparison.divergences == []
    assert all(r.distributed.fingerprints for r in landing.ranks)
    fingerprint = landing.ranks[0].distributed.fingerprints["[4/0]"]
    assert set(fingerprint.graphs) == {"dynamo", "post_grad", "output_code"} and fingerprint.inputs
    assert "Yes, as far as the logs tell" in (out / "index.html").read_text()


# ------------------------------------------------------------------------------------------------
# the typed comparison against the raw rank logs

RANK_FIXTURES = ("distributed", "collectives", "collectives_desync", "collectives_gloo_fail", "collectives_shapes", "ddp_cache_race")
CACHE_ARTIFACT = re.compile(r"cache_(hit|miss|bypass)")


class RawRank(msgspec.Struct):
    """What a rank's log says, read here record by record (no tlparse_py reading)."""

    compiles: dict[CompileId, None] = msgspec.field(default_factory=dict)  # frame compiles, in log order
    cache: list[tuple[str, str]] = msgspec.field(default_factory=list)  # (hit / miss / bypass, compile id as logged)
    exchanges: dict[str, int] = msgspec.field(default_factory=dict)  # frame compile → compiler_collective artifacts
    dynamic: dict[str, set[str]] = msgspec.field(default_factory=dict)  # frame compile → create_symbol sources
    compile_time: float = 0.0  # entire_frame_compile_time_s, plus each lazy backward's inductor_compile_time_s


def raw_rank(log: Path) -> RawRank:
    data = log.read_bytes()
    text = (gzip.decompress(data) if log.name.endswith(".gz") else data).decode("utf-8")
    raw = RawRank()
    for record in text.split("\n"):
        if record.startswith("\t") or "] {" not in record:
            continue
        meta = json.loads(record.split("] ", 1)[1])
        ca, frame_id, compile_id, attempt = (meta.get(k) for k in ("compiled_autograd_id", "frame_id", "frame_compile_id", "attempt"))
        if frame_id is None and ca is None:
            continue
        key = CompileId(ca, frame_id, compile_id, attempt)
        frame = str(key.frame_key())
        raw.compiles.setdefault(key.frame_key(), None)
        name = (meta.get("artifact") or {}).get("name", "")
        if found := CACHE_ARTIFACT.search(name):
            raw.cache.append((found.group(1), str(key.directory_key())))
        if name == "compiler_collective":
            raw.exchanges[frame] = raw.exchanges.get(frame, 0) + 1
        if "create_symbol" in meta:
            raw.dynamic.setdefault(frame, set()).add(meta["create_symbol"]["source"])
        raw.compile_time += (meta.get("compilation_metrics") or {}).get("entire_frame_compile_time_s") or 0.0
        raw.compile_time += (meta.get("bwd_compilation_metrics") or {}).get("inductor_compile_time_s") or 0.0
    return raw


def majority(signatures):
    """Ranks grouped by equal signature, the biggest group first (lowest ranks on a tie)."""
    groups = {}
    for rank, signature in sorted(signatures.items()):
        groups.setdefault(signature, []).append(rank)
    return sorted(groups.items(), key=lambda g: (-len(g[1]), g[1]))


@pytest.mark.parametrize("name", RANK_FIXTURES)
def test_cross_rank_facts_are_the_raw_logs(tmp_path, name):
    """Each cross-rank answer of the typed analysis, against the same fact read from the rank logs here."""
    landing, out = landing_of(tmp_path, TRACES / name)
    found = landing.comparison
    raw = {rank: raw_rank(next((TRACES / name).glob(f"*_rank_{rank}_*"))) for rank in found.ranks}
    assert found.ranks == [0, 1] and sorted(raw) == [0, 1]

    # what each rank compiled, and which ranks compiled something else than the majority
    for result in landing.ranks:
        assert result.facts().compile_keys == list(raw[result.number].compiles)
    groups = majority({rank: frozenset(r.compiles) for rank, r in raw.items()})
    reference = groups[0][0]
    expected = [(rank, reference - set(r.compiles), set(r.compiles) - reference) for rank, r in raw.items() if set(r.compiles) != reference]
    assert [(row.rank, set(row.missing), set(row.extra)) for row in found.compile_ids] == expected

    # cache results, and where a group of ranks first departs from the majority's
    groups = majority({rank: tuple(r.cache) for rank, r in raw.items()})
    assert [(g.ranks, g.sequence) for g in found.cache] == ([(members, list(sequence)) for sequence, members in groups] if len(groups) > 1 else [])
    if len(groups) > 1:
        (mine, _), (theirs, [rank, *_]) = groups
        at = next(i for i, (a, b) in enumerate(zip(mine, theirs)) if a[0] != b[0])
        [note] = found.notes
        assert (note.ranks, note.compile_id) == ([rank], theirs[at][1])
        assert f"lookup {at + 1} in {theirs[at][1]} was a {theirs[at][0]} where rank 0 had a {mine[at][0]}" in note.detail
        assert note.compile_time_s == {str(r): pytest.approx(raw[r].compile_time) for r in raw}
        assert note.spread_s == pytest.approx(abs(raw[0].compile_time - raw[1].compile_time))
    else:
        assert found.notes == []

    # compiler collectives: which ranks exchanged their state in which frame, and the dynamic dimensions each ended with
    frames = {frame for r in raw.values() for frame in r.exchanges}
    assert {c.compile_id: (c.ranks, c.exchanges, c.dynamic_by_rank) for c in found.collectives} == {
        frame: (
            [rank for rank, r in raw.items() if frame in r.exchanges],
            max(r.exchanges.get(frame, 0) for r in raw.values()),
            {str(rank): sorted(r.dynamic.get(frame, ())) for rank, r in raw.items() if frame in r.dynamic or frame in r.exchanges},
        )
        for frame in frames
    }

    # every verdict names a compile the ranks logged; summary.json holds exactly the typed verdicts
    logged = {str(key) for r in raw.values() for key in r.compiles}
    assert all(d.compile_id in logged for d in [*found.divergences, *found.notes] if d.compile_id is not None and d.kind != "cache")
    summary = read_json(out / "summary.json")
    assert summary["divergences"] == msgspec.to_builtins(found.divergences) and summary["notes"] == msgspec.to_builtins(found.notes)
    assert summary["compiler_collectives"] == msgspec.to_builtins(found.collectives)


def test_the_comparison_reads_typed_summaries_not_their_json(tmp_path):
    """The rank results carry their typed summaries (as `summary.json` holds them); comparing them
    again gives the same answers, and a rank that could not be read compares as having compiled nothing."""
    landing, _ = landing_of(tmp_path, TRACES / "collectives_desync")
    for result in landing.results:
        assert result.summary is not None and result.summary.compiles
        assert [c.id for c in result.summary.compiles] == [c["id"] for c in read_json(tmp_path / "out" / result.folder / "summary.json")["compiles"]]
    again = analyse(landing.results)
    assert again.comparison == landing.comparison
    broken = [landing.results[0], msgspec.structs.replace(landing.results[1], summary=None, error="unreadable")]
    [row] = analyse(broken).comparison.compile_ids  # on a tie, the group with the lowest rank is the reference
    assert row.rank == 1 and row.missing == landing.ranks[0].facts().compile_keys and row.extra == []
    assert rank_answers.figures(None) == rank_answers.RankFigures(0, 0, [])
