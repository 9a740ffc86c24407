"""One report, as asked for on the command line: its options, declared once, and checked before any work.

`tlparse-py PATH` and `tlparse-py run -- CMD` take the same report options (`report_options`) and
turn them into the same `ReportRequest`; `diff` shares `--report-url` (`report_url_option`).
Everything that can be wrong with a request is found by `ReportRequest.parse` and
`check_output`, before a log is read or a program is run: a malformed gate, a Markdown file whose
folder is missing, an output folder that cannot be used, a URL that is not http(s).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import click
from msgspec import Struct

from ..limits import GUNZIP_GRACE_MB, SINGLE_FILE_MB, Limits
from ..options import Options
from ..report.render import check_source_url
from ..report.targets import OutputError, check_target, classify_output
from .common import Amount, CliError, Input, Output, refuse_outputs_on_inputs
from .gates import HELP as GATES_HELP
from .gates import parse_gates

if TYPE_CHECKING:
    from ..analysis.conditions import Condition

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_LIMITS = Limits()  # the flags' defaults


def _check_source_url(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """--source-url must be an http(s) template with {path}: a usage error (exit 2) otherwise."""
    problem = check_source_url(value) if value else None
    if problem:
        raise click.BadParameter(problem, param_hint="'--source-url'")
    return value


def _check_single_file(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    if value is None:
        return value
    from .pack import check_single_file_target  # only with --single-file: most reports are not packed

    problem = check_single_file_target(value)
    if problem:
        raise click.BadParameter(problem, param_hint="'--single-file'")
    return value


def _check_report_url(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """--report-url is where the report is published: an http(s) URL, or a usage error (exit 2).
    Markdown links percent-encode what Markdown would read in it (`report.markdown.destination`:
    parentheses, pipes, backticks...); what cannot be meant, or cannot be linked to by appending a
    page's path, is refused: whitespace and control characters, quotes and angle brackets, a
    backslash (browsers read it as `/`), a bracketed (IPv6) host, which cmark-gfm would encode, and a
    query or fragment."""
    if not value:
        return value
    try:
        parts = urlsplit(value)
    except ValueError:  # e.g. an unclosed `[` in the host
        raise click.BadParameter(f"{value!r} is not an http(s) URL", param_hint="'--report-url'") from None
    bad = any(c in value for c in "\\<>\"'") or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value)
    if parts.scheme not in ("http", "https") or not parts.netloc or bad:
        raise click.BadParameter(f"{value!r} is not an http(s) URL", param_hint="'--report-url'")
    if "[" in parts.netloc or "]" in parts.netloc:
        raise click.BadParameter(f"{value!r}: a bracketed host cannot be linked from Markdown (GitHub encodes the brackets); "
                                 "use a host name", param_hint="'--report-url'")
    if parts.query or parts.fragment or value.endswith(("?", "#")):
        raise click.BadParameter(f"{value!r} has a query or fragment: links into the report append a page's path to the URL, "
                                 "so give the report folder's URL", param_hint="'--report-url'")
    return value.rstrip("/")


report_url_option = click.option(
    "--report-url", default="", metavar="URL", callback=_check_report_url,
    help="Where the report folder will be published (e.g. a CI artifact's URL): --markdown links go there. "
         "Without it they are relative to the Markdown file's folder.")

# Every option of a report, in --help order; `tlparse-py PATH` and `run -- CMD` both take them.
REPORT_OPTIONS: list[Callable[[F], F]] = [
    click.option("-o", "--out", default="tl_out", show_default=True, type=click.Path(path_type=Path), help="Output folder."),
    click.option("--overwrite", is_flag=True, help="Replace the output folder if it exists (only once the new report is complete)."),
    click.option("--latest", is_flag=True, help="PATH is a folder: read its most recently modified log."),
    click.option("--all-runs", is_flag=True,
                 help="PATH is a folder: read every log in it, as one report (by default only its newest run's logs are read; "
                      "the index names the others and why)."),
    click.option("--strict", is_flag=True, help="Exit 1 if any line or payload could not be read (the report is still written)."),
    click.option("--strict-compile-id", is_flag=True, help="Exit 1 if some record has a malformed compile id."),
    click.option("--no-browser", is_flag=True, help="Do not open the report in a web browser."),
    click.option("--custom-header-html", default="", metavar="HTML", help="HTML inserted at the top of the index page."),
    click.option("-v", "--verbose", is_flag=True, help="Name every skipped or damaged line on stderr."),
    click.option("-p", "--plain-text", is_flag=True, help="Write inductor output code as plain .txt instead of highlighted HTML."),
    click.option("-e", "--export", is_flag=True, help="Export report: what torch.export/draft_export ran into, a page per guard."),
    click.option("-i", "--inductor-provenance", is_flag=True, help="Provenance-tracking pages: pre-grad ↔ post-grad graph ↔ generated code."),
    click.option("--all-ranks-html", is_flag=True, help="PATH is a folder of rank logs: a report per rank and a landing page of what diverges."),
    click.option("--dask-scheduler", default=None, metavar="ADDRESS",
                 help="With --all-ranks-html: build the rank reports on this Dask cluster (e.g. tcp://host:8786), which must see the same "
                      "filesystem; needs pip install 'tlparse-py[dask]'."),
    click.option("--highlight-mb", type=Amount(min=0), default=0.0, show_default=True, metavar="MB",
                 help="Text highlighted with Pygments when the report is written (cached across runs); "
                      "the rest, by default all, is coloured by the page's script when shown."),
    click.option("--inline-mb", type=Amount(min=0), default=8.0, show_default=True, metavar="MB",
                 help="Text shown inline on compile-id pages per report; beyond it sections link to their files."),
    click.option("--max-line-mb", type=Amount(min=0, min_open=True), default=DEFAULT_LIMITS.max_line_mb, show_default=True, metavar="MB",
                 help="A longer line is skipped and counted (fail_line_too_long) instead of being held in memory."),
    click.option("--max-gunzip-ratio", type=Amount(min=0), default=DEFAULT_LIMITS.max_gunzip_ratio, show_default=True, metavar="N",
                 help=f"Refuse a .gz that expands more than N times over (past {GUNZIP_GRACE_MB} MB): a decompression bomb."),
    click.option("--no-gunzip-limit", is_flag=True, help="Un-gzip whatever the ratio (same as --max-gunzip-ratio 0)."),
    click.option("--max-raw-log-mb", type=Amount(min=0), default=DEFAULT_LIMITS.max_raw_log_mb, show_default=True, metavar="MB",
                 help="raw.log copies the log up to this size; beyond it raw.log is a note naming the log."),
    click.option("--fail-on", "fail_on", multiple=True, metavar="CONDITIONS", help=GATES_HELP),
    click.option("--markdown", "markdown_file", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
                 help="Also write a compact Markdown summary (GitHub-flavoured, links into the report) to FILE."),
    report_url_option,
    click.option("--source-url", default="", metavar="TEMPLATE", callback=_check_source_url,
                 help="Link user-code locations to your repository, e.g. 'https://github.com/org/repo/blob/SHA/{path}#L{line}'."),
    click.option("--source-root", default="", metavar="DIR", help="Stripped from logged file names to make {path} for --source-url."),
    click.option("--single-file", "single_file", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE.html", callback=_check_single_file,
                 help=f"Also write the report as one self-contained HTML file (pages, then linked files up to {SINGLE_FILE_MB:g} MB; "
                      "see `tlparse-py pack`)."),
]


# --serve: the report folder over HTTP once it is written (`tlparse-py PATH` and `watch`); `tlparse-py
# serve DIR` takes --port and --host. Not among REPORT_OPTIONS: `run` takes those, and does not serve.
DEFAULT_HOST = "127.0.0.1"
port_option = click.option(
    "--port", type=click.IntRange(1, 65535), default=None, metavar="PORT",
    help="Port to serve on; without it the first free port of 8000-8099 (else one the system picks). A port in use: exit 2.")
host_option = click.option(
    "--host", default=None, metavar="HOST",
    help=f"Address to serve on (default {DEFAULT_HOST}: only this machine can connect; reach it from another over SSH, "
         "`ssh -L PORT:127.0.0.1:PORT HOST`). Any other address, such as 0.0.0.0, lets anyone who can reach this machine "
         "read the report.")
SERVE_OPTIONS: list[Callable[[F], F]] = [
    click.option("--serve", is_flag=True,
                 help="Once the report is written, serve its folder over HTTP until Ctrl-C, printing the URL (no browser is opened)."),
    port_option,
    host_option,
]


def serve_options(command: F) -> F:
    """Decorate a command with --serve, --port and --host (they reach it as keyword arguments)."""
    for option in reversed(SERVE_OPTIONS):
        command = option(command)
    return command


class ServeAt(Struct, frozen=True):
    """Where to serve a report folder: --host (loopback unless told) and --port (None: the first
    free port of 8000-8099, else one the system picks)."""

    host: str = DEFAULT_HOST
    port: int | None = None

    @classmethod
    def parse(cls, params: dict[str, Any]) -> ServeAt | None:
        """--serve's address; None without --serve (where --port or --host is a usage error, exit 2)."""
        if not params.get("serve"):
            if params.get("port") is not None or params.get("host") is not None:
                raise CliError("--port and --host say where --serve serves the report: add --serve")
            return None
        return cls(params["host"] or DEFAULT_HOST, params["port"])


