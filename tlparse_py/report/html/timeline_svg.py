"""The index's pictures, as inline SVG: the run timeline and the compile time by frame.

Drawn from `analysis.timeline.Timeline` alone (the views re-derive nothing), with no script and no
external resource, so that a report opened from file://, as a CI artifact, in a notebook or on
paper shows them. Colours are CSS classes (the page's CSP allows no inline style), from a palette
readable with colour-blindness (Okabe-Ito), with a dark-mode variant (report.css). Each picture
has a <title>/<desc>, and a table of the same data under it: the tables stay the source of truth.

Bounds: the timeline draws one bar per compile up to `timeline.MAX_BARS`, then buckets of compiles
(`timeline.BUCKETS` per process across the axis) with their counts by outcome; a bar wider than
MIN_PHASE_WIDTH also shows its phases. The frame chart shows `timeline.TOP_FRAMES` frames.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable

from ...analysis.summary import STATUS_LABELS, STATUS_SEVERITY
from ...analysis.timeline import MAX_BARS, PART_NAMES, UNDER_WAY, Axis, Bucket, CompileSpan, FrameTime, Timeline
from ...units import format_seconds
from .escaping import esc

WIDTH = 1000  # the viewBox's width: the pictures scale to the page's width
LABEL_WIDTH = 110  # the lanes' names
PLOT_LEFT, PLOT_RIGHT = 116.0, 990.0
LANE_HEIGHT, BAR_HEIGHT, PHASE_HEIGHT = 30, 15, 6
AXIS_HEIGHT = 26
MIN_BAR_WIDTH = 2.5  # a compile of a few milliseconds in an hour's run is still seen
MIN_PHASE_WIDTH = 8.0  # narrower bars show no phase segments (they could not be told apart)
FRAME_ROW, FRAME_LABEL_WIDTH, FRAME_BAR_LEFT, FRAME_BAR_RIGHT = 26, 360.0, 370.0, 900.0
# a frame's label (its name, number, generation, recompiles) is cut in the picture to what fits left of
# its bar, about 6.7 units a character at the pictures' font size (whole in its <title> and the table)
FRAME_LABEL_CHARS = 52


def coordinate(value: float) -> str:
    """A coordinate, short, as every picture writes them: one decimal, no trailing zero."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _s(value: float | None) -> str:
    """A time as the pages write it (`1.23 s`, `4.5 ms`)."""
    return format_seconds(value)


def _at(seconds: float) -> str:
    """A point of the run, as a table cell says it: seconds from its first record, three decimals."""
    return f"{seconds:.3f}"


class Scale:
    """Seconds of the run → x of the plot, through the axis' compressed gaps."""

    def __init__(self, axis: Axis):
        self.axis = axis
        self.factor = (PLOT_RIGHT - PLOT_LEFT) / (axis.length or 1.0)

    def x(self, seconds: float) -> float:
        return PLOT_LEFT + self.axis.at(seconds) * self.factor


def lane_name(process: int, lanes: int) -> str:
    return "the program" if lanes == 1 else (f"process p{process}" if process else "process 0 (first)")


def outcome_class(outcome: str) -> str:
    return f"tl-{outcome}" if outcome in STATUS_LABELS or outcome == UNDER_WAY else "tl-missing"


# -- the run timeline ------------------------------------------------------------------------------


def timeline_figure(timeline: Timeline) -> str:
    """The run timeline: a lane per process, a bar per compile (or buckets of them), the long gaps
    compressed and marked, with its legend and, folded, the table of the same."""
    if not timeline.drawn_count:
        return ('<p class="muted">No compile logged a time the timeline could place (its <code>dynamo_start</code> or '
                "<code>compilation_metrics</code> record).</p>")
    scale = Scale(timeline.axis)
    lanes = {process: place for place, process in enumerate(timeline.processes)}
    height = LANE_HEIGHT * len(lanes) + AXIS_HEIGHT + 4
    compiles, span = len(timeline.spans), timeline.axis.end_s
    title = f"Run timeline: {compiles:,} compile{'s' if compiles != 1 else ''} over {_s(span)}"
    desc = _timeline_desc(timeline, timeline.drawn_count)
    out = [f'<figure class="picture timeline" id="timeline-figure">\n<svg xmlns="http://www.w3.org/2000/svg" class="pic" viewBox="0 0 {WIDTH} {height}" '
           f'role="group" aria-labelledby="timeline-title timeline-desc">\n<title id="timeline-title">{esc(title)}</title>\n'
           f'<desc id="timeline-desc">{esc(desc)}</desc>\n']
    for process, place in lanes.items():
        y = place * LANE_HEIGHT
        out.append(f'<rect class="tl-lane" x="{coordinate(PLOT_LEFT)}" y="{y + 2}" width="{coordinate(PLOT_RIGHT - PLOT_LEFT)}" height="{LANE_HEIGHT - 4}"/>'
                   f'<text class="tl-name" x="{LABEL_WIDTH - 4}" y="{y + 6 + BAR_HEIGHT / 2 + 4:.0f}">{esc(lane_name(process, len(lanes)))}</text>\n')
    out.extend(gap_marks(timeline.axis, scale, height - AXIS_HEIGHT))
    if timeline.buckets is None:
        out.extend(_bar(s, scale, lanes[s.process] * LANE_HEIGHT + 4) for s in timeline.drawn_spans())
    else:
        out.extend(_bucket(b, scale, lanes[b.process] * LANE_HEIGHT + 4) for b in timeline.buckets)
    out.extend(axis_marks(timeline.axis, scale, height - AXIS_HEIGHT))
    out.append("</svg>\n")
    out.append(_timeline_legend(timeline))
    out.append(_timeline_table(timeline))
    out.append("</figure>")
    return "".join(out)


