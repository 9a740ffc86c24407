"""Compile-id pages and the index summary: exact numbers from the fixtures, page structure from parsed HTML."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import TRACES, read_json
from linkcheck import broken_links
from logs import cid, line, metrics, write_log
from tlparse_py import kinds
from tlparse_py.analysis import phases
from tlparse_py.analysis import questions as summary
from tlparse_py.analysis.store import MetricsEntry
from tlparse_py.analysis.compile_groups import graph_break_groups, recompiled_frames
from tlparse_py.analysis import tables as tables_module
from tlparse_py.analysis.tables import TensorRow, compile_tables
from tlparse_py.limits import PAGE_RECORDS_PER_KIND
from tlparse_py.model import CompileId
from tlparse_py.paths import compile_page_url
from tlparse_py.report.render import STATIC_DIR
from tlparse_py.report.views import compile as compile_view

SHOWN_KINDS = re.compile(
    r"(dynamo_output_graph|aot_(joint|forward|backward|inference)_graph|inductor_(pre|post)_grad_graph|"
    r"(before|after)_(pre|post|joint)_grad_graph|before_joint_graph|after_joint_graph|dynamo_cpp_guards_str|"
    r"inductor_output_code|recompile_reasons|dynamo_graph_break_reason|compiled_autograd_graph|optimize_ddp_split_(graph|child))"
)


def fixture(scenario):
    return sorted((TRACES / scenario).glob("dedicated_log*"))[0]


def counts_of(report):
    totals, compiles = report.totals(), report.compiles()
    return dict(
        frames=totals["frames"], compile_ids=totals["compiles"], graph_breaks=totals["graph_breaks"],
        distinct_graph_breaks=len(graph_break_groups(compiles)), restarts=sum(c.restarts for c in compiles),
        recompiles=totals["recompiles"], failures=totals["failed"], cache_hits=totals["cache.hit"],
        cache_misses=totals["cache.miss"], cache_bypasses=totals["cache.bypass"], records=report.records,
        chromium_events=report.chromium_events,
    )


@pytest.mark.parametrize(
    "scenario, expected",
    [
        ("graph_break", dict(frames=5, compile_ids=5, graph_breaks=3, distinct_graph_breaks=2, restarts=3, recompiles=0, failures=0, cache_hits=0, cache_misses=10, cache_bypasses=0, records=676, chromium_events=552)),
        # recompiles: [0/1] [0/2] [1/1] [1/2]; [1/3], over the recompile limit, compiled nothing (issue 43 item 7)
        ("recompile", dict(frames=2, compile_ids=7, graph_breaks=0, distinct_graph_breaks=0, restarts=0, recompiles=4, failures=0, cache_hits=0, cache_misses=12, cache_bypasses=0, records=788, chromium_events=653)),
        ("failure", dict(frames=3, compile_ids=3, graph_breaks=0, distinct_graph_breaks=0, restarts=0, recompiles=0, failures=3, cache_hits=0, cache_misses=0, cache_bypasses=0, records=59, chromium_events=38)),
        ("compiled_autograd", dict(frames=4, compile_ids=5, graph_breaks=2, distinct_graph_breaks=1, restarts=2, recompiles=1, failures=0, cache_hits=0, cache_misses=8, cache_bypasses=2, records=879, chromium_events=559)),
        ("transformer", dict(frames=1, compile_ids=2, graph_breaks=0, distinct_graph_breaks=0, restarts=0, recompiles=1, failures=0, cache_hits=0, cache_misses=6, cache_bypasses=0, records=785, chromium_events=427)),
        ("training", dict(frames=1, compile_ids=1, graph_breaks=0, distinct_graph_breaks=0, restarts=0, recompiles=0, failures=0, cache_hits=0, cache_misses=3, cache_bypasses=0, records=238, chromium_events=193)),
    ],
)
def test_summary_counts(report_of, scenario, expected):
    report, _ = report_of(fixture(scenario))
    assert counts_of(report) == expected


def test_summary_tables_of_graph_breaks_and_recompiles(report_of):
    report, _ = report_of(fixture("graph_break"))
    groups = [(g.reason, [s.user_location for s in g.sites], g.count, [brk.attempt for _, brk in g.breaks]) for g in graph_break_groups(report.compiles())]
    assert groups == [
        ("Failed to trace builtin operator", ["/work/scenarios/graph_break.py:23"], 2, ["[0/0]", "[1/0]"]),
        ("Call to `torch._dynamo.graph_break()`", ["/work/scenarios/graph_break.py:25"], 1, ["[2/0]"]),
    ]
    report, _ = report_of(fixture("recompile"))
    frames = recompiled_frames(report.compiles())
    assert [(f.frame, f.name, len(f.compiles), f.hit_limit) for f in frames] == [("1", "scale_tag", 4, True), ("0", "scale_shape", 3, False)]
    assert frames[1].reasons[0] == (frames[1].compiles[1], "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8")
    rows = {c.label: c for c in report.compiles()}
    assert rows["[1/3]"].status == "limit" and rows["[1/3]"].headline == "Unsupported: Dynamo recompile limit exceeded"
    assert rows["[1/3]"].frame == "scale_tag" and rows["[1/3]"].user_location == rows["[1/2]"].user_location  # from the frame's other compiles
    assert rows["[0/1]"].headline.startswith("recompiled: 0/0: tensor 'x' size mismatch")
    slowest = sorted(report.compiles(), key=lambda c: -(c.compile_time_s.total or 0))
    assert slowest[0].label == "[0/0]"  # the cold compile


class _Ids(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: list[str] = []
        self.artifact_links: list[str] = []
        self._in_artifact_summary = 0

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if attributes.get("id"):
            self.ids.append(attributes["id"])
        if tag == "a" and attributes.get("href"):
            self.artifact_links.append(attributes["href"])


@pytest.mark.parametrize("scenario", ["graph_break", "recompile", "training", "compiled_autograd", "distributed", "failure", "transformer"])
def test_every_graph_guard_code_and_reason_is_on_its_compile_page(report_of, scenario):
    log = fixture(scenario)
    report, out = report_of(log)
    directory = read_json(out / "compile_directory.json")
    for key, entry in directory.items():
        shown = [a["url"] for a in entry["artifacts"] if SHOWN_KINDS.match(a["name"])]
        if not shown:
            continue
        page_key = next(k for k in report.directory if str(k) == key)
        page = (out / compile_page_url(page_key)).read_text()
        parser = _Ids()
        parser.feed(page)
        assert len(parser.ids) == len(set(parser.ids)), f"duplicate ids on {key}'s page"
        sections = page.count('<details class="artifact"')
        assert sections >= len(shown), key
        for url in shown:
            raw = url if not url.endswith(".html") else None
            if raw:
                assert f'href="../{url}"' in page, (key, url)
    assert broken_links(out) == []


def test_compile_page_sections_for_a_graph_break(report_of):
    report, out = report_of(fixture("graph_break"))
    page = (out / "-_2_0_1" / "index.html").read_text()
    for section in ("stack", "graph-breaks", "guards", "pipeline", "code", "cache", "files", "records"):
        assert f'id="{section}"' in page, section
    assert "Dynamo restarted the analysis of this frame" in page
    assert 'class="timebar"' in page and "<svg" in page
    attempt0 = (out / "-_2_0_0" / "index.html").read_text()
    assert "Call to `torch._dynamo.graph_break()`" in attempt0 and "/work/scenarios/graph_break.py:25" in attempt0
    assert 'href="../-_2_0_1/index.html"' in attempt0  # points to the attempt that holds the metrics


def test_pipeline_diffs_show_what_passes_changed(tmp_path, report_of):
    before = "graph():\n    %x : placeholder\n    %mul : call_function[target=aten.mul](args = (%x, 2))\n    return mul"
    after = before.replace("aten.mul", "aten.add")
    lines = [
        line({"artifact": {"name": "before_post_grad_graph", "encoding": "string"}, **cid()}, before),
        line({"artifact": {"name": "noop_post_grad", "encoding": "string"}, **cid()}, before),
        line({"inductor_post_grad_graph": {}, **cid()}, after),
        line({"aot_inference_graph": {}, **cid()}, after),
    ]
    report, out = report_of(write_log(tmp_path / "a.log", lines))
    assert kinds.payload_name(["artifact"], {"artifact": {"name": "before_post_grad_graph"}}) == "before_post_grad_graph"
    page = (out / "-_0_0_0" / "index.html").read_text()
    assert page.count("<details class=\"diff\">") == 2  # the pass step and the end step; the AOT graph is not diffed
    assert "No change." in page  # noop pass
    assert '<span class="added">+1</span> <span class="removed">−1</span>' in page


def entry(**fields) -> MetricsEntry:
    return MetricsEntry(CompileId(None, 0, 0, 0), "", fields)


def test_time_split_and_its_bar():
    """The metrics nest their times (the backend's includes Inductor's, which includes code
    generation): the analysis splits the forward time into consecutive phases, the bar draws them."""
    split = phases.time_split(entry(entire_frame_compile_time_s=2.0, backend_compile_time_s=1.5, inductor_compile_time_s=1.0, code_gen_time_s=0.5))
    assert split is not None and split.total == 2.0
    assert [(p.name, p.seconds) for p in split.phases] == [("Dynamo", 0.5), ("AOTAutograd", 0.5), ("Inductor", 0.5), ("Code generation", 0.5)]
    bar = compile_view.time_bar(split)
    assert [(s["label"], s["seconds"], s["width"], s["x"]) for s in bar["segments"]] == [
        ("Dynamo", 0.5, 250.0, 0.0), ("AOTAutograd", 0.5, 250.0, 250.0), ("Inductor", 0.5, 250.0, 500.0), ("Code generation", 0.5, 250.0, 750.0)
    ]
    assert phases.time_split(entry(entire_frame_compile_time_s=None)) is None and compile_view.time_bar(None) is None
    assert phases.time_split(entry(entire_frame_compile_time_s=True)) is None  # a flag is not a time
    # a backend time past the whole (a bad log) is capped: Dynamo's share is 0, never negative
    assert phases.time_split(entry(entire_frame_compile_time_s=1.0, backend_compile_time_s=5.0)).phases[0].seconds == 0


def test_pass_timings_and_guard_count_come_from_the_analysis(tmp_path, report_of):
    """A compile page's FX pass timings (chromium `pass.<stage>.<name>` spans) and its guard count are
    the analysis' facts, shown on the page as the analysis gives them."""
    def span(ph, name, ts):
        return line({"chromium_event": {}, **cid()}, json.dumps({"ph": ph, "name": name, "ts": ts, "tid": 1, "pid": 1, "args": {"compile_id": "0/0"}}))

    lines = [
        line({"dynamo_start": {"stack": []}, **cid()}),
        line({"inductor_post_grad_graph": {}, **cid()}, "graph():\n    return ()"),  # the timings are shown with the graphs
        span("B", "pass.post_grad_passes.remove_noop_ops", 1_000), span("E", "pass.post_grad_passes.remove_noop_ops", 251_000),
        span("B", "pass.post_grad_passes.reinplace", 300_000), span("E", "pass.post_grad_passes.reinplace", 1_300_000),
        span("B", "pass.custom_stage.mine", 2_000_000), span("E", "pass.custom_stage.mine", 2_500_000),
        span("B", "not_a_pass", 3_000_000), span("E", "not_a_pass", 3_100_000),
        metrics(entire_frame_compile_time_s=2.0, guard_count=7),
    ]
    report, out = report_of(write_log(tmp_path / "passes.log", lines))
    key = CompileId(None, 0, 0, 0)
    assert phases.pass_timings(report, key) == {"post_grad": [("reinplace", 1.0), ("remove_noop_ops", 0.25)], "custom_stage": [("mine", 0.5)]}
    assert report.guard_count(key) == 7
    page = (out / "-_0_0_0" / "index.html").read_text()
    assert '<caption>post_grad</caption><tbody><tr><td class="k">reinplace</td><td>1.00 s</td></tr><tr><td class="k">remove_noop_ops</td>' in page
    assert " · 7 guards" in page


