"""What every command shares: one-line errors with an exit code, sanitised output, the browser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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




def open_browser(out: Path) -> None:
    import webbrowser  # only when a browser is opened: it imports subprocess and more

    try:
        webbrowser.open((out / "index.html").absolute().as_uri())
    except Exception:  # no browser is not an error: the report is written
        pass


def size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
