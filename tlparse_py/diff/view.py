"""The diff page's context and the Markdown summary: pure functions of the typed diff (analysis.comparison.diff).

Every fact is the comparison's: which compiles run eagerly now, which compile times can be
compared and the one ratio over them, the totals combined over ranks, each gate's value and
failure (`totals.DIFF_GATES`, `totals.GateFailure`). This module only words and shapes them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, NamedTuple

import msgspec
from markupsafe import Markup

from .. import limits
from ..analysis.compared import BreakRow, Change, CompileRef, CompileTimes, Comparison, Diff, EagerRow, FailureRow, FrameRow, OpCountRow, Shown, Timed, VllmChange
from ..analysis.summary import first_line
from ..analysis.totals import DIFF_GATES, GATES_BY_NAME, TOTALS, GateFailure, GateUnchecked, break_line
from ..report.html.diff_svg import diff_frames_figure
from ..report.markdown import code, text
from ..report.views.common import Page
from ..units import format_seconds

TITLE = "torch.compile diff"
# where the diff page details a total (its cards link there)
DETAILS = {"graph_breaks": "graph-breaks", "recompiles": "recompiles", "failed": "failures", "skipped": "no-longer-compiled",
           "compile_time_s": "compile-time", "cache": "cache"}
RATIO = GATES_BY_NAME["compile_time_ratio"]  # the one ratio of a comparison: its label and how it is shown


def _count(value: Any) -> str:
    return "unknown" if value is None else f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _seconds(value: Any) -> str:
    return "unknown" if value is None else format_seconds(value)


def change(values: Change | Timed | Shown | CompileTimes, better: str = "lower", seconds: bool = False) -> dict[str, Any]:
    """A before/after pair as shown: texts, the signed delta and whether it got better or worse
    (`better="none"`: neither, e.g. a time that cannot be compared)."""
    show = _seconds if seconds else _count
    delta = values.delta
    if delta is None:
        delta_text, cls = "", ""
    elif delta == 0:
        delta_text, cls = "±0", ""
    else:
        sign = "+" if delta > 0 else "−"
        delta_text = f"{sign}{show(abs(delta))}"
        improved = (delta < 0) if better == "lower" else (delta > 0)
        cls = "" if better == "none" else ("added" if improved else "removed")
    ratio = values.ratio if isinstance(values, (Timed, CompileTimes)) else None
    return {
        "base": show(values.base),
        "new": show(values.new),
        "delta": delta_text,
        "ratio": RATIO.show(ratio) if ratio is not None else "",
        "cls": cls,
        "changed": bool(delta),
    }


def gate_words(diff: Diff, reasons: bool = True) -> list[str]:
    """Every gate as the `Diff:` line, the page and the Markdown say it: `compile time ratio ×1.01`,
    `compile time ratio not checked (why)` (their declarations: `totals.DIFF_GATES`); without the why
    where it is said apart (`reasons=False`: the Markdown lists each under its gates line)."""
    return [f"{gate.label} {gate.show(diff.metrics.get(gate.name))}" if diff.metrics.get(gate.name) is not None
            else f"{gate.label} not checked" + (f" ({diff.unchecked.get(gate.name, 'unknown')})" if reasons else "") for gate in DIFF_GATES]


def _where(row: FrameRow | EagerRow | FailureRow | OpCountRow, paired: bool = False) -> dict[str, str]:
    """How a row's frame is named on the page: its name, the library it is in when it is a library frame,
    its user location and, for a frame row (`paired`), how it was found in NEW when it moved or was renamed."""
    frame = row.frame
    return {"frame": frame if frame is not None else "(unknown frame)", "inside": row.inside or "",
            "location": _location(row), "pairing": pairing_words(row) if paired and isinstance(row, FrameRow) else ""}


def _location(row: FrameRow | EagerRow | FailureRow | OpCountRow | BreakRow) -> str:
    """A row's user code line as every view of the diff names it: relative to its run's root (`where`)."""
    return row.where or row.user_location or ""


def pairing_words(row: FrameRow) -> str:
    """`moved (line 17 → 18)`, `renamed from head`, ... ("" for the same code at the same line)."""
    moved = row.moved
    how = row.pairing
    if how == "renamed":
        return f"renamed from {row.base_frame}" + (f", line {moved.from_} → {moved.to}" if moved else "")
    if moved:
        return f"moved (line {moved.from_} → {moved.to})" + (", its anchoring line edited" if how == "edited" else "")
    return "its anchoring line edited" if how == "edited" else ""


def _ratio_card(time: CompileTimes, prefix: str) -> dict[str, Any]:
    """The comparison's one ratio, with the gate's label and words."""
    shown = RATIO.show(time.ratio) if time.comparable else "not checked"
    return {"label": RATIO.label, "text": shown, "href": f"#{prefix}compile-time", "value": None}


def section_context(comparison: Comparison, prefix: str = "") -> dict[str, Any]:
    """What one comparison (one report pair, or one rank) shows; anchors start with `prefix`."""
    time = comparison.time
    # counts that drop because a frame stopped compiling (its cache lookups) are no saving; raw times are
    # never a verdict: the verdict on time is the ratio over the comparable pairs
    lost = bool(comparison.no_longer_compiled)
    cards = [
        {"label": t.label, "value": change(comparison.total(t.name), "none" if t.seconds or (lost and t.name.startswith("cache.")) else t.better,
                                           t.seconds),
         "href": f"#{prefix}{anchor}" if (anchor := DETAILS.get(t.name.partition(".")[0])) else None, "text": None}
        for t in TOTALS
    ]
    cards.append(_ratio_card(time, prefix))
    frames = comparison.frames
    # the page lists at most limits.INDEX_ROWS frames a table (diff.json lists them all): a row per
    # compile of 100,000s of frames is a page no browser opens, and its text costs memory per compile
    recompiles, more_recompiles = _first_rows(
        (f for f in frames if f.recompiles.base or f.recompiles.new or f.new_recompile_reasons),
        lambda f: {**_where(f, paired=True), "recompiles": change(f.recompiles, "none" if f.regression else "lower"),
                   "compiles": change(f.compiles, "none"), "reasons": f.new_recompile_reasons, "presence": f.presence,
                   "regression": f.regression})
    times, more_times = _first_rows(iter(frames), lambda f: {
        **_where(f, paired=True), "presence": f.presence, "regression": f.regression,
        "time": change(f.compile_time_s, "lower" if f.compile_time_s.ratio is not None else "none", seconds=True),
        "compiles": change(f.compiles, "none"),
        "pairs": [{"base": p.base.id if p.base else None, "new": p.new.id if p.new else None,
                   "comparable": p.time_comparable, "apart": p.time_apart or ""} for p in f.pairs]})
    cache_frames, more_cache_frames = _first_rows(
        (f for f in frames if any(f.cache[s].base or f.cache[s].new for s in ("hit", "miss", "bypass"))),
        lambda f: {**_where(f), **{state: change(f.cache[state], "higher" if state == "hit" else "lower")
                                   for state in ("hit", "miss", "bypass")}})
    graph_breaks = comparison.graph_breaks
    return {
        "prefix": prefix,
        "cards": cards,
        # the picture of the frames with the most compile time (`comparison.frame_times`), drawn once here
        "picture": Markup(diff_frames_figure(comparison, prefix)),
        "new_graph_breaks": [_gb(g) for g in graph_breaks.new],
        "gone_graph_breaks": [_gb(g) for g in graph_breaks.gone],
        "changed_graph_breaks": [_gb(g) for g in graph_breaks.changed],
        "moved_graph_breaks": [_gb(g) for g in graph_breaks.moved],
        "recompiles": recompiles,
        "more_recompiles": more_recompiles,
        "times": times,
        "more_times": more_times,
        "total_time": change(comparison.total("compile_time_s"), "none", seconds=True),
        "time": {**change(time, "lower" if time.comparable else "none", seconds=True), "comparable": time.comparable,
                 "why_not": time.why_not, "compared": time.compared, "paired": time.paired, "label": RATIO.label,
                 "title": RATIO.label[:1].upper() + RATIO.label[1:],
                 "apart": [{"base": a.base, "new": a.new, "why": a.why} for a in time.apart], "apart_count": time.apart_count,
                 "base_only": _work(time.base_only.compiles, time.base_only.known_seconds),
                 "new_only": _work(time.new_only.compiles, time.new_only.known_seconds)},
        "no_longer_compiled": [
            {**_where(f), "base_id": f.base.id if f.base else None, "new_id": f.new.id if f.new else None,
             "outcome": f.outcome, "headline": first_line(f.reason or ""), "reason": f.reason or "",
             "lost": _seconds(f.lost_compile_time_s)}
            for f in comparison.no_longer_compiled
        ],
        "cache_totals": [(state, change(comparison.total(f"cache.{state}"), "none" if lost else "higher" if state == "hit" else "lower"))
                         for state in ("hit", "miss", "bypass")],
        "cache_frames": cache_frames,
        "more_cache_frames": more_cache_frames,
        "new_failures": [_failure(f) for f in comparison.failures.new],
        "fixed_failures": [_failure(f) for f in comparison.failures.fixed],
        "vllm": _vllm(comparison.vllm),
        "op_counts": [
            {**_where(o), "base_id": o.base.id if o.base else None, "new_id": o.new.id if o.new else None,
             "ops": change(o.graph_op_count, "none")}
            for o in comparison.graph_op_counts
        ],
    }


def _work(compiles: int, seconds: float | None) -> dict[str, Any]:
    return {"compiles": compiles, "seconds": _seconds(seconds)}


def _vllm(vllm: VllmChange | None) -> dict[str, Any] | None:
    """vLLM's pieces and passes as the template reads them (its JSON: a pass's name is `pass`)."""
    return msgspec.to_builtins(vllm) if vllm is not None else None


def _first_rows(frames: Iterator[FrameRow], row: Callable[[FrameRow], dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The rows of the first limits.INDEX_ROWS frames, and how many frames more there are (their rows are never built)."""
    first = [row(f) for f in itertools.islice(frames, limits.INDEX_ROWS)]
    return first, sum(1 for _ in frames)