def _timeline_desc(timeline: Timeline, drawn: int) -> str:
    words = [f"One lane per process ({len(timeline.processes)}); time runs left to right, in seconds from the report's first record."]
    if timeline.buckets is None:
        words.append("Each bar is one compile, from its first record to its last, coloured by its outcome, with its phases "
                     "(Dynamo, AOTAutograd, Inductor, code generation) under it where the log times them; each links to its page.")
    else:
        words.append(f"{drawn:,} compiles are more than one bar each can show: they are drawn in {len(timeline.buckets):,} buckets "
                     "(compiles of one process starting close together), each split by outcome, its counts in its title.")
    if timeline.unknown:
        words.append(f"{timeline.unknown:,} compile{'s' if timeline.unknown != 1 else ''} logged no time and "
                     f"{'are' if timeline.unknown != 1 else 'is'} not drawn.")
    if timeline.axis.gaps:
        words.append(f"{len(timeline.axis.gaps)} long stretch{'es' if len(timeline.axis.gaps) != 1 else ''} without a compile "
                     "are drawn compressed, marked with a break.")
    words.append("The table below the picture lists the same.")
    return " ".join(words)


def _bar(span: CompileSpan, scale: Scale, y: float) -> str:
    return _drawn_bar(span, scale.axis, y)


# A live report draws its timeline again at each update, over the spans it kept: a bar (and a table
# row) is drawn once for as long as its span and the axis stay the same, not at each update.
@functools.lru_cache(maxsize=MAX_BARS)
def _drawn_bar(span: CompileSpan, axis: Axis, y: float) -> str:
    assert span.start_s is not None and span.end_s is not None
    scale = Scale(axis)
    x0, x1 = scale.x(span.start_s), scale.x(span.end_s)
    width = max(x1 - x0, MIN_BAR_WIDTH)
    marks = (" tl-recompile" if span.recompile else "") + (" tl-retry" if span.cause == "retry" else "") + (" tl-hit" if span.cache_hit else "")
    title = bar_title(span)
    rect = (f'<title>{esc(title)}</title><rect class="tl-bar {outcome_class(span.outcome)}{marks}" x="{coordinate(x0)}" y="{coordinate(y)}" '
            f'width="{coordinate(width)}" height="{BAR_HEIGHT}"/>')
    if width >= MIN_PHASE_WIDTH:
        rect += "".join(_phase_rects(span, scale, y + BAR_HEIGHT + 1))
    if span.url:
        return f'<a href="{esc(span.url)}">{rect}</a>\n'
    return f"<g>{rect}</g>\n"


def bar_title(span: CompileSpan) -> str:
    assert span.start_s is not None and span.end_s is not None
    name = f" {span.frame}" if span.frame else ""
    cause = {"recompile": ", a recompile", "retry": ", a retry after a failed compile"}.get(span.cause, "")
    hit = ", cache hit" if span.cache_hit else ""
    phases = ", ".join(f"{p.name} {_s(p.seconds)}" for p in span.phases if p.seconds is not None)
    time = f"compile time {_s(span.seconds)}" if span.seconds is not None else "compile time unknown"
    return (f"{span.label}{name}: {STATUS_LABELS.get(span.outcome, span.outcome)}{cause}{hit}; "
            f"{_at(span.start_s)} s to {_at(span.end_s)} s, {time}" + (f" ({phases})" if phases else ""))


