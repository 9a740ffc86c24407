"""The diff page's picture, as inline SVG: compile time by frame, BASE against NEW.

Drawn from the comparison alone (`compared.FrameTimes`, with the graph break rows it points at):
per frame, BASE's bar above NEW's, both to one scale and stacked by part as the index's "compile
time by frame" chart stacks them (its colours: `timeline.PART_NAMES`, report.css); under each bar
a strip of the frame's compiles in that run, coloured by how the time comparison counted each pair
(compared, not compared, one run only: `compared.PairTime.verdict`); beside the bars the graph
breaks new in NEW (▲, on NEW's bar) and gone since BASE (▼, on BASE's) and each run's recompiles
(↻). Only the frames the comparison chose are drawn (`FrameTimes.cap`), which the figure says; each
links to its row of the compile time table. No script, no external resource; each value from a log
escaped. Under it, folded, the table of the same (the compile time table stays the source of truth).
"""

from __future__ import annotations

from collections import Counter

from ... import limits
from ...analysis.compared import COMPARED, NOT_COMPARED, ONE_RUN, Comparison, FrameTime, PairTime, SideTime
from ...analysis.timeline import PART_NAMES
from ...units import format_seconds
from .escaping import esc
from .timeline_svg import WIDTH, coordinate

ROW = 46  # a frame: BASE's bar and strip, NEW's bar and strip
BAR_HEIGHT, STRIP_HEIGHT = 11, 4
NAME_RIGHT = 262.0  # the frame's name and place end here
NAME_CHARS = 40  # a longer name or place is cut in the picture (whole in its <title> and the tables)
RECOMPILES_LEFT, BREAKS_LEFT = 272.0, 300.0  # the marks of each run: its recompiles, its graph breaks new or gone
SIDE_LEFT = 376.0  # "BASE" / "NEW"
BAR_LEFT, BAR_RIGHT = 410.0, 800.0
# the strip of compiles under a bar, in Okabe-Ito colours apart from the parts': green, in the ratio; yellow outlined,
# left apart (a caution, seen on a light and a dark page); grey, one run's work. A graph break new in NEW is orange,
# as the run timeline colours a graph break
VERDICT_CLASS = {COMPARED: "tl-ok", NOT_COMPARED: "tl-skipped tl-recompile", ONE_RUN: "tl-empty"}
VERDICT_WORDS = {COMPARED: "compared (in the ratio)", NOT_COMPARED: "not compared (cache results differ, or a time is unknown)",
                 ONE_RUN: "in one run only (new, gone or no longer compiled)"}


def _s(value: float | None) -> str:
    return format_seconds(value) if value is not None else "unknown"


def diff_frames_figure(comparison: Comparison, prefix: str = "") -> str:
    """The frames of `comparison.frame_times` as paired bars, their legend and, folded, their table;
    ids start with `prefix` (one figure per rank on a multi-rank diff)."""
    chosen = comparison.frame_times
    frames = chosen.frames
    if not frames:
        return '<p class="muted">No frame logged a compile time in either run.</p>'
    most = max(max(f.base.seconds or 0.0, f.new.seconds or 0.0) for f in frames) or 1.0
    scale = (BAR_RIGHT - BAR_LEFT) / most
    height = ROW * len(frames) + 2
    fid = f"{prefix}diff-frames"
    out = [f'<figure class="picture frames" id="{fid}-figure">\n<p class="muted">{esc(_lead(len(frames), chosen.with_time, chosen.cap))}</p>\n'
           f'<svg xmlns="http://www.w3.org/2000/svg" class="pic" viewBox="0 0 {WIDTH} {height}" role="group" aria-labelledby="{fid}-title {fid}-desc">\n'
           f'<title id="{fid}-title">{esc(_title(len(frames), chosen.with_time))}</title>\n<desc id="{fid}-desc">{esc(_desc())}</desc>\n']
    for place, frame in enumerate(frames):
        out.append(_row(frame, comparison, place * ROW + 1, scale, prefix))
    out.append("</svg>\n")
    out.append(_legend(frames))
    out.append(_table(frames, comparison))
    out.append("</figure>\n")
    return "".join(out)


def _lead(drawn: int, with_time: int, cap: int) -> str:
    """The figure's first line: what is drawn, and the cap when it left frames out."""
    if with_time > drawn:
        which = f"The {drawn} frames with the most compile time in either run, of {with_time:,} with a compile time (at most {cap} are drawn)"
    else:
        which = f"Every frame with a compile time ({drawn})"
    return (f"{which}, most first: BASE's bar above NEW's, to one scale. The compile time table below lists every frame; "
            "diff.json holds these as frame_times.")


