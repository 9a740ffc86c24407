"""The pages written once per record or compile id (code, pass diff, guards, guard details, kernel
stack traces, provenance) and the index's pieces written once per compile (`html.index_rows`) are
plain Python (`report.html`). They were Jinja templates: EXPECTED holds what those templates wrote
for the models below (every value hostile, the branches each takes), which the functions must write
byte for byte, inside the shell every page has."""

from __future__ import annotations

import pytest

from tlparse_py.analysis.program import ProgramExit
from tlparse_py.report import render
from tlparse_py.report.highlight import Lines
from tlparse_py.report.html import index_rows, shell
from tlparse_py.report.html.escaping import script_json
from tlparse_py.report.views import pages as P
from tlparse_py.report.views.common import FrameView

X = "<x&'\">"


def page(**fields):
    base = dict(title="dir\\sub/t" + X, root="../", source={"path": "/l/" + X}, compile_id="[0/0]", kind="k" + X, lineno=7,
                compile_page="-_0_0_0/index.html")
    return {**base, **fields}


F = [FrameView("f" + X + ".py", 3, "fn" + X, "x = 1", None), FrameView("g.py", 4, "g", "", "dump_file/e.html#L4")]

MODELS = {
    "code": P.CodePage(**page(), lines=Lines(html=["a = 1", "<span>b</span>"], lang="python", highlighted=True), lang="python", raw_url="raw/" + X),
    "pass_diff": P.PassDiffPage(**page(), before=Lines(html=["a", "b", "c"], lang="python", highlighted=True),
                                after=Lines(html=["a", "B", "c"], lang="python", highlighted=True), before_url="b" + X, after_url="a" + X,
                                baseline="base" + X, added=1, removed=1),
    "guards": P.GuardsPage(**page(), guards=["L['x'] < 3" + X, "G"]),
    "guard_info": P.GuardInfoPage(**page(), expr="s0 > 1" + X, result="True" + X, user_stack=F, stack=[], locals=[("x", "1" + X)], symbols=[],
                                  sources=[("s0", "L['x']" + X)],
                                  provenance=[P.ExpressionNode(0, "r" + X, "m", "a, b", F[:1], []), P.ExpressionNode(1, "r2", "m2" + X, "", [], F[1:])]),
    "guard_info_empty": P.GuardInfoPage(**page(compile_id=None), expr="e", result=None, user_stack=[], stack=[], locals=[], symbols=[("a", "b")],
                                        sources=[], provenance=[]),
    "stack_traces": P.StackTracesPage(**page(), kernels=[("k" + X, ["t1\nt2" + X, "t3"]), ("k2", [])]),
    "provenance": P.ProvenancePage(**page(), pre=["a" + X, "b"], post=["c"], code=[], code_kind="cpp", code_offset=2, mappings=script_json({"<a>": [1]}),
                                   has_data=True, inputs={"pre" + X: "u/" + X, "post": "v"}),
    "provenance_none": P.ProvenancePage(**page(compile_id=None), pre=[], post=[], code=["x"], code_kind="python", code_offset=0, mappings=script_json({}),
                                        has_data=False, inputs={}),
}

TERMS = [{"label": "[0/0]" + X, "url": "-_0_0_0/index.html", "status": "ok"}, {"label": "[1/0]", "url": None, "status": "missing"}]
ROW = {"generation": 1, "page": "-_0_0_0/index.html", "label": "[0/0]", "attempts": [{"page": "p/index.html", "label": "[0/0_1]"}, {"page": None, "label": "[0/0_2]" + X}],
       "status": "error", "name": "fn" + X, "via": "via" + X, "location": "f.py:3", "seconds": 1.25, "split": "fwd" + X, "graph_ops": 12,
       "cache": [("hit", 1), ("miss", 2)], "reason": "why" + X, "config_unusual": ["a=1" + X, "b=2"]}
ENTRY = {"anchor": "cid-0_0_0", "page": "-_0_0_0/index.html", "label": "[0/0]" + X, "status": "ok",
         "capture": {"graph": 1, "compiles": [{"label": "[2/0]" + X, "page": "-_2_0_0/index.html", "status": "ok"}, {"label": "[3/0]", "page": None, "status": "error"}]},
         "compile_time": 2.5, "time_split": "split" + X, "time_is": "forward", "artifacts": [], "files_omitted": 1234, "crowded": [],
         "kinds": [{"known": True, "title": "t" + X, "kind": "dynamo_start", "count": 1}, {"known": False, "title": "u", "kind": "odd" + X, "count": 3}]}