def spooled_records(log, key):
    """The record summaries the compile page of `key` is built from (the pipeline's spool)."""
    from tlparse_py.pipeline import Options, Pipeline, new_analysis, read_logs, source_of
    from tlparse_py.report.folder_writer import NullWriter

    options = Options(workers=0)
    pipeline = Pipeline(new_analysis(source_of([log]), options), NullWriter(), options)
    try:
        read_logs([log], pipeline, None, None)
        return pipeline.spool.records(key)
    finally:
        pipeline.highlighter.close()


def test_inputs_symbols_and_runtime_overheads(tmp_path, report_of):
    lines = [
        line({"describe_storage": {"id": 0, "describer_id": 3, "size": 64}, **cid()}),
        line({"describe_tensor": {"id": 0, "describer_id": 3, "ndim": 2, "dtype": "torch.float32", "device": "device(type='cpu')", "size": [4, 4], "stride": [4, 1], "storage": 0, "requires_grad": True}, **cid()}),
        line({"describe_source": {"describer_id": 3, "id": 0, "source": "L['x']"}, **cid()}),
        line({"create_symbol": {"symbol": "s0", "val": "4", "vr": "[2, int_oo]", "source": "L['x'].size()[0]", "user_stack": [{"line": 9, "name": "f", "filename": "/u/m.py"}]}, **cid()}),
        line({"symbolic_shape_specialization": {"symbol": "s1", "sources": ["L['y'].size()[0]"], "value": "3"}, **cid()}),
        line({"compilation_metrics_runtime": {"runtime_cudagraphify_time_us": 1500, "runtime_triton_autotune_time_us": None}, "frame_id": 0, "frame_compile_id": 0}),
        metrics(),
    ]
    log = write_log(tmp_path / "a.log", lines)
    tables = compile_tables(spooled_records(log, CompileId(None, 0, 0, 0)))
    # dimension 0 is the symbol s0 the compile created for it, the input it was traced with 4 there
    assert tables.tensors == [TensorRow("L['x']", "[s0, 4]", "float32", "cpu", "[4, 1]", "64", "requires_grad", example="[4, 4]")]
    assert [(s.event, s.kind, s.name, s.value, s.range, s.source) for s in tables.symbols] == [
        ("created", "create_symbol", "s0", "4", "[2, int_oo]", "L['x'].size()[0]"),
        ("specialised", "symbolic_shape_specialization", "s1", "3", "", "L['y'].size()[0]"),
    ]
    assert tables.symbols[0].where is not None and tables.symbols[0].where.line == 9
    assert tables.runtime == [("compilation_metrics_runtime.runtime_cudagraphify_time_us", "1500")]
    # and the page shows the tables it was given
    report, out = report_of(log)
    page = (out / "-_0_0_0" / "index.html").read_text()
    assert "L[&#39;x&#39;]</code></td><td><code>[s0, 4]</code>" in page and "(traced with <code>[4, 4]</code>)" in page
    assert "<td>float32</td><td>cpu</td><td><code>[4, 1]</code></td><td>64</td><td>requires_grad" in page
    assert "/u/m.py:9" in page and "compilation_metrics_runtime.runtime_cudagraphify_time_us" in page


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), st.text(max_size=5), st.integers(), st.lists(st.integers()), st.lists(st.booleans(), max_size=3),
                 st.lists(st.one_of(st.integers(), st.floats(allow_nan=False), st.none()), max_size=4)))
