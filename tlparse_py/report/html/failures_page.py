"""The failures page (`views.index.FailuresPage`): every restart and every exception a compile
logged, in log order; and the page put in place of one that could not be built (`report.jobs.ErrorPage`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...analysis.summary import STATUS_LABELS
from .escaping import esc
from .parts import source_link
from .shell import page_shell

if TYPE_CHECKING:
    from .links import SourceLinks
    from .models import ErrorPageModel, FailuresPageModel, LiveMarkModel

TABLE_HEAD = ('<div class="scroll"><table>\n<thead><tr><th>Compile id</th><th>Outcome</th><th>Failure type</th><th>Failure description</th>'
              "<th>Failure source (compilation failures only)</th></tr></thead>\n<tbody>\n")


def failures_page_html(page: FailuresPageModel, live: LiveMarkModel | None = None) -> str:
    """The whole page; `live`: written while the log is still being read."""
    if not page.rows:
        return page_shell(page, live, "<h1>Failures and restarts</h1>\n<p>No restarts and no compilation failures were logged.</p>\n")
    words = f" ({esc(page.words)})" if page.words else ""
    rows = "".join(_row(row, page.source_links) for row in page.rows)
    return page_shell(page, live, (
        f"<h1>Failures and restarts</h1>\n<p>Every restart and every exception a compile logged, in log order{words}. The outcome says what "
        "became of the compile: a frame torch skipped, or one over the recompile limit, ran eagerly and is no failure.</p>\n"
        f"{TABLE_HEAD}{rows}</tbody>\n</table></div>\n"))


def _row(row: Mapping[str, Any], links: SourceLinks) -> str:
    metrics = f' · <a href="{esc(row["url"])}">metrics</a>' if row["url"] else ""
    status = row["status"]
    outcome = f'<span class="status status-{esc(status)}">{esc(STATUS_LABELS[status])}</span>' if status else ""
    source = f"<code>{source_link(row['source'], links)}</code>" if row["source"] else '<span class="muted">not available for restarts</span>'
    return (f'<tr>\n<td><a href="{esc(row["page"])}">{esc(row["label"])}</a>{metrics}</td>\n<td>{outcome}</td>\n'
            f'<td><code>{esc(row["type"])}</code></td>\n<td><pre>{esc(row["description"])}</pre></td>\n<td>{source}</td>\n</tr>\n')


def error_page_html(page: ErrorPageModel, live: LiveMarkModel | None = None) -> str:
    """In place of a page that could not be built: what it was, and why."""
    return page_shell(page, live, (
        f'<h1>{esc(page.title)}</h1>\n<div class="warning"><p>This page could not be built from the log: <code>{esc(page.detail)}</code>.</p>\n'
        f'<p>The records behind it are in <a href="{esc(page.root)}raw.jsonl">raw.jsonl</a>; please report the problem with the log that '
        "caused it.</p></div>\n"))
