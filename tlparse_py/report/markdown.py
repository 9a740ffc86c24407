"""A compact GitHub-flavoured Markdown summary of a report, for a CI job's summary or a PR comment.

`summary_markdown(digest)` builds it from a report's digest (`analysis.digest.digest_of` of its
typed summary: the same whether just analysed or loaded back from summary.json): the run, the totals, the failed
compiles, the top graph breaks, recompiles per frame, the slowest compiles and any `--fail-on` gate
failures, in about 45 lines whatever the log. Links point into the report: `link_prefix` is the
report folder as seen from where the Markdown lives (`""` for the report's own `summary.md`, e.g.
`"../tl_out/"` for `--markdown`). A multi-rank summary gets a row per rank and one for all ranks,
each total combined as its declaration says (`analysis.totals`).

What it shows is the analysis' digest of the report (`analysis.digest`): the totals as shown, the
failed compiles with their exception, the top graph-break kinds with their user code relative to
`--source-root` or the run's common folder, the recompiled frames, the slowest compiles. This module
only words and links them.

Text from the log (reasons, frame names, file names) is escaped, so it cannot make links, tables
or HTML of its own.

"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any
from urllib.parse import quote

from ..analysis.digest import FAILURE_ROWS, ROWS, RanksDigest, ReportDigest, RunLine
from ..analysis.program import ProgramExit
from ..analysis.summary import CompileSummary
from ..units import format_seconds

IDS_PER_ROW = 4  # compile ids named per row before "+N more"
TEXT_CHARS = 90

_SPECIAL = re.compile(r"([\\`*_{}\[\]<>#|~&!()])")
# A line that would start a block of its own at the start of a list item or paragraph: a list item
# (`-`, `+`, `1.`) or a setext underline; its marker is escaped.
_BLOCK_START = re.compile(r"^(?:([-+=])|(\d{1,9})(\.))")
# What GitHub links in plain text once the escapes are resolved: cmark-gfm's autolink extension, which
# looks at the raw text (so an escaped `\_` before `www.` still counts as punctuation that may start
# a link), and GitHub's own filters on the rendered text. A zero-width space goes in at each trigger,
# whatever comes before it:
# - `www.` (an extended www autolink): between `www` and `.`;
# - `scheme://` (http, https, ftp, and any other GitHub might add): between `:` and `//`;
# - `@` (e-mail addresses, `mailto:` and `xmpp:` autolinks, @mentions, user@sha): after it;
# - `#12`, `GH-12` (issue references, which also notify the issue): after `#`, between `GH` and `-`.
_AUTOLINKED = re.compile(r"(?i)(?<=www)(?=\.)|(?<=:)(?=//)|(?<=@)|(?<=#)(?=\d)|(?<=gh)(?=-\d)")
ZERO_WIDTH_SPACE = "\u200b"


def text(value: Any, limit: int = TEXT_CHARS) -> str:
    """Log text as one line of Markdown that shows it literally, wherever it is put (a paragraph, a
    list item, a table cell, a link's text): cut to `limit` characters, every character that could
    make markup escaped (so no HTML, image, link, table cell, emphasis or list), and no autolink,
    mention or issue reference (see `_AUTOLINKED`). The one escaper for log text in Markdown (`code`
    for a code span); fuzzed against cmark-gfm in tests/test_hostile4.py."""
    line = " ".join(str(value if value is not None else "").split())
    if len(line) > limit:
        line = line[: limit - 1].rstrip() + "…"
    line = _BLOCK_START.sub(lambda m: f"\\{m[1]}" if m[1] else f"{m[2]}\\{m[3]}", _SPECIAL.sub(r"\\\1", line))
    return _AUTOLINKED.sub(ZERO_WIDTH_SPACE, line)


def code(value: Any, limit: int = TEXT_CHARS) -> str:
    """Log text as a Markdown code span: literal inside (no markup, link or mention is made in one),
    fenced by one backtick more than the longest run inside, and padded with a space when it starts
    or ends with one, so it reads as logged (CommonMark strips the padding). Not for a table cell,
    where a `|` would still end the cell: use `text` there."""
    line = " ".join(str(value if value is not None else "").split())
    if len(line) > limit:
        line = line[: limit - 1].rstrip() + "…"
    if not line:
        return ""
    # `]:` in a code span that is a link's text at a line's start (`[`x]:`](url)`) makes a link
    # reference definition, read before any code span: a zero-width space keeps `]` from `:`
    line = line.replace("]:", f"]{ZERO_WIDTH_SPACE}:")
    fence = "`" * (max((len(run) for run in re.findall("`+", line)), default=0) + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    return f"{fence}{pad}{line}{pad}{fence}"


# What stays as it is in a URL written as a Markdown link destination: RFC 3986's unreserved and
# reserved characters (but parentheses, which would end the destination, and brackets, which
# cmark-gfm encodes itself), and `%` of what is already encoded. Everything else (spaces, `()`,
# `[]`, `<>`, `|`, which would end a table cell, `\\`, `` ` ``, `"`, `{}`, `^`, non-ASCII as UTF-8)
# is percent-encoded; a `%` that starts no escape is one itself (`%25`).
_URL_KEPT = "-._~:/?#@!$&'*+,;="


def destination(url: str) -> str:
    """A URL (`--report-url`, with what is appended to it) as a Markdown link destination whose href
    is that URL, in a paragraph or a table cell: the characters Markdown would read are
    percent-encoded, and `&` is written `&amp;` so that no `&name;` in it is read as an entity. A
    URL whose host cannot be written so (an IPv6 literal, `[::1]`) is refused by `--report-url`."""
    return re.sub(r"%(?![0-9A-Fa-f]{2})", "%25", quote(url, safe=_URL_KEPT + "%")).replace("&", "&amp;")


def path_destination(path: str) -> str:
    """A relative path (a folder's name may hold any character) as a Markdown link destination:
    everything but letters, digits, `-._~` and `/` percent-encoded (`#`, `?` and `:` too: in a
    folder's name they are not a fragment, a query or a scheme)."""
    return quote(path, safe="/")


def link(label: str, url: str, prefix: str = "") -> str:
    """A link into the report: `prefix` is the report folder, a relative path or an http(s) URL
    (`--report-url`); `url` is a page of the report, with an optional `#anchor`."""
    base = destination(prefix) if prefix.startswith(("http://", "https://")) else path_destination(prefix)
    return f"[{text(label)}]({base}{quote(url, safe='/#')})"


def time_span(first: str | None, last: str | None) -> str:
    """`2026-12-02 13:34:31 → 13:36:10 (1 min 39 s)` from two record timestamps; "" when unknown."""
    if not first or not last:
        return ""
    start, end = _instant(first), _instant(last)
    if start is None or end is None:
        return f"{first} → {last}"
    shown_end = end.strftime("%H:%M:%S") if end.date() == start.date() else end.strftime("%Y-%m-%d %H:%M:%S")
    return f"{start.strftime('%Y-%m-%d %H:%M:%S')} → {shown_end} ({duration((end - start).total_seconds())})"


def duration(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _instant(stamp: str) -> datetime | None:
    try:
        return datetime.fromisoformat(stamp)
    except ValueError:
        return None


def summary_markdown(digest: ReportDigest | RanksDigest, link_prefix: str = "", gate_failures: Iterable[str] = ()) -> str:
    """The Markdown summary of a report's digest (or of a multi-rank report's); user files as the
    digest names them (relative to `--source-root` or the run's common folder of user files)."""
    prefix = link_prefix if not link_prefix or link_prefix.endswith("/") else link_prefix + "/"
    lines = _landing(digest, prefix) if isinstance(digest, RanksDigest) else _report(digest, prefix)
    failures = list(gate_failures)
    if failures:
        lines += ["", f"**Gate failed** ({len(failures)}):"]
        lines += [f"- {text(line, 200)}" for line in failures]
    return "\n".join(lines) + "\n"


# -- one report ------------------------------------------------------------------------------------


def _report(digest: ReportDigest, prefix: str) -> list[str]:
    lines = [f"### {digest.program} report: {text(digest.run.log_name)}", ""]
    lines += _program_exit(digest.run.program_exit)
    lines += [_context(digest.run, prefix), ""]
    lines += _totals_table([("", digest.totals)], digest.columns)
    lines += _export(digest, prefix)
    lines += _failures(digest, prefix)
    lines += _graph_breaks(digest, prefix)
    lines += _recompiles(digest, prefix)
    lines += _config(digest, prefix)
    lines += _slowest(digest, prefix)
    lines += _vllm(digest, prefix)
    return lines


_EXPORT_BASES = {"logged": "logged by torch", "inferred": "inferred from the shape facts: torch logged no exception"}


def _export(digest: ReportDigest, prefix: str) -> list[str]:
    """The export verdict and its basis: what failed, the user's line, the export call and its partial graph."""
    row = digest.export
    if row is None:
        return []
    basis = f" ({_EXPORT_BASES.get(row.basis, text(row.basis))})" if row.status == "failed" else ""
    lines = ["", f"**{link(row.heading, f'{digest.index}#export', prefix)}**{basis}", ""]
    if row.cause == "data_dependent_guard":
        lines.append(f"- a guard on a data-dependent value at {text(row.where)}: {code(row.source)}: export could not decide "
                     f"{code(row.guard)} (GuardOnDataDependentSymNode)")
        lines.append(f"- fix: {text(row.hint, 200)}")
    elif row.cause == "data_dependent_branch":
        lines.append(f"- a data-dependent branch at {text(row.where)}: {code(row.source)} asks the truth value of a tensor, the "
                     f"unbacked symbol {code(row.symbol)}, which export cannot guard on (GuardOnDataDependentSymNode)")
        lines.append(f"- fix: {text(row.hint, 200)}")
    elif row.call_at:
        lines.append("- its trace failed: torch logged the graph traced until then, not the exception, so what it failed on is unknown")
    elif row.status == "failed":
        lines.append(f"- {text(row.error, 200)}")
        lines += [f"- torch suggests: {code(row.suggested_fix)}"] if row.suggested_fix else []
    elif row.status == "issues":
        lines.append(f"- {row.issues} issue{'s' if row.issues != 1 else ''} found during export")
    elif row.status == "ok":
        lines.append("- a program was exported, and no issue was found")
    else:
        lines.append("- the log holds no exception, no failed trace and no exported program: whether the export succeeded is unknown")
    if row.call_at:
        graph = link("the partial graph", row.partial_graph, prefix) if row.partial_graph else "the partial graph"
        more = f" · {row.failed_exports} export traces failed; this is the first" if row.failed_exports > 1 else ""
        lines.append(f"- the export call at {text(row.call_at)} · {graph}{more}")
    return lines


def _vllm(digest: ReportDigest, prefix: str) -> list[str]:
    if not digest.vllm:
        return []
    lines = ["", f"**{link('vLLM piecewise compiles', 'index.html', prefix)}**", ""]
    for call, groups in digest.vllm[:ROWS]:
        shown = ", ".join(f"{text(group)}: {count} piece{'s' if count != 1 else ''}" for group, count in groups) or "no piece logged"
        lines.append(f"- {text(call)}: {shown}")
    return lines


def _program_exit(program: ProgramExit | None) -> list[str]:
    """How the program `tlparse-py run` ran ended, first (a program that crashed must not read like a
    slow one); nothing for a report written without `run`, whose program exit is unknown."""
    if program is None:
        return []
    said = f"The program {program.outcome}"
    return [f"{f'**{said}**' if program.failed else said}: {code(program.command, 200)}", ""]


def _context(run: RunLine, prefix: str) -> str:
    parts = [f"torch {text(run.torch_version)}"]
    span = time_span(run.first_record, run.last_record)
    if span:
        parts.append(text(span, 200))
    if run.rank is not None:
        parts.append(f"rank {run.rank}")
    parts.append(text(run.tool))
    parts.append(link("full report", "index.html", prefix))
    return " · ".join(parts)


def _totals_table(rows: list[tuple[str, dict[str, str]]], grouped: list[tuple[str, list[str]]]) -> list[str]:
    """A header and one row per (label, shown totals); label "" for a single report. A column per
    totals' column (`digest.shown_columns`): totals sharing one are shown together, `a / b / c`."""
    labelled = any(label for label, _ in rows)
    head = [column for column, _ in grouped]
    align = ["---" if len(group) > 1 else "---:" for _, group in grouped]
    lines = [
        "| " + " | ".join((["rank"] if labelled else []) + head) + " |",
        "|" + "|".join((["---"] if labelled else []) + align) + "|",
    ]
    for label, shown in rows:
        cells = [" / ".join(shown[name] for name in group) for _, group in grouped]
        lines.append("| " + " | ".join(([label] if labelled else []) + cells) + " |")
    return lines


def _ids(compiles: list[CompileSummary], prefix: str) -> str:
    shown = [link(c.label, c.url, prefix) if c.url else text(c.label) for c in compiles[:IDS_PER_ROW]]  # url None: no page (docs/limits.md)
    more = len(compiles) - IDS_PER_ROW
    return " ".join(shown) + (f" +{more} more" if more > 0 else "")


def _more(count: int, anchor: str, prefix: str, index: str = "index.html") -> list[str]:
    return [f"…and {count} more in the {link('report', f'{index}#{anchor}', prefix)}."] if count > 0 else []


def _graph_breaks(digest: ReportDigest, prefix: str) -> list[str]:
    if not digest.breaks:
        return []
    lines = ["", f"**{link('Graph breaks', f'{digest.index}#graph-breaks', prefix)}** (top {len(digest.breaks)} of {digest.break_kinds} kinds)", ""]
    lines += ["| count | graph break | user code | hint | compiles |", "|---:|---|---|---|---|"]
    for row in digest.breaks:
        kind = f"{text(row.registry_id)} " if row.registry_id else ""
        where = (text(row.where, 60) if row.where else "unknown") + (f" (inside {row.inside})" if row.inside else "")
        where += f" +{row.other_sites} more" if row.other_sites else ""
        hint = text(row.hint, 80) if row.hint else ""
        hint += "".join(f"{' — ' if hint else ''}Config: {text(note, 160)}" for note in row.config_notes)
        owner = f" — {text(row.owner)}, on purpose: not counted in graph breaks" if row.owner else ""
        lines.append(f"| {row.count} | {kind}{text(row.reason)}{owner} | {where} | {hint} | {_ids(row.compiles, prefix)} |")
    return lines + _more(digest.break_kinds - ROWS, "graph-breaks", prefix, digest.index)


def _frame(name: str | None, inside: str) -> str:
    """A frame's name in a cell, with the library it is in when it is a library frame (as a graph break's line is)."""
    return text(name or "", 40) + (f" (inside {inside})" if inside else "")


def _failures(digest: ReportDigest, prefix: str) -> list[str]:
    if not digest.failures:
        return []
    count = f"{digest.failed} failed compile{'s' if digest.failed != 1 else ''}"
    lines = ["", f"**{link('Failures', f'{digest.index}#problems', prefix)}** ({count})", ""]
    lines += ["| compile | frame | user code | exception |", "|---|---|---|---|"]
    for row in digest.failures:
        where = text(row.where, 60) if row.where else "unknown"
        where += f", failed at {text(row.failed_at, 60)}" if row.failed_at else ""
        exception = f"{text(row.type, 40)}: {text(row.message)}" if row.message else text(row.type, 40)
        exception += f" ({text('suppress_errors')} was on: logged, not raised)" if row.suppressed else ""
        lines.append(f"| {_ids([row.compile], prefix)} | {_frame(row.compile.frame, row.compile.inside)} | {where} | {exception} |")
    return lines + _more(digest.failed - FAILURE_ROWS, "problems", prefix, digest.index)


def _recompiles(digest: ReportDigest, prefix: str) -> list[str]:
    if not digest.recompiles:
        return []
    lines = ["", f"**{link('Recompiles', f'{digest.index}#recompiles', prefix)}** per frame", ""]
    for frame in digest.recompiles:
        why = f"; first reason: {text(frame.first_reason, 70)}" if frame.first_reason else ""
        if frame.retry:
            why += f"; {text(frame.retry[0])} retried after {text(frame.retry[1])} failed"
        if frame.over_limit is not None:
            why = f"; then {_ids([frame.over_limit], prefix)} reached the recompile limit: runs eagerly" + why
        name = f" {_frame(frame.name, frame.inside)}" if frame.name else ""
        count = f"{len(frame.compiles)} compile{'s' if len(frame.compiles) != 1 else ''}"
        lines.append(f"- frame {text(frame.frame)}{name}: {count} {_ids(frame.compiles, prefix)}{why}")
    return lines + _more(digest.recompiled_frames - ROWS, "recompiles", prefix, digest.index)


def _config(digest: ReportDigest, prefix: str) -> list[str]:
    if not digest.config:
        return []
    lines = ["", f"**{link('Config differences', f'{digest.index}#compiles', prefix)}** between compiles", ""]
    for row in digest.config:
        name = f" {_frame(row.compile.frame, row.compile.inside)}" if row.compile.frame else ""
        lines.append(f"- {_ids([row.compile], prefix)}{name}: " + "; ".join(text(line, 200) for line in row.texts))
    return lines + _more(digest.config_compiles - ROWS, "compiles", prefix, digest.index)


def _slowest(digest: ReportDigest, prefix: str) -> list[str]:
    if not digest.slowest:
        return []
    lines = ["", f"**{link('Slowest compiles', f'{digest.index}#slowest', prefix)}**", ""]
    lines += ["| compile | frame | time | status |", "|---|---|---:|---|"]
    for c in digest.slowest:
        lines.append(f"| {_ids([c], prefix)} | {_frame(c.frame, c.inside)} | {format_seconds(c.compile_time_s.total)} | {text(c.status)} |")
    return lines


# -- a multi-rank report ---------------------------------------------------------------------------


def _cause(divergence: dict[str, Any]) -> str:
    """A divergence's first cause (summary.json 4.0), in one line before its detail: "" when none is known."""
    cause = divergence.get("cause")
    return f"{text(cause.get('text'), 240)}; " if isinstance(cause, dict) and cause.get("text") else ""


def _landing(digest: RanksDigest, prefix: str) -> list[str]:
    lines = [f"### torch.compile report: {digest.ranks} ranks", ""]
    lines += _program_exit(digest.program_exit)
    lines += [f"tlparse-py {text(digest.generator_version)} · {link('landing page', 'index.html', prefix)}", ""]
    rows = [(link(row.entry.name, f"{row.entry.folder}/index.html", prefix), row.totals) for row in digest.rows]
    rows.append(("**all**", digest.combined))
    lines += _totals_table(rows, digest.columns)
    lines += _more(digest.ranks - ROWS * 2, "", prefix)
    if digest.unread:
        lines += ["", f"{len(digest.unread)} rank(s) could not be read: " + ", ".join(text(folder) for folder in digest.unread[:ROWS])]
    divergences = digest.divergences
    if divergences:
        lines += ["", f"**{link('Ranks diverge', 'index.html', prefix)}** ({len(divergences)}):"]
        lines += [f"- {text(d.get('kind'))} {text(d.get('compile_id') or '')}: {_cause(d)}{text(d.get('detail'), 80)}" for d in divergences[:ROWS]]
        lines += _more(len(divergences) - ROWS, "", prefix)
    for note in digest.notes:
        lines += ["", f"**{link('Ranks differ in cache results only', 'index.html#cache-note', prefix) if not divergences else 'Ranks also differ in cache results'}**: "
                      f"{text(note.get('detail'), 160)}; compile-time spread {format_seconds(note.get('spread_s'))}, {text(note.get('timeout'), 120)}"]
    return lines

