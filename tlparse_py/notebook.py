"""The analysis in a notebook: a rich summary (`_repr_html_`), the report inline, and in-process tracing.

    import tlparse_py
    tlparse_py.analyze("/tmp/trace")            # in Jupyter: totals, failures, run timeline, time by frame, graph breaks, recompiles, slowest
    tlparse_py.show("/tmp/trace")               # writes the report and shows it inline (its single-file form)
    with tlparse_py.trace() as t:               # traces the compiles of this block, in this process
        compiled(x)
    t.analysis                                  # ... and shows their analysis

The summary is built from the same typed summary and totals every other view reads, and rendered
by an autoescaped template (`templates/notebook.html.j2`), with the index's pictures (the run
timeline and the compile time by frame) drawn by the same functions (`report.html.timeline_svg`).
Importing this module registers it as how an `Analysis` shows itself in a notebook (the analysis
layer renders nothing itself).
"""

from __future__ import annotations

import hashlib
import html
import logging
import os
import re
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from markupsafe import Markup
from msgspec import Struct, field, structs

from .analysis import compiles
from .analysis.compiles import Analysis
from .analysis.digest import ranks_digest, report_digest
from .analysis.compile_groups import failed_compiles, graph_break_groups, recompiled_frames, slowest
from .analysis.summary import STATUS_LABELS
from .analysis.timeline import Timeline
from .analysis.totals import TOTALS, columns, totals_of
from .multirank import ranks_analysis
from .multirank.ranks_analysis import RanksAnalysis
from .report.html.timeline_svg import frames_figure, timeline_figure
from .report.render import render

ROWS = 10  # rows per section of the summary
RANK_ROWS = 16  # ranks listed in a multi-rank summary (the others are in its "all" row)


def summary_html(analysis: Analysis) -> str:
    """The rich summary of an analysis: totals, failed compiles with their exception, the run timeline
    and the compile time by frame, graph breaks with torch's hints, recompiles per frame and the
    slowest compiles; each links into the report when one was written."""
    return render("notebook.html.j2", summary_view(analysis))


def summary_view(analysis: Analysis) -> dict[str, Any]:
    """The summary's plain data (what the template shows)."""
    summary = analysis.summary()
    compiles_ = summary.compiles
    values = totals_of(compiles_)
    link = _linker(analysis.report_dir)
    groups = graph_break_groups(compiles_)
    frames = recompiled_frames(compiles_)
    failed = failed_compiles(compiles_)
    differing = [c for c in compiles_ if c.config_texts]  # settings unlike the frame's previous compile, or most compiles
    digest = report_digest(summary)
    export = digest.export
    return {
        "title": summary.log_name,
        "kind": digest.program,
        "export": {"headline": export.headline, "status": export.status, "url": link("index.html#export")} if export is not None else None,
        "report": link("index.html"),
        "totals": [(total.label, total.show(values[total.name])) for total in TOTALS],
        "failures": [
            {"label": c.label, "url": link(c.url), "frame": c.frame or "", "where": c.user_location or "unknown",
             "type": c.failure.type, "message": c.failure.message, "failed_at": c.failure.user_location or "",
             "suppressed": bool(c.failure.suppressed)}
            for c in failed[:ROWS] if c.failure is not None
        ],
        "more_failures": max(len(failed) - ROWS, 0),
        "graph_breaks": [
            {"count": g.count, "kind": g.first.registry_id, "reason": g.reason, "hint": g.first.advice[0] if g.first.advice else "",
             "owner": g.first.owner,
             "where": g.sites[0].user_location or "unknown", "inside": g.sites[0].inside, "more": len(g.sites) - 1,
             "config_notes": list(dict.fromkeys(note for c, brk in g.breaks for note in c.config_notes(brk)))[:3]}
            for g in groups[:ROWS]
        ],
        "more_graph_breaks": max(len(groups) - ROWS, 0),
        "recompiles": [
            {"frame": f.frame, "name": f.name, "count": len(f.compiled),
             "reason": f.first_reason or "", "retries": len(f.retries),
             "over_limit": f.over_limit.label if f.over_limit else ""}
            for f in frames[:ROWS]
        ],
        "more_recompiles": max(len(frames) - ROWS, 0),
        "config": [{"label": c.label, "url": link(c.url), "frame": c.frame or "", "texts": c.config_texts} for c in differing[:ROWS]],
        "more_config": max(len(differing) - ROWS, 0),
        "pictures": pictures(analysis.timeline(), link) if compiles_ else None,
        "slowest": [
            {"label": c.label, "url": link(c.url), "frame": c.frame or "", "seconds": c.compile_time_s.total,
             "status": STATUS_LABELS.get(c.status, c.status)}
            for c in slowest(compiles_, 5)
        ],
    }