def _phase_rects(span: CompileSpan, scale: Scale, y: float) -> Iterable[str]:
    for phase in span.phases:
        if phase.start_s is None or phase.seconds is None or phase.seconds <= 0:
            continue
        x0, x1 = scale.x(phase.start_s), scale.x(phase.start_s + phase.seconds)
        if x1 - x0 >= 0.5:
            yield f'<rect class="phase-{esc(phase.key)}" x="{coordinate(x0)}" y="{coordinate(y)}" width="{coordinate(x1 - x0)}" height="{PHASE_HEIGHT}"/>'


def _bucket(bucket: Bucket, scale: Scale, y: float) -> str:
    return bucket_mark(bucket, scale, y, BAR_HEIGHT + 1 + PHASE_HEIGHT)


def bucket_mark(bucket: Bucket, scale: Scale, y: float, height: float, whose: str = "") -> str:
    """A bucket of compiles: a bar split by outcome, the most severe on top; `whose` starts its title (`rank 3 · `)."""
    x0 = scale.x(bucket.start_s)
    width = max(scale.x(bucket.end_s) - x0, MIN_BAR_WIDTH)
    count = bucket.count
    outcomes = [(o, bucket.outcomes[o]) for o in STATUS_SEVERITY if bucket.outcomes.get(o)]
    words = ", ".join(f"{n:,} {STATUS_LABELS[o]}" for o, n in outcomes)
    title = (f"{whose}{count:,} compile{'s' if count != 1 else ''} from {_at(bucket.start_s)} s to {_at(bucket.end_s)} s, "
             f"compile time {_s(bucket.seconds)}: {words}")
    out = [f"<g><title>{esc(title)}</title>"]
    top = y
    for outcome, n in outcomes:  # the most severe on top, each its share of the bucket's height
        part = height * n / count
        out.append(f'<rect class="tl-bar {outcome_class(outcome)}" x="{coordinate(x0)}" y="{coordinate(top)}" width="{coordinate(width)}" height="{coordinate(part)}"/>')
        top += part
    out.append("</g>\n")
    return "".join(out)


def gap_marks(axis: Axis, scale: Scale, bottom: float) -> Iterable[str]:
    for gap in axis.gaps:
        x0, x1 = scale.x(gap.start_s), scale.x(gap.end_s)
        title = f"{_s(gap.end_s - gap.start_s)} without a compile ({_at(gap.start_s)} s to {_at(gap.end_s)} s), drawn compressed"
        yield (f'<g class="tl-gap"><title>{esc(title)}</title><rect x="{coordinate(x0)}" y="0" width="{coordinate(x1 - x0)}" height="{coordinate(bottom)}"/>'
               f'<path d="M{coordinate(x0 + 2)} {coordinate(bottom + 2)} l3 -6 l3 6 l3 -6"/></g>\n')


def _ticks(end: float) -> float:
    """A round step between ticks: about eight ticks over `end` seconds."""
    raw = max(end / 8, 1e-3)
    power = 10 ** math.floor(math.log10(raw))
    return next(step * power for step in (1, 2, 5, 10) if step * power >= raw)


def axis_marks(axis: Axis, scale: Scale, y: float) -> Iterable[str]:
    yield f'<line class="tl-axis" x1="{coordinate(PLOT_LEFT)}" y1="{coordinate(y)}" x2="{coordinate(PLOT_RIGHT)}" y2="{coordinate(y)}"/>\n'
    step = _ticks(axis.end_s - sum(g.end_s - g.start_s for g in axis.gaps) or axis.end_s)
    marks = [i * step for i in range(int(axis.end_s / step) + 1)]
    marks += [g.end_s for g in axis.gaps]  # where the run goes on after a gap
    last = -1e9
    for seconds in sorted(set(marks)):
        if any(g.start_s < seconds < g.end_s for g in axis.gaps):
            continue
        x = scale.x(seconds)
        if x - last < 48 or (x - PLOT_LEFT < 12 and seconds):  # labels would overlap
            continue
        last = x
        yield (f'<line class="tl-tick" x1="{coordinate(x)}" y1="{coordinate(y)}" x2="{coordinate(x)}" y2="{coordinate(y + 4)}"/>'
               f'<text class="tl-time{" tl-first" if x - PLOT_LEFT < 12 else ""}" x="{coordinate(x)}" y="{coordinate(y + 15)}">{esc(_tick_label(seconds, step))}</text>\n')
    yield f'<text class="tl-unit" x="{LABEL_WIDTH - 4}" y="{coordinate(y + 15)}">time (s)</text>\n'


