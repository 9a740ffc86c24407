"""Pieces of markup several pages show: a frame, a stack, a status, a compile id's files, a text
section, the compile-time bar, a graph break's place, the notes on Dynamo's made-up names.

Each returns its HTML as a str (the Python pages join them); `render` makes each a template global
returning Markup, so the templates show the very same markup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ...units import format_seconds
from .code import code_html
from .escaping import Markup, esc

if TYPE_CHECKING:
    from ...analysis.summary import GraphBreak
    from .links import SourceLinks
    from .models import FrameModel, ProgramExitModel, SectionModel

# tlparse's cache marks (kept as such in compile_directory.json), shown as words
CACHE_WORDS = {"\u2705": "hit", "\u274c": "miss", "\u2753": "bypass"}
COMPILING = "compiling…"  # what a live report says of a compile started and not ended, instead of its status


def plural(count: int, word: str, words: str | None = None) -> str:
    return word if count == 1 else (words or f"{word}s")


def source_link(location: Any, links: SourceLinks | None) -> Markup:
    """A `file.py:23` location, escaped, as a link into the user's repository where one is configured."""
    text = "" if location is None else str(location)
    href = links.href_of(text) if links is not None else None
    if href is None:
        return Markup(esc(text))
    return Markup(f'<a class="source" href="{esc(href)}" rel="noopener noreferrer">{esc(text)}</a>')


def frame(f: FrameModel, root: str) -> str:
    """A stack frame: `file:line in <b>name</b>`, linked to its FX-generated source or the user's repository."""
    where = f"{esc(f.file)}:{esc(f.line)}"
    if f.href:
        where = f'<a href="{esc(root)}{esc(f.href)}">{where}</a>'
    elif f.source_href:
        where = f'<a class="source" href="{esc(f.source_href)}" rel="noopener noreferrer">{where}</a>'
    loc = f' <span class="loc">{esc(f.loc)}</span>' if f.loc else ""
    return f"{where} in <b>{esc(f.name)}</b>{loc}"


def stack(frames: list[FrameModel], root: str) -> str:
    if not frames:
        return '<p class="muted">No stack was logged.</p>'
    return '<ol class="stack">' + "".join(f"<li>{frame(f, root)}</li>" for f in frames) + "</ol>"


def status(value: str, labels: Mapping[str, str], compiling: bool = False) -> str:
    """A compile's status as a badge (`compiling…` while a live report's compile has not ended)."""
    if compiling:
        return f'<span class="status status-missing" title="started, not ended yet (a live report)">{COMPILING}</span>'
    label = esc(labels[value])
    return f'<span class="status status-{esc(value)}" title="{label}">{label}</span>'


def cache_badge(mark: str) -> str:
    word = esc(CACHE_WORDS.get(mark, mark))
    return f'<span class="cache cache-{word}">cache {word}</span>'


def artifact(a: dict[str, Any], root: str) -> str:
    """One file of a compile id (`views.common.artifact_view`): a link, or an external link and its address."""
    if a["external"]:
        name = f'<a href="{esc(a["href"])}" rel="noopener noreferrer">{esc(a["name"])}</a>' if a["href"] else esc(a["name"])
        html = f'{name} <span class="muted">→ <code>{esc(a["url"])}</code></span>'
    else:
        html = f'<a href="{esc(root)}{esc(a["url"])}">{esc(a["name"])}</a>'
    if a["readable_url"]:
        html += f' (<a href="{esc(root)}{esc(a["readable_url"])}">readable html</a>)'
    if a["suffix"]:
        html += " " + cache_badge(a["suffix"])
    size = a.get("size")  # (lines, bytes) of the text its record logged (`views.sections.sized`)
    return f'{html} <span class="number">({esc(a["number"])}){" · " + file_size(*size) if size else ""}</span>'


def file_size(lines: int, count: int) -> str:
    """`120 lines · 4.1 KB`: the size of a file's text at a glance (a few bytes a link on the index)."""
    if not count:
        return "empty"
    return f"{lines:,} {plural(lines, 'line')} · {byte_size(count)}"


def byte_size(count: int) -> str:
    """`412 B`, `4.1 KB`, `38 KB`, `1.2 MB`: bytes in three figures at most (1 KB = 1,000 bytes)."""
    if count < 1000:
        return f"{count} B"
    value = float(count)
    for unit in ("KB", "MB", "GB"):
        value /= 1000
        if value < 9.95:
            return f"{value:.1f} {unit}"
        if value < 999.5:
            return f"{value:.0f} {unit}"
    return f"{value:,.0f} GB"


def artifact_list(artifacts: list[dict[str, Any]], root: str) -> str:
    """A compile id's files (views.sections.artifact_rows): a row names the subgraph (the records'
    `subgraph_name`) before each group of them, as upstream tlparse's "Subgraph Name: <name>"."""
    out = ['<ul class="artifacts">']
    for a in artifacts:
        if a["opens_group"]:
            subgraph = a["subgraph"]
            named = f"Subgraph Name: {esc(subgraph)}" if subgraph is not None else '<span class="muted">Outside any subgraph</span>'
            out.append(f'<li class="subgraph">{named}</li>')
        out.append(f"<li>{artifact(a, root)}</li>")
    out.append("</ul>")
    return "".join(out)


def diffstat(diff: dict[str, Any]) -> str:
    """` +3 −1` of a pass diff (`views.sections.PageBuilder._diff`)."""
    return f' <span class="diffstat"><span class="added">+{esc(diff["added"])}</span> <span class="removed">−{esc(diff["removed"])}</span></span>'


