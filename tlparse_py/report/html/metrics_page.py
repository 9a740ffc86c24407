"""The page of one compilation_metrics record (`views.pages.MetricsPage`), as HTML: written once per
compile, so a plain function of its model, in the order the page shows it."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .escaping import esc
from .parts import artifact_list, seconds, stack
from .shell import page_shell

if TYPE_CHECKING:
    from .models import LiveMarkModel, MetricModel, MetricsPageModel, ShapeFactModel

# the compile times the page shows, each with what it counts (an abbr's title) where the name does not say
TIMES = (
    ("entire_frame_compile_time_s", "Entire frame", "Total time spent compiling this frame, including Dynamo tracing, the backend and Inductor"),
    ("backend_compile_time_s", "Backend",
     "Time spent in the backend compiler (for the inductor backend: AOTAutograd and Inductor; a backend of your own: its own work)"),
    ("inductor_compile_time_s", "Inductor", "Time spent in Inductor (not logged when Inductor did not run)"),
    ("code_gen_time_s", "Code generation", ""),
    ("dynamo_time_before_restart_s", "Dynamo before restart", "Time Dynamo spent on attempts that were restarted (e.g. by a graph break)"),
)
COUNTS = (
    ("guard_count", "Guards"), ("shape_env_guard_count", "Shape env guards"), ("graph_op_count", "Graph ops"),
    ("graph_node_count", "Graph nodes"), ("graph_input_count", "Graph inputs"), ("cache_size", "Cache size"),
    ("accumulated_cache_size", "Accumulated cache size"),
)
CUSTOM_OPS = (("compliant_custom_ops", "Compliant custom ops"), ("non_compliant_ops", "Non-compliant ops"))
FRAME = ("co_name", "co_filename", "co_firstlineno")
FAILURE = ("fail_type", "fail_reason", "fail_user_frame_filename", "fail_user_frame_lineno", "restart_reasons")
# every field the page shows in a place of its own (kinds.builtin.METRICS_SHOWN must name the same:
# the others go to its "Other Metrics")
FIELDS_SHOWN = frozenset({*FRAME, *FAILURE, *(name for name, _, _ in TIMES), *(name for name, _ in COUNTS), *(name for name, _ in CUSTOM_OPS)})


def metrics_page_html(page: MetricsPageModel, live: LiveMarkModel | None = None) -> str:
    """The whole page; `live`: written while the log is still being read."""
    meta = page.meta
    parts = [
        _heading(page), _times(meta), _failure(meta), _restarts(page.restart_reasons), "\n", _counts(meta), _custom_ops(meta),
        "\n<h2>Stack</h2>\n", stack(page.stack, page.root), "\n\n<h2>Outputs of this compile id</h2>\n",
        artifact_list(page.outputs, page.root) if page.outputs else '<p class="muted">None.</p>', "\n",
        _specializations(page), "\n", _guards_added(page), "\n", _other_metrics(page),
        f'\n<h2>All fields</h2>\n<details class="section"><summary>{len(meta)} fields as logged</summary>\n'
        f'<pre class="meta">{esc(page.fields)}</pre>\n</details>\n',
    ]
    return page_shell(page, live, "".join(parts))


def _heading(page: MetricsPageModel) -> str:
    meta = page.meta
    compile_id = f'<a href="{esc(page.root)}{esc(page.compile_page)}">{esc(page.compile_id)}</a>' if page.compile_id is not None else "(unknown)"
    frame = ""
    if meta.get("co_name"):
        at = f" in <code>{esc(meta.get('co_filename'))}:{esc(meta.get('co_firstlineno'))}</code>" if meta.get("co_filename") else ""
        frame = f" Frame <code>{esc(meta.get('co_name'))}</code>{at}."
    return (f'<h1>{esc(page.title)} for {compile_id}</h1>\n'
            f'<p class="muted"><code>{esc(page.kind)}</code> record at line {esc(page.lineno)} of the log.\n{frame}</p>\n\n')


def _times(meta: dict[str, Any]) -> str:
    rows = "".join(f'<tr><td class="k">{_named(words, title)}</td><td>{seconds(meta.get(name))}</td></tr>\n' for name, words, title in TIMES)
    return f'<h2>Compile time</h2>\n<div class="scroll"><table class="times"><tbody>\n{rows}</tbody></table></div>\n\n'


def _named(words: str, title: str) -> str:
    return f'<abbr title="{title}">{words}</abbr>' if title else words


def _failure(meta: dict[str, Any]) -> str:
    if not meta.get("fail_type"):
        return "<h2>Restarts and failures</h2>\n<p>No failures.</p>"
    reason = esc(meta.get("fail_reason") if meta.get("fail_reason") else "(no reason logged)")
    where = ""
    if meta.get("fail_user_frame_filename"):
        where = f"<p>In <code>{esc(meta.get('fail_user_frame_filename'))}</code>, line {esc(meta.get('fail_user_frame_lineno'))}</p>"
    return (f'<h2>Restarts and failures</h2>\n<div class="warning"><p>Failure: <code>{esc(meta.get("fail_type"))}</code></p>\n'
            f"<pre>{reason}</pre>\n{where}</div>\n")


def _restarts(reasons: list[Any]) -> str:
    """restart_reasons: the record's when it is a list (views.pages.metrics_page)."""
    if not reasons:
        return "<p>No restarts.</p>"
    items = "".join(f'<li><pre class="reason">{esc(reason)}</pre></li>' for reason in reasons)
    return f"<p>Restart reasons:</p><ul>{items}</ul>\n"