# the ids and references of a picture's markup (its figure, its <title> and <desc>): generated, never from the log
PICTURE_IDS = re.compile(r'(?<=\s)(id|aria-labelledby)="([^"]*)"')


def pictures(timeline: Timeline, link: Any) -> dict[str, Markup]:
    """The run timeline and the compile time by frame, as the index draws them (`timeline_svg`),
    each compile and frame linking to its page where a report was written (`link`), none else."""
    linked = structs.replace(
        timeline,
        spans=[structs.replace(span, url=link(span.url)) for span in timeline.spans],
        frames=[structs.replace(frame, url=link(frame.url)) for frame in timeline.frames],
    )
    drawn = {"timeline": timeline_figure(linked), "frames": frames_figure(linked)}
    scope = hashlib.blake2b("".join(drawn.values()).encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
    return {name: _in_notebook(figure, scope) for name, figure in drawn.items()}


def _in_notebook(figure: str, scope: str) -> Markup:
    """A picture as the notebook shows it: its links open beside the notebook (a link followed in an
    output would leave it), and its ids its own (a notebook shows many outputs on one page: each
    picture's aria-labelledby must name its own title). Every value from the log in `figure` is
    escaped (`"` written `&#34;`): an `href="` or `id="` in it is the picture's own markup."""
    figure = figure.replace('<a href="', '<a target="_blank" href="')
    return Markup(PICTURE_IDS.sub(lambda m: f'{m[1]}="' + " ".join(f"{name}-{scope}" for name in m[2].split()) + '"', figure))


def _linker(report_dir: Path | None) -> Any:
    """A page of the report as a link from where the notebook runs (its kernel's folder); None
    without a report."""
    if report_dir is None:
        return lambda url: None
    base = Path(os.path.relpath(report_dir.absolute(), Path.cwd())).as_posix()
    return lambda url: f"{base}/{url}" if url else None


compiles.html_view = summary_html


def ranks_html(ranks: RanksAnalysis) -> str:
    """The summary of a folder of rank logs: whether the ranks agree (each divergence), and each
    rank's totals with the totals over the ranks; each rank links to its report when one was written."""
    return render("notebook_ranks.html.j2", ranks_view(ranks))


def ranks_view(ranks: RanksAnalysis) -> dict[str, Any]:
    """The multi-rank summary's plain data (what the template shows)."""
    summary = ranks.summary()
    digest = ranks_digest(summary, RANK_ROWS)
    shown = {id(row.entry): row.totals for row in digest.rows}
    grouped = columns()
    link = _linker(ranks.report_dir)
    found = ranks.comparison
    first = found.first
    return {
        "title": ranks.folder.name or str(ranks.folder),
        "report": link("index.html"),
        "ranks": ranks.ranks,
        "diverges": ranks.diverges,
        "first": first if first is not None and first.compile_id else None,
        "divergences": found.divergences[:ROWS],
        "more_divergences": max(len(found.divergences) - ROWS, 0),
        "notes": found.notes,
        "columns": [column for column, _ in grouped],
        "rows": [
            {"name": entry.name, "url": link(f"{entry.folder}/index.html"), "error": entry.error or "",
             "cells": [" / ".join(shown[id(entry)][total.name] for total in group) for _, group in grouped] if id(entry) in shown else []}
            for entry in summary.ranks[:RANK_ROWS]
        ],
        "combined": [" / ".join(digest.combined[total.name] for total in group) for _, group in grouped],
        "more_ranks": max(len(summary.ranks) - RANK_ROWS, 0),
    }


ranks_analysis.html_view = ranks_html


class Shown(Struct, weakref=True):
    """A report shown inline: its single-file form in an iframe, sandboxed (its own scripts run in it).
    A report `show()` wrote to a temporary folder (no `out`) is removed with the folder once this is
    no longer used, or when the interpreter (the kernel) exits."""

    report_dir: Path
    single_file: Path
    height: int = 720

    def _repr_html_(self) -> str:
        page = self.single_file.read_text(encoding="utf-8")
        return (f'<iframe srcdoc="{html.escape(page, quote=True)}" style="width:100%;height:{self.height}px;border:1px solid #ccc" '
                f'sandbox="allow-scripts" title="tlparse-py report"></iframe>')


def show(path: str | Path, out: str | Path | None = None, *, height: int = 720) -> Shown:
    """Write the report of a trace (to `out`, else a new temporary folder, removed once the returned
    `Shown` is no longer used or the interpreter exits) and show it inline."""
    from . import build
    from .report.pack import pack_report

    if out is not None:
        report_dir = Path(out)
        build(path, report_dir, overwrite=True)
        single = report_dir.parent / f"{report_dir.name}.html"
        pack_report(report_dir, single)
        return Shown(report_dir, single, height)
    folder = Path(tempfile.mkdtemp(prefix="tlparse-py-report-"))
    try:
        report_dir = folder / "report"
        build(path, report_dir, overwrite=False)
        single = folder / "report.html"
        pack_report(report_dir, single)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)  # a trace that cannot be read leaves nothing behind either
        raise
    shown = Shown(report_dir, single, height)
    weakref.finalize(shown, shutil.rmtree, folder, ignore_errors=True)  # also run at exit (finalize's atexit)
    return shown


