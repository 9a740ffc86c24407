"""Export reports (-e): draft_export issues, guard pages, the capture file read with its main log."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from conftest import SHARED, TRACES
from linkcheck import broken_links
from logs import line, write_log
from tlparse_py.cli import main
from tlparse_py.model import CompileId

CORPUS = SHARED / "corpus" / "tlparse"
DASH = CompileId()


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_real_draft_export_folder_reads_capture_file_with_main_log(tmp_path):
    out = tmp_path / "out"
    result = run(TRACES / "export", "-e", "-o", out, "--no-browser")
    assert result.exit_code == 0, result.stderr
    assert "reading 2 logs of one process together" in result.stderr
    index = (out / "index.html").read_text()
    assert "Draft export report" in index and "2 issue(s) were found during export" in index
    assert "Could not decide whether u0 &gt; 2 always holds, so it was specialised to True" in index
    guard = (out / "-_-_-_-" / "symbolic_guard_information_2.html").read_text()
    # the capture file's stack frames use string ids defined only in the main log
    assert "/work/scenarios/export.py:55" in guard and "(unknown)" not in guard
    assert "u0 &gt; 2" in guard and 'class="provenance"' in guard
    assert sorted(p.name for p in (out / "-_-_-_-").glob("exported_program_*.txt")) == [
        "exported_program_0.txt", "exported_program_1.txt", "exported_program_3.txt"
    ]
    assert broken_links(out) == []


def test_without_e_export_records_are_shown_with_a_hint(tmp_path, report_of):
    report, out = report_of(sorted((TRACES / "export").glob("*.log"))[0])  # the capture file alone
    index = (out / "index.html").read_text()
    assert "run tlparse-py with <code>-e</code>" in index
    assert [f.failure_type for f in report.export_failures] == ["Data Dependent Error"]
    assert report.stats.strict_failures() == 0  # tlparse rejects these records (list-valued frame_locals)


def test_fake_kernel_issues(tmp_path):
    out = tmp_path / "out"
    assert run(TRACES / "custom_op", "-e", "-o", out, "--no-browser").exit_code == 0
    index = (out / "index.html").read_text()
    assert "torch.ops.harness.no_fake.default has no fake kernel implementation." in index
    assert "mismatch between fake value 5 and real value 4" in index


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared corpus not present")
@pytest.mark.parametrize("case, issue", [("export", "Data Dependent Error"), ("export_guard_added", "Guard Evaluated")])
def test_corpus_export_logs(tmp_path, report_of, case, issue):
    report, out = report_of(CORPUS / f"{case}.log", export=True)
    assert [f.failure_type for f in report.export_failures] == [issue]
    assert [a.url for a in report.directory[DASH]] == ["-_-_-_-/symbolic_guard_information_0.html", "-_-_-_-/exported_program_1.txt"]
    assert report.export_failures[0].url == "-_-_-_-/symbolic_guard_information_0.html"
    assert broken_links(out) == []


def test_missing_fields_never_crash(tmp_path, report_of):
    """tlparse panics (exit 101) on a missing expr/result/op/reason/node id."""
    lines = [
        line({"guard_added": {"prefix": "eval"}}),
        line({"propagate_real_tensors_provenance": {}}),
        line({"missing_fake_kernel": {}}),
        line({"mismatched_fake_kernel": {"op": 3}}),
        line({"expression_created": {"result_id": "x"}}),
        line({"create_unbacked_symbol": {}}),
        line({"guard_added": {"prefix": "eval", "expr": "s0 > 1", "expr_node_id": 1, "frame_locals": {"locals": {"x": ["T(s0)"], "y": None}, "symbols": [1]}}}),
        line({"expression_created": {"result_id": 1, "argument_ids": [1, 2, "z"], "method": "gt", "result": "s0 > 1"}}),
    ]
    report, out = report_of(write_log(tmp_path / "a.log", lines), export=True)
    assert len(report.export_failures) == 5
    assert report.stats.strict_failures() == 0
    pages = sorted(p.name for p in (out / "-_-_-_-").glob("symbolic_guard_information_*.html"))
    assert pages == ["symbolic_guard_information_0.html", "symbolic_guard_information_1.html", "symbolic_guard_information_2.html"]
    assert "T(s0)" in (out / "-_-_-_-" / pages[2]).read_text()
    assert broken_links(out) == []


def test_export_mode_numbers_only_export_outputs(tmp_path, report_of):
    lines = [
        line({"dynamo_output_graph": {}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0}, "g"),
        line({"exported_program": {}}, "ExportedProgram: ..."),
    ]
    report, out = report_of(write_log(tmp_path / "a.log", lines), export=True)
    assert [a.url for a in report.directory[DASH]] == ["-_-_-_-/exported_program_0.txt"]
    assert report.directory[CompileId(None, 0, 0, 0)] == []
    assert len(list((out / "payloads").iterdir())) == 1  # the graph's payload is kept