def test_a_logged_size_reads_as_json_dumps_writes_it(value):
    """A tensor's sizes and strides are shown as `json.dumps` writes them (a list of ints without its encoder)."""
    assert tables_module._text(value) == ("" if value is None else value if isinstance(value, str) else json.dumps(value))


def test_huge_payloads_degrade_to_plain_text_and_links(tmp_path, report_of):
    code = "\n".join(f"x{i} = {i}  # a line of generated code" for i in range(80_000))  # ~3 MB
    report, out = report_of(write_log(tmp_path / "a.log", [line({"inductor_output_code": {"filename": "/t/cbig.py"}, **cid()}, code)]))
    code_page = (out / "-_0_0_0" / "inductor_output_code_cbig_0.html").read_text()
    assert 'data-colour="python"' in code_page and 'id="L80000"' in code_page  # coloured by the page ...
    assert "colours this text up to line 50,000" in code_page  # ... as far as it can, and it says so
    compile_page_html = (out / "-_0_0_0" / "index.html").read_text()
    assert "Not shown here: too large to show inline" in compile_page_html
    assert broken_links(out) == []


def test_highlight_and_inline_budgets(tmp_path, report_of):
    """With Pygments asked for, past its budget texts are left to the page's script; past the inline
    budget they are linked, and the page says why."""
    code = "\n".join(f"x{i} = {i}" for i in range(2000))
    lines = [line({"inductor_output_code": {"filename": f"/t/c{n}.py"}, **cid(n, 0, 0)}, code + f"\n# {n}") for n in range(3)]
    report, out = report_of(write_log(tmp_path / "a.log", lines), highlight_mb=0.05, inline_mb=0.06)
    pages = [(out / f"-_{n}_0_0" / f"inductor_output_code_c{n}_{n}.html").read_text() for n in range(3)]
    assert ['<span class="m">' in p for p in pages] == [True, True, False]
    assert 'data-colour="python"' in pages[2] and 'data-colour' not in pages[0]
    compile_pages = [(out / f"-_{n}_0_0" / "index.html").read_text() for n in range(3)]
    assert ["(--inline-mb)" in p for p in compile_pages] == [False, False, True]
    assert broken_links(out) == []


