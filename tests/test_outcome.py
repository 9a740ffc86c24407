"""The report command asks one question (issue 48): `outcome.report_outcome` writes the report and
answers with one typed `Outcome` (the lines to say, whether to open a browser, how to end), which the
command prints and exits by. What the command prints is checked in tests/test_cli.py,
test_gates.py, test_markdown_ci.py and the rank tests; here, that the answer is data and that the
command holds none of the work.
"""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest

from conftest import TRACES
from tlparse_py.analysis.conditions import parse_conditions
from tlparse_py.analysis.totals import TOTALS
from tlparse_py.options import Options
from tlparse_py.outcome import EXIT_GATES, EXIT_WRITING_FAILED, Ending, Refused, Said, Telling, report_outcome
from tlparse_py.commands.request import ReportRequest


def request(tmp_path: Path, **changes) -> ReportRequest:
    asked = ReportRequest(out=tmp_path / "out", overwrite=False, options=Options(), conditions=[], markdown_file=None, report_url="",
                          single_file=None, no_browser=True)
    for name, value in changes.items():
        setattr(asked, name, value)
    return asked


class Told:
    """What was told while the report was written, and the progress displays asked for."""

    def __init__(self) -> None:
        self.lines: list[Said] = []
        self.sizes: list[int] = []

    def telling(self) -> Telling:
        return Telling(self.lines.append, lambda diagnostic: None, self.progress)

    def progress(self, size: int):
        self.sizes.append(size)
        return Quiet()


class Quiet:
    def __call__(self, done: int, records: int) -> None:
        pass

    def clear(self) -> None:
        pass


def one_log(name: str) -> Path:
    return next(p for p in sorted((TRACES / name).iterdir()) if p.name.startswith("dedicated_log"))


def test_the_report_command_holds_no_work_of_its_own():
    """commands/report.py asks `outcome` and prints: it imports no writer, gate, Markdown, total or rank report."""
    graph = grimp.build_graph("tlparse_py", exclude_type_checking_imports=True)
    imported = graph.find_modules_directly_imported_by("tlparse_py.commands.report")
    below = ("tlparse_py.pipeline", "tlparse_py.multirank", "tlparse_py.report.markdown", "tlparse_py.report.pack", "tlparse_py.analysis.totals",
             "tlparse_py.analysis.digest", "tlparse_py.analysis.conditions", "tlparse_py.commands.gates", "tlparse_py.commands.pack")
    assert [module for module in imported if module.startswith(below)] == []
    assert "tlparse_py.outcome" in imported


def test_a_report_comes_to_its_lines_its_gates_and_its_ending(tmp_path):
    log = one_log("failure")
    conditions = parse_conditions("compiles>0,failed>100", [total.name for total in TOTALS])
    markdown = tmp_path / "summary.md"
    told = Told()
    outcome = report_outcome(log, request(tmp_path, conditions=conditions, markdown_file=markdown), told.telling())
    assert told.sizes == [log.stat().st_size] and outcome.out == tmp_path / "out" and (outcome.out / "index.html").is_file()
    texts = [said.text for said in outcome.said]
    assert texts[0].startswith("Stats {") and texts[1].startswith(f"Report: {tmp_path / 'out' / 'index.html'}: compiles ")
    assert texts[-2].startswith("--fail-on compiles>0: compiles is ") and texts[-1] == f"Markdown summary: {markdown}"
    assert not any(said.out for said in outcome.said) and markdown.read_text().startswith("### torch.compile report")
    assert outcome.failed == [texts[-2].removeprefix("--fail-on ")]
    assert outcome.ending == Ending(f"--fail-on: 1 condition(s) held; the report is in {tmp_path / 'out'}", EXIT_GATES)
    assert outcome.browse is False  # --no-browser


def test_what_cannot_be_written_is_refused_and_what_fails_after_the_report_ends_it(tmp_path):
    told = Told()
    with pytest.raises(Refused) as refused:
        report_outcome(tmp_path / "missing.log", request(tmp_path), told.telling())
    assert refused.value.code == 2 and not (tmp_path / "out").exists()
    blocked = tmp_path / "a_folder.md"
    blocked.mkdir()  # --markdown's file cannot be written: the report is, and the outcome says so
    outcome = report_outcome(one_log("failure"), request(tmp_path, markdown_file=blocked), told.telling())
    assert outcome.ending is not None and outcome.ending.code == EXIT_WRITING_FAILED
    assert outcome.ending.message.startswith(f"--markdown: could not write {blocked}")


def test_a_folder_of_ranks_comes_to_a_landing_page_and_its_lines(tmp_path):
    told = Told()
    outcome = report_outcome(TRACES / "distributed", request(tmp_path, all_ranks_html=True, no_browser=False), told.telling())
    assert all(said.text.startswith("rank_") and not said.out for said in told.lines) and told.lines
    on_stdout = [said.text for said in outcome.said if said.out]
    assert f"Multi-rank report generated under {tmp_path / 'out'}" in on_stdout and "Individual pages: rank_*/index.html" in on_stdout
    assert outcome.said[-1].text.startswith(f"Report: {tmp_path / 'out' / 'index.html'}: compiles ")
    assert outcome.browse is True and outcome.ending is None