TRIE = [{"kind": "open", "frame": F[0], "ids": TERMS[:1], "more": 0}, {"kind": "frame", "frame": F[1], "ids": TERMS, "more": 1500},
        {"kind": "close", "frame": None, "ids": [], "more": 0}, {"kind": "open", "frame": F[1], "ids": [], "more": 0},
        {"kind": "close", "frame": None, "ids": [], "more": 0}]
LABELS = {"ok": "OK", "error": "Error" + X, "missing": "Missing"}
RANKS = {"error": 0, "ok": 1}

PIECES = {
    "ids": lambda: index_rows.ids(TERMS, "../"),
    "compile_row": lambda: index_rows.compile_row(ROW, 3, False, LABELS, RANKS),
    "compile_row_compiling": lambda: index_rows.compile_row(
        {**ROW, "status": "odd", "generation": 0, "attempts": [], "via": None, "seconds": None, "graph_ops": None, "cache": [], "reason": "",
         "config_unusual": ["c"]}, 4, True, LABELS, RANKS),
    "compile_id_section": lambda: index_rows.compile_id_section(ENTRY, "../", LABELS),
    "compile_id_section_bare": lambda: index_rows.compile_id_section(
        {**ENTRY, "page": None, "status": None, "capture": None, "compile_time": None, "files_omitted": 0, "kinds": []}, "", LABELS),
    "trie": lambda: index_rows.trie(TRIE, "../"),
}

