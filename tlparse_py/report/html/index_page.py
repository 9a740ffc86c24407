"""The index (`views.index.IndexPage`), as HTML: what happened and what went wrong, every compile and
every compile id, section by section in the order the page shows them.

On a log of thousands of compiles the index is the report's biggest page (10 MB at 10,000 compiles),
so it is written in pieces (`index_page_pieces`): the compiles table, "Files by compile id" and the
stack trie a row at a time, from rows the view makes as they are read (`views.index.Rows`), so that
neither the rows nor the page are ever held whole. `index_page_html` joins them (a live report's index,
tests).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ...analysis.summary import STATUS_LABELS, STATUS_SEVERITY
from .escaping import esc, safe_href
from .index_rows import compile_id_section, compile_link, compile_row_pieces, recompiled_frame, trie_pieces
from .parts import break_site, name_notes, perfetto, plural, program_exit, seconds, source_link
from .shell import VERSION, page_foot, page_head, source_path
from .timeline_svg import frames_figure, timeline_figure

if TYPE_CHECKING:
    from .links import SourceLinks
    from .models import IndexPageModel, LiveMarkModel

STATUS_RANK = {status: rank for rank, status in enumerate(STATUS_SEVERITY)}  # the compiles table sorts statuses by it
FAILURES_LINK = '<p><a href="failures_and_restarts.html">The whole error</a> is on the failures page.</p></div>\n'
NO_PROVENANCE = ' <span class="muted">(no provenance artifacts)</span>'
FAKE_KERNELS = "https://docs.google.com/document/d/1_W62p8WJOQQUzPsJYa7s701JXt0qf2OfLub2sbkHOaU"


def index_page_html(page: IndexPageModel, live: LiveMarkModel | None = None) -> str:
    """The whole page; `live`: written while the log is still being read."""
    return "".join(index_page_pieces(page, live))


def index_page_pieces(page: IndexPageModel, live: LiveMarkModel | None = None) -> Iterator[str]:
    """The page in pieces, in order: the rows of its long lists one by one, the rest a section each."""
    yield page_head(page, live)
    yield _header(page)
    yield _problems(page)
    yield _pictures(page)
    yield _export(page)
    yield _diagnostics(page)
    yield from _compiles(page, live)
    yield _graph_breaks(page)
    yield from _recompiles(page)
    yield _slowest(page)
    yield from _stack_trie(page)
    yield _failures(page)
    yield _provenance(page)
    yield _chromium(page)
    yield from _compile_ids(page)
    yield from _unknown_stacks(page)
    yield _report_files(page)
    yield page_foot(page)


def _pieces(fragment: str | list[str]) -> Iterable[str]:
    """A part a live report rendered before, in the pieces it was kept in (a row, a section each)."""
    return (fragment,) if isinstance(fragment, str) else fragment


def _get(value: Any, name: str) -> Any:
    """A field of a record or a key of a dict, as a template reads `value.name`."""
    return value[name] if type(value) is dict else getattr(value, name)


def _joined(items: Iterable[Any], piece: Callable[[Any], str], between: str) -> str:
    return between.join(map(piece, items))


def _code(value: Any) -> str:
    return f"<code>{esc(value)}</code>"


def _status_link(c: Mapping[str, Any]) -> str:
    """A compile's label coloured by its outcome, linked to its page when it has one."""
    if c["page"]:
        return f'<a class="status status-{esc(c["status"])}" href="{esc(c["page"])}">{esc(c["label"])}</a>'
    return f'<span class="status status-{esc(c["status"])}">{esc(c["label"])}</span>'


def _thousands(count: int) -> str:
    return esc(f"{count:,}")


# -- the top: title, where the log comes from, the run, the headline ---------------------------------


def _header(page: IndexPageModel) -> str:
    custom = f'<div class="custom-header">{esc(page.custom_header)}</div>' if page.custom_header else ""
    title = ("Draft export report" if page.draft_export else "Export report") if page.export_mode else "torch.compile report"
    program = program_exit(page.program) if page.program else ""
    return (f"{custom}<h1>{title}</h1>\n{program}{_left_out(page.source)}{_source(page)}{_processes(page)}\n"
            f"{_run(page)}\n{_cards(page)}")