def _title(drawn: int, with_time: int) -> str:
    shown = f"the {drawn} of {with_time:,} frames" if with_time > drawn else f"{drawn} frame{'s' if drawn != 1 else ''}"
    return f"Compile time by frame, BASE against NEW: {shown} with the most compile time in either run"


def _desc() -> str:
    return ("For each frame, two horizontal bars to one scale: BASE's compile time above, NEW's below, each stacked by part (Dynamo, "
            "AOTAutograd, Inductor, code generation, forward time the log does not split, backward compile). Under each bar, a strip of "
            "the frame's compiles in that run, coloured by how the time comparison counted each pair: compared (in the ratio), not "
            "compared (cache results differ, or a time is unknown), or in one run only. Beside each bar, a triangle up for graph "
            "breaks new in NEW, down for graph breaks gone since BASE, and the run's recompiles of the frame. Each frame links to its "
            "row of the compile time table; the table below the picture lists the same.")


def _frame_name(frame: FrameTime) -> str:
    name = frame.frame or "(unknown frame)"
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"


def _place(frame: FrameTime) -> str:
    """The frame's place, the library it is in, and a frame only one run has, as the picture's second line."""
    words = [frame.where or ""] if frame.where else []
    if frame.inside:
        words.append(f"inside {frame.inside}")
    if frame.presence != "both":
        words.append("only in NEW" if frame.presence == "new" else "only in BASE")
    text = " · ".join(words)
    return text if len(text) <= NAME_CHARS else "…" + text[-(NAME_CHARS - 1):]  # a place's end (file:line) says the most


def _verdict_words(frame: FrameTime) -> str:
    """How the frame's time compares, as NEW's value says it: its ratio, else why there is none."""
    ratio = frame.compile_time_s.ratio
    if ratio is not None:
        return f"×{ratio:.2f}"
    if frame.regression:
        return frame.regression
    if frame.presence == "new":
        return "only in NEW"
    if frame.presence == "gone":
        return "only in BASE"
    compared = sum(1 for p in frame.pairs if p.verdict == COMPARED)
    return f"{compared} of {len(frame.pairs)} compiles compared" if compared else "not compared"


def _row(frame: FrameTime, comparison: Comparison, y: float, scale: float, prefix: str) -> str:
    """A frame's row. Its shapes are the link to its row of the compile time table (keyboard-focusable, titled with
    everything the row says); its words stand beside them, outside the link, so that the page's links' underline
    (report.css) does not strike through the picture."""
    base_y, new_y = y + 3, y + 3 + BAR_HEIGHT + STRIP_HEIGHT + 6
    base_value = _s(frame.base.seconds) if frame.base.seconds is not None else ("not compiled" if frame.presence == "new" else "no time")
    new_value = _s(frame.new.seconds) if frame.new.seconds is not None else ("not compiled" if frame.presence == "gone" else "no time")
    if frame.presence == "both" and frame.new.seconds is not None:
        new_value += f"  ({_verdict_words(frame)})"
    base_shapes, base_words = _side("BASE", frame.base, [p.base for p in frame.pairs], frame.pairs, base_y, scale, base_value)
    new_shapes, new_words = _side("NEW", frame.new, [p.new for p in frame.pairs], frame.pairs, new_y, scale, new_value)
    # recompiles are marked where they changed: a count the same in both runs says nothing of the change
    again = frame.recompiles.base != frame.recompiles.new or frame.new_recompile_reasons > 0
    base_again = frame.recompiles.base if again and frame.presence != "new" else None
    new_again = frame.recompiles.new if again and frame.presence != "gone" else None
    shapes = "".join([f"<title>{esc(_row_title(frame, comparison))}</title>",
                      f'<rect class="tl-lane" x="0" y="{coordinate(y)}" width="{WIDTH}" height="{ROW - 4}"/>', *base_shapes, *new_shapes])
    link = (f'<a href="#{esc(prefix)}time-{frame.index}">{shapes}</a>' if frame.index < limits.INDEX_ROWS  # the table lists the first INDEX_ROWS
            else f"<g>{shapes}</g>")
    words = [f'<text class="tl-name" x="{coordinate(NAME_RIGHT)}" y="{coordinate(y + 17)}">{esc(_frame_name(frame))}</text>',
             f'<text class="tl-unit" x="{coordinate(NAME_RIGHT)}" y="{coordinate(y + 32)}">{esc(_place(frame))}</text>', *base_words, *new_words,
             *_marks(len(frame.gone_graph_breaks), "gone", base_again, base_y), *_marks(len(frame.new_graph_breaks), "new", new_again, new_y)]
    return f"<g>{link}{''.join(words)}</g>\n"


