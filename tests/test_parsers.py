"""Each parser, through the whole pipeline on small hand-written logs, checked on the model and files."""

from __future__ import annotations

import json

import pytest

from conftest import read_json
from logs import cid, line, metrics, start, write_log
from tlparse_py.model import CompileId
from tlparse_py.analysis.summary import STATUS_EMPTY, STATUS_ERROR, STATUS_MISSING, STATUS_OK, STATUS_RESTART

K00 = CompileId(None, 0, 0, 0)


def urls(report, key=K00):
    return [a.url for a in report.directory[key]]


@pytest.mark.parametrize(
    "kind",
    [
        "optimize_ddp_split_graph",
        "compiled_autograd_graph",
        "aot_forward_graph",
        "aot_backward_graph",
        "aot_inference_graph",
        "aot_joint_graph",
        "inductor_post_grad_graph",
        "inductor_pre_grad_graph",
        "dynamo_cpp_guards_str",
        "dynamo_output_graph",
    ],
)
def test_text_graphs_are_written_verbatim(tmp_path, report_of, kind):
    log = write_log(tmp_path / "a.log", [line({kind: {}, **cid()}, "graph text\n  x = y")])
    report, out = report_of(log)
    assert urls(report) == [f"-_0_0_0/{kind}_0.txt"]
    assert (out / f"-_0_0_0/{kind}_0.txt").read_text() == "graph text\n  x = y"
    assert report.stats.strict_failures() == 0


def test_numbering_is_global_and_follows_log_order(tmp_path, report_of):
    lines = [
        line({"dynamo_output_graph": {}, **cid(0, 0, 0)}, "g0"),
        line({"dynamo_output_graph": {}, **cid(1, 0, 0)}, "g1"),
        line({"artifact": {"name": "fx_graph_cache_miss", "encoding": "json"}, **cid(0, 0, 0)}, '{"b": 1, "a": [1, 2]}'),
        line({"graph_dump": {"name": "inductor_aot_wrapper_code", "type": "cpp"}, **cid(1, 0, 0)}, "int main() {}"),
    ]
    report, out = report_of(write_log(tmp_path / "a.log", lines))
    assert urls(report) == ["-_0_0_0/dynamo_output_graph_0.txt", "-_0_0_0/fx_graph_cache_miss_2.json"]
    assert urls(report, CompileId(None, 1, 0, 0)) == ["-_1_0_0/dynamo_output_graph_1.txt", "-_1_0_0/inductor_aot_wrapper_code_3.txt"]
    assert [a.suffix for a in report.directory[K00]] == ["", "❌"]
    # json artifacts are pretty-printed with sorted keys
    assert (out / "-_0_0_0/fx_graph_cache_miss_2.json").read_text() == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}'


def test_artifact_encodings(tmp_path, report_of):
    lines = [
        line({"artifact": {"name": "recompile_reasons", "encoding": "json"}, **cid()}, "0/0: not json at all"),
        line({"artifact": {"name": "torch._functorch.config", "encoding": "string"}, **cid()}, "{\n\"a\": 1\n}"),
        line({"artifact": {"name": "weird", "encoding": "base64"}, **cid()}, "aGk="),
    ]
    report, out = report_of(write_log(tmp_path / "a.log", lines))
    assert urls(report) == ["-_0_0_0/recompile_reasons_0.json", "-_0_0_0/torch._functorch.config_1.txt", "-_0_0_0/weird_2.txt"]
    assert (out / "-_0_0_0/recompile_reasons_0.json").read_text() == "0/0: not json at all"  # kept as written
    assert not (out / "payloads").exists()  # every payload went to its own file


def test_records_without_compile_id_go_to_dash_folder(tmp_path, report_of):
    report, out = report_of(write_log(tmp_path / "a.log", [line({"artifact": {"name": "torch_version", "encoding": "json"}}, "{}")]))
    assert urls(report, CompileId()) == ["-_-_-_-/torch_version_0.json"]
    assert read_json(out / "compile_directory.json")["[-/-]"]["artifacts"][0]["url"] == "-_-_-_-/torch_version_0.json"