def _left_out(source: Any) -> str:
    left_out = _get(source, "left_out")
    if not left_out:
        return ""
    items = "".join(f'<li>{_joined(_get(left, "logs"), _code, ", ")}: {esc(_get(left, "why"))}.</li>' for left in left_out)
    return ('<div class="warning left-out" id="left-out"><p><b>Not every log of the folder is in this report.</b> Left out:</p>\n'
            f"<ul>{items}</ul>\n<p>To read every log of the folder into one report: <code>tlparse-py PATH --all-runs</code> "
            "(in Python, <code>all_runs=True</code>); to read one alone, name its log.</p></div>\n")


def _source(page: IndexPageModel) -> str:
    source = page.source
    rank = f", rank {esc(page.rank)}" if page.rank is not None else ""
    also = _get(source, "also")
    read = f" Also read: {_joined(also, _code, ', ')}." if also else ""
    others = _get(source, "others")
    not_read = f" Other logs in that folder, not read here: {_joined(others, _code, ', ')}." if others and not _get(source, "left_out") else ""
    return (f'<p class="muted">From <code>{esc(source_path(source))}</code> ({_thousands(_get(source, "size"))} bytes){rank}.\n'
            f"{read}{not_read}</p>\n")


def _processes(page: IndexPageModel) -> str:
    processes = page.processes
    if not processes:
        return ""
    if _get(page.source, "every_log"):
        what = (f"{len(processes)} processes logged into this trace, every log of the folder read together (a folder made for one run, "
                "or <code>--all-runs</code>, which reads other runs' logs too): ")
    else:
        what = (f"{len(processes)} processes of one run logged into this trace (a program and the processes it started, known by "
                "their first stacks, or whose logs overlap in time): ")
    each = "; ".join(f'{_process_name(p)}, pid {esc(p["pid"])}, {esc(p["compiles"])} compile{"" if p["compiles"] == 1 else "s"}'
                     for p in processes)
    return (f'<p class="processes" id="processes">{what}{each}. Each numbers its own frames: a compile id names its process from the '
            "second on (<code>[p1:0/0]</code>). They are not ranks: totals add up over them.</p>")


def _process_name(p: Mapping[str, Any]) -> str:
    return f"<code>p{esc(p['process'])}</code>" if p["process"] else "the first"


def _run(page: IndexPageModel) -> str:
    run = page.run
    torch = f"<code>{esc(run['torch_version'])}</code>" if run["torch_version"] else "version not logged"
    if run.get("torch_commit"):  # a live report's run (or an older one's) may have none
        torch += f" (commit <code>{esc(run['torch_commit'])}</code>)"
    span = (f'records from <time datetime="{esc(run["first_record"])}">{esc(page.time_span)}</time>' if page.time_span
            else "no record timestamps")
    if run["rank"] is not None:
        rank = f"rank {esc(run['rank'])}"
    elif page.processes:
        rank = f"no rank logged ({len(page.processes)} processes)"
    else:
        rank = "no rank logged (a single process)"
    return f'<p class="muted run" id="run">torch {torch} · {span} · {rank} · tlparse-py {VERSION}</p>\n'


def _cards(page: IndexPageModel) -> str:
    out = ['<ul class="cards">\n']
    for c in page.cards:
        title = f' title="{esc(c["title"])}"' if c["title"] else ""
        value = f'<span class="n">{esc(c["value"])}</span>'
        if c["href"]:
            value = f'<a href="{esc(c["href"])}">{value}</a>'
        out.append(f'<li{title}>{value}<span class="t">{esc(c["words"])}</span></li>\n')
    out.append(f'<li><span class="n">{esc(page.records)}</span><span class="t">records</span></li>\n</ul>\n')
    return "".join(out)


# -- top problems, pictures, export, problems reading the log ----------------------------------------


def _problems(page: IndexPageModel) -> str:
    if not page.problems:
        return "\n"
    out = ['<h2 id="problems">Top problems</h2>\n']
    for number, p in enumerate(page.problems, start=1):
        if p["kind"] == "failure":
            out.append(_failure_problem(p, number, page.source_links))
        elif p["kind"] == "limit":
            out.append(_limit_problem(p, number, page.source_links))
    out.append("\n")
    return "".join(out)