def _text(n: int) -> str:
    return f"{n:>999}"  # 1,000 bytes


def _interleaved_log(tmp_path):
    """Compile id 0 logs first but its texts last: the plan goes an id after another, in the order
    ids first logged, not in the texts' log order (a budget of 2 texts shows id 0's two, not id 1's)."""
    lines = [line({"dynamo_start": {"stack": []}, **cid(0, 0, 0)}), line({"dynamo_start": {"stack": []}, **cid(1, 0, 0)})]
    lines += [line({"dynamo_output_graph": {}, **cid(frame, 0, 0)}, _text(n)) for frame in (1, 0) for n in range(2)]
    return write_log(tmp_path / "interleaved.log", lines)


def _many_texts_log(tmp_path):
    """Compile id 0 logs 5 graphs past what its page reads (PAGE_RECORDS_PER_KIND); id 1 one graph. A
    budget of 1,001.5 texts shows id 1's only if id 0's unread graphs are not counted."""
    lines = [line({"dynamo_output_graph": {}, **cid(0, 0, 0)}, _text(n)) for n in range(PAGE_RECORDS_PER_KIND + 5)]
    lines.append(line({"dynamo_output_graph": {}, **cid(1, 0, 0)}, _text(1)))
    return write_log(tmp_path / "many.log", lines)