EXPECTED = {
    'code': '<h1>t&lt;x&amp;&#39;&#34;&gt;</h1>\n<p class="muted"><code>k&lt;x&amp;&#39;&#34;&gt;</code> record at line 7 of the log, compile id <a href="../-_0_0_0/index.html">[0/0]</a> · <a href="../raw/&lt;x&amp;&#39;&#34;&gt;">raw text</a> · 2 lines</p>\n<pre class="code"><span id="L1">a = 1</span><span id="L2"><span>b</span></span></pre>\n',
    'pass_diff': '<h1>dir\\sub/t&lt;x&amp;&#39;&#34;&gt;</h1>\n<p class="muted"><code>k&lt;x&amp;&#39;&#34;&gt;</code> record at line 7 of the log, compile id <a href="../-_0_0_0/index.html">[0/0]</a>.\nThe graph after the pass (<a href="../a&lt;x&amp;&#39;&#34;&gt;">file</a>) beside the graph before it: <code>base&lt;x&amp;&#39;&#34;&gt;</code> (<a href="../b&lt;x&amp;&#39;&#34;&gt;">file</a>).\n<span class="diffstat"><span class="added">+1</span> <span class="removed">−1</span></span>· <a href="../index.html">vLLM compilation summary</a></p>\n<div class="diff-wrapper"><table class="diff-table"><colgroup><col class="line-num-col"><col class="code-col"><col class="line-num-col"><col class="code-col"></colgroup><tr class="diff-hunk"><td colspan="4">@@ -1,3 +1,3 @@</td></tr><tr><td class="line-num">1</td><td class="code-cell">a</td><td class="line-num">1</td><td class="code-cell">a</td></tr><tr><td class="line-num">2</td><td class="code-cell diff-del">b</td><td class="line-num">2</td><td class="code-cell diff-add">B</td></tr><tr><td class="line-num">3</td><td class="code-cell">c</td><td class="line-num">3</td><td class="code-cell">c</td></tr></table></div>\n',
    'guards': '<h1>Guards</h1>\n<p class="muted">2 guards from the <code>dynamo_guards</code> record at line 7, compile id <a href="../-_0_0_0/index.html">[0/0]</a>.</p>\n<ul class="guards">\n<li><code>L[&#39;x&#39;] &lt; 3&lt;x&amp;&#39;&#34;&gt;</code></li>\n<li><code>G</code></li>\n</ul>\n',
    'guard_info': '<h1>Symbolic shapes information</h1>\n<p>More detailed information on <code>s0 &gt; 1&lt;x&amp;&#39;&#34;&gt;</code>, which was decided as <code>True&lt;x&amp;&#39;&#34;&gt;</code><span class="muted">(<code>k&lt;x&amp;&#39;&#34;&gt;</code> record at line 7 of the log)</span>.</p>\n\n<details class="section" open><summary>User stack</summary><ol class="stack"><li>f&lt;x&amp;&#39;&#34;&gt;.py:3 in <b>fn&lt;x&amp;&#39;&#34;&gt;</b> <span class="loc">x = 1</span></li><li><a href="../dump_file/e.html#L4">g.py:4</a> in <b>g</b></li></ol></details>\n<details class="section"><summary>Framework stack</summary><p class="muted">No stack was logged.</p></details>\n\n<details class="section" open><summary>Locals</summary>\n<div class="scroll"><table class="fields"><tbody>\n<tr><td class="k">x</td><td class="v">1&lt;x&amp;&#39;&#34;&gt;</td></tr>\n</tbody></table></div><h3>Symbol sources</h3><div class="scroll"><table class="fields"><tbody>\n<tr><td class="k">s0</td><td class="v">L[&#39;x&#39;]&lt;x&amp;&#39;&#34;&gt;</td></tr>\n</tbody></table></div></details>\n\n<details class="section" open><summary>Provenance of this expression (2 nodes)</summary>\n<ul class="provenance">\n<li class="depth-0">\n<b><code>r&lt;x&amp;&#39;&#34;&gt;</code></b> <span class="muted">= m(a, b)</span>\n<details><summary>user stack</summary><ol class="stack"><li>f&lt;x&amp;&#39;&#34;&gt;.py:3 in <b>fn&lt;x&amp;&#39;&#34;&gt;</b> <span class="loc">x = 1</span></li></ol></details></li>\n<li class="depth-1">\n<b><code>r2</code></b> <span class="muted">= m2&lt;x&amp;&#39;&#34;&gt;()</span>\n<details><summary>framework stack</summary><ol class="stack"><li><a href="../dump_file/e.html#L4">g.py:4</a> in <b>g</b></li></ol></details></li>\n</ul>\n</details>\n',
    'guard_info_empty': '<h1>Symbolic shapes information</h1>\n<p>More detailed information on <code>e</code><span class="muted">(<code>k&lt;x&amp;&#39;&#34;&gt;</code> record at line 7 of the log)</span>.</p>\n\n<details class="section" open><summary>User stack</summary><p class="muted">No stack was logged.</p></details>\n<details class="section"><summary>Framework stack</summary><p class="muted">No stack was logged.</p></details>\n\n<details class="section" open><summary>Locals</summary>\n<p class="muted">No locals were logged.</p><h3>Symbols</h3><div class="scroll"><table class="fields"><tbody>\n<tr><td class="k">a</td><td class="v">b</td></tr>\n</tbody></table></div></details>\n\n<details class="section" open><summary>Provenance of this expression (0 nodes)</summary>\n<p class="muted">No expression graph was logged for this guard.</p></details>\n',
    'stack_traces': '<h1>Kernel stack traces</h1>\n<p class="muted">Which user code each generated kernel came from (record at line 7).</p>\n<h3>k&lt;x&amp;&#39;&#34;&gt;</h3>\n<pre class="code">t1\nt2&lt;x&amp;&#39;&#34;&gt;</pre>\n<pre class="code">t3</pre>\n<h3>k2</h3>\n',
    'provenance': '<h1>Inductor provenance tracking <a href="../-_0_0_0/index.html">[0/0]</a></h1>\n<p class="muted">Hover or click a line to see where it came from and what it became: pre-grad graph ↔ post-grad graph ↔ generated C++ code. Bold lines have a mapping. Inputs:\n<a href="../u/&lt;x&amp;&#39;&#34;&gt;">pre&lt;x&amp;&#39;&#34;&gt;</a>, <a href="../v">post</a>.</p>\n<div class="provenance-panes" data-code-kind="cpp" data-code-offset="2">\n<section><h3>Pre-grad graph</h3><pre id="preGradGraph" class="pane"><span class="pl" data-n="1">a&lt;x&amp;&#39;&#34;&gt;</span><span class="pl" data-n="2">b</span></pre></section>\n<section><h3>Post-grad graph</h3><pre id="postGradGraph" class="pane"><span class="pl" data-n="1">c</span></pre></section>\n<section><h3>Generated code</h3><pre id="generatedCode" class="pane"></pre></section>\n</div>\n<script id="lineMappings" type="application/json">{\n  "\\u003ca\\u003e": [\n    1\n  ]\n}</script>\n<script src="../static/provenance.js"></script>\n',
    'provenance_none': '<h1>Inductor provenance tracking (unknown)</h1>\n<p class="note">This compile id has no provenance artifacts (<code>inductor_provenance_tracking_node_mappings</code>). Set <code>torch._inductor.config.trace.provenance_tracking_level = 1</code> to log them.</p>\n<div class="provenance-panes" data-code-kind="python" data-code-offset="0">\n<section><h3>Pre-grad graph</h3><pre id="preGradGraph" class="pane"></pre></section>\n<section><h3>Post-grad graph</h3><pre id="postGradGraph" class="pane"></pre></section>\n<section><h3>Generated code</h3><pre id="generatedCode" class="pane"><span class="pl" data-n="1">x</span></pre></section>\n</div>\n<script id="lineMappings" type="application/json">{}</script>\n<script src="../static/provenance.js"></script>\n',
    'ids': '<span class="ids"><a class="status status-ok" href="../-_0_0_0/index.html">[0/0]&lt;x&amp;&#39;&#34;&gt;</a> <span class="status status-missing">[1/0]</span> </span>',
    'compile_row': '<tr><td data-sort-value="3" title="compiled after torch._dynamo.reset(), which makes torch number compile ids from [0/0] again"><a href="-_0_0_0/index.html">[0/0]</a><br><span class="muted">attempts <a href="p/index.html">[0/0_1]</a> [0/0_2]&lt;x&amp;&#39;&#34;&gt; </span></td><td data-sort-value="0"><span class="status status-error" title="Error&lt;x&amp;&#39;&#34;&gt;">Error&lt;x&amp;&#39;&#34;&gt;</span></td><td><code>fn&lt;x&amp;&#39;&#34;&gt;</code><br><span class="muted">called at <code>f.py:3</code>, via&lt;x&amp;&#39;&#34;&gt;</span></td><td class="num" data-sort-value="1.25" title="fwd&lt;x&amp;&#39;&#34;&gt;">1.25 s</td><td class="num">12</td><td data-sort-value="2000001"><span class="cache cache-hit">1 hit</span> <span class="cache cache-miss">2 miss</span> </td><td class="why">why&lt;x&amp;&#39;&#34;&gt;<br><span class="muted">config unlike most compiles: <code>a=1&lt;x&amp;&#39;&#34;&gt;</code>; <code>b=2</code></span></td></tr>\n',
    'compile_row_compiling': '<tr><td data-sort-value="4"><a href="-_0_0_0/index.html">[0/0]</a></td><td data-sort-value="2"><span class="status status-missing" title="started, not ended yet (a live report)">compiling…</span></td><td><code>fn&lt;x&amp;&#39;&#34;&gt;</code></td><td class="num" data-sort-value="" title="fwd&lt;x&amp;&#39;&#34;&gt;"><span class="muted">unknown</span></td><td class="num"></td><td data-sort-value="0"></td><td class="why"><span class="muted">config unlike most compiles: <code>c</code></span></td></tr>\n',
    'compile_id_section': '<section class="compile" id="cid-0_0_0">\n<h3><a href="-_0_0_0/index.html">[0/0]&lt;x&amp;&#39;&#34;&gt;</a> <span class="status status-ok" title="OK">OK</span><span class="muted">compiled autograd graph 1: the capture of the backward graph, not a compile</span> <span class="muted" title="split&lt;x&amp;&#39;&#34;&gt;">2.50 s forward</span></h3>\n<p class="kinds">Compiled as <a class="status status-ok" href="-_2_0_0/index.html">[2/0]&lt;x&amp;&#39;&#34;&gt;</a> <span class="status status-error">[3/0]</span> </p><p class="note">…and 1,234 more files of this compile id, listed in <a href="../compile_directory.json">compile_directory.json</a>.</p><p class="kinds">Records: <span class="kind" title="t&lt;x&amp;&#39;&#34;&gt;">dynamo_start</span> <span class="kind unknown" title="u">odd&lt;x&amp;&#39;&#34;&gt; ×3</span> — <a href="-_0_0_0/index.html">details</a></p></section>\n',
    'compile_id_section_bare': '<section class="compile" id="cid-0_0_0">\n<h3>[0/0]&lt;x&amp;&#39;&#34;&gt; </h3>\n</section>\n',
    'trie': '<ul class="trie">\n<li><span class="ids"><a class="status status-ok" href="../-_0_0_0/index.html">[0/0]&lt;x&amp;&#39;&#34;&gt;</a> </span>f&lt;x&amp;&#39;&#34;&gt;.py:3 in <b>fn&lt;x&amp;&#39;&#34;&gt;</b> <span class="loc">x = 1</span><details class="branch" open><summary>calls from here</summary><ul><li><span class="ids"><a class="status status-ok" href="../-_0_0_0/index.html">[0/0]&lt;x&amp;&#39;&#34;&gt;</a> <span class="status status-missing">[1/0]</span> </span><span class="muted">and 1,500 more</span> <a href="../dump_file/e.html#L4">g.py:4</a> in <b>g</b></li>\n</ul></details></li>\n<li><a href="../dump_file/e.html#L4">g.py:4</a> in <b>g</b></li>\n</ul>',
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_record_page_writes_what_its_template_wrote(name):
    model = MODELS[name]
    html = render.render_page(model)
    head = shell.shell_head(model.title, model.root, model.source["path"], None, model.usual_index, model.failures_link, model.compile_page,
                            model.compile_id)
    foot = shell.shell_foot(model.root, model.source["path"])
    assert html.startswith(head) and html.endswith(foot)
    assert html[len(head):-len(foot)] == EXPECTED[name]
    assert "<x&" not in html  # every value from the log escaped


@pytest.mark.parametrize("name", sorted(PIECES))
def test_an_index_piece_writes_what_its_macro_wrote(name):
    assert PIECES[name]() == EXPECTED[name]


def test_the_live_index_gets_the_same_pieces_by_name():
    """`render_macro` (what views.live_index calls) answers with the Python pieces, as Markup."""
    assert render.render_macro("compile_row", ROW, 3, False, LABELS, RANKS) == EXPECTED["compile_row"]
    assert render.render_macro("compile_id_section", ENTRY, "../", LABELS) == EXPECTED["compile_id_section"]
    assert render.render_macro("trie", TRIE, "../") == EXPECTED["trie"]
    assert render.render_macro("ids", TERMS, "../") == EXPECTED["ids"]
    assert str(render.render_macro("program_exit", ProgramExit("x" + X, 0, None))).startswith('<p class="muted program-exit"')


def test_the_index_calls_the_rows_as_one_piece():
    rows = [ROW, {**ROW, "label": "[1/0]"}]
    assert index_rows.compile_rows(rows, frozenset({"[1/0]"}), LABELS, RANKS) == (
        index_rows.compile_row(rows[0], 1, False, LABELS, RANKS) + index_rows.compile_row(rows[1], 2, True, LABELS, RANKS))
    assert index_rows.compile_rows(rows, None, LABELS, RANKS).count("compiling…") == 0


def test_the_view_models_have_what_the_page_functions_read():
    """`html.models` describes each view model the page functions read (a Protocol naming its record
    in `views`): the record has every field the Protocol lists."""
    import importlib
    import inspect
    import re
    from typing import Protocol

    from tlparse_py.report.html import models

    protocols = [c for _, c in inspect.getmembers(models, inspect.isclass) if c.__module__ == models.__name__ and Protocol in c.__mro__]
    assert len(protocols) >= 15
    for protocol in protocols:
        named = re.search(r"`(views\.\w+|report\.\w+|analysis\.\w+)\.(\w+)`", protocol.__doc__ or "")
        assert named, f"{protocol.__name__} names no view model"
        module = f"tlparse_py.report.{named.group(1)}" if named.group(1).startswith("views.") else f"tlparse_py.{named.group(1)}"
        record = getattr(importlib.import_module(module), named.group(2))
        wanted = {name for base in protocol.__mro__ if base.__module__ == models.__name__ for name in base.__dict__.get("__annotations__", {})}
        fields = set(getattr(record, "__struct_fields__", ())) | {name for name in dir(record) if not name.startswith("_")}
        assert wanted and wanted <= fields, (protocol.__name__, wanted - fields)