class Traced(Struct, weakref=True):
    """What `trace()` recorded: its folder, and once the block ends, the analysis of its compiles.
    A temporary folder (`trace()` without one) is removed once this is no longer used, or when the
    interpreter exits."""

    folder: Path
    analysis: Analysis | RanksAnalysis | None = None  # a block that logged as several ranks: theirs (`tlparse_py.analyze`)
    logs: list[Path] = field(default_factory=list)

    def _repr_html_(self) -> str | None:
        if self.analysis is None:
            return f"<p>tracing into <code>{html.escape(str(self.folder))}</code> (the block has not ended)</p>"
        return self.analysis._repr_html_()


def _entry(text: str, index: int) -> Any:
    return lambda: (text, index)


TRACE_LOGS = "dedicated_log_torch_trace*"


@contextmanager
def trace(folder: str | Path | None = None) -> Iterator[Traced]:
    """Trace the compiles of a block of code, in this process, as TORCH_TRACE would.

    torch reads TORCH_TRACE when it is imported; this adds torch's own trace handler to its trace
    logger for the block instead, and removes it after. The strings torch interned before the
    block (file names) are logged again first, so stacks name their files. A function compiled
    before the block is not compiled again in it, and traces nothing.

    Each block has a folder of its own, so its analysis is of its own compiles only: without
    `folder`, a new temporary one, removed once the `Traced` is no longer used (or at exit); a
    `folder` that already holds a trace (an earlier block's, or this cell's last run) is refused
    with FileExistsError before anything is traced, and nothing in it is touched.
    """
    from torch._logging import _internal, structured  # noqa: PLC0415 - torch only when tracing

    if folder is not None:
        where = Path(folder)
        earlier = sorted(where.glob(TRACE_LOGS)) if where.is_dir() else []
        if earlier:
            raise FileExistsError(f"{where} already holds a trace ({earlier[0].name}): each trace() block needs a folder of its own "
                                  "(give another, remove that one, or leave the folder out for a temporary one)")
        where.mkdir(parents=True, exist_ok=True)
        traced = Traced(where)
    else:
        where = Path(tempfile.mkdtemp(prefix="tlparse-py-trace-"))
        traced = Traced(where)
        weakref.finalize(traced, shutil.rmtree, where, ignore_errors=True)
    handler = _internal.LazyTraceHandler(str(where))
    handler.setFormatter(_internal.TorchLogsFormatter(trace=True))
    log = _internal.trace_log
    level = log.level
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)
    try:
        for text, index in list(structured.INTERN_TABLE.items()):
            _internal.trace_structured("str", _entry(text, index), suppress_context=True)
        yield traced
    finally:
        log.removeHandler(handler)
        handler.close()
        log.setLevel(level)
    from . import analyze

    traced.logs = sorted(where.glob(TRACE_LOGS))
    if traced.logs:
        traced.analysis = analyze(where, all_runs=True)  # the block's own folder: every log in it is the block's
