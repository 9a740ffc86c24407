"""The pages written once per compile id (compile page, compilation-metrics page) are plain Python
(`report.html`): they escape every value as the templates' autoescape did, never need the template
engine, and share their shell and pieces with the templates."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markupsafe import Markup, escape

from logs import cid, line, metrics, start, write_log
from tlparse_py.pipeline import write_report
from tlparse_py.report import render
from tlparse_py.report.html import parts, shell
from tlparse_py.report.html.escaping import esc
from tlparse_py.report.views.live import LiveBanner, LiveMark, OpenCompile

HOSTILE = "<script>alert('x')</script>&\"q\""


class HasHtml:
    def __html__(self) -> str:
        return "<i>trusted</i>"


@pytest.mark.parametrize("value", [
    "plain", HOSTILE, "", 0, 12, -3, 1.5, None, True, Markup("<b>safe</b>"), HasHtml(), ["<a>"], ("x", "&"),
    HOSTILE * 40, "plain " * 100,  # long texts (escaped in one pass past LONG_TEXT)
])
def test_a_value_is_escaped_as_markupsafe_escapes_it(value):
    assert esc(value) == str(escape(value))


def hostile_report(tmp_path: Path) -> Path:
    """A report of one compile whose frame, file and failure are hostile text."""
    lines = [
        start(filename=HOSTILE, fn=HOSTILE),
        metrics(co_name=HOSTILE, co_filename=HOSTILE, co_firstlineno=3, fail_type=HOSTILE, fail_reason=HOSTILE,
                fail_user_frame_filename=HOSTILE, fail_user_frame_lineno=4, restart_reasons=[HOSTILE],
                non_compliant_ops=[HOSTILE], entire_frame_compile_time_s=0.5),
        line({"artifact": {"name": HOSTILE, "encoding": "string"}, **cid()}, HOSTILE),
    ]
    out = tmp_path / "out"
    write_report(write_log(tmp_path / "dedicated_log_torch_trace_x.log", lines), out)
    return out


def test_the_hot_pages_never_write_a_log_string_unescaped(tmp_path):
    out = hostile_report(tmp_path)
    compile_page = (out / "-_0_0_0" / "index.html").read_text()
    metrics_page = next((out / "-_0_0_0").glob("compilation_metrics_*.html")).read_text()
    for page in (compile_page, metrics_page):
        assert "<script>" not in page
        assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&#34;q&#34;" in page
    assert metrics_page.count("&lt;script&gt;") >= 5  # frame, file, failure, reason, restart, op


def test_a_single_log_report_does_not_use_the_template_engine(tmp_path, monkeypatch):
    """Its pages (the hot pages, the index, the failures page) are Python: no template is rendered."""
    used: list[str] = []
    original = render.render

    def recording(template, context):
        used.append(template)
        return original(template, context)

    monkeypatch.setattr(render, "render", recording)
    out = hostile_report(tmp_path)
    assert (out / "-_0_0_0" / "index.html").is_file()
    assert (out / "index.html").is_file() and (out / "failures_and_restarts.html").is_file()
    assert used == []


def test_a_template_page_and_a_python_page_share_the_shell():
    """base.html.j2 is `shell_head` + content + `shell_foot`: the same bytes as `page_shell` (and
    `page_head` + content + `page_foot`, which the index writes in pieces)."""
    source = {"path": "/logs/<x>.log"}
    context = {"title": "T <1>", "root": "../", "source": source, "compile_id": None, "compile_page": "c/index.html",
               "usual_index": "tlparse_index.html", "failures_link": False}
    page = render.render("rank_failed.html.j2", {**context, "log": "l", "error": "e"})
    head = shell.shell_head("T <1>", "../", source["path"], None, "tlparse_index.html", False, "c/index.html", None)
    assert page.startswith(head)
    assert page.endswith(shell.shell_foot("../", source["path"]))
    assert "(unknown)" in head and "vLLM summary" in head and "Failures &amp; restarts" not in head
    model = type("Page", (), {**context, "source": source})()
    assert shell.page_head(model, None) == head and shell.page_foot(model) == shell.shell_foot("../", source["path"])


def test_a_live_page_has_its_mark_and_banner():
    banner = LiveBanner("14:47:50", 1, [OpenCompile("<0/0>", "x/index.html", "14:47:01", 1.5e9, "41 s")], "Note <n>.", 0)
    mark = LiveMark("p.html", "", banner, frozenset())
    head = shell.shell_head("t", "", "log", mark, "index.html", True, None, None)
    assert '<meta name="tlparse-live" data-root="" data-page="p.html" data-version="">' in head
    assert "1 compile so far, compiling <a href=\"x/index.html\">&lt;0/0&gt;</a> for <span data-since-epoch=\"1500000000.0\">41 s</span>." in head
    assert "Note &lt;n&gt;." in head


def test_the_templates_call_the_python_pieces():
    """A piece the templates share with the Python pages is defined once: as Python, called as
    `html.<name>` (a macro of that name only calls it)."""
    macros = (render.TEMPLATE_DIR / "_macros.html.j2").read_text()
    for name in render.TEMPLATE_PARTS:
        body = re.search(rf"{{% macro {name}\((.*?)\) -%}}(.*?){{%- endmacro %}}", macros, re.S)
        assert body is None or body.group(2).strip() == f"{{{{ html.{name}({body.group(1)}) }}}}", name
    assert re.findall(r"{% macro (\w+)\(", macros) == ["perfetto", "program_exit"]  # those the landing page still calls
    frame = render.environment().globals["html"].frame
    view = type("FrameView", (), {"file": "<f>.py", "line": 3, "name": "n&", "loc": "", "href": None, "source_href": None})()
    assert frame(view, "") == Markup(parts.frame(view, "")) == Markup("&lt;f&gt;.py:3 in <b>n&amp;</b>")
    assert render.render_macro("frame", view, "") == frame(view, "")


def test_the_metrics_page_shows_the_fields_the_metrics_kinds_declare_shown():
    """A field the page stops showing in a place of its own must go to its "Other Metrics" table."""
    from tlparse_py.analysis.kinds.builtin import METRICS_SHOWN
    from tlparse_py.report.html.metrics_page import FIELDS_SHOWN

    assert FIELDS_SHOWN == METRICS_SHOWN