def _gb(g: BreakRow) -> dict[str, Any]:
    return {"reason": g.reason, "location": _location(g), "count": change(g.count),
            "frames": [f if f is not None else "(unknown frame)" for f in g.frames], "compiles": g.compiles,
            "registry_id": g.registry_id, "doc_url": g.doc_url, "hints": g.hints,
            "source": g.user_source, "moved": {"from": g.moved.from_, "to": g.moved.to} if g.moved else None, "torch_break": g.torch_break}


def _failure(f: FailureRow) -> dict[str, Any]:
    return {**_where(f), "base_id": f.base.id if f.base else None, "new_id": f.new.id if f.new else None,
            "type": f.type, "reason": f.reason or "", "failed_at": f.failed_where or f.failed_at or ""}


def _violation(v: GateFailure) -> dict[str, Any]:
    return {"condition": v.condition, "gate": v.gate, "value": v.shown, "details": v.details}


class SideExit(NamedTuple):
    said: str  # `NEW: the program was killed by SIGKILL`
    failed: bool
    command: str  # "" when unknown


def program_words(diff: Diff) -> list[SideExit]:
    """How each side's program ended, when either side's summary says it (under `tlparse-py run`): a
    program that crashed must never read like a slow one. Nothing when neither says (both read from
    logs, or written without `run`); "unknown" for the side that does not."""
    sides = (("BASE", diff.base.program), ("NEW", diff.new.program))
    if all(program is None for _, program in sides):
        return []
    return [SideExit(f"{role}: the program {program.outcome}", program.failed, program.command) if program is not None
            else SideExit(f"{role}: how the program ended is unknown", False, "") for role, program in sides]