LOGS = {"transformer": lambda tmp_path: fixture("transformer"), "interleaved": _interleaved_log, "many texts": _many_texts_log}


@pytest.mark.parametrize("log, inline_mb", [("transformer", 8), ("transformer", 0.05), ("interleaved", 0.002), ("many texts", 1.0015)])
def test_the_inline_plan_noted_while_reading_is_the_plan_of_a_pass_over_every_record(tmp_path, monkeypatch, log, inline_mb):
    """The texts the pages show inline are chosen from those noted while reading (no second read of
    every compile id's records): the pages must be those a pass over every id's records makes, within
    the budget or past it, and for an id with more records than its page reads."""
    from tlparse_py import pipeline
    from tlparse_py.report.views.sections import PageBuilder

    whole_pass = PageBuilder.plan_inline
    noted = []

    def as_noted(self, keys, records_of, texts=None):
        noted.append(texts)
        return whole_pass(self, keys, records_of, texts)

    def read_back(self, keys, records_of, texts=None):
        return whole_pass(self, keys, records_of, None)

    source = LOGS[log](tmp_path)
    reports = {}
    for name, plan in (("noted", as_noted), ("read back", read_back)):
        monkeypatch.setattr(PageBuilder, "plan_inline", plan)
        reports[name] = tmp_path / name
        pipeline.write_report(source, reports[name], options=pipeline.Options(inline_mb=inline_mb))
    assert noted and noted[0] is not None and len(noted[0].lines) > 0
    files = {name: {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()} for name, out in reports.items()}
    assert files["noted"].keys() == files["read back"].keys()
    assert [name for name in files["noted"] if files["noted"][name] != files["read back"][name]] == []
    pages = b"".join(data for name, data in files["noted"].items() if name.endswith("/index.html"))
    assert (b"(--inline-mb)" in pages) == (log == "interleaved" or inline_mb < 1)  # the budget was reached where it is small
    if log != "transformer":  # which id's texts the budget reached
        shown = {key: (out / key / "index.html").read_text().count("(--inline-mb)") for key in ("-_0_0_0", "-_1_0_0") for out in [reports["noted"]]}
        assert shown == ({"-_0_0_0": 0, "-_1_0_0": 2} if log == "interleaved" else {"-_0_0_0": 0, "-_1_0_0": 0})