def _frame_words(p: Mapping[str, Any], links: SourceLinks) -> str:
    """`<b>Frame 3</b> <code>name</code> at <code>file:line</code> (via)` of a problem."""
    name = f" <code>{esc(p['name'])}</code>" if p["name"] else ""
    at = f" at <code>{source_link(p['location'], links)}</code>" if p["location"] else ""
    via = f' <span class="muted">({esc(p["via"])})</span>' if p["via"] else ""
    return f"<b>Frame {esc(p['frame'])}</b>{name}{at}{via}"


def _failure_problem(p: Mapping[str, Any], number: int, links: SourceLinks) -> str:
    message = f": <code>{esc(p['message'])}</code>" if p["message"] else ""
    failed_at = f", at <code>{source_link(p['failed_at'], links)}</code>" if p["failed_at"] else ""
    suppressed = ("<p><code>torch._dynamo.config.suppress_errors</code> was on: torch logged the error instead of raising it and ran the "
                  "frame eagerly (unless <code>fullgraph=True</code> made it raise).</p>") if p["suppressed"] else ""
    return (f'<div class="note problem problem-failure" id="problem-{number}"><p><span class="status status-error">Error</span> '
            f"{_frame_words(p, links)}: its compile {compile_link(p['compile'])} failed with <code>{esc(p['type'])}</code>{message}{failed_at}.</p>\n"
            f"{suppressed}{FAILURES_LINK}")


def _limit_problem(p: Mapping[str, Any], number: int, links: SourceLinks) -> str:
    limit = f" = {esc(p['limit'])}" if p["limit"] is not None else ""
    compiled = p["compiled"]
    after = (f", after {len(compiled)} compile{'s' if len(compiled) != 1 else ''} ({_joined(compiled, compile_link, ' ')})"
             if compiled else "")
    out = [f'<div class="note problem problem-limit" id="problem-{number}"><p><span class="status status-limit">Recompile limit: runs eagerly</span> '
           f"{_frame_words(p, links)} reached torch's recompile limit (<code>torch._dynamo.config.{esc(p['limit_type'])}</code>{limit}) at "
           f"{compile_link(p['compile'])}{after}. From then on the frame runs eagerly, uncompiled, for every input its compiled graphs do not fit. "
           "The program ran correctly: this is not a failure, but the time of those calls is eager time.</p>\n"]
    if p["guards"]:
        reasons = p["reasons"]
        shown = "".join(f"<li>{compile_link(r)}: <code>{esc(r['reason'])}</code></li>" for r in reasons[:8])
        more = f"<li class=\"muted\">and {len(reasons) - 8} more on the compile's page</li>" if len(reasons) > 8 else ""
        out.append(f"<p>The guard that kept failing: {_joined(p['guards'], _code, ', ')}</p>\n"
                   f'<ul class="reasons">{shown}{more}</ul>\n')
        if p["name_notes"]:
            out.append(name_notes(p["name_notes"]))
    else:
        out.append('<p class="muted">No recompile reason was logged for it.</p>')
    out.append(f"<p>Fix: {_joined(p['fixes'], esc, '; or ')}.</p></div>\n")
    return "".join(out)


def _pictures(page: IndexPageModel) -> str:
    if not page.timeline:
        return "\n"
    return (f'<h2 id="timeline">Run timeline</h2>\n{timeline_figure(page.timeline)}\n'
            f'<h2 id="time-by-frame">Compile time by frame</h2>\n{frames_figure(page.timeline)}\n\n')


def _export(page: IndexPageModel) -> str:
    export, mode = page.export, page.export_mode
    if not (mode or page.export_rows or page.exported_programs or export["status"] == "failed"):
        return "\n"
    out = [f'<h2 id="export">{"Export issues" if mode else "torch.export"}</h2>\n', _export_failure(export, page.source_links)]
    if not mode:
        out.append('<p class="note">This trace comes from <code>torch.export</code>: run tlparse-py with <code>-e</code> for the export report, '
                   "with a page per guard and its provenance.</p>")
    if page.export_rows:
        out.append(_export_rows(page.export_rows, mode))
    elif mode and export["status"] == "ok":
        out.append("<p>No issues were found during export, and it was able to soundly produce a graph. You can now change back to "
                   "<code>torch.export.export()</code>.</p>\n")
    elif mode and export["status"] == "unknown":
        out.append("<p>No issues were found in the log, but it holds no exported program either, so whether the export succeeded is unknown.</p>\n")
        if export.get("evidence"):
            out.append(f"<p>The log holds part of the evidence of a constraint violation, not all of it ({esc(export['missing'])}):</p>"
                       f"{_export_evidence(export['evidence'])}")
    programs = page.exported_programs
    if programs:
        links = "".join(f'<a href="{esc(url)}">{esc(url.rpartition("/")[2])}</a> ' for url in programs)
        out.append(f"<p>Exported program{'s' if len(programs) > 1 else ''}: {links}</p>\n")
    elif mode:
        out.append('<p class="muted">No exported program was logged.</p>')
    out.append("\n")
    return "".join(out)