def test_malformed_compile_id_goes_to_unknown_folder_per_line(tmp_path, report_of):
    lines = [line({"export": {}}), line({"dynamo_output_graph": {}, "frame_id": "x"}, "g")]
    report, out = report_of(write_log(tmp_path / "a.log", lines))
    assert urls(report, None) == ["unknown_2/dynamo_output_graph_0.txt"]
    assert list(read_json(out / "compile_directory.json")) == ["[-/-]", "unknown"]


def test_missing_attempt_lands_in_raw_folder_but_attempt_zero_key(tmp_path, report_of):
    report, _ = report_of(write_log(tmp_path / "a.log", [line({"dynamo_output_graph": {}, **cid(0, 5, None)}, "g")]))
    assert urls(report, CompileId(None, 0, 5, 0)) == ["-_0_5_-/dynamo_output_graph_0.txt"]


def test_inductor_output_code_is_a_page_with_line_anchors_to_colour(tmp_path, report_of):
    code = "def call(args):\n    x = 1  # comment\n    return x"
    meta = {"inductor_output_code": {"filename": "/tmp/torchinductor_u/ab/cabc123.py"}, **cid()}
    report, out = report_of(write_log(tmp_path / "a.log", [line(meta, code)]))
    assert urls(report) == ["-_0_0_0/inductor_output_code_cabc123_0.html"]
    page = (out / "-_0_0_0/inductor_output_code_cabc123_0.html").read_text()
    assert 'id="L1"' in page and 'id="L3"' in page and 'id="L4"' not in page
    assert '<pre class="code" data-colour="python"><span id="L1">def call(args):</span>' in page  # coloured by the page
    report, out = report_of(write_log(tmp_path / "b.log", [line(meta, code)]), highlight_mb=1)
    page = (out / "-_0_0_0/inductor_output_code_cabc123_0.html").read_text()
    assert '<span class="k">def</span>' in page and "data-colour" not in page  # or by Pygments, when asked
    # html mode keeps the raw code in payloads/ (and the page links to it)
    payloads = list((out / "payloads").iterdir())
    assert [p.read_text() for p in payloads] == [code]
    assert f"payloads/{payloads[0].name}" in page


def test_inductor_output_code_plain_text(tmp_path, report_of):
    meta = {"inductor_output_code": {}, **cid()}
    report, out = report_of(write_log(tmp_path / "a.log", [line(meta, "x = 1")]), plain_text=True)
    assert urls(report) == ["-_0_0_0/inductor_output_code_0.txt"]
    assert (out / "-_0_0_0/inductor_output_code_0.txt").read_text() == "x = 1"


def test_dynamo_guards_page_and_bad_guard_json(tmp_path, report_of):
    good = json.dumps([{"code": "L['x'].size()[0] == 3"}, {"code": "___check_type_id(L['y'], 1)"}])
    lines = [line({"dynamo_guards": {}, **cid()}, good), line({"dynamo_guards": {}, **cid(1, 0, 0)}, "[1, 2")]
    report, out = report_of(write_log(tmp_path / "a.log", lines))
    assert urls(report) == ["-_0_0_0/dynamo_guards_0.html"]
    assert "L[&#39;x&#39;].size()[0] == 3" in (out / "-_0_0_0/dynamo_guards_0.html").read_text()
    assert report.stats["fail_dynamo_guards_json"] == 1
    assert urls(report, CompileId(None, 1, 0, 0)) == []
    assert len(list((out / "payloads").iterdir())) == 2  # both payloads kept


def test_link_records_consume_a_number_and_unsafe_urls_are_not_links(tmp_path, report_of):
    lines = [
        line({"link": {"name": "profile", "url": "https://example.com/p"}, **cid()}),
        line({"link": {"name": "evil", "url": "javascript:alert(1)"}, **cid()}),
        line({"dynamo_output_graph": {}, **cid()}, "g"),
    ]
    report, out = report_of(write_log(tmp_path / "a.log", lines))
    assert urls(report) == ["https://example.com/p", "javascript:alert(1)", "-_0_0_0/dynamo_output_graph_2.txt"]
    index = (out / "index.html").read_text()
    assert 'href="https://example.com/p"' in index
    assert 'href="javascript:' not in index