def test_subgraph_names_are_grouped(tmp_path, report_of):
    lines = [
        line({"artifact": {"name": "before_pre_grad_graph", "encoding": "string"}, "subgraph_name": "subgraph_0", **cid()}, "a"),
        line({"artifact": {"name": "before_pre_grad_graph", "encoding": "string"}, "subgraph_name": "subgraph_1", **cid()}, "b"),
        line({"dynamo_output_graph": {}, **cid()}, "g"),
    ]
    report, out = report_of(write_log(tmp_path / "a.log", lines))
    page = (out / "-_0_0_0" / "index.html").read_text()
    assert 'id="subgraphs"' in page and "subgraph_0" in page and "subgraph_1" in page


def test_index_links_every_compile_from_table_and_trie(report_of):
    report, out = report_of(fixture("recompile"))
    index = (out / "index.html").read_text()
    for key in report.directory:
        if summary.is_compile(key):
            assert index.count(f'href="{compile_page_url(key)}"') >= 2, key  # table and files list (and trie)
    assert json.loads((out / "compile_directory.json").read_text())  # still tlparse's schema


def test_pages_built_in_two_processes_are_identical(tmp_path, monkeypatch):
    """Big reports build pages in a forked process too; the report must not depend on it."""
    from tlparse_py.report import jobs
    from tlparse_py import pipeline

    log = fixture("transformer")
    outputs = {}
    for name, threshold in (("serial", 10**9), ("parallel", 1)):
        monkeypatch.setattr(jobs, "PARALLEL_PAGES", threshold)
        out = tmp_path / name
        pipeline.write_report(log, out, options=pipeline.Options(highlight_mb=0.2, inline_mb=1))
        outputs[name] = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert outputs["serial"].keys() == outputs["parallel"].keys()
    assert [name for name in outputs["serial"] if outputs["serial"][name] != outputs["parallel"][name]] == []