def report_options(command: F) -> F:
    """Decorate a command with every report option (they reach it as keyword arguments)."""
    for option in reversed(REPORT_OPTIONS):
        command = option(command)
    return command


class ReportRequest(Struct):
    """What to write and check once the log is read: the report's options, parsed and validated."""

    out: Path
    overwrite: bool
    options: Options
    conditions: list[Condition]
    markdown_file: Path | None
    report_url: str
    single_file: Path | None
    latest: bool = False
    all_runs: bool = False  # every log of the folder, not only its newest run's (`run` reads the folder it made whole)
    strict: bool = False
    strict_compile_id: bool = False
    no_browser: bool = False
    verbose: bool = False
    all_ranks_html: bool = False
    dask_scheduler: str | None = None

    @classmethod
    def parse(cls, params: dict[str, Any]) -> ReportRequest:
        """The request of `report_options`' values; CliError (exit 2) for any that cannot be used,
        before anything is read or run."""
        conditions = parse_gates(params["fail_on"])
        _check_markdown_target(params["markdown_file"])
        if params["latest"] and params["all_runs"]:
            raise CliError("--latest reads the newest log and --all-runs every log: give one of them")
        if params["latest"] and params["all_ranks_html"]:
            raise CliError("--latest cannot be used with --all-ranks-html")
        if params["dask_scheduler"] is not None and not params["all_ranks_html"]:
            raise CliError("--dask-scheduler builds the rank reports of --all-ranks-html: use it with --all-ranks-html")
        limits = Limits(params["max_line_mb"], 0 if params["no_gunzip_limit"] else params["max_gunzip_ratio"], params["max_raw_log_mb"])
        options = Options(params["plain_text"], params["custom_header_html"], params["export"], params["inductor_provenance"],
                          highlight_mb=params["highlight_mb"], inline_mb=params["inline_mb"], limits=limits,
                          source_url=params["source_url"], source_root=params["source_root"])
        return cls(
            out=params["out"], overwrite=params["overwrite"], options=options, conditions=conditions,
            markdown_file=params["markdown_file"], report_url=params["report_url"], single_file=params["single_file"],
            latest=params["latest"], all_runs=params["all_runs"], strict=params["strict"], strict_compile_id=params["strict_compile_id"],
            no_browser=params["no_browser"], verbose=params["verbose"], all_ranks_html=params["all_ranks_html"],
            dask_scheduler=params["dask_scheduler"],
        )

    def check_output(self) -> None:
        """Whether `-o` can take the report (exists without --overwrite, not a report...): CliError (exit 2)."""
        try:
            check_target(self.out, self.overwrite)
        except OutputError as exc:
            raise CliError(str(exc)) from None

    def check_not_an_input(self, path: Path) -> None:
        """No output replaces or lands in the input (`common.refuse_outputs_on_inputs`, exit 2, before
        anything is read): -o, --markdown or --single-file that is (or links to) the input log or
        folder, lies in the input folder, or an -o that holds the input. --single-file is packed
        from -o, so it may not lie in -o either."""
        name = f"the input folder {path}" if path.is_dir() else f"the input log {path}"
        outputs = [Output("-o", self.out, folder=True), Output("--markdown", self.markdown_file), Output("--single-file", self.single_file)]
        refuse_outputs_on_inputs(outputs, [Input(path, name)])
        refuse_outputs_on_inputs([Output("--single-file", self.single_file)], [Input(self.out, f"the report folder -o {self.out}")])

    def markdown_prefix(self) -> str:
        """How --markdown links into the report: at --report-url, else relative to the Markdown file's folder."""
        if self.report_url:
            return self.report_url + "/"
        assert self.markdown_file is not None
        prefix = Path(os.path.relpath(os.path.abspath(self.out), os.path.abspath(self.markdown_file.parent))).as_posix()
        return "" if prefix == "." else prefix + "/"


def _check_markdown_target(markdown_file: Path | None) -> None:
    if markdown_file is None:
        return
    refusal = classify_output(markdown_file).refusal()  # the one word on what an output path may be
    if refusal is not None:
        raise CliError(f"--markdown: {refusal}")
    if not markdown_file.parent.is_dir():
        raise CliError(f"--markdown: the folder {markdown_file.parent} does not exist")
