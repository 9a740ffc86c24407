"""The multi-rank landing page's picture, as inline SVG: every rank's compiles on one time axis, a lane
per rank, so that a rank that compiles slower, later or on its own shows at a glance.

Drawn from `analysis.rank_timeline.RankTimeline` alone, with the index's run timeline's scale, gap
and axis marks, colours and bar titles (`timeline_svg`): a bar is one compile, coloured by outcome,
linking to its page in that rank's report; a thin mark ends each lane at the rank's last record (a
rank that stopped logging early, killed or hung, ends short). Past `timeline.MAX_BARS` compiles the
lanes are buckets of compiles with their counts by outcome. Under it, folded, the table of the same
per rank, and above it the slowest rank in words.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...analysis.rank_timeline import RankLane, RankTimeline
from ...analysis.summary import STATUS_LABELS
from ...analysis.timeline import UNDER_WAY, Bucket, CompileSpan
from ...units import format_seconds
from .escaping import esc
from .timeline_svg import (
    AXIS_HEIGHT, LABEL_WIDTH, MIN_BAR_WIDTH, PLOT_LEFT, PLOT_RIGHT, WIDTH, Scale, axis_marks, bar_title, gap_marks, outcome_class, coordinate, bucket_mark,
)

LANE_HEIGHT, BAR_HEIGHT = 26, 16  # up to COMPACT_FROM ranks
COMPACT_FROM = 17  # from this many ranks, lanes are thinner so that the picture stays a screen high
COMPACT_LANE_HEIGHT, COMPACT_BAR_HEIGHT = 13, 9
LAST_RECORD_OVERHANG = 3  # the last-record mark stands out of its lane by this much


def _at(seconds: float | None) -> str:
    """A point of the common axis, as a table cell says it: seconds, three decimals."""
    return f"{seconds:.3f}" if seconds is not None else "—"


def _rank_words(lane: RankLane) -> str:
    return f"rank {lane.rank}"


def ranks_figure(timeline: RankTimeline) -> str:
    """The ranks' lanes on one axis, their legend and, folded, the table per rank."""
    if not timeline.drawn:
        return ('<p class="muted">No rank logged a compile time the picture could place (a compile\'s <code>dynamo_start</code> '
                "or <code>compilation_metrics</code> record, and the rank's record times).</p>")
    lane_height, bar_height = (COMPACT_LANE_HEIGHT, COMPACT_BAR_HEIGHT) if len(timeline.lanes) >= COMPACT_FROM else (LANE_HEIGHT, BAR_HEIGHT)
    scale = Scale(timeline.axis)
    plot_bottom = lane_height * len(timeline.lanes) + 2
    height = plot_bottom + AXIS_HEIGHT + 4
    title = f"Compiles per rank over time: {len(timeline.lanes)} ranks, {timeline.drawn:,} compiles over {format_seconds(timeline.axis.end_s)}"
    out = [f'<figure class="picture timeline" id="rank-timeline-figure">\n{_lead(timeline)}<svg xmlns="http://www.w3.org/2000/svg" class="pic" viewBox="0 0 {WIDTH} {height}" '
           f'role="group" aria-labelledby="rank-timeline-title rank-timeline-desc">\n<title id="rank-timeline-title">{esc(title)}</title>\n'
           f'<desc id="rank-timeline-desc">{esc(_desc(timeline))}</desc>\n']
    slowest = timeline.slowest
    for place, lane in enumerate(timeline.lanes):
        out.append(_lane_background(lane, place * lane_height, lane_height, timeline.uneven and slowest is lane))
    out.extend(gap_marks(timeline.axis, scale, plot_bottom))
    for place, lane in enumerate(timeline.lanes):
        top = place * lane_height
        bar_y = top + (lane_height - bar_height) / 2
        if lane.buckets is not None:
            out.extend(_bucket(lane, b, scale, bar_y, bar_height) for b in lane.buckets)
        else:
            out.extend(_bar(lane, s, scale, bar_y, bar_height) for s in lane.spans)
        out.append(_lane_end(lane, scale, top, lane_height))
    out.extend(axis_marks(timeline.axis, scale, plot_bottom))
    out.append("</svg>\n")
    out.append(_legend(timeline))
    out.append(_table(timeline))
    out.append("</figure>\n")
    return "".join(out)


def _lead(timeline: RankTimeline) -> str:
    """The slowest rank and the last to finish compiling in words, over the picture (the table says the same per rank)."""
    words = [w for w in (_slowest_words(timeline), _straggler_words(timeline), _origin_words(timeline)) if w]
    return f"<p>{' '.join(words)}</p>\n" if words else ""


