"""`tlparse-py pack REPORT_DIR FILE.html`: a written report as one self-contained HTML file
(what `tlparse-py report --single-file` also writes). Exit codes: 0 written; 1 writing failed;
2 REPORT_DIR is not a report, or FILE cannot be a file or lies in REPORT_DIR (nothing written).
"""

from __future__ import annotations

from pathlib import Path

import click

from ..limits import SINGLE_FILE_MB as BUDGET_MB
from .common import Amount, CliError, Input, Output, echo_err, refuse_outputs_on_inputs

__all__ = ["BUDGET_MB", "check_single_file_target", "pack"]


def check_single_file_target(target: Path) -> str | None:
    """Why `target` cannot be written as the single file (None when it can): a folder, a socket...
    (`targets.classify_output`); a pipe or a character device such as /dev/stdout is written in place."""
    from ..report.targets import classify_output

    problem = classify_output(target).refusal()
    if problem:
        return problem
    if not target.parent.is_dir():
        return f"the folder {target.parent} does not exist"
    return None


@click.command("pack", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("report_dir", type=click.Path(path_type=Path, file_okay=False))
@click.argument("target", metavar="FILE.html", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--budget-mb", type=Amount(min=0), default=BUDGET_MB, show_default=True, metavar="MB",
              help="Text packed beyond the report's pages (graphs, guards, code, ...); past it links become plain text.")
def pack(report_dir: Path, target: Path, budget_mb: float) -> None:
    """Write the report in REPORT_DIR as one self-contained HTML file, FILE.html.

    The file holds the index, every compile page, the failures page and the metrics pages, then the
    files they link (graphs, guards, generated code, ...) while the whole stays within --budget-mb;
    links to what was left out become plain text with a note. It needs nothing but itself: no
    network, no other file, scripts optional.
    """
    problem = check_single_file_target(target)
    if problem:
        raise CliError(problem)
    refuse_outputs_on_inputs([Output("FILE.html", target)], [Input(report_dir, f"the report folder {report_dir}")])
    from ..report.pack import PackError, pack_report

    try:
        packed = pack_report(report_dir, target, budget_mb)
    except PackError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"could not write {target}: {exc.strerror or exc}", 1) from None
    echo_err(packed.line())