def test_dump_file_is_global_and_stack_frames_link_to_it(tmp_path, report_of):
    stack = [{"line": 2, "name": "forward", "filename": 0}]
    lines = [
        line({"str": ["<eval_with_key>.4", 0]}),
        line({"dump_file": {"name": "<eval_with_key>.4"}}, "def forward(self):\n    return 1"),
        line({"dynamo_start": {"stack": stack}, **cid()}),
    ]
    report, out = report_of(write_log(tmp_path / "a.log", lines))
    assert urls(report, CompileId()) == ["dump_file/eval_with_key_4.html"]
    assert 'id="L2"' in (out / "dump_file/eval_with_key_4.html").read_text()
    assert 'href="dump_file/eval_with_key_4.html#L2"' in (out / "index.html").read_text()


def test_compilation_metrics_status_and_failures(tmp_path, report_of):
    lines = [
        start(0, 0),
        metrics(0, 0, 0),
        start(1, 0),
        metrics(1, 0, 1, restart_reasons=["graph break in f"]),
        start(2, 0),
        metrics(2, 0, 0, fail_type="BackendCompilerFailed", fail_reason="boom <b>", fail_user_frame_filename="u.py", fail_user_frame_lineno=9),
        start(3, 0),
        metrics(3, 0, 0, graph_op_count=0),
        start(4, 0),
        metrics(5, 0, 0, fail_type="Unsupported"),  # a failure without a reason: tlparse aborts here
    ]
    report, out = report_of(write_log(tmp_path / "a.log", lines))
    statuses = [report.status_of(CompileId(None, f, 0, 0)) for f in range(5)]
    # [1/0] restarted, but logged no graph break: a restart, not a break
    assert statuses == [STATUS_OK, STATUS_RESTART, STATUS_ERROR, STATUS_EMPTY, STATUS_MISSING]
    rows = [(str(r.compile_id), r.failure_type, r.description, r.source) for r in report.failures]
    assert rows == [
        ("[1/0_1]", "RestartAnalysis", "graph break in f", ""),
        ("[2/0]", "BackendCompilerFailed", "boom <b>", "u.py:9"),
        ("[5/0]", "Unsupported", "(no reason logged)", "N/A:0"),
    ]
    assert all((out / r.url).is_file() for r in report.failures)
    failures_page = (out / "failures_and_restarts.html").read_text()
    assert "boom &lt;b&gt;" in failures_page and "boom <b>" not in failures_page


def test_missing_restart_reasons_is_not_a_break(tmp_path, report_of):
    """tlparse marks a compile without `restart_reasons` as a graph break; we only trust a non-empty list."""
    meta = {"compilation_metrics": {"graph_op_count": 3}, **cid()}
    report, _ = report_of(write_log(tmp_path / "a.log", [start(), line(meta)]))
    assert report.status_of(K00) == STATUS_OK


def test_metrics_page_shows_specialisations_of_every_attempt(tmp_path, report_of):
    spec = {"symbol": "s0", "sources": ["L['x'].size()[0]"], "value": "4", "reason": "guard", "user_stack": [], "stack": []}
    lines = [
        start(),
        line({"symbolic_shape_specialization": spec, **cid(0, 0, 1)}),
        line({"guard_added_fast": {"expr": "Eq(s0, 4)", "user_stack": [], "stack": []}, **cid(0, 0, 0)}),
        metrics(0, 0, 1),
    ]
    report, out = report_of(write_log(tmp_path / "a.log", lines))
    page = (out / report.directory[CompileId(None, 0, 0, 1)][0].url).read_text()
    assert "L[&#39;x&#39;].size()[0]" in page and "Eq(s0, 4)" in page