def _export_failure(export: Mapping[str, Any], links: SourceLinks) -> str:
    """Why the export failed, when it did: where its trace stopped, the inferred violation, or the logged error."""
    if export["status"] != "failed":
        return ""
    if export.get("trace_failure"):
        return _export_trace_failure(export["trace_failure"], links) + "\n"
    if export["basis"] == "inferred":
        fix = (f"<p>The fix torch suggests for such a guard: <code>{esc(export['suggested_fix'])}</code></p>"
               if export["suggested_fix"] else "")
        return (f'<div class="warning"><p><b>Export failed (inferred):</b> {esc(export["error"])}</p>\n'
                "<p>This is an inference: the log holds no exception and no exported program. It holds the evidence below, and for it "
                "torch raises a constraint violation at the end of the export.</p>\n"
                f"{_export_evidence(export['evidence'])}\n{fix}</div>\n")
    guard = f"<p>The guard behind it: <code>{esc(export['guard'])}</code></p>" if export["guard"] else ""
    fix = f"<p>torch suggests: <code>{esc(export['suggested_fix'])}</code></p>" if export["suggested_fix"] else ""
    return f'<div class="warning"><p><b>Export failed:</b> <code>{esc(export["error"])}</code></p>\n{guard}{fix}{FAILURES_LINK[:-1]}'


def _export_evidence(e: Mapping[str, Any]) -> str:
    """The shape facts behind an inferred export verdict (questions.export_verdict's `evidence`)."""
    if e["dim"]:
        declared = f'the export call declares this dimension as <code>Dim("{esc(e["dim"])}")</code>'
    else:
        declared = "the export call's text does not show how this dimension was declared"
    return ('<ul class="evidence">\n'
            f"<li>the symbol <code>{esc(e['symbol'])}</code> that export created for <code>{esc(e['source'])}</code>, "
            f"declared range <code>{esc(e['declared_range'])}</code></li>\n"
            f"<li>the guard <code>{esc(e['guard'])}</code> (log line {esc(e['guard_line'])}), which narrows that range</li>\n"
            f"<li>{declared}: <code>{esc(e['call'])}</code> at <code>{esc(e['call_location'])}</code></li>\n</ul>")


def _export_trace_failure(t: Mapping[str, Any], links: SourceLinks) -> str:
    """A failed export trace (questions.export_verdict's `trace_failure`): where it failed, what on when the log tells, its partial graph."""
    where = ""
    if t["cause"] in ("data_dependent_guard", "data_dependent_branch"):
        function = f" in <code>{esc(t['user_function'])}</code>" if t["user_function"] else ""
        line = f': <code class="src">{esc(t["user_source"])}</code>' if t["user_source"] else ""
        where = f" at <code>{source_link(t['user_location'], links)}</code>{function}{line}</p>\n"
    if t["cause"] == "data_dependent_guard":
        why = (f"<p><b>Export failed: a guard on a data-dependent value</b>{where}"
               f"<p>Export could not decide <code>{esc(t['guard'])}</code> (log line {esc(t['guard_line'])}), a condition on a value computed "
               "from tensor data (<code>GuardOnDataDependentSymNode</code>), and its trace stopped there.</p>\n"
               f"<p>Fix: {esc(t['hint'])}.</p>\n")
    elif t["cause"] == "data_dependent_branch":
        why = (f"<p><b>Export failed: a data-dependent branch</b>{where}"
               f"<p>This line asks the truth value of a tensor, which export made the unbacked symbol <code>{esc(t['symbol'])}</code> "
               f"(range <code>{esc(t['symbol_range'])}</code>, log line {esc(t['symbol_line'])}): a value computed from tensor data, which export "
               "cannot guard on (<code>GuardOnDataDependentSymNode</code>).</p>\n"
               f"<p>Fix: {esc(t['hint'])}.</p>\n"
               '<p class="muted">The failure is logged (the partial graph below); what it failed on is inferred, since torch logs no exception '
               "for a non-strict export: the trace failed right after export created this symbol, and a truth value asked of an unbacked "
               "symbol fails at once.</p>\n")
    else:
        why = ("<p><b>Export failed:</b> its trace stopped, and torch logged the graph traced until then, not the exception: what it failed "
               "on is unknown. The partial graph's last lines show how far it got; run the export to see its error.</p>\n")
    graph = f'<a href="{esc(t["partial_graph"])}">the partial graph</a>' if t["partial_graph"] else "the partial graph"
    others = f" · {esc(t['failed_exports'])} export traces failed in this log; this is the first" if t["failed_exports"] > 1 else ""
    return (f'<div class="warning" id="export-failure">\n{why}<p>The export call: <code>{esc(t["call"])}</code> at '
            f"<code>{source_link(t['call_location'], links)}</code> · {graph} (log line {esc(t['partial_graph_line'])}){others}</p>\n</div>")