def _slowest_words(timeline: RankTimeline) -> str:
    slow, fast, median, spread = timeline.slowest, timeline.fastest, timeline.median, timeline.spread_s
    if timeline.uneven and slow is not None and median is not None and spread is not None:
        which = "the fastest" if median is fast else "the median rank"
        return (f"<strong>Slowest: rank {slow.rank}</strong>, {esc(format_seconds(slow.compile_time_s))} of compile time, "
                f"{esc(format_seconds(spread))} more than rank {median.rank} ({which}, {esc(format_seconds(median.compile_time_s))}).")
    if slow is not None and fast is not None:
        return (f"The ranks' compile times are even: {esc(format_seconds(fast.compile_time_s))} (rank {fast.rank}) to "
                f"{esc(format_seconds(slow.compile_time_s))} (rank {slow.rank}).")
    return ""


def _straggler_words(timeline: RankTimeline) -> str:
    late, straggler, middle = timeline.late_s, timeline.straggler, timeline.median_finish
    if straggler is None or middle is None or late is None:
        return ""
    which = ", the median rank" if len(timeline.lanes) > 2 else ""
    return (f"<strong>Rank {straggler.rank} finishes compiling last</strong>, {esc(format_seconds(late))} after rank {middle.rank}"
            f"{which}: the ranks done before it wait for it at their next collective.")


def _origin_words(timeline: RankTimeline) -> str:
    if not timeline.by_clock:
        return (f"<strong>The ranks' first compiles start {esc(_long(timeline.apart_s))} apart by their clocks</strong>: "
                "their logs come from different runs, or their clocks differ. Each rank is drawn from its own first compile "
                "start (0 s); the table gives each one's time.")
    if timeline.origin:
        return (f'<span class="muted">0 s is the first compile start of all ranks: rank {timeline.origin_rank}\'s, at '
                f"{esc(timeline.origin)} (glog time); each rank is placed by its own records' times.</span>")
    return ""


def _long(seconds: float) -> str:
    """A long stretch of time in the unit a reader thinks in (days, hours, minutes)."""
    for unit, size in (("days", 86400.0), ("hours", 3600.0), ("minutes", 60.0)):
        if seconds >= 2 * size:
            return f"{seconds / size:.1f} {unit}"
    return format_seconds(seconds)


def _desc(timeline: RankTimeline) -> str:
    words = [f"One lane per rank ({len(timeline.lanes)}); time runs left to right, "
             + ("in seconds from the first compile start of all ranks, each rank placed by its records' wall-clock (glog) times."
                if timeline.by_clock else "in seconds from each rank's own first compile start (their clocks are too far apart to share one axis).")]
    if timeline.bucketed:
        words.append("The compiles are more than one bar each can show: each lane is drawn in buckets of compiles starting close "
                     "together, each split by outcome, its counts in its title.")
    else:
        words.append("Each bar is one compile, from its first record to its last, coloured by its outcome; each links to its page "
                     "in that rank's report.")
    words.append("A thin mark ends each lane at the rank's last record.")
    if timeline.axis.gaps:
        words.append("Long stretches in which no rank compiled are drawn compressed, marked with a break.")
    words.append("The table below the picture lists each rank's compiles, first start, last end and compile time.")
    return " ".join(words)


def _lane_background(lane: RankLane, top: float, lane_height: float, slowest: bool) -> str:
    name = _rank_words(lane) + (" · slowest" if slowest else "")
    time = format_seconds(lane.compile_time_s) if lane.compile_time_s is not None else "unknown"
    title = f"{_rank_words(lane)}: {lane.compiles:,} compile{'s' if lane.compiles != 1 else ''}, compile time {time}; its report"
    label = (f'<a href="{esc(lane.folder)}/index.html"><title>{esc(title)}</title><text class="tl-name" x="{LABEL_WIDTH - 4}" '
             f'y="{coordinate(top + lane_height / 2 + 4)}">{esc(name)}</text></a>')
    out = (f'<rect class="tl-lane" x="{coordinate(PLOT_LEFT)}" y="{coordinate(top + 1)}" width="{coordinate(PLOT_RIGHT - PLOT_LEFT)}" height="{coordinate(lane_height - 2)}"/>'
           f"{label}")
    why = _no_bars(lane)
    if why:
        out += f'<text class="tl-value" x="{coordinate(PLOT_LEFT + 6)}" y="{coordinate(top + lane_height / 2 + 4)}">{esc(why)}</text>'
    return out + "\n"


def _no_bars(lane: RankLane) -> str:
    """Why a lane is empty, in words ("" when it has bars)."""
    if lane.spans:
        return ""
    if lane.error:
        return f"no report: {lane.error}"
    if not lane.compiles:
        return "no compile"
    return f"{lane.compiles:,} compile{'s' if lane.compiles != 1 else ''}, none with a time the picture can place"


