"""The pages written once per record or compile id besides the compile and metrics pages: a text
(generated code, a graph, ...), a pass diff, guards, a guard's details, kernel stack traces and the
provenance highlighter (`views.pages`). A big log writes thousands of them: plain functions of their
view model, each inside the shell every page has (`shell.page_shell`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from .code import code_html, side_by_side_html
from .escaping import esc
from .parts import stack
from .shell import page_shell

if TYPE_CHECKING:
    from .models import (
        CodePageModel, GuardInfoPageModel, GuardsPageModel, LiveMarkModel, PageModel, PassDiffPageModel, ProvenancePageModel,
        StackTracesPageModel,
    )


def _compile_link(page: PageModel) -> str:
    """`, compile id [0/0]` (linked to its page) after the line that names the record; "" without one."""
    if page.compile_id is None:
        return ""
    return f', compile id <a href="{esc(page.root)}{esc(page.compile_page)}">{esc(page.compile_id)}</a>'


def code_page_html(page: CodePageModel, live: LiveMarkModel | None = None) -> str:
    """A text of the log as highlighted code with addressable lines."""
    name = page.title.replace("\\", "/").rpartition("/")[2]
    content = (f"<h1>{esc(name)}</h1>\n<p class=\"muted\"><code>{esc(page.kind)}</code> record at line {esc(page.lineno)} of the log"
               f'{_compile_link(page)} · <a href="{esc(page.root)}{esc(page.raw_url)}">raw text</a> · {len(page.lines.html)} lines</p>\n'
               f"{code_html(page.lines)}\n")
    return page_shell(page, live, content)


def pass_diff_page_html(page: PassDiffPageModel, live: LiveMarkModel | None = None) -> str:
    """One of vLLM's post-grad passes: the graph after it beside the graph before it."""
    root = esc(page.root)
    diffstat = ""
    if page.added is not None:
        diffstat = f'<span class="diffstat"><span class="added">+{esc(page.added)}</span> <span class="removed">−{esc(page.removed)}</span></span>'
    content = (f'<h1>{esc(page.title)}</h1>\n<p class="muted"><code>{esc(page.kind)}</code> record at line {esc(page.lineno)} of the log'
               f"{_compile_link(page)}.\n"
               f'The graph after the pass (<a href="{root}{esc(page.after_url)}">file</a>) beside the graph before it: '
               f'<code>{esc(page.baseline)}</code> (<a href="{root}{esc(page.before_url)}">file</a>).\n'
               f'{diffstat}· <a href="{root}index.html">vLLM compilation summary</a></p>\n'
               f"{side_by_side_html(page.before, page.after)}\n")
    return page_shell(page, live, content)


def guards_page_html(page: GuardsPageModel, live: LiveMarkModel | None = None) -> str:
    """The guards of a dynamo_guards record, one per line."""
    guards = "".join(f"<li><code>{esc(code)}</code></li>\n" for code in page.guards)
    content = (f'<h1>Guards</h1>\n<p class="muted">{len(page.guards)} guards from the <code>dynamo_guards</code> record at line '
               f'{esc(page.lineno)}{_compile_link(page)}.</p>\n<ul class="guards">\n{guards}</ul>\n')
    return page_shell(page, live, content)


def _fields(rows: Iterable[tuple[str, str]]) -> str:
    """Named values, as a two-column table."""
    body = "".join(f'<tr><td class="k">{esc(name)}</td><td class="v">{esc(value)}</td></tr>\n' for name, value in rows)
    return f'<div class="scroll"><table class="fields"><tbody>\n{body}</tbody></table></div>'


def guard_info_page_html(page: GuardInfoPageModel, live: LiveMarkModel | None = None) -> str:
    """A symbolic_guard_information record: the guard, its stacks, the locals, and the expressions behind it."""
    root = page.root
    result = f", which was decided as <code>{esc(page.result)}</code>" if page.result is not None else ""
    local_values = _fields(page.locals) if page.locals else '<p class="muted">No locals were logged.</p>'
    symbols = f"<h3>Symbols</h3>{_fields(page.symbols)}" if page.symbols else ""
    sources = f"<h3>Symbol sources</h3>{_fields(page.sources)}" if page.sources else ""
    content = (f"<h1>Symbolic shapes information</h1>\n<p>More detailed information on <code>{esc(page.expr)}</code>{result}"
               f'<span class="muted">(<code>{esc(page.kind)}</code> record at line {esc(page.lineno)} of the log)</span>.</p>\n\n'
               f'<details class="section" open><summary>User stack</summary>{stack(page.user_stack, root)}</details>\n'
               f'<details class="section"><summary>Framework stack</summary>{stack(page.stack, root)}</details>\n\n'
               f'<details class="section" open><summary>Locals</summary>\n{local_values}{symbols}{sources}</details>\n\n'
               f'<details class="section" open><summary>Provenance of this expression ({len(page.provenance)} nodes)</summary>\n'
               f"{_provenance(page)}</details>\n")
    return page_shell(page, live, content)


