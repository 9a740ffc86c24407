"""`tlparse-py diff BASE NEW`: what changed between two runs, as a page, diff.json and (optionally) Markdown.

Exit codes: 0 diff written; 2 an input or the output cannot be used, or `--fail-on` is malformed
(nothing written); 3 a `--fail-on` condition holds (the diff is written); 1 writing failed.
"""

from __future__ import annotations

from pathlib import Path

import click

from ..analysis import comparison
from ..analysis.conditions import OPERATOR_LIST, Condition, ConditionError, parse_conditions
from ..analysis.compared import Diff
from ..analysis.totals import DIFF_GATES, check_diff
from ..diff.load import LoadError, load
from ..diff.output import write_diff, write_markdown
from ..diff.view import gate_words
from ..report.targets import OutputError, ReportKeptElsewhere, classify_output
from .common import CliError, Input, Output, echo_err, open_browser, refuse_outputs_on_inputs
from .request import report_url_option

_NAMES = ", ".join(f"{gate.name} ({gate.description})" for gate in DIFF_GATES)


def _conditions(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> list[Condition]:
    if not value:
        return []
    try:
        return parse_conditions(",".join(value), [gate.name for gate in DIFF_GATES])
    except ConditionError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


@click.command("diff", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option("-o", "--out", default="tl_diff", show_default=True, type=click.Path(path_type=Path), help="Output folder.")
@click.option("--fail-on", "conditions", multiple=True, callback=_conditions, metavar="CONDITIONS",
              help=f"Exit 3 if any condition holds: comma-separated NAME OP NUMBER, OP one of {OPERATOR_LIST} "
                   f"(e.g. \"new_graph_breaks>0,compile_time_ratio>1.2\"). Names: {_NAMES}.")
@click.option("--markdown", "markdown_file", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="Also write a compact GitHub-flavoured Markdown summary (for a PR comment or CI job summary).")
@click.option("--overwrite", is_flag=True, help="Replace the output folder if it exists (only once the new diff is complete).")
@click.option("--no-browser", is_flag=True, help="Do not open the diff in a web browser.")
@click.option("--pair", "pairs", multiple=True, metavar="FILE_A=FILE_B", callback=lambda ctx, param, value: _pairs(value),
              help="BASE's user file FILE_A is NEW's FILE_B (renamed or moved); files are named relative to the run's root. Repeatable.")
@click.option("--source-root", default="", metavar="DIR",
              help="Files are compared relative to DIR (default: the common folder of each run's user files).")
@report_url_option
def diff(base: Path, new: Path, out: Path, conditions: list[Condition], markdown_file: Path | None, overwrite: bool, no_browser: bool,
         pairs: tuple[tuple[str, str], ...], source_root: str, report_url: str) -> None:
    """Compare two runs: what got better or worse between BASE and NEW.

    BASE and NEW are each a trace log, a TORCH_TRACE folder or a tlparse-py report folder (read
    through its summary.json). Frames are paired by code identity (file, function, the source
    text that anchors them; a resume function only with one after the same kind of graph break),
    so an edit elsewhere in the file is no change; compiles in order within a frame. Writes
    OUT/index.html and OUT/diff.json.
    """
    refuse_outputs_on_inputs([Output("-o", out, folder=True), Output("--markdown", markdown_file)], _inputs(base, new))
    if markdown_file is not None and (problem := classify_output(markdown_file).refusal()):
        raise CliError(f"--markdown: {problem}")  # a socket...: before any work (a pipe or /dev/stdout is written in place)
    sides = []
    for role, path in (("BASE", base), ("NEW", new)):
        try:
            side = load(path, role)
        except LoadError as exc:
            raise CliError(str(exc)) from None
        if side.note:
            echo_err(f"{role}: {side.note}")
        sides.append(side)
    try:
        result = comparison.diff(sides[0].summary, sides[1].summary, str(base), str(new), comparison.Pairing(pairs, source_root))
    except ValueError as exc:  # one side multi-rank and not the other, a --pair naming no file, --pairs that contradict
        raise CliError(str(exc)) from None
    del sides  # the summaries: the diff is all that is written (their compiles are not held while it is)
    for note in result.notes:
        echo_err(f"warning: {note}")
    verdicts = check_diff(conditions, result.sections())
    failed = verdicts.failed
    for unchecked in verdicts.unchecked:
        echo_err(f"--fail-on {unchecked.line}")
    try:
        write_diff(result, out, overwrite, failed, verdicts.unchecked)
    except ReportKeptElsewhere as exc:
        raise CliError(str(exc), 1) from None
    except OutputError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"could not write the diff ({exc.filename or out}: {exc.strerror or exc}); nothing was changed in {out}", 1) from None
    if markdown_file is not None:
        try:
            write_markdown(result, markdown_file, out, failed, report_url, verdicts.unchecked)
        except OSError as exc:
            raise CliError(f"could not write {markdown_file}: {exc.strerror or exc}", 1) from None
    echo_err(_headline(result))
    echo_err(f"Diff: {out / 'index.html'}")
    if not no_browser:
        open_browser(out)
    if failed:
        for failure in failed:
            echo_err(f"--fail-on {failure.line}")
        click.get_current_context().exit(3)


def _inputs(base: Path, new: Path) -> list[Input]:
    """What the diff reads and must leave as it is: each side, and the report folder of a side
    named by its summary.json."""
    inputs = []
    for role, path in (("BASE", base), ("NEW", new)):
        inputs.append(Input(path, f"the {role} input {path}"))
        if path.name == "summary.json" and path.is_file():
            inputs.append(Input(path.parent, f"the {role} report folder {path.parent}"))
    return inputs


def _pairs(values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for value in values:
        a, sep, b = value.partition("=")
        if not sep or not a.strip() or not b.strip():
            raise click.BadParameter(f"{value!r}: expected FILE_A=FILE_B", param_hint="'--pair'")
        pairs.append((a.strip(), b.strip()))
    return tuple(pairs)  # pairs that contradict each other are refused by the pairing (`pairing.file_map`: exit 2)


def _headline(result: Diff) -> str:
    """`Diff: new graph breaks 1, ..., compile time ratio ×1.01, ...`: every gate (`DIFF_GATES`), as its declaration names and shows it."""
    return "Diff: " + ", ".join(gate_words(result))