def _bar(lane: RankLane, span: CompileSpan, scale: Scale, y: float, height: float) -> str:
    assert span.start_s is not None and span.end_s is not None
    x0 = scale.x(span.start_s)
    width = max(scale.x(span.end_s) - x0, MIN_BAR_WIDTH)
    marks = (" tl-recompile" if span.recompile else "") + (" tl-retry" if span.cause == "retry" else "") + (" tl-hit" if span.cache_hit else "")
    body = (f"<title>{esc(_rank_words(lane))} · {esc(bar_title(span))}</title>"
            f'<rect class="tl-bar {outcome_class(span.outcome)}{marks}" x="{coordinate(x0)}" y="{coordinate(y)}" width="{coordinate(width)}" height="{coordinate(height)}"/>')
    return f'<a href="{esc(span.url)}">{body}</a>\n' if span.url else f"<g>{body}</g>\n"


def _bucket(lane: RankLane, bucket: Bucket, scale: Scale, y: float, height: float) -> str:
    return bucket_mark(bucket, scale, y, height, f"{_rank_words(lane)} · ")


def _lane_end(lane: RankLane, scale: Scale, top: float, lane_height: float) -> str:
    """The rank's last record, a thin mark across its lane."""
    if lane.last_record_s is None:
        return ""
    x = scale.x(max(lane.last_record_s, 0.0))
    title = f"{_rank_words(lane)}'s last record: {_at(lane.last_record_s)} s"
    return (f'<g><title>{esc(title)}</title><line class="tl-axis" x1="{coordinate(x)}" y1="{coordinate(top + 1 - LAST_RECORD_OVERHANG / 2)}" '
            f'x2="{coordinate(x)}" y2="{coordinate(top + lane_height - 1 + LAST_RECORD_OVERHANG / 2)}"/></g>\n')


def _legend(timeline: RankTimeline) -> str:
    spans = [s for lane in timeline.lanes for s in lane.spans]
    shown = {s.outcome for s in spans}
    items = [f'<span class="swatch {outcome_class(o)}"></span>{esc(STATUS_LABELS[o])}' for o in STATUS_LABELS if o in shown]
    if UNDER_WAY in shown:
        items.append(f'<span class="swatch {outcome_class(UNDER_WAY)}"></span>compiling (under way, drawn to its rank\'s last record)')
    if not timeline.bucketed:
        if any(s.recompile for s in spans):
            items.append('<span class="swatch tl-ok tl-recompile"></span>recompile (outlined)')
        if any(s.cause == "retry" for s in spans):
            items.append('<span class="swatch tl-ok tl-retry"></span>retry (dashed outline)')
        if any(s.cache_hit for s in spans):
            items.append('<span class="swatch tl-ok tl-hit"></span>cache hit (lighter)')
    items.append("· a thin mark ends each lane at the rank's last record")
    return f'<figcaption class="legend-line">{" ".join(items)}</figcaption>\n'


def _table(timeline: RankTimeline) -> str:
    rows = "".join(_row(timeline, lane) for lane in timeline.lanes)
    head = ("<tr><th>Rank</th><th>Compiles</th><th>First compile at</th><th>First start (s)</th><th>Last end (s)</th>"
            f"<th>Last record (s)</th><th>Compile time</th><th>{'Over the fastest' if _median_is_fastest(timeline) else 'Over the median rank'}</th>"
            "<th>Note</th></tr>")
    return (f'<details class="section picture-table"><summary>The ranks\' compiles as a table</summary>\n<div class="scroll">'
            f'<table class="compact"><thead>{head}</thead><tbody>\n{rows}</tbody></table></div></details>\n')


def _row(timeline: RankTimeline, lane: RankLane) -> str:
    over = timeline.over_median_s(lane)
    figures = [f"{lane.compiles:,}", lane.first_compile_at or "—", _at(lane.first_start_s), _at(lane.last_end_s), _at(lane.last_record_s),
               format_seconds(lane.compile_time_s) if lane.compile_time_s is not None else "unknown",
               _signed(over) if over is not None and lane is not timeline.median else "—"]
    link = f'<a href="{esc(lane.folder)}/index.html">rank&nbsp;{lane.rank}</a>'
    numbers = "".join(f'<td class="num">{esc(figure)}</td>' for figure in figures)
    return f"<tr><td>{link}</td>{numbers}<td>{esc('; '.join(_notes(timeline, lane)))}</td></tr>\n"


def _median_is_fastest(timeline: RankTimeline) -> bool:
    """With two ranks the median one is the fastest, and is called so."""
    return timeline.median is timeline.fastest


def _signed(seconds: float) -> str:
    """A difference of times: `+2.70 s`, `−350.0 ms`."""
    return ("+" if seconds > 0 else "−" if seconds < 0 else "±") + format_seconds(abs(seconds))


def _notes(timeline: RankTimeline, lane: RankLane) -> Iterable[str]:
    if lane is timeline.slowest:
        yield "slowest (most compile time)"
    if lane is timeline.median and not _median_is_fastest(timeline):
        yield "median compile time"
    if lane is timeline.fastest:
        yield "fastest"
    if lane is timeline.last_to_finish:
        yield "finishes compiling last"
    if lane.error:
        yield f"no report: {lane.error}"
    elif lane.unknown:
        yield f"{lane.unknown:,} compile{'s' if lane.unknown != 1 else ''} with no time placed"