def _counts(meta: dict[str, Any]) -> str:
    values = [(words, meta.get(name)) for name, words in COUNTS]
    if all(value is None for _, value in values):
        return ""
    rows = "".join(f'<tr><td class="k">{words}</td><td>{esc(value) if value is not None else ""}</td></tr>\n' for words, value in values)
    return f'<h2>Graph and cache</h2>\n<div class="scroll"><table class="times"><tbody>\n{rows}</tbody></table></div>\n'


def _custom_ops(meta: dict[str, Any]) -> str:
    if not (meta.get("compliant_custom_ops") or meta.get("non_compliant_ops")):
        return ""
    out = ["<h2>Custom ops</h2>\n"]
    for name, words in CUSTOM_OPS:
        ops = meta.get(name)
        if ops:
            items = "".join(f"<li><code>{esc(op)}</code></li>" for op in _as_list(ops))
            out.append(f"<p>{words}:</p><ul>{items}</ul>\n")
    return "".join(out)


def _as_list(ops: Any) -> Iterable[Any]:
    """A logged list of ops, or one op logged alone."""
    if isinstance(ops, str):
        return [ops]
    try:
        iter(ops)
    except TypeError:
        return [ops]
    return ops


def _stack_cell(frames: list[Any], root: str) -> str:
    """A stack, collapsed to its length."""
    return f"<td><details><summary>{len(frames)} frames</summary>{stack(frames, root)}</details></td>"


def _specializations(page: MetricsPageModel) -> str:
    if not page.specializations:
        return ""
    rows = "".join(_specialization(s, page.root) for s in page.specializations)
    return ('<h2>Symbolic shape specializations</h2>\n<div class="scroll"><table><thead><tr><th>Symbol</th><th>Source(s)</th><th>Value</th>'
            f'<th>Reason</th><th>User stack</th><th>Framework stack</th></tr></thead><tbody>\n{rows}</tbody></table></div>\n')


def _specialization(s: ShapeFactModel, root: str) -> str:
    sources = "".join(f"<code>{esc(src)}</code><br>" for src in s.sources)
    return (f"<tr><td><code>{esc(s.symbol)}</code></td><td>{sources}</td><td><code>{esc(s.value)}</code></td><td>{esc(s.reason)}</td>\n"
            f"{_stack_cell(s.user_stack, root)}\n{_stack_cell(s.stack, root)}</tr>\n")


def _guards_added(page: MetricsPageModel) -> str:
    if not page.guards_added:
        return ""
    rows = "".join(f"<tr><td><code>{esc(g.expr)}</code></td>\n{_stack_cell(g.user_stack, page.root)}\n{_stack_cell(g.stack, page.root)}</tr>\n"
                   for g in page.guards_added)
    return ('<h2>Guards added fast</h2>\n<div class="scroll"><table><thead><tr><th>Expression</th><th>User stack</th><th>Framework stack</th></tr>'
            f"</thead><tbody>\n{rows}</tbody></table></div>\n")


def _other_metrics(page: MetricsPageModel) -> str:
    """The fields with no place of their own above (the metrics kinds' word: kinds.builtin.other_metrics), as JSON."""
    if not (page.other_metrics or page.null_metrics):
        return ""
    nulls = ""
    if page.null_metrics:
        nulls = " Logged as null: " + ", ".join(f"<code>{esc(name)}</code>" for name in page.null_metrics) + "."
    out = ['<h2 id="other-metrics">Other Metrics</h2>\n<p class="muted">The fields this record logs that have no place of their own above, '
           f"in log order, each value as JSON.{nulls}</p>\n"]
    if page.other_metrics:
        rows = "".join(_other_metric(o, page.value_limit) for o in page.other_metrics)
        out.append('<div class="scroll"><table class="other-metrics"><thead><tr><th>Metric</th><th>Value</th></tr></thead><tbody>\n'
                   f"{rows}</tbody></table></div>")
    return "".join(out)


def _other_metric(o: MetricModel, limit: int) -> str:
    """A field and its value: short ones whole, long ones collapsed behind their start (and cut past `limit`)."""
    if not o.preview:
        return _short_row(o.name, o.text)
    cut = f"… (cut at {esc(f'{limit:,}')} characters; raw.jsonl holds the whole record)" if o.chars > limit else ""
    return (f'<tr><td class="k">{esc(o.name)}</td><td><details><summary><code>{esc(o.preview)}</code> <span class="muted">'
            f'({esc(f"{o.chars:,}")} characters)</span></summary><pre class="meta">{esc(o.text)}{cut}</pre></details></td></tr>\n')


# A short row is the same HTML on every page that logs the same field and value (most of them, with
# many small compiles: `views.pages.metric_view`); made once. Bounded, as memory must not grow with the log.
@functools.lru_cache(maxsize=4096)
def _short_row(name: str, text: str) -> str:
    return f'<tr><td class="k">{esc(name)}</td><td><code>{esc(text)}</code></td></tr>\n'