def test_backward_metrics_pages(tmp_path, report_of):
    lines = [
        line({"bwd_compilation_metrics": {"inductor_compile_time_s": 1.5, "fail_type": None}, **cid()}),
        line({"aot_autograd_backward_compilation_metrics": {"elapsed_time": 2}, **cid()}),
    ]
    report, out = report_of(write_log(tmp_path / "a.log", lines))
    assert urls(report) == ["-_0_0_0/bwd_compilation_metrics_0.html", "-_0_0_0/aot_autograd_backward_compilation_metrics_1.html"]
    assert "1.50 s" in (out / urls(report)[0]).read_text()


def test_kernel_stack_traces_get_a_readable_companion(tmp_path, report_of):
    traces = json.dumps({"triton_poi_0": ["File \"m.py\", line 1\\n  foo()\\n"]})
    lines = [
        line({"artifact": {"name": "inductor_provenance_tracking_kernel_stack_traces", "encoding": "json"}}, traces),
        line({"artifact": {"name": "after", "encoding": "string"}}, "x"),
    ]
    report, out = report_of(write_log(tmp_path / "a.log", lines))
    first, second = report.directory[CompileId()]
    assert first.url == "-_-_-_-/inductor_provenance_tracking_kernel_stack_traces_0.json"
    assert first.readable_url == "-_-_-_-/inductor_provenance_tracking_kernel_stack_traces_0_readable.html"
    assert second.url == "-_-_-_-/after_2.txt"  # the companion used number 1, as in tlparse
    readable = (out / first.readable_url).read_text()
    assert 'line 1\n  foo()' in readable and "\\n" not in readable


def test_no_file_kinds_keep_tlparse_numbering(tmp_path, report_of):
    """Kinds tlparse does not know (or shows no file for) must not shift the numbers of the rest."""
    lines = [
        line({"create_symbol": {"symbol": "s0", "val": 4}, **cid()}),
        line({"compilation_metrics_runtime": {"runtime_cudagraphify_time_us": 5}, "frame_id": 0, "frame_compile_id": 0}),
        line({"guard_added": {"expr": "s0 > 1", "frame_locals": {"locals": {"x": ["Tensor(shape: [s0])"]}}}, **cid()}),
        line({"describe_tensor": {"id": 0, "ndim": 1, "size": [4]}, **cid()}),
        line({"dynamo_output_graph": {}, **cid()}, "g"),
    ]
    report, out = report_of(write_log(tmp_path / "a.log", lines))
    assert urls(report) == ["-_0_0_0/dynamo_output_graph_0.txt"]
    assert report.stats["unknown"] == 0 and report.stats.strict_failures() == 0
    assert set(report.kinds[K00]) == {"create_symbol", "compilation_metrics_runtime", "guard_added", "describe_tensor", "dynamo_output_graph"}


def test_unknown_kinds_are_counted_and_shown(tmp_path, report_of):
    lines = [line({"brand_new_kind": {"answer": 42}, **cid()}, "its payload")]
    report, out = report_of(write_log(tmp_path / "a.log", lines))
    assert report.stats["unknown"] == 1 and dict(report.unknown_kinds) == {"brand_new_kind": 1}
    page = (out / "-_0_0_0/index.html").read_text()
    assert "brand_new_kind" in page and "answer" in page and "42" in page
    payload = next((out / "payloads").iterdir())
    assert f"payloads/{payload.name}" in page and payload.read_text() == "its payload"


def test_stack_records_build_the_unknown_stack_trie(tmp_path, report_of):
    stack = [{"line": 5, "name": "export_it", "filename": "/u/m.py"}]
    report, out = report_of(write_log(tmp_path / "a.log", [line({"graph_dump": {"name": "aoti"}, "stack": stack}, "c")]))
    assert report.unknown_stacks.size == 1
    assert "export_it" in (out / "index.html").read_text()


def test_subgraph_name_is_context_not_a_kind(tmp_path, report_of):
    lines = [line({"artifact": {"name": "before_pre_grad_graph", "encoding": "string"}, "subgraph_name": "sub_0", **cid()}, "g")]
    report, out = report_of(write_log(tmp_path / "a.log", lines))
    assert report.stats["unknown"] == 0
    assert "sub_0" in (out / "-_0_0_0/index.html").read_text()
