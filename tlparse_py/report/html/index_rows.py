"""The index's pieces written once per compile or compile id: a row of the compiles table, a compile
id's section of "Files by compile id", the stack trie's rows and the links to compiles they hold.

On a log of thousands of compiles these are most of the index, and a live report renders each
again whenever its compile changes (`views.live_index`): plain functions of their view data
(`views.index`: `compile_row`, `compile_entry`, `trie_rows`, `terminal_view`, all dicts), which
the index (`index_page`) writes a row at a time, and `views.live_index` one by one.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any

from .escaping import esc
from .parts import artifact_list, frame, name_notes, seconds, status

Row = Mapping[str, Any]  # a dict of views.index

GENERATION_NOTE = "compiled after torch._dynamo.reset(), which makes torch number compile ids from [0/0] again"


def ids(items: Iterable[Row], root: str) -> str:
    """Links to compiles (`views.index.terminal_view`), each coloured by its outcome."""
    links = []
    for t in items:
        if t["url"]:
            links.append(f'<a class="status status-{esc(t["status"])}" href="{esc(root)}{esc(t["url"])}">{esc(t["label"])}</a> ')
        else:
            links.append(f'<span class="status status-missing">{esc(t["label"])}</span> ')
    return f'<span class="ids">{"".join(links)}</span>' if links else ""


def trie(rows: Iterable[Row], root: str) -> str:
    """The stack trie, already flattened into rows (`views.index.trie_rows`): chains flat, branches
    collapsible (`views.live_index.LiveTrie` keeps the same HTML per node)."""
    return "".join(trie_pieces(rows, root))


BRANCH = '<details class="branch" open><summary>calls from here</summary><ul>'


def trie_pieces(rows: Iterable[Row], root: str) -> Iterator[str]:
    """`trie` a row at a time, each row read once (the index's are made as they are read)."""
    yield '<ul class="trie">\n'
    rows = iter(rows)
    row, before = next(rows, None), None
    while row is not None:
        after = next(rows, None)  # an open row opens a branch unless its node has no child
        kind = row["kind"]
        if kind == "frame" or kind == "open":
            more = f'<span class="muted">and {_thousands(row["more"])} more</span> ' if row["more"] else ""
            head = f'<li>{ids(row["ids"], root)}{more}{frame(row["frame"], root)}'
            if kind == "frame":
                yield head + "</li>\n"
            elif after is not None and after["kind"] != "close":
                yield head + BRANCH
            else:
                yield head
        elif before == "open":
            yield "</li>\n"
        else:
            yield "</ul></details></li>\n"
        row, before = after, kind
    yield "</ul>"


def _thousands(count: int) -> str:
    return esc(f"{count:,}")


def kind_chip(k: Row) -> str:
    """A record kind and how many records of it (`views.index.kind_rows`)."""
    unknown = "" if k["known"] else " unknown"
    count = f' ×{esc(k["count"])}' if k["count"] > 1 else ""
    return f'<span class="kind{unknown}" title="{esc(k["title"])}">{esc(k["kind"])}{count}</span>'


def compile_rows(rows: Iterable[Row], compiling: Collection[str] | None, labels: Mapping[str, str], ranks: Mapping[str, int]) -> str:
    """The compiles table's rows; `compiling`: the compiles a live report shows as still compiling."""
    return "".join(compile_row_pieces(rows, compiling, labels, ranks))


def compile_row_pieces(rows: Iterable[Row], compiling: Collection[str] | None, labels: Mapping[str, str],
                       ranks: Mapping[str, int]) -> Iterator[str]:
    """`compile_rows` a row at a time."""
    for index, r in enumerate(rows, start=1):
        yield compile_row(r, index, compiling is not None and r["label"] in compiling, labels, ranks)


def compile_row(r: Row, index: int, compiling: bool, labels: Mapping[str, str], ranks: Mapping[str, int]) -> str:
    """One row of the compiles table (`views.index.compile_row`): `index` its place (1, 2, ...),
    `compiling` whether it is still compiling (a live report), `labels` and `ranks` the statuses'
    words and order."""
    generation = f' title="{GENERATION_NOTE}"' if r["generation"] else ""
    name = f'<a href="{esc(r["page"])}">{esc(r["label"])}</a>' if r["page"] else esc(r["label"])
    attempts = ""
    if r["attempts"]:
        attempts = '<br><span class="muted">attempts ' + "".join(_page_link(a) + " " for a in r["attempts"]) + "</span>"
    via = ""
    if r["via"]:
        called = f'called at <code>{esc(r["location"])}</code>, ' if r["location"] else ""
        via = f'<br><span class="muted">{called}{esc(r["via"])}</span>'
    secs = r["seconds"]
    split = f' title="{esc(r["split"])}"' if r["split"] else ""
    time = seconds(secs) if secs is not None else '<span class="muted">unknown</span>'
    ops = esc(r["graph_ops"]) if r["graph_ops"] is not None else ""
    counts = dict(r["cache"])
    cache_rank = counts.get("miss", 0) * 1000000 + counts.get("bypass", 0) * 1000 + counts.get("hit", 0)
    cache = "".join(f'<span class="cache cache-{esc(state)}">{esc(count)} {esc(state)}</span> ' for state, count in r["cache"])
    return (f'<tr><td data-sort-value="{esc(index)}"{generation}>{name}{attempts}</td>'
            f'<td data-sort-value="{esc(ranks.get(r["status"], len(ranks)))}">{status(r["status"], labels, compiling)}</td>'
            f'<td><code>{esc(r["name"])}</code>{via}</td>'
            f'<td class="num" data-sort-value="{esc(secs) if secs is not None else ""}"{split}>{time}</td>'
            f'<td class="num">{ops}</td><td data-sort-value="{esc(cache_rank)}">{cache}</td>'
            f'<td class="why">{_why(r)}</td></tr>\n')


def _page_link(a: Row) -> str:
    return f'<a href="{esc(a["page"])}">{esc(a["label"])}</a>' if a["page"] else esc(a["label"])


def _why(r: Row) -> str:
    """Why it failed, restarted or recompiled, and its settings unlike most compiles'."""
    if not r["config_unusual"]:
        return esc(r["reason"])
    settings = "; ".join(f"<code>{esc(u)}</code>" for u in r["config_unusual"])
    return f'{esc(r["reason"])}{"<br>" if r["reason"] else ""}<span class="muted">config unlike most compiles: {settings}</span>'


def compile_id_sections(entries: Iterable[Row], root: str, labels: Mapping[str, str]) -> str:
    return "".join(compile_id_section(c, root, labels) for c in entries)


def compile_id_section(c: Row, root: str, labels: Mapping[str, str]) -> str:
    """One compile id's section of "Files by compile id" (`views.index.compile_entry`)."""
    page = c["page"]
    name = f'<a href="{esc(page)}">{esc(c["label"])}</a>' if page else esc(c["label"])
    badge = status(c["status"], labels) if c["status"] else ""
    capture = c["capture"]
    captured = f'<span class="muted">compiled autograd graph {esc(capture["graph"])}: the capture of the backward graph, not a compile</span>' if capture else ""
    time = ""
    if c["compile_time"] is not None:
        split = f' title="{esc(c["time_split"])}"' if c["time_split"] else ""
        time = f' <span class="muted"{split}>{seconds(c["compile_time"])} {esc(c["time_is"])}</span>'
    out = [f'<section class="compile" id="{esc(c["anchor"])}">\n<h3>{name} {badge}{captured}{time}</h3>\n']
    if capture and capture["compiles"]:
        out.append(f'<p class="kinds">Compiled as {"".join(_compiled_as(k) for k in capture["compiles"])}</p>')
    if c["crowded"]:  # before the list, which holds only the first of their files
        out.append(crowded_table(c["crowded"], root))
    if c["artifacts"]:
        out.append(artifact_list(c["artifacts"], root))
    if c["files_omitted"]:
        out.append(f'<p class="note">…and {_thousands(c["files_omitted"])} more files of this compile id, listed in '
                   f'<a href="{esc(root)}compile_directory.json">compile_directory.json</a>.</p>')
    if c["kinds"]:
        details = f'— <a href="{esc(page)}">details</a>' if page else '— <span class="muted">no page (nothing but its start was logged)</span>'
        out.append(f'<p class="kinds">Records: {"".join(kind_chip(k) + " " for k in c["kinds"])}{details}</p>')
    out.append("</section>\n")
    return "".join(out)


def crowded_table(rows: list[Row], root: str) -> str:
    """The record kinds a compile id wrote more files of than the index links
    (`views.sections.crowded_views`): a row each, with its counts and a link to its own list on the
    compile page, instead of hundreds of links here."""
    bound = _thousands(rows[0]["bound"])
    return (f'<p class="note">More than {bound} files of one record kind: the list below links the first {bound} of each such kind, '
            "and its own list on the compile page has them all.</p>\n"
            '<table class="compact crowded"><thead><tr><th>Record kind</th><th>Records</th><th>Files</th><th>All its files</th></tr>'
            "</thead>\n<tbody>" + "".join(_crowded_row(r, root) for r in rows) + "</tbody></table>\n")


def _crowded_row(r: Row, root: str) -> str:
    kind = f'<span class="kind{"" if r["known"] else " unknown"}" title="{esc(r["title"])}">{esc(r["kind"])}</span>'
    directory = f'<a href="{esc(root)}compile_directory.json">compile_directory.json</a>'
    if not r["page"]:
        where = f"in {directory}"
    elif r["listed"] < r["files"]:  # past limits.PAGE_FILES of the id's files: its page lists the first
        where = (f'<a href="{esc(r["page"])}#{esc(r["anchor"])}">the first {_thousands(r["listed"])} on the compile page</a>; '
                 f"all in {directory}")
    else:
        where = f'<a href="{esc(r["page"])}#{esc(r["anchor"])}">all {_thousands(r["files"])} on the compile page</a>'
    return (f'<tr><td>{kind}</td><td class="num">{_thousands(r["records"])}</td><td class="num">{_thousands(r["files"])}</td>'
            f"<td>{where}</td></tr>\n")


def _compiled_as(k: Row) -> str:
    """A compile of a compiled-autograd capture's graph, coloured by its outcome."""
    if k["page"]:
        return f'<a class="status status-{esc(k["status"])}" href="{esc(k["page"])}">{esc(k["label"])}</a> '
    return f'<span class="status status-{esc(k["status"])}">{esc(k["label"])}</span> '


def recompiled_frame(f: Row) -> str:
    """A recompiled frame of the index's "Recompiles" (`views.index.recompile_view`): its compiles,
    why each compiled again, its retries."""
    name = f" <code>{esc(f['name'])}</code>" if f["name"] else ""
    via = f' <span class="muted">({esc(f["via"])})</span>' if f["via"] else ""
    compiled = f["compiled"]
    each = "".join(compile_link(c) + " " for c in compiled)
    over = f["over_limit"]
    limit = (f'then {compile_link(over)} <a class="status status-limit" href="#problems">reached the recompile limit: runs eagerly</a>'
             if over else "")
    notes = name_notes(f["name_notes"]) if f["name_notes"] else ""
    return (f'<div class="frame-recompiles">\n<p><b>Frame {esc(f["frame"])}</b>{name}{via} compiled {len(compiled)} '
            f"time{'s' if len(compiled) != 1 else ''}: {each}{limit}</p>\n{_reasons(f)}{notes}</div>\n")


def _reasons(f: Row) -> str:
    """Why a frame compiled again: the guards that failed, its settings that changed, the retries."""
    if not (f["reasons"] or f["retries"] or f["config"]):
        return ""
    items = [f'<li><a href="{esc(r["page"])}">{esc(r["label"])}</a>: <code>{esc(r["reason"])}</code></li>' for r in f["reasons"]]
    items.extend(f"<li>{compile_link(r)}: {esc(r['text'])}</li>" for r in f["config"])
    for r in f["retries"]:
        failed = f'<a href="{esc(r["failed_page"])}">{esc(r["failed"])}</a>' if r["failed_page"] else esc(r["failed"])
        failure = f" (<code>{esc(r['failure'])}</code>)" if r["failure"] else ""
        items.append(f"<li>{compile_link(r)}: a retry, not a recompile: {failed} failed{failure} and the function was called again; "
                     "no guard failed</li>")
    return f'<ul class="reasons">{"".join(items)}</ul>'


def compile_link(c: Row) -> str:
    """A compile's label, linked to its page when it has one."""
    return f'<a href="{esc(c["page"])}">{esc(c["label"])}</a>' if c["page"] else esc(c["label"])
