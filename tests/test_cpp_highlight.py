"""C++ in Inductor's CPU output code: the kernels inside Python string literals are highlighted as C++."""

from __future__ import annotations

import re
import shutil
from html import unescape
from pathlib import Path

import pytest

from conftest import TRACES
from tlparse_py.pipeline import Options, write_report
from tlparse_py.report.highlight import cpp_kernels, highlight_lines

KERNEL = """import torch
cpp_fused_add_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const float* in_ptr0, float* out_ptr0)
{
    /* a comment
       over two lines */
    for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(64L); x0+=static_cast<int64_t>(1L))
    {
        auto tmp0 = in_ptr0[static_cast<int64_t>(x0)];
        out_ptr0[static_cast<int64_t>(x0)] = tmp0 + static_cast<float>(1.0);
    }
}
''')


def call(args):
    return None
"""


def _text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html))


def _classes_of(html: str, word: str) -> set[str]:
    return set(re.findall(r'<span class="([\w ]+)">' + re.escape(word) + "</span>", html))


def test_the_kernel_literal_is_found():
    (opening, start, end), = cpp_kernels(KERNEL)
    assert KERNEL[opening:start] == "r'''"
    assert KERNEL[start:end].lstrip().startswith("#include") and KERNEL[end:end + 4] == "''')"
    assert cpp_kernels("x = 1\n") == [] and cpp_kernels("async_compile.cpp(r'''never closed") == []


def test_cpp_inside_the_literal_and_python_around_it():
    lines = highlight_lines(KERNEL, "python")
    assert lines.highlighted
    assert len(lines.html) == KERNEL.count("\n") + 1  # line anchors never shift
    assert [_text(h) for h in lines.html] == KERNEL.split("\n")
    kernel = "\n".join(lines.html[2:13])
    assert "k" in _classes_of(kernel, "for")
    assert "kt" in _classes_of(kernel, "float") and "kt" in _classes_of(kernel, "void") and "kt" in _classes_of(kernel, "int64_t")
    assert "cp" in _classes_of(kernel, "#include")
    assert '<span class="cm">/* a comment</span>' in kernel  # a token over two lines is closed at the line end
    assert 'class="s1"' not in kernel and 'class="sd"' not in kernel  # not one long string any more
    python = "\n".join(lines.html[:2] + lines.html[13:])
    assert "k" in _classes_of(python, "import") and "k" in _classes_of(python, "def") and "k" in _classes_of(python, "return")
    assert '<span class="sd">r\'\'\'</span>' in lines.html[1] and lines.html[13].startswith('<span class="sd">\'\'\'</span>')


def test_python_without_kernels_is_highlighted_as_before():
    text = "def f(x):\n    return 'async_compile'  # no kernel\n"
    lines = highlight_lines(text, "python")
    assert lines.highlighted and len(lines.html) == 3
    assert "kt" not in "".join(lines.html)


def _output_code_page(out: Path) -> Path:
    pages = [p for p in out.glob("*/inductor_output_code_*.html") if "cpp_pybinding" in p.read_text()]
    assert pages, "the fixture has CPU output code"
    return pages[0]


@pytest.mark.parametrize("scenario", ["inference", "training"])
def test_a_cpu_output_code_page_highlighted_by_pygments_has_cpp_tokens(tmp_path, scenario):
    log = next((TRACES / scenario).glob("dedicated_log*"))
    out = tmp_path / "out"
    write_report(log, out, options=Options(highlight_mb=4))  # Pygments on the server, as asked
    html = _output_code_page(out).read_text()
    start = html.index("cpp_pybinding")
    kernel = html[start:html.index("\'\'\'</span><span class=\"p\">)", start)]
    assert "k" in _classes_of(kernel, "for")
    assert {"kt"} & (_classes_of(kernel, "float") | _classes_of(kernel, "void") | _classes_of(kernel, "int64_t"))
    assert "k" in _classes_of(html, "def") and "k" in _classes_of(html, "import")  # the Python around it
    compile_page = (out / _output_code_page(out).parent.name / "index.html").read_text()
    assert 'class="kt"' in compile_page  # the same text inline on its compile page


def test_the_page_script_colours_kernels_past_the_budget(tmp_path):
    playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed")
    from logs import cid, line, write_log

    log = write_log(tmp_path / "a.log", [line({"inductor_output_code": {"filename": "/t/cx.py"}, **cid()}, KERNEL)])
    out = tmp_path / "out"
    write_report(log, out, options=Options(highlight_mb=0))
    page_path = out / "-_0_0_0" / "inductor_output_code_cx_0.html"
    assert 'data-colour="python"' in page_path.read_text()
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        page.goto(page_path.as_uri())
        page.wait_for_load_state("load")
        classes = page.evaluate("""() => {
            const out = {};
            for (const n of [2, 4, 8, 14, 17]) {
                out[n] = Array.from(document.querySelectorAll('#L' + n + ' span')).map(s => [s.className, s.textContent]);
            }
            return out;
        }""")
        text = page.evaluate("Array.from(document.querySelectorAll('pre.code > span')).map(s => s.textContent)")
        browser.close()
    assert text == KERNEL.split("\n")[: len(text)]
    assert ["sd", "r'''"] in classes["2"] and ["s2", "'float*'"] in classes["2"]
    assert ["kt", "void"] in classes["4"] and ["s", '"C"'] in classes["4"]
    assert ["k", "for"] in classes["8"] and ["kt", "int64_t"] in classes["8"]
    assert ["sd", "'''"] in classes["14"]
    assert ["k", "def"] in classes["17"]
    assert errors == []
