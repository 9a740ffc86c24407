"""`tlparse-py`: the command line.

`tlparse-py PATH [OPTIONS]` writes a report (the `report` command, the default); `tlparse-py diff`
and `tlparse-py run` are the other commands. Exit codes: 0 done; 1 report written but `--strict`
found problems, or writing failed; 2 the input or output cannot be used (nothing written); 3 a
`--fail-on` condition holds (the report is written).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from ._version import __version__

__all__ = ["main"]

# Commands are imported when used: `--version` and `--help` must not pay for Jinja, Pygments and
# the pipeline.
COMMANDS = {
    "report": "tlparse_py.commands.report:report",
    "diff": "tlparse_py.commands.diff:diff",
    "run": "tlparse_py.commands.run:run",
    "pack": "tlparse_py.commands.pack:pack",
    "watch": "tlparse_py.commands.watch:watch",
    "serve": "tlparse_py.commands.serve:serve",
}
# The one-line summaries `tlparse-py --help` lists (a test keeps them equal to each command's own).
SUMMARIES = {
    "report": "Write an HTML report of what torch.compile did, from the logs TORCH_TRACE wrote.",
    "diff": "Compare two runs: what got better or worse between BASE and NEW.",
    "run": "Run COMMAND with TORCH_TRACE set, then write the report of what it compiled.",
    "pack": "Write the report in REPORT_DIR as one self-contained HTML file, FILE.html.",
    "watch": "Write a report that updates while the program writes its trace.",
    "serve": "Serve the report in DIR over HTTP until Ctrl-C (default DIR: tl_out).",
}


class ReportByDefault(click.Group):
    """A group whose first argument may be a trace instead of a command: `tlparse-py PATH` is
    `tlparse-py report PATH`, as tlparse has always been used. A PATH named like a command can be
    given as `tlparse-py report NAME`."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attribute = COMMANDS[name].split(":")
        return getattr(importlib.import_module(module), attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of `--help`, without importing every command (and Jinja with them)."""
        with formatter.section("Commands"):
            formatter.write_dl(list(SUMMARIES.items()))

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        top_level = {"-h", "--help", "-V", "--version"}
        if not args or (args[0] not in COMMANDS and args[0] not in top_level):
            args = ["report", *args]
        return super().parse_args(ctx, args)

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage("tlparse-py", "[report] [OPTIONS] [PATH]  |  tlparse-py COMMAND [ARGS]...")


@click.group(cls=ReportByDefault, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="tlparse-py", message="%(prog)s %(version)s")
def main() -> None:
    """Reports of what torch.compile did, from the logs TORCH_TRACE wrote.

    `tlparse-py PATH` writes the report of a trace (see `tlparse-py report --help` for its options).
    """




def __getattr__(name: str) -> Any:
    """`from tlparse_py.cli import ProgressBar` keeps working without importing it up front."""
    if name == "ProgressBar":
        from .commands.report import ProgressBar

        return ProgressBar
    raise AttributeError(name)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