def _export_rows(rows: list[dict[str, Any]], mode: bool) -> str:
    guard_pages = " Each guard links to a page with its stacks, locals and provenance." if mode else ""
    out = [f"<p><b>{len(rows)} issue(s) were found during export.</b>{guard_pages}</p>\n"
           '<div class="scroll"><table><thead><tr><th>Issue</th><th>What happened</th><th>More</th></tr></thead><tbody>\n']
    for r in rows:
        if r["url"]:
            more = f'<a href="{esc(r["url"])}">guard details</a>'
        elif r["fake_kernel"]:
            more = f'<a href="{FAKE_KERNELS}" rel="noopener noreferrer">about fake kernels</a>'
        else:
            more = ""
        out.append(f"<tr><td>{esc(r['type'])}</td><td>{esc(r['text'])}</td>\n<td>{more} "
                   f'<span class="muted">line {esc(r["line"])}, <a href="{esc(r["page"])}">{esc(r["label"])}</a></span></td></tr>\n')
    out.append("</tbody></table></div>\n")
    return "".join(out)


def _diagnostics(page: IndexPageModel) -> str:
    diagnostics, unknown = page.diagnostics, page.unknown_kinds
    if not (diagnostics.total or unknown):
        return "\n"
    out = [f'<h2 id="diagnostics">Problems reading the log</h2>\n<p><code>{esc(page.stats_line)}</code></p>\n']
    if unknown:
        kinds = "".join(f'<span class="kind unknown">{esc(kind)} ×{esc(count)}</span> ' for kind, count in unknown)
        out.append(f"<p>Record kinds this version does not know (shown generically on their compile-id pages):\n{kinds}</p>")
    total, kept = diagnostics.total, diagnostics.kept
    if total:
        listed = f"; the first {len(kept)} are listed" if total > len(kept) else ""
        out.append(f'<details class="section"{" open" if total <= 20 else ""}><summary>{esc(total)} skipped or damaged line(s){listed}</summary>\n'
                   '<div class="scroll"><table><thead><tr><th>File</th><th>Line</th><th>Problem</th><th>Detail</th><th>What it means</th></tr>'
                   "</thead><tbody>\n")
        out.extend(f"<tr><td><code>{esc(d.path)}</code></td><td>{esc(d.lineno)}</td><td>{esc(d.problem)}</td><td class=\"v\">{esc(d.detail)}</td>"
                   f"<td>{esc(d.hint)}</td></tr>\n" for d in kept)
        out.append("</tbody></table></div>\n</details>\n")
    out.append("\n")
    return "".join(out)


# -- the compiles table, graph breaks, recompiles, the slowest compiles -------------------------------