def _side(role: str, side: SideTime, seconds: list[float | None], pairs: list[PairTime], y: float, scale: float,
          value: str) -> tuple[list[str], list[str]]:
    """One run's shapes, its bar (stacked by part) and the strip of its compiles under it (by verdict), and its words."""
    out = []
    x = BAR_LEFT
    for key, part in side.parts.items():
        width = part * scale
        out.append(f'<rect class="phase-{esc(key)}" x="{coordinate(x)}" y="{coordinate(y)}" width="{coordinate(max(width, 0.5))}" height="{BAR_HEIGHT}"/>')
        x += width
    strip = BAR_LEFT
    for pair, compile_s in zip(pairs, seconds):
        if not compile_s:
            continue
        width = compile_s * scale
        out.append(f'<rect class="{VERDICT_CLASS[pair.verdict]}" x="{coordinate(strip)}" y="{coordinate(y + BAR_HEIGHT + 2)}" '
                   f'width="{coordinate(max(width - 1, 0.5))}" height="{STRIP_HEIGHT}"/>')  # a gap of 1 between compiles
        strip += width
    words = [f'<text class="tl-value" x="{coordinate(SIDE_LEFT)}" y="{coordinate(y + BAR_HEIGHT - 1)}">{role}</text>',
             f'<text class="tl-value" x="{coordinate(max(x, strip) + 5)}" y="{coordinate(y + BAR_HEIGHT - 1)}">{esc(value)}</text>']
    return out, words


def _marks(breaks: int, how: str, recompiles: float | int | None, y: float) -> list[str]:
    """A run's marks beside its bar: graph breaks new (▲, NEW's) or gone (▼, BASE's), and its recompiles (↻)."""
    out = []
    middle = y + BAR_HEIGHT / 2
    if breaks:
        x = BREAKS_LEFT
        if how == "new":
            shape, cls = f"M{coordinate(x)} {coordinate(middle + 4)} l4.5 -8 l4.5 8 z", "tl-break"
        else:
            shape, cls = f"M{coordinate(x)} {coordinate(middle - 4)} l4.5 8 l4.5 -8 z", "tl-ok"
        count = f"{'+' if how == 'new' else '−'}{breaks} break{'s' if breaks != 1 else ''}"
        out.append(f'<path class="{cls}" d="{shape}"/><text class="tl-value" x="{coordinate(x + 12)}" y="{coordinate(y + BAR_HEIGHT - 1)}">{count}</text>')
    if recompiles is not None:
        out.append(f'<text class="tl-value" x="{coordinate(RECOMPILES_LEFT)}" y="{coordinate(y + BAR_HEIGHT - 1)}">↻{recompiles}</text>')
    return out


def _row_title(frame: FrameTime, comparison: Comparison) -> str:
    """Everything the row shows, in words (its tooltip, and what a screen reader reads)."""
    place = f" at {frame.where}" if frame.where else ""
    words = [f"{frame.frame or '(unknown frame)'}{place}: BASE {_side_words(frame.base)}; NEW {_side_words(frame.new)}"]
    if frame.compile_time_s.ratio is not None:
        words.append(f"NEW / BASE ×{frame.compile_time_s.ratio:.2f}, every compile compared")
    for verdict in (NOT_COMPARED, ONE_RUN):
        apart = [p for p in frame.pairs if p.verdict == verdict]
        if apart:
            words.append(f"{len(apart)} compile pair{'s' if len(apart) != 1 else ''} {verdict}: {apart[0].why}")
    new, gone = comparison.graph_breaks.new, comparison.graph_breaks.gone
    words += [f"new graph break: {new[i].reason} at {new[i].where or new[i].user_location}" for i in frame.new_graph_breaks]
    words += [f"graph break gone: {gone[i].reason} at {gone[i].where or gone[i].user_location}" for i in frame.gone_graph_breaks]
    if frame.recompiles.base or frame.recompiles.new:
        words.append(f"recompiles {frame.recompiles.base} → {frame.recompiles.new}")
    if frame.new_recompile_reasons:
        words.append(f"{frame.new_recompile_reasons} recompile reason{'s' if frame.new_recompile_reasons != 1 else ''} new in NEW")
    return "; ".join(words)


def _side_words(side: SideTime) -> str:
    if side.seconds is None:
        return "no compile time"
    parts = ", ".join(f"{PART_NAMES.get(k, k)} {_s(v)}" for k, v in side.parts.items())
    return f"{_s(side.seconds)}" + (f" ({parts})" if parts else "")