def _provenance(page: GuardInfoPageModel) -> str:
    """The expressions behind the guard, depth first (`views.pages.expression_tree`)."""
    if not page.provenance:
        return '<p class="muted">No expression graph was logged for this guard.</p>'
    root = page.root
    out = ['<ul class="provenance">\n']
    for node in page.provenance:
        out.append(f'<li class="depth-{esc(node.depth)}">\n<b><code>{esc(node.result)}</code></b> '
                   f'<span class="muted">= {esc(node.method)}({esc(node.arguments)})</span>\n')
        if node.user_stack:
            out.append(f"<details><summary>user stack</summary>{stack(node.user_stack, root)}</details>")
        if node.stack:
            out.append(f"<details><summary>framework stack</summary>{stack(node.stack, root)}</details>")
        out.append("</li>\n")
    out.append("</ul>\n")
    return "".join(out)


def stack_traces_page_html(page: StackTracesPageModel, live: LiveMarkModel | None = None) -> str:
    """Which user code each generated kernel came from."""
    kernels = "".join(f"<h3>{esc(kernel)}</h3>\n" + "".join(f'<pre class="code">{esc(trace)}</pre>\n' for trace in traces)
                      for kernel, traces in page.kernels)
    content = (f'<h1>Kernel stack traces</h1>\n<p class="muted">Which user code each generated kernel came from (record at line '
               f"{esc(page.lineno)}).</p>\n{kernels}")
    return page_shell(page, live, content)


PANES = (("Pre-grad graph", "preGradGraph", "pre"), ("Post-grad graph", "postGradGraph", "post"), ("Generated code", "generatedCode", "code"))


def provenance_page_html(page: ProvenancePageModel, live: LiveMarkModel | None = None) -> str:
    """-i: the three panes of one compile id (pre-grad graph, post-grad graph, generated code), and
    the line maps the page's script highlights them by."""
    root = esc(page.root)
    compile_id = (f'<a href="{root}{esc(page.compile_page)}">{esc(page.compile_id)}</a>' if page.compile_id is not None
                  else "(unknown)")
    if page.has_data:
        inputs = ", ".join(f'<a href="{root}{esc(url)}">{esc(pane)}</a>' for pane, url in page.inputs.items())
        code = "C++" if page.code_kind == "cpp" else "Python"
        about = ("<p class=\"muted\">Hover or click a line to see where it came from and what it became: pre-grad graph ↔ post-grad graph ↔ "
                 f"generated {code} code. Bold lines have a mapping. Inputs:\n{inputs}.</p>\n")
    else:
        about = ('<p class="note">This compile id has no provenance artifacts (<code>inductor_provenance_tracking_node_mappings</code>). '
                 "Set <code>torch._inductor.config.trace.provenance_tracking_level = 1</code> to log them.</p>\n")
    panes = "".join(f'<section><h3>{heading}</h3><pre id="{pane_id}" class="pane">{_pane_lines(getattr(page, field))}</pre></section>\n'
                    for heading, pane_id, field in PANES)
    content = (f"<h1>Inductor provenance tracking {compile_id}</h1>\n{about}"
               f'<div class="provenance-panes" data-code-kind="{esc(page.code_kind)}" data-code-offset="{esc(page.code_offset)}">\n'
               f'{panes}</div>\n<script id="lineMappings" type="application/json">{esc(page.mappings)}</script>\n'
               f'<script src="{root}static/provenance.js"></script>\n')
    return page_shell(page, live, content)


def _pane_lines(lines: list[str]) -> str:
    return "".join(f'<span class="pl" data-n="{n}">{esc(line)}</span>' for n, line in enumerate(lines, start=1))