def _compiles(page: IndexPageModel, live: LiveMarkModel | None) -> Iterator[str]:
    rows, bounds = page.compile_rows, page.bounds
    if not rows:
        yield "\n"
        return
    listed = len(rows)
    first = (f'<p class="note">The first {_thousands(listed)} of {_thousands(bounds["compiles"])} compiles are listed here; '
             '<a href="summary.json">summary.json</a> lists them all.</p>') if bounds["compiles"] > listed else ""
    yield ('<h2 id="compiles">Compiles</h2>\n'
           f'{first}<p class="filter" hidden><label for="compiles-filter">Filter compiles</label> <input type="search" id="compiles-filter" '
           'data-filter="compiles-table" placeholder="id, status, frame, cache, reason" autocomplete="off"> '
           '<span class="muted" role="status" aria-live="polite"></span></p>\n'
           '<div class="scroll"><table class="compiles" id="compiles-table" data-sortable>\n'
           '<thead><tr><th data-sort="num">Compile id</th><th data-sort="num">Status</th><th data-sort="text">Frame</th><th data-sort="num">'
           'Compile time <span class="muted">(forward + backward)</span></th><th data-sort="num">Graph ops</th><th data-sort="num">Cache</th>'
           "<th>Why it failed, restarted or recompiled</th></tr></thead>\n<tbody>\n")
    if "compile_rows" in page.fragments:
        yield from _pieces(page.fragments["compile_rows"])
    else:
        yield from compile_row_pieces(rows, live.compiling if live is not None else None, STATUS_LABELS, STATUS_RANK)
    total = page.totals["compile_time_s"]
    yield (f'</tbody>\n<tfoot><tr><td colspan="3">Total</td><td class="num">{seconds(total) if total is not None else "unknown"}</td>'
           '<td colspan="3"></td></tr></tfoot>\n</table></div>\n\n')


def _graph_breaks(page: IndexPageModel) -> str:
    if not page.graph_breaks:
        return '<h2 id="graph-breaks">Graph breaks</h2>\n<p>No graph breaks were logged.</p>'
    out = ['<h2 id="graph-breaks">Graph breaks</h2>\n<p class="muted">Graph breaks by kind (torch\'s graph-break registry id, where the log '
           "gives it), most frequent first, with the fix torch suggests and every user code line they happened at. torch's own breaks (its "
           "<code>torch._dynamo.graph_break()</code> inside torch, on purpose) come last, marked, and are counted apart, in torch's graph "
           'breaks.</p>\n<div class="scroll"><table><thead><tr><th>Count</th><th>Graph break</th><th>User code</th><th>Compile ids</th></tr>'
           "</thead><tbody>\n"]
    out.extend(_graph_break(g, page.source_links) for g in page.graph_breaks)
    out.append("</tbody></table></div>\n")
    return "".join(out)


def _graph_break(g: Mapping[str, Any], links: SourceLinks) -> str:
    registry = ""
    if g["registry_id"]:
        if g["doc_url"]:
            registry = f'<a class="gb-id" href="{esc(safe_href(g["doc_url"]))}" rel="noopener noreferrer">{esc(g["registry_id"])}</a> '
        else:
            registry = f'<span class="gb-id">{esc(g["registry_id"])}</span> '
    reason = f'<a href="{esc(g["url"])}">{esc(g["reason"])}</a>' if g["url"] else esc(g["reason"])
    owner = f'<br><span class="gb-owner">{esc(g["owner"])}</span>' if g["owner"] else ""
    explained = f'<br><span class="muted">{esc(g["explanation"])}</span>' if g["explanation"] else ""
    hints = "".join(f'<br><span class="hint">Hint: {esc(hint)}</span>' for hint in g["hints"])
    notes = "".join(f'<br><span class="config-note">Config: {esc(note)}</span>' for note in g["config_notes"])
    sites = "<br>".join(break_site(s, links) for s in g["sites"])
    compile_ids = "".join(f'<a href="{esc(c["page"])}">{esc(c["label"])}</a> ' for c in g["compile_ids"])
    return (f'<tr><td class="num">{esc(g["count"])}</td><td>{registry}{reason}{owner}{explained}{hints}{notes}</td>\n'
            f"<td>{sites}</td>\n<td>{compile_ids}</td></tr>\n")


def _recompiles(page: IndexPageModel) -> Iterator[str]:
    """A piece a frame: the frames are made as they are written (`views.index.Rows`), never all held."""
    yield '\n<h2 id="recompiles">Recompiles</h2>\n'
    if not page.recompiles:
        yield "<p>No frame was compiled more than once.</p>"
    if "recompiled_frames" in page.fragments:  # a live report's, each frame's as it rendered it last (`views.live_index`)
        yield from _pieces(page.fragments["recompiled_frames"])
    else:
        for f in page.recompiles:
            yield recompiled_frame(f)
    yield "\n"