class DiffPage(Page, kw_only=True):
    """What changed between two runs: one section, or one per rank."""

    template: ClassVar[str] = "diff.html.j2"
    base: dict[str, Any]
    new: dict[str, Any]
    notes: list[str]
    sections: list[dict[str, Any]]
    multi: bool
    gates: list[str]
    violations: list[dict[str, Any]]
    empty: bool
    programs: list[SideExit]  # each side's program exit (`program_words`)
    unchecked: list[dict[str, str]]  # the `--fail-on` conditions not checked, and why


def diff_page(diff: Diff, violations: list[GateFailure] | None = None, unchecked: list[GateUnchecked] | None = None) -> DiffPage:
    """The whole diff page: one section, or one per rank."""
    sections = []
    if diff.comparison is not None:
        sections.append({"title": None, "anchor": None, "note": None, **section_context(diff.comparison)})
    for rank in diff.ranks:
        anchor = f"{rank.folder}"
        body = section_context(rank.comparison, f"{anchor}-") if rank.comparison is not None else None
        sections.append({"title": rank.folder, "anchor": anchor, "note": rank.note, "body": body, **(body or {})})
    return DiffPage(
        title=TITLE,
        source={"path": f"{diff.base.path} → {diff.new.path}"},
        failures_link=False,
        base=msgspec.to_builtins(diff.base),
        new=msgspec.to_builtins(diff.new),
        notes=diff.notes,
        sections=sections,
        multi=bool(diff.ranks),
        gates=gate_words(diff),
        violations=[_violation(v) for v in violations or []],
        empty=diff.nothing_changed,
        programs=program_words(diff),
        unchecked=[{"condition": u.condition, "why": u.why} for u in unchecked or []],
    )


