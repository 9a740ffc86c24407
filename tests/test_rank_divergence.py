"""Multi-rank verdicts from content: per compile id, the ranks' graphs, output code and input shapes
(normalised), and compiler collectives read as what they are (local state before an exchange)."""

from __future__ import annotations

import json

from conftest import TRACES, read_json
from linkcheck import broken_links
from logs import cid, line, metrics, start
from test_multirank import artifact, landing_of, rank_log
from tlparse_py.analysis import facts
from tlparse_py.multirank import divergences

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
    assert summary["divergences"] == [] and not landing.diverges and landing.content == []
    assert summary["compiler_collectives"] == []
    assert "Yes, as far as the logs tell" in index and "with the same graphs, output code and input shapes" in index
    assert broken_links(out) == []


def test_different_input_shape_diverges_at_the_first_compile(tmp_path):
    landing, out, summary, index = two_ranks(tmp_path, frame(n="4") + frame(1), frame(n="5") + frame(1))
    assert [(d["kind"], d["compile_id"], d["ranks"]) for d in summary["divergences"]] == [("compile_content", "[0/0]", [1])]
    detail = summary["divergences"][0]["detail"]
    assert detail.startswith("Dynamo graph, post-grad graph, output code and input shapes differ from rank 0's")
    assert 'f32[4][1]cpu' in detail and 'f32[5][1]cpu' in detail
    assert landing.first["compile_id"] == "[0/0]"
    assert "as far as the logs tell" not in index
    assert "No: the ranks diverge, first at <code>[0/0]</code>" in index
    assert "First differing lines of the Dynamo graph" in index
    assert "f32[4][1]cpu" in index and "f32[5][1]cpu" in index
    assert broken_links(out) == []


def test_same_compile_id_different_graph(tmp_path):
    landing, out, summary, index = two_ranks(tmp_path, frame() + frame(1, graph=SIN), frame() + frame(1, graph=COS))
    assert [(d["kind"], d["compile_id"], d["ranks"]) for d in summary["divergences"]] == [("compile_content", "[1/0]", [1])]
    [row] = landing.content
    [departure] = row["departures"]
    assert row["reference"] == [0] and departure["differs"] == ["Dynamo graph", "post-grad graph", "output code"]
    view = departure["side_by_side"]
    assert (view["what"], view["left"], view["right"]) == ("Dynamo graph", 0, 1)
    left = [text for _, text, _, _ in view["rows"]]
    right = [text for _, _, _, text in view["rows"]]
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
    assert summary["divergences"] == [] and divergences(landing) == []
    assert all(r.distributed.fingerprints for r in landing.ranks)
    fingerprint = landing.ranks[0].distributed.fingerprints["[4/0]"]
    assert set(fingerprint.graphs) == {"dynamo", "post_grad", "output_code"} and fingerprint.inputs
    assert "Yes, as far as the logs tell" in (out / "index.html").read_text()