def _legend(frames: list[FrameTime]) -> str:
    """What the colours and marks mean, a line each: the parts, the strip's verdicts, the marks (those drawn)."""
    drawn = {k for f in frames for side in (f.base, f.new) for k in side.parts}
    keys = [k for k in PART_NAMES if k in drawn]
    lines = ["Bars, by part: " + " ".join(f'<span class="swatch phase-{esc(k)}"></span>{esc(PART_NAMES.get(k, k))}' for k in keys)]
    verdicts = dict.fromkeys(p.verdict for f in frames for p in f.pairs)
    lines.append("Under each bar, one piece per compile, as the time comparison counted it: "
                 + " ".join(f'<span class="swatch {VERDICT_CLASS[v]}"></span>{esc(VERDICT_WORDS[v])}' for v in VERDICT_CLASS if v in verdicts))
    marks = []
    if any(f.new_graph_breaks for f in frames):
        marks.append('<span class="swatch tl-break"></span>▲ +n graph breaks new in NEW')
    if any(f.gone_graph_breaks for f in frames):
        marks.append('<span class="swatch tl-ok"></span>▼ −n graph breaks gone since BASE')
    if any(f.recompiles.base != f.recompiles.new or f.new_recompile_reasons for f in frames):
        marks.append("↻n the run's recompiles of the frame, where they changed")
    if marks:
        lines.append("Marks: " + " · ".join(marks))
    return f'<figcaption class="legend-line">{"<br>".join(lines)}</figcaption>\n'


def _table(frames: list[FrameTime], comparison: Comparison) -> str:
    """The picture's numbers, a row per bar: each frame's BASE row above its NEW row, as drawn."""
    drawn = {k for f in frames for side in (f.base, f.new) for k in side.parts}
    keys = [k for k in PART_NAMES if k in drawn]
    rows = [_table_rows(f, keys, comparison) for f in frames]
    head = "".join(f"<th>{esc(PART_NAMES[k])}</th>" for k in keys)
    return ('<details class="section picture-table"><summary>The picture as a table</summary>\n<div class="scroll"><table class="compact">'
            f"<thead><tr><th>Frame</th><th>Run</th><th>Compile time</th>{head}<th>Δ</th><th>Ratio</th><th>Compiles</th>"
            "<th>Recompiles</th><th>Graph breaks</th></tr></thead>"
            f"<tbody>\n{''.join(rows)}</tbody></table></div></details>\n")


def _table_rows(f: FrameTime, keys: list[str], comparison: Comparison) -> str:
    time = f.compile_time_s
    delta = "" if time.delta is None else ("±0" if time.delta == 0 else f"{'+' if time.delta > 0 else '−'}{_s(abs(time.delta))}")
    counted = Counter(p.verdict for p in f.pairs)
    pairs = ", ".join(f"{counted[v]} {v}" for v in VERDICT_CLASS if counted[v])
    breaks = {"BASE": [f"gone: {comparison.graph_breaks.gone[i].reason}" for i in f.gone_graph_breaks],
              "NEW": [f"new: {comparison.graph_breaks.new[i].reason}" for i in f.new_graph_breaks]}
    recompiles = {"BASE": f.recompiles.base if f.presence != "new" else None, "NEW": f.recompiles.new if f.presence != "gone" else None}
    cells = []
    for role, side in (("BASE", f.base), ("NEW", f.new)):
        parts = "".join(f'<td class="num">{esc(_s(side.parts[k])) if k in side.parts else ""}</td>' for k in keys)
        seconds = _s(side.seconds) if side.seconds is not None else "—"
        cells.append(f'<td>{role}</td><td class="num">{esc(seconds)}</td>{parts}')
        cells[-1] += "" if role == "NEW" else (f'<td class="num" rowspan="2">{esc(delta)}</td>'
                                               f'<td class="num" rowspan="2">{f"×{time.ratio:.2f}" if time.ratio is not None else ""}</td>'
                                               f'<td rowspan="2">{esc(pairs)}</td>')
        cells[-1] += f'<td class="num">{_count(recompiles[role])}</td><td>{"<br>".join(esc(b) for b in breaks[role])}</td>'
    name = f'<td rowspan="2"><code>{esc(f.frame or "(unknown frame)")}</code><br><span class="muted">{esc(_place(f))}</span></td>'
    return f"<tr>{name}{cells[0]}</tr>\n<tr>{cells[1]}</tr>\n"


def _part(side: SideTime, key: str) -> str:
    return _s(side.parts[key]) if key in side.parts else "—"


def _count(value: float | int | None) -> str:
    return "—" if value is None else f"{value:g}"