# ------------------------------------------------------------------------------------------------
# Markdown (for a pull-request comment or a CI job summary)


LONG = 400  # characters of one line of log text in the diff's Markdown


def markdown(diff: Diff, page: str, violations: list[GateFailure] | None = None, limit: int = 5,
             unchecked: list[GateUnchecked] | None = None) -> str:
    """A compact GitHub-flavoured summary; `page` is the diff page's path relative to the Markdown file.
    It tells what happened, first what a reader must know: how each program ended, the gates that
    failed, the totals, every gate not checked and why, then what changed (at most `limit` lines a list)."""
    lines = [f"### torch.compile diff: {code(diff.base.path, LONG)} → {code(diff.new.path, LONG)}", ""]
    programs = program_words(diff)
    if programs:
        lines += [" · ".join(f"**{text(p.said)}**" if p.failed else text(p.said) for p in programs), ""]
    for note in diff.notes:
        lines += [f"> ⚠️ {text(note, LONG)}", ""]
    if violations:
        lines.append("**Gate failed** (`--fail-on`):")
        for v in violations:
            details = f" ({v.details})" if v.details else ""
            lines.append(f"- ❌ {code(v.condition)}: {text(f'{v.gate} = {v.shown}{details}', LONG)}")
        lines.append("")
    single = diff.comparison is not None  # rank sections have their own anchors: link the page

    def anchor(name: str) -> str:
        return f"{page}#{name}" if single else page

    if diff.sections():
        lines += ["| | base | new | Δ |", "|---|---:|---:|---:|"]
        for total in TOTALS:
            lines.append(_md_row(total.label, diff.total(total.name), total.seconds))
        lines.append("")
        lines += [f"**Gates:** {text(' · '.join(gate_words(diff, reasons=False)), LONG * 2)} — [compile time]({anchor('compile-time')})"]
        lines += _not_checked(diff, unchecked or []) + [""]
    lines += _changes(diff, anchor, limit)
    for c in diff.comparisons():
        lines += _vllm_lines(c.vllm, page, limit)
    if diff.ranks:
        lines.append(f"{len(diff.ranks)} ranks compared: [per-rank sections]({page})")
        lines.append("")
    if diff.nothing_changed and not violations:
        lines.append("No graph break, recompile, failure or cache change.")
        lines.append("")
    lines.append(f"[Full diff]({page})")
    return "\n".join(lines) + "\n"


def _changes(diff: Diff, anchor: Callable[[str], str], limit: int) -> list[str]:
    """What changed, a list each: frames no longer compiled, new and gone graph breaks, new and fixed
    failures; over ranks each line starts with its rank's folder."""
    sections = diff.sections()

    def each(rows_of: Callable[[Comparison], list[Any]], line: Callable[[Any], str]) -> list[str]:
        return [f"{text(folder)}: {line(row)}" if folder else line(row) for folder, c in sections for row in rows_of(c)]

    eager = each(lambda c: c.no_longer_compiled, _eager_line)
    lines = _listed(f"No longer compiled: runs eagerly ({len(eager)})", anchor("no-longer-compiled"), eager, limit)
    new = each(lambda c: c.graph_breaks.new, lambda g: text(break_line(g), LONG))
    torchs = sum(1 for _, c in sections for g in c.graph_breaks.new if g.torch_break)
    count = f"{len(new) - torchs}" + (f", and {torchs} of torch's own" if torchs else "")
    lines += _listed(f"New graph breaks ({count})", anchor("graph-breaks"), new, limit)
    gone = each(lambda c: c.graph_breaks.gone, _gone_line)
    lines += _listed(f"Gone graph breaks ({len(gone)})", anchor("graph-breaks"), gone, limit)
    failed = each(lambda c: c.failures.new, lambda f: _failure_line(f, f.new))
    lines += _listed(f"New failures ({len(failed)})", anchor("failures"), failed, limit)
    fixed = each(lambda c: c.failures.fixed, lambda f: _failure_line(f, f.base))
    return lines + _listed(f"Fixed failures ({len(fixed)})", anchor("failures"), fixed, limit)