def test_a_page_that_fails_in_the_child_is_reported(tmp_path, monkeypatch):
    """Pages the forked child could not build are counted by the parent, in page order."""
    import os
    import time

    from tlparse_py.report import jobs
    from tlparse_py import pipeline

    monkeypatch.setattr(jobs, "PARALLEL_PAGES", 1)
    monkeypatch.setattr(jobs, "CLAIM_JOBS", 1)
    parent, original = os.getpid(), compile_view.compile_page

    def broken(inputs, pages, position, records, builder, *outline):
        if os.getpid() == parent:
            time.sleep(0.05)  # the parent is slow: the child takes jobs too
            return original(inputs, pages, position, records, builder, *outline)
        raise RuntimeError(f"boom {position}")  # every page the child builds

    monkeypatch.setattr(pipeline, "compile_page", broken)
    report = pipeline.write_report(fixture("graph_break"), tmp_path / "out")
    failed = sorted(p.parent.name for p in (tmp_path / "out").glob("*/index.html") if "RuntimeError: boom" in p.read_text())
    assert failed and report.stats["fail_parser"] == len(failed)
    problems = [d.problem for d in report.diagnostics.kept]
    assert len(problems) == len(failed) and all(p.startswith("could not build the page of ") for p in problems)
    positions = [int(d.detail.rpartition(" ")[2]) for d in report.diagnostics.kept]
    assert positions == sorted(positions)  # in page order, whichever process built them