def _slowest(page: IndexPageModel) -> str:
    if not page.slowest:
        return '<h2 id="slowest">Slowest compiles</h2>\n<p>No compile times were logged.</p>'
    out = ['<h2 id="slowest">Slowest compiles</h2>\n<div class="scroll"><table class="compact"><thead><tr><th>Compile id</th><th>Frame</th>'
           '<th>Compile time <span class="muted">(forward + backward)</span></th><th>Graph ops</th></tr></thead><tbody>\n']
    for r in page.slowest:
        via = f'<br><span class="muted">{esc(r["via"])}</span>' if r["via"] else ""
        ops = esc(r["graph_ops"]) if r["graph_ops"] is not None else ""
        out.append(f'<tr><td><a href="{esc(r["page"])}">{esc(r["label"])}</a></td><td><code>{esc(r["name"])}</code>{via}</td>'
                   f'<td class="num">{seconds(r["seconds"])}</td><td class="num">{ops}</td></tr>\n')
    out.append("</tbody></table></div>\n")
    return "".join(out)


# -- the stack trie, links to the other pages, the compile ids' files -------------------------------


def _stack_trie(page: IndexPageModel) -> Iterator[str]:
    legend = "".join(f'<span class="status status-{esc(key)}">{esc(text)}</span>' for key, text in STATUS_LABELS.items())
    yield ('\n<h2 id="stack-trie">Stack trie</h2>\n<p>Where in your program compiles started: the stacks of every <code>dynamo_start</code>, '
           "merged on their common prefix. Each compile id links to its page and is coloured by its outcome.</p>\n"
           f'<p class="legend">{legend}</p>\n')
    if "trie" in page.fragments:
        yield from _pieces(page.fragments["trie"])
    elif page.trie:
        yield from trie_pieces(page.trie, page.root)
    else:
        yield '<p class="muted">No <code>dynamo_start</code> stacks were logged.</p>'
    if page.no_stack:
        listed = "".join(_status_link(r) + " " for r in page.no_stack)
        yield ("<p>Compiles with no start stack in the log (torch logged no <code>dynamo_start</code> for them, as for a compile that hit the "
               f"recompile limit, or export): {listed}</p>")
    yield "\n"


def _failures(page: IndexPageModel) -> str:
    if not page.failures:
        return "\n"
    words = esc(page.failures_words) if page.failures_words else "What torch logged as restarted or failed"
    return (f'<h2 id="failures">Failures and restarts</h2>\n<p><a href="failures_and_restarts.html">{words}</a>: every restart and every '
            "exception a compile logged, with where it happened.</p>\n\n")


def _provenance(page: IndexPageModel) -> str:
    if not page.provenance_pages:
        return "\n"
    items = "".join(f'<li><a href="{esc(p["url"])}">{esc(p["label"])}</a>{"" if p["has_data"] else NO_PROVENANCE}</li>'
                    for p in page.provenance_pages)
    return ('<h2 id="provenance">Provenance tracking</h2>\n<p>Three-pane highlighters mapping pre-grad graph ↔ post-grad graph ↔ generated '
            f"code:</p>\n<ul>{items}</ul>\n\n")


def _chromium(page: IndexPageModel) -> str:
    if not page.chromium_events:
        return "\n"
    return ('<h2 id="chromium">Chromium events</h2>\n<p><a href="chromium_events.json">chromium_events.json</a> holds '
            f"{esc(page.chromium_events)} trace events of the compiler's phases. Open it in <a href=\"https://ui.perfetto.dev/\" "
            'rel="noopener noreferrer">Perfetto</a> (Open trace file, then pick <code>chromium_events.json</code> from this report\'s folder) '
            f"or <code>chrome://tracing</code> to see where compile time went.</p>\n{perfetto(page.title)}\n\n")


