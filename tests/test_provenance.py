"""Provenance tracking (-i): tlparse's exact line mappings on its seven test logs, and the page."""

from __future__ import annotations

import json
import re

import pytest

from conftest import SHARED
from linkcheck import broken_links
from logs import cid, line, write_log
from tlparse_py.report import provenance

CORPUS = SHARED / "corpus" / "tlparse"
EXPECTED = SHARED / "spec" / "tlparse_provenance_expected_mappings.json"
CASES = {
    "test_provenance_tracking_aot_cuda": ("inductor_provenance_aot_cuda_log", "-_-_-_-"),
    "test_provenance_tracking_aot_debug_handle": ("inductor_provenance_aot_debug_handle_log", "-_-_-_-"),
    "test_provenance_tracking_aot_log": ("inductor_provenance_aot_log", "-_-_-_-"),
    "test_provenance_tracking_aot_log_old": ("inductor_provenance_aot_log_old", "-_-_-_-"),
    "test_provenance_tracking_jit_cuda": ("inductor_provenance_jit_cuda_log", "-_0_0_0"),
    "test_provenance_tracking_jit_debug_handle": ("inductor_provenance_jit_debug_handle_log", "-_0_0_0"),
    "test_provenance_tracking_jit_log": ("inductor_provenance_jit_log", "-_0_0_0"),
}


def embedded_mappings(page: str):
    """The JSON exactly as a browser (or tlparse's test) reads it from the script element."""
    text = re.search(r'<script id="lineMappings" type="application/json">(.*?)</script>', page, re.S).group(1)
    return json.loads(text)


def unordered(mappings):
    return {name: {k: sorted(v) for k, v in table.items()} for name, table in mappings.items()}


@pytest.mark.skipif(not EXPECTED.is_file(), reason="../shared spec not present")
@pytest.mark.parametrize("test", sorted(CASES))
def test_line_mappings_equal_tlparse(report_of, test):
    case, folder = CASES[test]
    report, out = report_of(CORPUS / f"{case}.txt", provenance=True)
    page = (out / f"provenance_tracking_{folder}.html").read_text()
    expected = json.loads(EXPECTED.read_text())[test]
    assert unordered(embedded_mappings(page)) == unordered(expected)
    assert broken_links(out) == []


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared corpus not present")
def test_every_compile_id_gets_a_page_and_the_index_lists_them(report_of):
    report, out = report_of(CORPUS / "inductor_provenance_jit_log.txt", provenance=True)
    assert (out / "provenance_tracking_-_-_-_-.html").is_file() and (out / "provenance_tracking_-_0_0_0.html").is_file()
    index = (out / "index.html").read_text()
    assert 'href="provenance_tracking_-_0_0_0.html"' in index and "(no provenance artifacts)" in index


def test_log_text_cannot_break_out_of_the_mappings_script(tmp_path, report_of):
    mappings = {"preToPost": {"x</script><script>alert(1)": ["y"]}, "cppCodeToPost": {}, "postToCppCode": {}}
    lines = [
        line({"artifact": {"name": "before_pre_grad_graph", "encoding": "string"}, **cid()}, "x</script><script>alert(1) = f(a)"),
        line({"artifact": {"name": "after_post_grad_graph", "encoding": "string"}, **cid()}, "y = g(b)"),
        line({"artifact": {"name": "inductor_provenance_tracking_node_mappings", "encoding": "json"}, **cid()}, json.dumps(mappings)),
    ]
    _, out = report_of(write_log(tmp_path / "a.log", lines), provenance=True)
    page = (out / "provenance_tracking_-_0_0_0.html").read_text()
    assert "<script>alert" not in page
    assert embedded_mappings(page)["preToPost"] == {"1": [1]}


def test_node_lines_and_kernel_lines():
    graph = "class G:\n    def forward(self, x):\n        # comment\n        mul: f32[4] = x * 2\n        add = mul + 1\n        mul: f32[4] = add"
    assert provenance.node_lines(graph) == {"class G": 1, "def forward(self, x)": 2, "mul": 6, "add": 5}
    code = "\n\n# AOT ID: ['0']\ndef call(args):\n    buf0 = k_1(x)\n    buf1 = k_10(y)\n"
    # numbered from the `# AOT ID:` line; "k_1" also matches "k_10" (a substring match, as in tlparse)
    assert provenance.python_kernel_lines(code, ["k_1", "k_10"]) == {"k_1": [3, 4], "k_10": [4]}
    assert provenance.line_mappings("", "", "", "", "not json") == {}
