"""What every command shares: one-line errors with an exit code, sanitised output, the browser."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

import click

from ..model import Diagnostic
from ..terminal import sanitize


class CliError(click.ClickException):
    """One clear line on stderr and a chosen exit code; never a traceback."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click declares it on the class; each error has its own

    def format_message(self) -> str:
        # messages name paths and log text: no escape sequence reaches the terminal, and no line
        # can be started from a log (a CI system reads `::error ...` at the start of a line)
        return sanitize(self.message)


class Amount(click.FloatRange):
    """A size or ratio option: a finite number (inf and nan, which Python's float() accepts, are
    refused with the option's name, exit 2), at least `min` (above it when `min_open`)."""

    name = "amount"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if number != number or number in (float("inf"), float("-inf")):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def echo_err(message: str) -> None:
    """One line on stderr, sanitized here so no caller can forget (log text, file names): a newline
    inside it is written as an escape, so log text can never start a line of its own."""
    click.echo(sanitize(message), err=True)


def echo_out(message: str) -> None:
    """One line on stdout, sanitized as `echo_err`."""
    click.echo(sanitize(message))


def echo_diagnostic(diagnostic: Diagnostic) -> None:
    # each piece may come from the log: sanitized without newlines, so none can fake a line
    detail = f": {sanitize(diagnostic.detail)}" if diagnostic.detail else ""
    hint = f" ({sanitize(diagnostic.hint)})" if diagnostic.hint else ""
    echo_err(f"{sanitize(diagnostic.path)}:{diagnostic.lineno}: {sanitize(diagnostic.problem)}{detail}{hint}")




class Output(NamedTuple):
    """A path a command writes: its option (as the message names it), the path (None: not asked
    for), and whether it is a folder that the command replaces (`-o`)."""

    option: str
    path: Path | None
    folder: bool = False


class Input(NamedTuple):
    """A path a command reads, or must leave as it is: a log, a trace or report folder (`name` is how
    the message names it, e.g. "the input log base.log")."""

    path: Path
    name: str


def refuse_outputs_on_inputs(outputs: Iterable[Output], inputs: Iterable[Input]) -> None:
    """Inputs are never outputs: CliError (exit 2), one line, before anything is read or written,
    when an output resolves to an input (the same file or folder: by real path, so symlinks and `..`
    are seen through, or by inode, so a hard link is too), lies inside an input folder, or is a
    folder (`-o`) that holds an input and would replace it. The one check of every command that
    writes: the report, `run`, `watch`, `diff` and `pack`."""
    sources = [(source, Path(os.path.realpath(source.path))) for source in inputs]
    for output in outputs:
        if output.path is None:
            continue
        target = Path(os.path.realpath(output.path))
        for source, real in sources:
            problem = _clash(output, target, source, real)
            if problem:
                raise CliError(f"{output.option}: {output.path} {problem}; write it elsewhere (nothing was written)")


def _clash(output: Output, target: Path, source: Input, real: Path) -> str | None:
    if target == real or _same_file(target, real):
        return f"is {source.name}"
    if real.is_dir() and real in target.parents:
        return f"is inside {source.name}"
    if output.folder and target in real.parents:
        return f"holds {source.name}, which it would replace"
    return None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # either is missing (or unreadable): not the same existing file
        return False


def open_browser(out: Path) -> None:
    import webbrowser  # only when a browser is opened: it imports subprocess and more

    try:
        webbrowser.open((out / "index.html").absolute().as_uri())
    except Exception:  # no browser is not an error: the report is written
        pass