COMPILE_IDS = (
    '<h2 id="compile-ids">Files by compile id <span class="toolbar"><button type="button" data-toggle-all="open" hidden>Expand all</button> '
    '<button type="button" data-toggle-all="close" hidden>Collapse all</button></span></h2>\n'
    '<details class="section"><summary>How to read compile ids and the files below</summary>\n'
    "<p>A compile id <code>[x/y]</code> is the y-th compile (recompile) of frame x; <code>[x/y_z]</code> is its z-th attempt (Dynamo restarts "
    "analysis, e.g. after a graph break); <code>[!a/x/y]</code> is a compile inside compiled autograd graph a, and <code>[!a/-/-]</code> "
    "compiled autograd's capture of that backward graph (not a compile). <code>[-/-]</code> holds records logged outside any compile.</p>\n"
    "<p>The PT2 pipeline logs, in order: <code>dynamo_output_graph</code> (the FX graph Dynamo captured), "
    "<code>optimize_ddp_split_graph/child</code> (DDP buckets), <code>aot_joint_graph</code>, <code>aot_forward_graph</code>, "
    "<code>aot_backward_graph</code> or <code>aot_inference_graph</code> (AOTAutograd), <code>inductor_post_grad_graph</code> (after "
    "Inductor's FX passes) and <code>inductor_output_code</code> (the generated code). <code>compiled_autograd_graph</code> is the backward "
    "graph compiled autograd captured. Numbers in parentheses are the order in which files were written; <span class=\"cache cache-hit\">cache "
    'hit</span>, <span class="cache cache-miss">cache miss</span> and <span class="cache cache-bypass">cache bypass</span> mark the files of '
    "cache lookups.</p>\n</details>\n"
)


def _compile_ids(page: IndexPageModel) -> Iterator[str]:
    yield COMPILE_IDS + _bounds(page)
    if "compiles" in page.fragments:
        yield from _pieces(page.fragments["compiles"])
    else:
        for entry in page.compiles:
            yield compile_id_section(entry, page.root, STATUS_LABELS)
    yield "\n"


def _bounds(page: IndexPageModel) -> str:
    """What "Files by compile id" leaves out: the compile ids past the first listed, the pages not written."""
    bounds, listed = page.bounds, len(page.compiles)
    pageless, cut = bounds["pageless"], bounds["compile_ids"] > listed
    if not (pageless or cut):
        return ""
    first = (f'The first {_thousands(listed)} of {_thousands(bounds["compile_ids"])} compile ids are listed here; '
             '<a href="compile_directory.json">compile_directory.json</a> lists them all. ') if cut else ""
    without = (f'{_thousands(pageless)} compile {plural(pageless, "id")} logged nothing but {"its" if pageless == 1 else "their"} '
               f'<code>dynamo_start</code>: past the first {_thousands(bounds["paged_start_only"])} such ids, they are listed without a page of '
               "their own (a page would only repeat the start stack shown in the stack trie).") if pageless else ""
    return f'<p class="note" id="bounds">{first}{without}</p>'


def _unknown_stacks(page: IndexPageModel) -> Iterator[str]:
    fragment = page.fragments.get("unknown_trie")
    if not (page.unknown_trie or fragment is not None):
        return
    yield ('<h2 id="unknown-stacks">Unknown stacks</h2>\n<p>Records logged outside any compile id carry the stack of their call site instead '
           "(export, AOTInductor). These are those stacks.</p>\n")
    if fragment is not None:
        yield from _pieces(fragment)
    else:
        yield from trie_pieces(page.unknown_trie, page.root)
    yield "\n"


def _report_files(page: IndexPageModel) -> str:
    return ('\n<h2 id="files">Report files</h2>\n<ul>\n'
            "<li><a href=\"compile_directory.json\">compile_directory.json</a>: every file above, by compile id (tlparse's schema)</li>\n"
            "<li><a href=\"raw.jsonl\">raw.jsonl</a>: every record's metadata, one JSON object per line</li>\n"
            '<li><a href="raw.log">raw.log</a>: the log itself</li>\n'
            '<li><a href="chromium_events.json">chromium_events.json</a>: trace events for Perfetto</li>\n'
            '<li><a href="summary.json">summary.json</a>: the numbers above, for scripts and CI (schema in the README)</li>\n'
            '<li><a href="summary.md">summary.md</a>: a short Markdown summary, e.g. for a CI job summary or a pull request</li>\n'
            f'</ul>\n<p class="muted"><code>{esc(page.stats_line)}</code></p>\n')