def _not_checked(diff: Diff, unchecked: list[GateUnchecked]) -> list[str]:
    """Every gate whose value is unknown, with why and the `--fail-on` conditions on it that were not
    checked (which pass without a verdict: CI must see that they were not checked)."""
    lines = []
    for gate in DIFF_GATES:
        if diff.metrics.get(gate.name) is not None:
            continue
        conditions = [u.condition for u in unchecked if u.gate == gate.name]
        on = f" ({', '.join(code(c) for c in conditions)} not checked)" if conditions else ""
        lines.append(f"- ⚠️ {text(gate.label)} not checked{on}: {text(diff.unchecked.get(gate.name, 'unknown'), LONG)}")
    return lines


def _listed(title: str, href: str, items: list[str], limit: int) -> list[str]:
    """`**Title (n)** — [details](href)` and its first `limit` items; nothing for no item."""
    if not items:
        return []
    more = [f"- … and {len(items) - limit} more"] if len(items) > limit else []
    return [f"**{title}** — [details]({href})", *[f"- {item}" for item in items[:limit]], *more, ""]


def _eager_line(f: EagerRow) -> str:
    """A compile of BASE that NEW runs eagerly: its frame, compile id (NEW's, else BASE's) and user code line, how and why."""
    compile_ = f.new.id if f.new is not None else f"{f.base.id} of BASE" if f.base is not None else ""
    where = f" at {text(_location(f))}" if _location(f) else ""
    reason = f": {text(first_line(f.reason), LONG)}" if f.reason else ""
    return f"{code(f.frame)}{_inside(f.inside)} {text(compile_)}{where}: {text(f.outcome)}{reason}"


def _gone_line(g: BreakRow) -> str:
    """A graph break BASE had and NEW has not (the change's win): its kind, reason and place, how often BASE logged it."""
    kind = f"{g.registry_id}: " if g.registry_id else ""
    owner = " (torch's own)" if g.torch_break else ""
    times = f" ({g.count.base}× in BASE)" if g.count.base and g.count.base > 1 else ""
    return text(f"{kind}{g.reason} at {_location(g)}{owner}{times}", LONG)


def _failure_line(f: FailureRow, compile_: CompileRef | None) -> str:
    """A failed compile: its frame, id and user code line, the exception (type and message), and the line torch says it failed at."""
    where = f" at {text(_location(f))}" if _location(f) else ""
    message = f": {text(f.message, LONG)}" if f.message else ""
    failed_at = f.failed_where or f.failed_at
    at = f" (failed at {text(failed_at)})" if failed_at and failed_at != _location(f) else ""
    return f"{code(f.frame)}{_inside(f.inside)} {text(compile_.id if compile_ else '')}{where}: {code(f.type)}{message}{at}"


def _vllm_lines(vllm: VllmChange | None, page: str, limit: int) -> list[str]:
    """vLLM's pieces only one run compiled, and passes whose effect changed."""
    if vllm is None or not vllm.changed:
        return []
    lines = [f"**vLLM pieces** — [details]({page}#vllm)"]
    lines += [f"- {code(p.submod)} for {text(p.group)} ({text(p.call)}) is new" for p in vllm.new_pieces[:limit]]
    lines += [f"- {code(p.submod)} for {text(p.group)} ({text(p.call)}) is gone" for p in vllm.gone_pieces[:limit]]
    lines += [f"- pass {code(p.pass_)} ({text(p.call)}): {text(p.base or 'not run')} → {text(p.new or 'not run')}"
              for p in vllm.passes[:limit]]
    return lines + [""]


def _inside(inside: str) -> str:
    """` (inside the standard library)` after a library frame's name in Markdown; "" for any other frame."""
    return f" (inside {text(inside)})" if inside else ""


def _md_row(label: str, values: Shown, seconds: bool) -> str:
    """One total before and after, as each side's own summary shows it (over ranks: combined); times
    are times, never a ratio (the diff's one ratio is on the gates line)."""
    return f"| {label} | {text(values.base_shown)} | {text(values.new_shown)} | {change(values, seconds=seconds)['delta']} |"