def section(s: SectionModel, root: str, open: bool = False) -> str:
    """One text section of a compile page: collapsible, linked to its files, optionally with a diff."""
    root = esc(root)
    out = ['<div class="artifact-box">\n']
    if s.url or s.raw_url:
        out.append('<span class="links">')
        if s.url:
            out.append(f'<a href="{root}{esc(s.url)}">file</a>')
        if s.raw_url and s.raw_url != s.url:
            out.append(f' · <a href="{root}{esc(s.raw_url)}">raw</a>')
        out.append("</span>")
    out.append(f'<details class="artifact" id="{esc(s.id)}"{" open" if open else ""}>\n<summary><span class="title">{esc(s.title)}</span>')
    if s.subgraph:
        out.append(f' <span class="kind">subgraph {esc(s.subgraph)}</span>')
    out.append(f'<span class="muted">· line {esc(s.line)} · {esc(f"{s.size:,}")} bytes</span>\n')
    diff = s.diff
    if diff and not diff["skipped"]:
        out.append(diffstat(diff))
    out.append("</summary>\n")
    if diff:
        out.append(_section_diff(s.id, diff))
    if s.too_large:
        out.append(f'<p class="note">Not shown here: {esc(s.note)}. Open the <a href="{root}{esc(s.raw_url)}">file</a>.</p>\n')
    else:
        out.append(code_html(s.lines, f"{s.id}-"))  # type: ignore[arg-type]  # a section shown inline has its lines
    out.append("</details>\n</div>")
    return "".join(out)


def _section_diff(section_id: str, diff: dict[str, Any]) -> str:
    counts = "" if diff["skipped"] else f': {esc(diff["added"])} lines added, {esc(diff["removed"])} removed'
    if diff["skipped"]:
        body = '<p class="muted">Too large to diff here.</p>'
    elif diff["lines"]:
        body = code_html(diff["lines"], f"{section_id}-d")
    else:
        body = '<p class="muted">No change.</p>'
    return (f'<details class="diff"><summary>Diff against the step before{counts}</summary>\n'
            f'<p class="muted">Diff against <a href="#{esc(diff["base_id"])}">{esc(diff["base_title"])}</a>.</p>\n{body}</details>\n')


def seconds(value: Any) -> str:
    """`|seconds`: a time as the pages write it, escaped."""
    return esc(format_seconds(value))


def time_bar(bar: dict[str, Any]) -> str:
    """Compile time split by phase (`views.compile.time_bar`), as an inline SVG bar (no script, no library)."""
    out = ['<figure class="timebar">\n<svg viewBox="0 0 1000 22" preserveAspectRatio="none" role="img" aria-label="compile time by phase">\n']
    for seg in bar["segments"]:
        if seg["width"] > 0:
            out.append(f'<rect class="phase-{esc(seg["css"])}" x="{esc(seg["x"])}" y="0" width="{esc(seg["width"])}" height="22">'
                       f'<title>{esc(seg["label"])}: {seconds(seg["seconds"])}</title></rect>')
    out.append("</svg>\n<figcaption>")
    for seg in bar["segments"]:
        out.append(f'<span class="swatch phase-{esc(seg["css"])}"></span>{esc(seg["label"])} ')
        if seg["known"]:
            out.append(f'{seconds(seg["seconds"])} ({esc("%.0f" % (seg["share"] * 100))}%)')
        else:
            out.append('<span class="muted">unknown</span>')
        out.append(" ")
    if bar["not_run"]:
        not_run = esc(", ".join(map(str, bar["not_run"])))
        out.append(f'<span class="muted" title="the log has no time and no span of them for this compile">· not run: {not_run}</span> ')
    out.append(f'· total {seconds(bar["total"])}</figcaption>\n</figure>')
    return "".join(out)


def name_notes(notes: Iterable[str]) -> str:
    """What the names Dynamo made up in guards (`___stack0`) stand for (`questions.dynamo_name_notes`,
    `LimitHit.name_notes`, `FrameRecompiles.name_notes`)."""
    items = "".join(f"<li>{esc(n)}</li>" for n in notes)
    return f'<div class="note names"><p>Names in these guards that Dynamo made up:</p><ul>{items}</ul></div>'


def break_site(b: GraphBreak, links: SourceLinks | None) -> str:
    """Where a graph break happened: the user code line, and the library line when torch broke inside
    torch or another library."""
    if b.user_location:
        html = f"<code>{source_link(b.user_location, links)}</code>"
        if b.user_source:
            html += f'<br><code class="src">{esc(b.user_source)}</code>'
    else:
        html = '<span class="muted">unknown: the traceback names no user code</span>'
    if b.library_location:
        html += f'<br><span class="muted">inside {esc(b.inside)}: <code>{esc(b.library_location)}</code></span>'
    return html


def program_exit(p: ProgramExitModel) -> str:
    """How the program `tlparse-py run` ran ended, under a report's title: a red line when it failed,
    so that a program that crashed does not read like a slow one."""
    if p.failed:
        return (f'<p class="warning program-exit" id="program-exit"><strong>The program {esc(p.outcome)}</strong>: <code>{esc(p.command)}</code>. '
                "This report shows what it traced before it ended.</p>\n")
    return f'<p class="muted program-exit" id="program-exit">The program {esc(p.outcome)}: <code>{esc(p.command)}</code>.</p>\n'


def perfetto(title: Any) -> str:
    """Opens chromium_events.json in ui.perfetto.dev (report.js; hidden without scripts, where the text beside it says how)."""
    return (f'<div class="perfetto" data-perfetto data-title="{esc(title)}" data-events="static/chromium_events.js" hidden>\n'
            '<button type="button" class="perfetto-open">Open in Perfetto</button>\n'
            "<label class=\"perfetto-pick\" hidden>Pick <code>chromium_events.json</code> from this report's folder: "
            '<input type="file" accept=".json,application/json"></label>\n'
            '<p class="perfetto-status" role="status" aria-live="polite"></p>\n</div>')