def _tick_label(seconds: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    return f"{seconds:.{decimals}f}" if seconds == round(seconds, decimals) else f"{seconds:.3f}".rstrip("0").rstrip(".")


def _timeline_legend(timeline: Timeline) -> str:
    shown = {s.outcome for s in timeline.drawn_spans()}
    items = [f'<span class="swatch {outcome_class(o)}"></span>{esc(STATUS_LABELS[o])}' for o in STATUS_LABELS if o in shown]
    if UNDER_WAY in shown:
        items.append(f'<span class="swatch {outcome_class(UNDER_WAY)}"></span>compiling (under way, drawn to the last record)')
    if timeline.buckets is None:  # no more than MAX_BARS drawn
        drawn = list(timeline.drawn_spans())
        if any(s.recompile for s in drawn):
            items.append('<span class="swatch tl-ok tl-recompile"></span>recompile (outlined)')
        if any(s.cause == "retry" for s in drawn):
            items.append('<span class="swatch tl-ok tl-retry"></span>retry (dashed outline)')
        if any(s.cache_hit for s in drawn):
            items.append('<span class="swatch tl-ok tl-hit"></span>cache hit (lighter)')
        keys = dict.fromkeys(p.key for s in drawn for p in s.phases if p.seconds)
        names = {p.key: p.name for s in drawn for p in s.phases}
        if keys:
            items.append("· phases, under wide bars:")
            items.extend(f'<span class="swatch phase-{esc(k)}"></span>{esc(names[k])}' for k in keys)
    return f'<figcaption class="legend-line">{" ".join(items)}</figcaption>\n'


def _timeline_table(timeline: Timeline) -> str:
    if timeline.buckets is not None:
        rows = "".join(
            f"<tr><td>{esc(lane_name(b.process, len(timeline.processes)))}</td><td class=\"num\">{_at(b.start_s)}</td>"
            f"<td class=\"num\">{_at(b.end_s)}</td><td class=\"num\">{b.count:,}</td><td>"
            + esc(", ".join(f"{n:,} {STATUS_LABELS[o]}" for o in STATUS_SEVERITY if (n := b.outcomes.get(o, 0))))
            + "</td></tr>\n" for b in timeline.buckets)
        head = "<tr><th>Process</th><th>From (s)</th><th>To (s)</th><th>Compiles</th><th>Outcomes</th></tr>"
        what = f"The {len(timeline.buckets):,} buckets as a table"
    else:
        rows = "".join(_span_row(s, len(timeline.processes)) for s in timeline.drawn_spans())
        head = "<tr><th>Compile</th><th>Process</th><th>Start (s)</th><th>End (s)</th><th>Outcome</th><th>Phases</th></tr>"
        what = "The timeline as a table"
    unknown = f' <span class="muted">({timeline.unknown:,} with no known time left out)</span>' if timeline.unknown else ""
    return (f'<details class="section picture-table"><summary>{what}{unknown}</summary>\n<div class="scroll"><table class="compact">'
            f"<thead>{head}</thead><tbody>\n{rows}</tbody></table></div></details>\n")


@functools.lru_cache(maxsize=MAX_BARS)
def _span_row(span: CompileSpan, lanes: int) -> str:
    assert span.start_s is not None and span.end_s is not None
    label = f'<a href="{esc(span.url)}">{esc(span.label)}</a>' if span.url else esc(span.label)
    phases = ", ".join(f"{p.name} {_s(p.seconds)}" if p.seconds is not None else f"{p.name} (unknown)" for p in span.phases)
    return (f"<tr><td>{label}</td><td>{esc(lane_name(span.process, lanes))}</td><td class=\"num\">{_at(span.start_s)}</td>"
            f"<td class=\"num\">{_at(span.end_s)}</td><td>{esc(STATUS_LABELS.get(span.outcome, span.outcome))}</td><td>{esc(phases)}</td></tr>\n")


# -- compile time by frame ---------------------------------------------------------------------------


def frames_figure(timeline: Timeline) -> str:
    """A horizontal bar per frame with the most compile time, stacked by phase (the forward phases,
    the forward time the log does not split, the backward compiles), recompiles marked."""
    frames = timeline.frames
    if not frames:
        return '<p class="muted">No compile logged a compile time.</p>'
    most = max(f.total for f in frames) or 1.0
    height = FRAME_ROW * len(frames) + 4
    shown = f"the {len(frames)} of {timeline.frames_with_time} frames" if timeline.frames_with_time > len(frames) else f"{len(frames)} frame{'s' if len(frames) != 1 else ''}"
    title = f"Compile time by frame: {shown} with the most"
    desc = ("One bar per frame, its compile time over all its compiles stacked by part (Dynamo, AOTAutograd, Inductor, "
            "code generation, forward time the log does not split, backward compile); a frame that recompiled is outlined, "
            "its count of recompiles beside its name. Each links to the frame's first compile. The table below lists the same.")
    out = [f'<figure class="picture frames" id="frames-figure">\n<svg xmlns="http://www.w3.org/2000/svg" class="pic" viewBox="0 0 {WIDTH} {height}" role="group" '
           f'aria-labelledby="frames-title frames-desc">\n<title id="frames-title">{esc(title)}</title>\n<desc id="frames-desc">{esc(desc)}</desc>\n']
    scale = (FRAME_BAR_RIGHT - FRAME_BAR_LEFT) / most
    for place, frame in enumerate(frames):
        out.append(_frame_row(frame, place * FRAME_ROW + 2, scale))
    out.append("</svg>\n")
    keys = dict.fromkeys(k for f in frames for k in f.parts)
    legend = " ".join(f'<span class="swatch phase-{esc(k)}"></span>{esc(PART_NAMES[k])}' for k in keys)
    if any(f.recompiles for f in frames):
        legend += ' <span class="swatch tl-frame-recompiled"></span>recompiled (outlined)'
    out.append(f'<figcaption class="legend-line">{legend}</figcaption>\n')
    out.append(_frames_table(frames, list(keys)))
    out.append("</figure>")
    return "".join(out)


def _frame_label(frame: FrameTime) -> str:
    """`name · frame 3 · ↻2`, its name cut so that the whole label fits left of the bar."""
    after = f" · frame {frame.frame}" + (f" · ↻{frame.recompiles}" if frame.recompiles else "")
    name = frame.name or "(no name logged)"
    room = max(FRAME_LABEL_CHARS - len(after), 12)
    return (name if len(name) <= room else name[: room - 1] + "…") + after


def _frame_row(frame: FrameTime, y: float, scale: float) -> str:
    parts = ", ".join(f"{PART_NAMES[k]} {_s(v)}" for k, v in frame.parts.items())
    again = f", {frame.recompiles} recompile{'s' if frame.recompiles != 1 else ''}" if frame.recompiles else ""
    title = f"Frame {frame.frame} {frame.name}: {frame.compiles} compile{'s' if frame.compiles != 1 else ''}{again}, {_s(frame.total)} ({parts})"
    label = _frame_label(frame)
    out = [f'<title>{esc(title)}</title><text class="tl-name" x="{coordinate(FRAME_LABEL_WIDTH)}" y="{coordinate(y + 15)}">{esc(label)}</text>']
    x = FRAME_BAR_LEFT
    for key, seconds in frame.parts.items():
        width = seconds * scale
        out.append(f'<rect class="phase-{esc(key)}" x="{coordinate(x)}" y="{coordinate(y + 3)}" width="{coordinate(max(width, 0.5))}" height="{FRAME_ROW - 8}"/>')
        x += width
    if frame.recompiles:
        out.append(f'<rect class="tl-frame-recompiled" x="{coordinate(FRAME_BAR_LEFT)}" y="{coordinate(y + 3)}" width="{coordinate(max(x - FRAME_BAR_LEFT, 0.5))}" height="{FRAME_ROW - 8}"/>')
    out.append(f'<text class="tl-value" x="{coordinate(x + 5)}" y="{coordinate(y + 15)}">{esc(_s(frame.total))}</text>')
    body = "".join(out)
    return f'<a href="{esc(frame.url)}">{body}</a>\n' if frame.url else f"<g>{body}</g>\n"


def _frames_table(frames: list[FrameTime], keys: list[str]) -> str:
    head = "".join(f"<th>{esc(PART_NAMES[k])}</th>" for k in keys)
    rows = []
    for f in frames:
        name = f'<a href="{esc(f.url)}">{esc(f.name or "(no name logged)")}</a>' if f.url else esc(f.name or "(no name logged)")
        cells = "".join(f'<td class="num">{esc(_s(f.parts[k])) if k in f.parts else ""}</td>' for k in keys)
        rows.append(f'<tr><td>{name}</td><td>{esc(f.frame)}</td><td class="num">{f.compiles}</td><td class="num">{f.recompiles}</td>'
                    f'{cells}<td class="num">{esc(_s(f.total))}</td></tr>\n')
    return ('<details class="section picture-table"><summary>Compile time by frame as a table</summary>\n<div class="scroll"><table class="compact">'
            f"<thead><tr><th>Frame</th><th>Id</th><th>Compiles</th><th>Recompiles</th>{head}<th>Total</th></tr></thead>"
            f"<tbody>\n{''.join(rows)}</tbody></table></div></details>\n")