def test_the_record_pages_started_ahead_of_the_compiles(tmp_path, monkeypatch):
    """The pages kinds asked for (metrics, code...) are started on by a forked child while this
    process builds the compiles; the other two take them too once free. A page none of them could
    build is counted in page order; a child that dies has its pages built here; the report is the
    one a serial run writes."""
    import os
    import time

    from tlparse_py.report import jobs
    from tlparse_py import pipeline

    def files_of(out):
        return {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    monkeypatch.setattr(jobs, "PARALLEL_PAGES", 10**9)
    pipeline.write_report(fixture("graph_break"), tmp_path / "serial")
    monkeypatch.setattr(jobs, "PARALLEL_PAGES", 1)
    monkeypatch.setattr(jobs, "CLAIM_JOBS", 1)
    parent, forks, fork = os.getpid(), [], jobs.PageJobs._fork

    def counted_fork(self, work):
        pid, reader = fork(self, work)
        forks.append(pid)
        return pid, reader

    monkeypatch.setattr(jobs.PageJobs, "_fork", counted_fork)
    original = dict(pipeline.PAGE_VIEWS)
    monkeypatch.setattr(pipeline, "PAGE_VIEWS", {**original, "metrics": lambda build, page: os._exit(3) if os.getpid() != parent
                                                 else original["metrics"](build, page)})
    report = pipeline.write_report(fixture("graph_break"), tmp_path / "died")
    assert len(forks) == 2 and report.diagnostics.kept == []  # the child ahead, then the compile pages' child
    assert files_of(tmp_path / "died").keys() == files_of(tmp_path / "serial").keys()

    def broken(build, page):
        if os.getpid() == parent:
            time.sleep(0.02)  # this process is slow: the children take pages too
            return original[page.view](build, page)
        raise RuntimeError(f"boom {page.url}")

    monkeypatch.setattr(pipeline, "PAGE_VIEWS", {view: broken for view in original})
    report = pipeline.write_report(fixture("graph_break"), tmp_path / "broken")
    failed = [d.detail.rpartition(" ")[2] for d in report.diagnostics.kept]
    assert failed and report.stats["fail_parser"] == len(failed)
    numbers = [int(re.search(r"_(\d+)\.", url).group(1)) for url in failed]
    assert numbers == sorted(numbers)  # in page order, whichever process built them
    assert all("RuntimeError: boom" in (tmp_path / "broken" / url).read_text() for url in failed)


def test_a_failure_while_the_compiles_are_built_stops_the_child_ahead(tmp_path, monkeypatch):
    """Something fails in this process while the forked child is on the record pages: the child
    is killed before the error goes up (it must not go on writing into the staging folder)."""
    import os
    import time

    from tlparse_py.report import jobs
    from tlparse_py import pipeline

    monkeypatch.setattr(jobs, "PARALLEL_PAGES", 1)
    monkeypatch.setattr(jobs, "CLAIM_JOBS", 1)
    started, fork = [], jobs.PageJobs._fork

    def slow_fork(self, work):
        def slow():
            time.sleep(1)  # long enough to outlive this process's failure
            return work()
        pid, reader = fork(self, slow)
        started.append(pid)
        return pid, reader

    def broken(analysis):
        raise RuntimeError("no compiles")

    monkeypatch.setattr(jobs.PageJobs, "_fork", slow_fork)
    monkeypatch.setattr(pipeline, "ready_for_pages", broken)
    with pytest.raises(RuntimeError, match="no compiles"):
        pipeline.write_report(fixture("graph_break"), tmp_path / "out")
    assert len(started) == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(started[0], os.WNOHANG)  # reaped: killed and waited for
    left = sorted(p.name for p in tmp_path.iterdir())
    time.sleep(1.5)  # what a surviving child would write meanwhile
    assert sorted(p.name for p in tmp_path.iterdir()) == left and not any(".partial-" in name for name in left)


def test_the_search_index_from_the_pages_outlines(tmp_path, monkeypatch):
    """With forked pages, each process takes the search index's pieces from the outlines its pages
    are built from, and the child hands its own over: the index is the one a serial run writes. A
    bug in the index costs the search box, not the report; a child that dies has the pieces it
    gathered made again here."""
    import os

    from tlparse_py.report import jobs
    from tlparse_py import pipeline

    def index_of(out):
        return {p.name: p.read_bytes() for p in (out / "static").rglob("*.js") if "index" in p.name}

    monkeypatch.setattr(jobs, "PARALLEL_PAGES", 10**9)
    pipeline.write_report(fixture("graph_break"), tmp_path / "serial")
    monkeypatch.setattr(jobs, "PARALLEL_PAGES", 1)
    monkeypatch.setattr(jobs, "CLAIM_JOBS", 1)
    pipeline.write_report(fixture("graph_break"), tmp_path / "forked")
    assert index_of(tmp_path / "forked") == index_of(tmp_path / "serial") != {}

    parent, original = os.getpid(), pipeline.build_index

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(pipeline, "build_index", broken)
    report = pipeline.write_report(fixture("graph_break"), tmp_path / "broken")
    assert [(d.problem, d.detail) for d in report.diagnostics.kept] == [("could not build the search index", "RuntimeError: boom")]

    def breaks_after_a_shard(*args, **kwargs):  # a shard is written as soon as it is made, the manifest last
        files = original(*args, **kwargs)
        yield next(files)
        raise RuntimeError("boom after a shard")

    monkeypatch.setattr(pipeline, "build_index", breaks_after_a_shard)
    report = pipeline.write_report(fixture("graph_break"), tmp_path / "broken_late")
    assert [d.detail for d in report.diagnostics.kept] == ["RuntimeError: boom after a shard"]
    assert (tmp_path / "broken_late" / "static" / "search" / "index-0.js").exists()
    default = (STATIC_DIR / "search-index.js").read_bytes()
    assert (tmp_path / "broken_late" / "static" / "search-index.js").read_bytes() == default  # no manifest names it: the box stays hidden

    monkeypatch.setattr(pipeline, "build_index", original)
    pieces = pipeline.page_pieces

    def dies_in_the_child(*args, **kwargs):
        if os.getpid() != parent:
            os._exit(3)
        return pieces(*args, **kwargs)

    monkeypatch.setattr(pipeline, "page_pieces", dies_in_the_child)
    report = pipeline.write_report(fixture("graph_break"), tmp_path / "died")
    assert report.diagnostics.kept == []
    assert index_of(tmp_path / "died") == index_of(tmp_path / "serial")


