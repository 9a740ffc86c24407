"""`tlparse-py`: the command line.

`tlparse-py PATH [OPTIONS]` writes a report (the `report` command, the default); `tlparse-py diff`
and `tlparse-py run` are the other commands. Exit codes: 0 done; 1 report written but `--strict`
found problems, or writing failed; 2 the input or output cannot be used (nothing written); 3 a
`--fail-on` condition holds (the report is written).
"""

from __future__ import annotations

import sys

import click

from ._version import __version__
from .commands.report import ProgressBar, report
from .commands.run import run

__all__ = ["ProgressBar", "main"]


class ReportByDefault(click.Group):
    """A group whose first argument may be a trace instead of a command: `tlparse-py PATH` is
    `tlparse-py report PATH`, as tlparse has always been used. A PATH named like a command can be
    given as `tlparse-py report NAME`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        top_level = {"-h", "--help", "-V", "--version"}
        if not args or (args[0] not in self.commands and args[0] not in top_level):
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


main.add_command(report)
main.add_command(run)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
