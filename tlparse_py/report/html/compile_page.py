"""The page of one compile id (`views.compile.CompilePage`), as HTML: written once per compile id, so
a plain function of its model, section by section, in the order the page shows them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .escaping import esc, safe_href
from ...analysis.summary import STATUS_LABELS
from .parts import artifact, break_site, diffstat, frame, name_notes, seconds, section, source_link, stack, status, time_bar
from .shell import page_shell

if TYPE_CHECKING:
    from .models import CompilePageModel, LiveMarkModel


def compile_page_html(page: CompilePageModel, live: LiveMarkModel | None = None) -> str:
    """The whole page; `live`: written while the log is still being read."""
    root = esc(page.root)
    parts = [
        _pagenav(page, root), _heading(page, live), _generation_note(page, root), _capture_note(page, root), _library_frame_note(page),
        *(_metric(page, metric, root) for metric in page.metrics),
        _no_metrics_note(page, root), _cache_line(page, root), _config_note(page, root),
        '\n<details class="section" id="stack" open><summary>Stack that triggered the compile</summary>\n',
        stack(page.stack, page.root), "\n</details>\n\n",
        _graph_breaks(page, root), "\n", _recompiles(page), "\n", _tensors(page), "\n", _symbols(page), "\n", _guards(page), "\n",
        _pipeline(page), "\n", _texts("code", "Generated code", page.sections["code"], page.root), "\n", _phases(page), "\n",
        _runtime(page), "\n", _cache_table(page, root), "\n", *(_declared_section(d, page.root) for d in page.declared_sections),
        _texts("other", "Other artifacts", page.sections["other"], page.root), "\n", _subgraphs(page), _files(page, root),
        _records(page, root),
    ]
    return page_shell(page, live, "".join(parts))


def _links(items: list[Any], link: Any) -> str:
    """Items joined by ", " (`link` makes each one's HTML)."""
    return ", ".join(map(link, items))


def _pagenav(page: CompilePageModel, root: str) -> str:
    before = f'← <a href="{root}{esc(page.previous)}">{esc(page.previous_label)}</a>' if page.previous else ""
    after = f'<a href="{root}{esc(page.next)}">{esc(page.next_label)}</a> →' if page.next else ""
    return (f'<nav class="pagenav" aria-label="Compile ids">\n<span>{before}</span>\n'
            f'<span><a href="{root}{esc(page.usual_index)}#{esc(page.anchor)}">all compile ids</a></span>\n<span>{after}</span>\n</nav>\n')


def _heading(page: CompilePageModel, live: LiveMarkModel | None) -> str:
    label = esc(page.label)
    what = f"Compiled autograd graph {esc(page.capture['graph'])}: capture of the backward graph {label}" if page.capture else f"Compile {label}"
    badge = status(page.status, STATUS_LABELS, live is not None and page.label in live.compiling) if page.status else ""
    return (f'<h1>{what} {badge}<span class="toolbar"><button type="button" data-toggle-all="open" hidden>Expand all</button> '
            '<button type="button" data-toggle-all="close" hidden>Collapse all</button></span></h1>\n\n')


def _generation_note(page: CompilePageModel, root: str) -> str:
    """A compile id torch numbered again after `torch._dynamo.reset()`."""
    if page.reuses:
        others = _links(page.reuses, lambda r: f'<a href="{root}{esc(r.url)}">{esc(r.label)}</a>')
        return (f'<div class="note"><p>This compile id names {len(page.reuses) + 1} separate compiles: after <code>torch._dynamo.reset()</code> '
                f'torch numbers compile ids from [0/0] again, in a new generation. This page shows the one of generation {esc(page.generation)}, '
                f'with only the records it logged; the others: {others}. (Their files share the folder, as tlparse lays them out.)</p></div>\n')
    if page.generation:
        return (f'<div class="note"><p>Compiled in generation {esc(page.generation)}: after <code>torch._dynamo.reset()</code>, '
                'which makes torch number compile ids from [0/0] again.</p></div>')
    return ""


def _capture_note(page: CompilePageModel, root: str) -> str:
    """A compiled-autograd capture (what its graph compiled as), or a compile of a captured graph."""
    capture, captured_by = page.capture, page.captured_by
    if capture:
        def compiled(k: dict[str, Any]) -> str:
            if k["page"]:
                return f'<a class="status status-{esc(k["status"])}" href="{root}{esc(k["page"])}">{esc(k["label"])}</a>'
            return f'<span class="status status-{esc(k["status"])}">{esc(k["label"])}</span>'

        compiles = _links(capture["compiles"], compiled) if capture["compiles"] else "nothing the log records"
        return (f'<div class="note" id="capture"><p>Compiled autograd traced the backward pass here into one graph, its graph {esc(capture["graph"])} '
                '(the records below, and <code>compiled_autograd_graph</code>). A capture is not a compile: the graph it captured was compiled as '
                f"{compiles}.</p></div>\n")
    if captured_by:
        return (f'<p class="note">A compile of the backward graph compiled autograd captured as its graph {esc(captured_by["graph"])}: '
                f'<a href="{root}{esc(captured_by["page"])}">{esc(captured_by["label"])}</a>.</p>')
    return ""


def _library_frame_note(page: CompilePageModel) -> str:
    """A compile that Dynamo started in a library frame: what it compiled, and the user's line that led there."""
    lf = page.library_frame
    if not lf:
        return ""
    called = f", called at <code>{source_link(lf['location'], page.source_links)}</code>" if lf["location"] else ""
    if lf["torch_wrapper"]:
        model = f"; the model is the one this compile's guards name for the wrapper's <code>fn</code>: <code>{esc(lf['module'])}</code>" if lf["module"] else ""
        why = ("torch compiles a model whose forward is its own (<code>nn.Sequential</code>, <code>DistributedDataParallel</code>) through this one "
               f"function, so the metrics and the stack below end there{model}.")
    else:
        why = ("Dynamo started this compile in library code, not yours, so the metrics and the stack below end there; the line above is the "
               "innermost line of your code in its stack, the one that led into it.")
    return f'<p class="note" id="library-frame">Compiled <code>{esc(lf["frame"])}</code>{called}: {esc(lf["via"])}. {why}</p>'


def _metric(page: CompilePageModel, metric: dict[str, Any], root: str) -> str:
    """One compilation_metrics record of the compile: frame, times, counts, failure and time bar."""
    f = metric["fields"]
    out = ["<p>"]
    if f["co_name"]:
        out.append(f"Frame <code>{esc(f['co_name'])}</code>")
        if f["co_filename"]:
            out.append(f" at <code>{_location_link(f['co_filename'], f['co_firstlineno'], page)}</code>")
        out.append(" · ")
    forward = f["entire_frame_compile_time_s"]
    out.append(f"compile time {seconds(forward) if forward is not None else 'unknown'}")
    backward = page.backward
    if backward:
        total = (forward or 0) + sum(backward)
        out.append(f" + lazy backward compile {', '.join(map(seconds, backward))} (total {seconds(total)})")
    if page.backward_in_forward is not None and forward is not None:
        out.append(f", of which the backward compile {seconds(page.backward_in_forward)} "
                   '<span class="muted">(compiled inside the forward compile, not lazily: it is part of the forward time)</span>')
    if f["graph_op_count"] is not None:
        out.append(f" · {esc(f['graph_op_count'])} graph ops")
    if f["guard_count"] is not None:
        out.append(f" · {esc(f['guard_count'])} guards")
    if metric["url"]:
        out.append(f' · <a href="{root}{esc(metric["url"])}">compilation metrics</a>')
    out.append("</p>\n")
    out.append(_failure(page, f, root))
    if metric["bar"]:
        out.append(time_bar(metric["bar"]))
    return "".join(out)


def _location_link(filename: Any, line: Any, page: CompilePageModel) -> str:
    """`file.py:23` of a metrics record, linked into the user's repository where one is configured."""
    return source_link(f"{filename}:{line}", page.source_links)


def _failure(page: CompilePageModel, f: dict[str, Any], root: str) -> str:
    """A metrics record's failure: over the recompile limit (runs eagerly, not a failure), or failed."""
    if not f["fail_type"]:
        return ""
    reason = esc(f["fail_reason"] if f["fail_reason"] else "(no reason logged)")
    if page.status == "limit":
        return ('<div class="note"><p><span class="status status-limit">Recompile limit: runs eagerly</span> This compile is over torch\'s recompile '
                "limit: nothing was compiled, and the frame runs eagerly from here on for every input its compiled graphs do not fit. The program ran "
                f'correctly; this is not a failure (<a href="{root}{esc(page.usual_index)}#problems">the guard that kept failing, and the fix</a>). '
                f"torch's message (<code>{esc(f['fail_type'])}</code>):</p><pre class=\"reason\">{reason}</pre></div>\n")
    where = ""
    if f["fail_user_frame_filename"]:
        where = f" at <code>{_location_link(f['fail_user_frame_filename'], f['fail_user_frame_lineno'], page)}</code>"
    return f'<div class="warning"><p>Failed: <code>{esc(f["fail_type"])}</code>{where}</p><pre class="reason">{reason}</pre></div>'


def _no_metrics_note(page: CompilePageModel, root: str) -> str:
    if page.metrics:
        return ""
    if page.other_attempts:
        attempts = _links(page.other_attempts, lambda o: f'<a href="{root}{esc(o["page"])}">{esc(o["label"])}</a>')
        return f"<p>This is one attempt of a frame compile whose metrics were logged under {attempts}.</p>\n"
    if page.status == "missing":
        return '<p class="note">No compilation metrics were logged for this compile id (the process may have crashed or is still running).</p>'
    return ""


def _cache_line(page: CompilePageModel, root: str) -> str:
    """The compile's cache lookups, one badge each (the table further down has their keys)."""
    if not page.cache:
        return ""
    out = ["<p>Cache: "]
    for c in page.cache:
        title = esc(c["reason"] or c["key"])
        words = f'{esc(c["cache"])} {esc(c["state"])}'
        if c["url"]:
            out.append(f'<a class="cache cache-{esc(c["state"])}" href="{root}{esc(c["url"])}" title="{title}">{words}</a> ')
        else:
            out.append(f'<span class="cache cache-{esc(c["state"])}" title="{title}">{words}</span> ')
    out.append("</p>")
    return "".join(out)


def _config_note(page: CompilePageModel, root: str) -> str:
    """Its settings that changed since its frame's previous compile (or that none did), and those unlike the run's usual."""
    config = page.config
    if not config:
        return ""
    since = f'<a href="{root}{esc(config["since_page"])}">{esc(config["since"])}</a>' if config["since_page"] else esc(config["since"])
    out = []
    if config["changes"] or config["unusual"]:
        out.append('<div class="note" id="config">')
        if config["changes"]:
            changes = "".join(f'<li><code>{esc(c["setting"])}</code>: <code>{esc(c["before"])}</code> → <code>{esc(c["after"])}</code></li>'
                              for c in config["changes"])
            out.append(f"<p>Config changed since this frame's previous compile {since}:</p>\n<ul>{changes}</ul>")
        if config["unusual"]:
            # how many compiles had the usual value is the index's to say (its row): a count here would
            # change this page with every compile that logs its config
            unusual = "".join(f'<li><code>{esc(u["setting"])}</code> = <code>{esc(u["value"])}</code> here; <code>{esc(u["usual"])}</code> in '
                              f'most of the run\'s compiles (<a href="{root}{esc(page.usual_index)}#compiles">the index\'s table of compiles</a> says how many)</li>'
                              for u in config["unusual"])
            out.append(f"<p>Settings unlike most of the run's compiles:</p>\n<ul>{unusual}</ul>")
        out.append("</div>\n")
    if config["since"] and not config["changes"]:
        out.append(f"<p class=\"muted\" id=\"config-same\">Config: the same settings as this frame's previous compile {since} "
                   "(every config module both logged).</p>")
    return "".join(out)


def _graph_breaks(page: CompilePageModel, root: str) -> str:
    """Its graph breaks (reason, user code, explanation and fix) and its restarts."""
    restarts = [m["fields"]["restart_reasons"] for m in page.metrics]
    if not (page.graph_breaks or page.sections["graph_breaks"] or any(restarts)):
        return ""
    out = [f'<details class="section" id="graph-breaks" open><summary>Graph breaks ({len(page.graph_breaks)}) '
           f"and restarts ({sum(map(len, restarts))})</summary>\n"]
    for reasons in restarts:
        if reasons:
            items = "".join(f'<li><pre class="reason">{esc(r)}</pre></li>' for r in reasons)
            out.append(f"<p>Dynamo restarted the analysis of this frame because of:</p><ul>{items}</ul>")
    if page.graph_breaks:
        out.append('<div class="scroll"><table><thead><tr><th>Reason</th><th>User code</th><th>Explanation and fix</th></tr></thead><tbody>\n')
        out.extend(_graph_break_row(page, index, root) for index in range(len(page.graph_breaks)))
        out.append("</tbody></table></div>")
    out.extend(section(s, page.root) for s in page.sections["graph_breaks"])
    out.append("</details>\n")
    return "".join(out)


def _graph_break_row(page: CompilePageModel, index: int, root: str) -> str:
    g = page.graph_breaks[index]
    out = ["<tr><td>"]
    if g.registry_id:
        if g.doc_url:
            out.append(f'<a class="gb-id" href="{esc(safe_href(g.doc_url))}" rel="noopener noreferrer">{esc(g.registry_id)}</a> ')
        else:
            out.append(f'<span class="gb-id">{esc(g.registry_id)}</span> ')
    out.append(f'<a href="{root}{esc(g.url)}">{esc(g.reason)}</a>' if g.url else esc(g.reason))
    if g.owner:
        out.append(f'<br><span class="gb-owner">{esc(g.owner)}</span>')
    out.append(f"</td><td>{break_site(g, page.source_links)}</td><td>{esc(g.explained)}")
    out.extend(f'<br><span class="hint">Hint: {esc(hint)}</span>' for hint in g.advice)
    if page.break_config_notes:
        out.extend(f'<br><span class="config-note">Config: {esc(note)}</span>' for note in page.break_config_notes[index])
    out.append("</td></tr>\n")
    return "".join(out)


def _recompiles(page: CompilePageModel) -> str:
    """Why it recompiled: the guard that failed for each earlier compile of the frame."""
    recompiles = page.recompiles
    if not (recompiles or page.sections["recompiles"]):
        return ""
    n = len(recompiles)
    reasons = f"{n} reason{'s' if n != 1 else ''}"
    if page.status == "limit":
        heading = f"The guard that failed ({reasons}): torch would have recompiled, but the frame was over the recompile limit"
    else:
        heading = f"Why this recompiled ({reasons})"
    items = "".join(
        f'<li><code>{esc(r["head"])}</code>'
        + (f'<details><summary>more</summary><pre class="reason">{esc(r["rest"])}</pre></details>' if r["rest"] else "") + "</li>"
        for r in recompiles
    )
    notes = name_notes(page.name_notes) if page.name_notes and any(r["names"] for r in recompiles) else ""
    texts = "".join(section(s, page.root) for s in page.sections["recompiles"])
    return (f'<details class="section" id="recompiles" open><summary>{heading}</summary>\n'
            '<p class="muted">Each line names an earlier compile of this frame and the guard that failed for it.</p>\n'
            f'<ul class="reasons">{items}</ul>\n{notes}{texts}</details>\n')


def _tensors(page: CompilePageModel) -> str:
    if not page.tensors:
        return ""
    rows = []
    for t in page.tensors:
        traced = (' <span class="muted" title="a dimension is a symbol of the compile: one compile serves every size it allows">'
                  f"(traced with <code>{esc(t.example)}</code>)</span>") if t.example else ""
        rows.append(f"<tr><td><code>{esc(t.source)}</code></td><td><code>{esc(t.shape)}</code>{traced}</td><td>{esc(t.dtype)}</td>"
                    f"<td>{esc(t.device)}</td><td><code>{esc(t.stride)}</code></td><td>{esc(t.storage)}</td><td>{esc(t.flags)}</td></tr>\n")
    return _table_section("inputs", f"Input tensors ({len(page.tensors)})",
                          ("Source", "Shape", "Dtype", "Device", "Stride", "Storage bytes", "Flags"), rows)


def _table_section(section_id: str, summary: str, headers: tuple[str, ...], rows: list[str]) -> str:
    """A closed section holding one scrolling table: `rows` are its <tr> lines, markup already."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    return (f'<details class="section" id="{section_id}"><summary>{esc(summary)}</summary>\n'
            f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>\n{"".join(rows)}</tbody></table></div>\n</details>\n')


def _symbols(page: CompilePageModel) -> str:
    if not page.symbols:
        return ""
    rows = []
    for s in page.symbols:
        row = s.row
        where = frame(s.where, page.root) if s.where else ""
        rows.append(f'<tr><td><span class="kind" title="{esc(row.kind)}">{esc(row.event)}</span></td><td><code>{esc(row.name)}</code></td>'
                    f"<td><code>{esc(row.value)}</code></td><td><code>{esc(row.range)}</code></td><td><code>{esc(row.source)}</code></td>"
                    f"<td>{where}</td></tr>\n")
    return _table_section("symbols", f"Symbols and shape guards ({len(page.symbols)})",
                          ("Event", "Symbol / expression", "Value", "Range", "Source", "User code"), rows)


def _guards(page: CompilePageModel) -> str:
    if not page.sections["guards"]:
        return ""
    count = page.guard_count
    counted = f" ({esc(count)} guard{'s' if count != 1 else ''})" if count is not None else ""
    notes = name_notes(page.name_notes) if page.name_notes else ""
    texts = "".join(section(s, page.root) for s in page.sections["guards"])
    return f'<details class="section" id="guards"><summary>Guards{counted}</summary>\n{notes}{texts}</details>\n'


def _pipeline(page: CompilePageModel) -> str:
    """The graphs in pipeline order: their list (with diff stats), higher-order-op subgraphs, the texts, FX pass timings."""
    steps = page.sections["pipeline"]
    if not steps:
        return ""
    out = [f'<details class="section" id="pipeline" open><summary>Graphs, in pipeline order ({len(steps)})</summary>\n'
           '<p class="muted">Each step after the first of a pass stage can be diffed against the step before it: open "Diff against…" to see what '
           'the passes changed.</p>\n<ol class="pipeline">']
    for s in steps:
        subgraph = f' <span class="kind">{esc(s.subgraph)}</span>' if s.subgraph else ""
        stat = diffstat(s.diff) if s.diff and not s.diff["skipped"] else ""
        out.append(f'<li><a href="#{esc(s.id)}">{esc(s.title)}</a>{subgraph}{stat}</li>')
    out.append("</ol>\n")
    out.append(_hops(page))
    out.extend(section(s, page.root) for s in steps)
    out.append(_pass_timings(page))
    out.append("</details>\n")
    return "".join(out)


def _hops(page: CompilePageModel) -> str:
    if not page.hops:
        return ""
    rows = []
    for s, h in page.hops:
        sid = esc(s.id)
        run_by = (f'<a href="#{sid}-L{esc(h.used_at)}"><code>{esc(h.op)}</code></a>' if h.op
                  else '<span class="muted">not found in the graph</span>')
        rows.append(f'<tr><td><a href="#{sid}-L{esc(h.line)}"><code>{esc(h.name)}</code></a></td><td>{run_by}</td>'
                    f'<td><a href="#{sid}">{esc(s.title)}</a></td></tr>\n')
    return (f'<details class="sub" open><summary>Higher-order-op subgraphs ({len(page.hops)})</summary>\n'
            '<div class="scroll"><table class="compact"><thead><tr><th>Subgraph</th><th>Run by</th><th>In</th></tr></thead><tbody>\n'
            f'{"".join(rows)}</tbody></table></div>\n</details>')


def _pass_timings(page: CompilePageModel) -> str:
    if not page.pass_timings:
        return ""
    tables = "".join(
        f'<div class="scroll"><table class="compact"><caption>{esc(stage)}</caption><tbody>'
        + "".join(f'<tr><td class="k">{esc(name)}</td><td>{seconds(secs)}</td></tr>' for name, secs in rows)
        + "</tbody></table></div>"
        for stage, rows in page.pass_timings.items()
    )
    return f'<details class="sub"><summary>FX pass timings (from chromium events)</summary>\n{tables}</details>\n'


def _texts(anchor: str, heading: str, sections: list[Any], root: str) -> str:
    """A block of text sections (`Generated code`, `Other artifacts`) with their count."""
    if not sections:
        return ""
    texts = "".join(section(s, root) for s in sections)
    return f'<details class="section" id="{anchor}"><summary>{heading} ({len(sections)})</summary>\n{texts}</details>\n'


def _declared_section(d: dict[str, Any], root: str) -> str:
    """A section a kind declared (`kinds.declare_section`) that the page has no block of its own for."""
    texts = "".join(section(s, root) for s in d["sections"])
    return (f'<details class="section" id="{esc(d["id"])}"{" open" if d["open"] else ""}><summary>{esc(d["heading"])} '
            f'({len(d["sections"])})</summary>\n{texts}</details>\n\n')


def _phases(page: CompilePageModel) -> str:
    """Where compile time went: the chromium spans as a tree, with total and self time."""
    if not page.phases:
        return ""
    rows = "".join(
        f'<tr><td class="k depth-{esc(min(p["depth"], 9))}">{"└ " if p["depth"] else ""}{esc(p["name"])}</td>'
        f'<td class="num">{seconds(p["total"])}</td><td class="num">{seconds(p["self"])}</td></tr>'
        for p in page.phases
    )
    return ('<details class="section" id="phases"><summary>Where compile time went (chromium events)</summary>\n'
            "<p class=\"muted\">Spans nest: a span's total includes the spans under it; its self time is what is left once they are taken out. "
            "Times add up along the tree, not down the column.</p>\n"
            '<div class="scroll"><table class="compact phase-tree"><thead><tr><th>Span</th><th>Total</th><th>Self</th></tr></thead>'
            f"<tbody>{rows}</tbody></table></div>\n</details>\n")


def _runtime(page: CompilePageModel) -> str:
    if not page.runtime:
        return ""
    rows = "".join(f'<tr><td class="k">{esc(name)}</td><td>{esc(value)}</td></tr>' for name, value in page.runtime)
    return ('<details class="section" id="runtime" open><summary>Compile overhead paid at run time</summary>\n'
            f'<div class="scroll"><table class="compact"><tbody>{rows}</tbody></table></div>\n</details>\n')


def _cache_table(page: CompilePageModel, root: str) -> str:
    if not page.cache:
        return ""
    rows = []
    for c in page.cache:
        name = f'<a href="{root}{esc(c["url"])}">{esc(c["cache"])}</a>' if c["url"] else esc(c["cache"])
        saved = f"saved {seconds(c['saved'])}" if c["saved"] else ""
        rows.append(f'<tr><td>{name}</td><td><span class="cache cache-{esc(c["state"])}">{esc(c["state"])}</span></td>'
                    f'<td><code>{esc(c["key"])}</code></td><td>{esc(c["reason"])}{saved}</td></tr>\n')
    return _table_section("cache", f"Cache lookups ({len(page.cache)})", ("Cache", "Result", "Key", "Reason / time saved"), rows)


def _subgraphs(page: CompilePageModel) -> str:
    """The regional / invoke_subgraph compiles of the compile id, each subgraph's texts linked."""
    if not page.subgraphs:
        return ""
    items = []
    for name in page.subgraphs:
        links = "".join(", ".join(f'<a href="#{esc(s.id)}">{esc(s.title)}</a>' for s in group if s.subgraph == name)
                        for group in page.sections.values())
        items.append(f'<li><span class="kind">{esc(name)}</span>: {links}</li>')
    return (f'<details class="section" id="subgraphs"><summary>Subgraphs ({len(page.subgraphs)})</summary>\n'
            '<p class="muted">Regional / invoke_subgraph compiles logged under this compile id, grouped by subgraph:</p>\n'
            f'<ul>{"".join(items)}</ul>\n</details>\n')


def _files(page: CompilePageModel, root: str) -> str:
    """The compile id's files (at most PAGE_FILES; compile_directory.json lists them all); those of a
    kind it wrote hundreds of (`page.crowded`, which the index links) in a list of their own each."""
    out = [f'\n<details class="section" id="files"><summary>Files ({esc(f"{len(page.artifacts) + page.files_omitted:,}")})</summary>\n']
    if page.artifacts:
        apart: dict[str, list[dict[str, Any]]] = {c["kind"]: [] for c in page.crowded}
        listed: list[dict[str, Any]] = []
        for a in page.artifacts:
            apart.get(a["kind"], listed).append(a)
        if listed:
            out.append('<ul class="artifacts">' + "".join(f"<li>{artifact(a, page.root)}</li>" for a in listed) + "</ul>\n")
        out.extend(_crowded_files(c, apart[c["kind"]], page.root) for c in page.crowded)
        if page.files_omitted:
            out.append(f'<p class="note">…and {esc(f"{page.files_omitted:,}")} more files, listed in '
                       f'<a href="{root}compile_directory.json">compile_directory.json</a>.</p>\n')
    else:
        out.append('<p class="muted">This compile id has no files of its own.</p>')
    out.append("</details>\n\n")
    return "".join(out)


def _crowded_files(c: dict[str, Any], files: list[dict[str, Any]], root: str) -> str:
    """Every listed file of one record kind the compile id wrote hundreds of (the index links here)."""
    listed, count = f"{c['listed']:,}", f"{c['files']:,}"
    more = f' <span class="muted">(the first {listed} of them; compile_directory.json lists them all)</span>' if c["listed"] < c["files"] else ""
    return (f'<details class="section" id="{esc(c["anchor"])}" open><summary>Files of <span class="kind{"" if c["known"] else " unknown"}" '
            f'title="{esc(c["title"])}">{esc(c["kind"])}</span> records: {count} files{more}</summary>\n'
            '<ul class="artifacts">' + "".join(f"<li>{artifact(a, root)}</li>" for a in files) + "</ul>\n</details>\n")


def _records(page: CompilePageModel, root: str) -> str:
    """Every record logged under the compile id, grouped by kind, in log order."""
    out = ['<h2 id="records">All records</h2>\n<p class="muted">Every record logged under this compile id, grouped by kind, in log order.</p>\n']
    if page.omitted:
        kinds = ", ".join(f'<code>{esc(kind)}</code> {esc(f"{n:,}")} more' for kind, n in page.omitted.items())
        out.append(f'<div class="note" id="records-bound"><p>This compile id logged more records of some kinds than a page reads: {kinds}. '
                   f'This page, its tables, texts and search entries use the first {esc(f"{page.page_bound:,}")} of each kind; '
                   f'<a href="{root}raw.jsonl">raw.jsonl</a> holds them all.</p></div>')
    for index, g in enumerate(page.groups, start=1):
        out.append(_record_group(index, g, root))
    return "".join(out)


def _record_group(index: int, g: dict[str, Any], root: str) -> str:
    out = [f'<details class="section" id="kind-{index}">\n<summary><span class="kind{"" if g["known"] else " unknown"}">{esc(g["kind"])}</span> '
           f'×{esc(g["count"])} <span class="muted">— {esc(g["title"])}</span></summary>\n']
    out.extend(_record(r, root) for r in g["records"])
    if g["kind"] == "chromium_event":
        out.append(f'<p class="muted">Trace events are collected in <a href="{root}chromium_events.json">chromium_events.json</a> (open it in Perfetto).</p>\n')
    elif g["count"] > len(g["records"]):
        out.append(f'<p class="muted">{esc(g["count"] - len(g["records"]))} more <code>{esc(g["kind"])}</code> records are in '
                   f'<a href="{root}raw.jsonl">raw.jsonl</a>.</p>')
    out.append("</details>\n")
    return "".join(out)


def _record(r: dict[str, Any], root: str) -> str:
    """One record: its line, its files, its metadata and context, its payload."""
    outputs = r["outputs"]
    out = [f'<details class="record">\n<summary>line {esc(r["line"])}']
    if outputs:
        urls = [esc(o.url) for o in outputs]  # escaping neither makes nor takes a "/": the name is the escaped url's last part
        out.append(" → " + ", ".join("link" if o.external else url.rpartition("/")[2] for o, url in zip(outputs, urls)))
        out.append(f"</summary>\n<p>Files: {', '.join(_output_link(o, url, root) for o, url in zip(outputs, urls))}</p>")
    else:
        out.append("</summary>\n")
    out.append(f'<pre class="meta">{esc(r["meta"])}</pre>\n')
    if r["context"]:
        out.append(f'<pre class="meta">{esc(r["context"])}</pre>')
    if r["payload"]:
        payload = esc(r["payload"])
        out.append(f'<p>Payload: <a href="{root}{payload}">{payload}</a> ({esc(r["payload_bytes"])} bytes)</p>')
    elif r["payload_bytes"] == 0:
        out.append('<p class="muted">Empty payload.</p>')
    out.append("</details>\n")
    return "".join(out)


def _output_link(o: Any, url: str, root: str) -> str:
    """A record's output (`url`: its url escaped): a file of the report, or an external link (only an http(s) one is linked)."""
    if not o.external:
        return f'<a href="{root}{url}">{url}</a>'
    href = safe_href(o.url)
    return f'<a href="{esc(href)}" rel="noopener noreferrer">{url}</a>' if href else f"<code>{url}</code>"
