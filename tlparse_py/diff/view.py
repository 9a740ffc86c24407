"""The diff page's context and the Markdown summary: pure functions of the diff dict (analysis.comparison.diff).

Every fact is the comparison's: which compiles runs eagerly now, whether compile times can be
compared, the totals combined over ranks. This module only words and shapes them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from .. import limits
from ..analysis.comparison import comparisons
from ..analysis.summary import first_line
from ..analysis.totals import TOTALS, break_line, value_at
from ..report.markdown import code, text
from ..report.views.common import Page
from ..units import format_seconds

TITLE = "torch.compile diff"
# where the diff page details a total (its cards link there)
DETAILS = {"graph_breaks": "graph-breaks", "recompiles": "recompiles", "failed": "failures", "skipped": "no-longer-compiled",
           "compile_time_s": "compile-time", "cache": "cache"}


def _count(value: Any) -> str:
    return "unknown" if value is None else f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _seconds(value: Any) -> str:
    return "unknown" if value is None else format_seconds(value)


def change(values: dict[str, Any], better: str = "lower", seconds: bool = False) -> dict[str, Any]:
    """A before/after pair as shown: texts, the signed delta and whether it got better or worse
    (`better="none"`: neither, e.g. a time that cannot be compared)."""
    show = _seconds if seconds else _count
    delta = values.get("delta")
    if delta is None:
        delta_text, cls = "", ""
    elif delta == 0:
        delta_text, cls = "±0", ""
    else:
        sign = "+" if delta > 0 else "−"
        delta_text = f"{sign}{show(abs(delta))}"
        improved = (delta < 0) if better == "lower" else (delta > 0)
        cls = "" if better == "none" else ("added" if improved else "removed")
    ratio = values.get("ratio")
    return {
        "base": show(values.get("base")),
        "new": show(values.get("new")),
        "delta": delta_text,
        "ratio": f"×{ratio:.2f}" if isinstance(ratio, (int, float)) else "",
        "cls": cls,
        "changed": bool(delta),
    }


def _where(row: dict[str, Any], paired: bool = False) -> dict[str, str]:
    """How a row's frame is named on the page: its name, the library it is in when it is a library frame,
    its user location and, for a frame row (`paired`), how it was found in NEW when it moved or was renamed."""
    frame = row["frame"]
    return {"frame": frame if frame is not None else "(unknown frame)", "inside": row.get("inside") or "",
            "location": row["user_location"] or "", "pairing": pairing_words(row) if paired else ""}


def pairing_words(row: dict[str, Any]) -> str:
    """`moved (line 17 → 18)`, `renamed from head`, ... ("" for the same code at the same line)."""
    moved = row.get("moved")
    how = row.get("pairing")
    if how == "renamed":
        return f"renamed from {row.get('base_frame')}" + (f", line {moved['from']} → {moved['to']}" if moved else "")
    if moved:
        return f"moved (line {moved['from']} → {moved['to']})" + (", its anchoring line edited" if how == "edited" else "")
    return "its anchoring line edited" if how == "edited" else ""


def section_context(comparison: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """What one comparison (one report pair, or one rank) shows; anchors start with `prefix`."""
    totals = comparison["totals"]
    time = comparison["time"]
    # counts that drop because a frame stopped compiling (its cache lookups, its time) are no saving
    lost = bool(comparison["no_longer_compiled"])
    cards = [
        (t.label, t.name, change(value_at(totals, t.name), _better(t.better, t.seconds or (lost and t.name.startswith("cache.")),
                                                                    time["comparable"] and not lost), t.seconds),
         DETAILS.get(t.name.partition(".")[0]))
        for t in TOTALS
    ]
    frames = comparison["frames"]
    # the page lists at most limits.INDEX_ROWS frames a table (diff.json lists them all): a row per
    # compile of 100,000s of frames is a page no browser opens, and its text costs memory per compile
    recompiles, more_recompiles = _first_rows(
        (f for f in frames if f["recompiles"]["base"] or f["recompiles"]["new"] or f["new_recompile_reasons"]),
        lambda f: {**_where(f, paired=True), "recompiles": change(f["recompiles"], "none" if f["regression"] else "lower"),
                   "compiles": change(f["compiles"], "none"), "reasons": f["new_recompile_reasons"], "presence": f["presence"],
                   "regression": f["regression"]})
    times, more_times = _first_rows(iter(frames), lambda f: {
        **_where(f, paired=True), "presence": f["presence"], "regression": f["regression"],
        "time": change(f["compile_time_s"], _better("lower", True, f["compile_time_s"]["ratio"] is not None or f["presence"] != "both"),
                       seconds=True),
        "compiles": change(f["compiles"], "none"),
        "pairs": [{"base": p["base"]["id"] if p["base"] else None, "new": p["new"]["id"] if p["new"] else None,
                   "comparable": p["time_comparable"]} for p in f["pairs"]]})
    cache_frames, more_cache_frames = _first_rows(
        (f for f in frames if any(f["cache"][s]["base"] or f["cache"][s]["new"] for s in ("hit", "miss", "bypass"))),
        lambda f: {**_where(f), **{state: change(f["cache"][state], "higher" if state == "hit" else "lower")
                                                                for state in ("hit", "miss", "bypass")}})
    graph_breaks = comparison["graph_breaks"]
    return {
        "prefix": prefix,
        "cards": [{"label": label, "value": value, "href": f"#{prefix}{anchor}" if anchor else None} for label, _, value, anchor in cards],
        "new_graph_breaks": [_gb(g) for g in graph_breaks["new"]],
        "gone_graph_breaks": [_gb(g) for g in graph_breaks["gone"]],
        "changed_graph_breaks": [_gb(g) for g in graph_breaks["changed"]],
        "moved_graph_breaks": [_gb(g) for g in graph_breaks.get("moved", [])],
        "recompiles": recompiles,
        "more_recompiles": more_recompiles,
        "times": times,
        "more_times": more_times,
        "total_time": change(totals["compile_time_s"], _better("lower", True, time["comparable"]), seconds=True),
        "time": {**change(time, _better("lower", True, time["comparable"]), seconds=True), "comparable": time["comparable"],
                 "why_not": time["why_not"], "compared": time["compared"]},
        "no_longer_compiled": [
            {**_where(f), "base_id": (f["base"] or {}).get("id"), "new_id": (f["new"] or {}).get("id"),
             "outcome": f["outcome"], "headline": first_line(f["reason"] or ""), "reason": f["reason"] or "",
             "lost": _seconds(f["lost_compile_time_s"])}
            for f in comparison["no_longer_compiled"]
        ],
        "cache_totals": [(state, change(totals["cache"][state], "none" if lost else "higher" if state == "hit" else "lower"))
                         for state in ("hit", "miss", "bypass")],
        "cache_frames": cache_frames,
        "more_cache_frames": more_cache_frames,
        "new_failures": [_failure(f) for f in comparison["failures"]["new"]],
        "fixed_failures": [_failure(f) for f in comparison["failures"]["fixed"]],
        "vllm": comparison.get("vllm"),
        "op_counts": [
            {**_where(o), "base_id": o["base"]["id"], "new_id": o["new"]["id"],
             "ops": change(o["graph_op_count"], "none")}
            for o in comparison["graph_op_counts"]
        ],
    }


def _first_rows(frames: Iterator[dict[str, Any]], row: Callable[[dict[str, Any]], dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The rows of the first limits.INDEX_ROWS frames, and how many frames more there are (their rows are never built)."""
    first = [row(f) for f in itertools.islice(frames, limits.INDEX_ROWS)]
    return first, sum(1 for _ in frames)


def _better(better: str, seconds: bool, comparable: bool) -> str:
    """A time that cannot be compared (cache states differ, or a frame runs eagerly now) is never shown as better or worse."""
    return better if not seconds or comparable else "none"


def _gb(g: dict[str, Any]) -> dict[str, Any]:
    return {"reason": g["reason"], "location": g["user_location"], "count": change(g["count"]),
            "frames": [f if f is not None else "(unknown frame)" for f in g["frames"]], "compiles": g["compiles"],
            "registry_id": g.get("registry_id"), "doc_url": g.get("doc_url"), "hints": g.get("hints") or [],
            "source": g.get("user_source"), "moved": g.get("moved"), "torch_break": bool(g.get("torch_break"))}


def _failure(f: dict[str, Any]) -> dict[str, Any]:
    return {**_where(f), "base_id": (f["base"] or {}).get("id"), "new_id": (f["new"] or {}).get("id"),
            "type": f["type"], "reason": f["reason"] or ""}


class DiffPage(Page, kw_only=True):
    """What changed between two runs: one section, or one per rank."""

    template: ClassVar[str] = "diff.html.j2"
    base: dict[str, Any]
    new: dict[str, Any]
    notes: list[str]
    sections: list[dict[str, Any]]
    multi: bool
    metrics: dict[str, Any]
    violations: list[str]
    empty: bool


def diff_page(diff: dict[str, Any], violations: list[str] | None = None) -> DiffPage:
    """The whole diff page: one section, or one per rank."""
    sections = []
    if diff.get("comparison") is not None:
        sections.append({"title": None, "anchor": None, "note": None, **section_context(diff["comparison"])})
    for rank in diff.get("ranks") or []:
        anchor = f"{rank['folder']}"
        body = section_context(rank["comparison"], f"{anchor}-") if rank["comparison"] is not None else None
        sections.append({"title": rank["folder"], "anchor": anchor, "note": rank["note"], "body": body, **(body or {})})
    return DiffPage(
        title=TITLE,
        source={"path": f"{diff['base']['path']} → {diff['new']['path']}"},
        failures_link=False,
        base=diff["base"],
        new=diff["new"],
        notes=diff.get("notes") or [],
        sections=sections,
        multi=bool(diff.get("ranks")),
        metrics=diff.get("metrics") or {},
        violations=violations or [],
        empty=is_empty(diff),
    )


def is_empty(diff: dict[str, Any]) -> bool:
    """Nothing to report: no graph break, recompile, failure, op count or cache change (times always move)."""
    for c in comparisons(diff):
        t = c["totals"]
        if c["graph_breaks"]["new"] or c["graph_breaks"]["gone"] or c["graph_breaks"]["changed"] or c["graph_breaks"].get("moved"):
            return False
        if c["failures"]["new"] or c["failures"]["fixed"] or c["graph_op_counts"] or c["no_longer_compiled"]:
            return False
        vllm = c.get("vllm")
        if vllm and (vllm["new_pieces"] or vllm["gone_pieces"] or vllm["passes"]):
            return False
        if any(value_at(t, total.name)["delta"] for total in TOTALS if not total.seconds):
            return False
        if any(f["new_recompile_reasons"] or f["presence"] != "both" for f in c["frames"]):
            return False
    return not any(r["comparison"] is None for r in diff.get("ranks") or [])


# ------------------------------------------------------------------------------------------------
# Markdown (for a pull-request comment or a CI job summary)


LONG = 400  # characters of one line of log text in the diff's Markdown


def markdown(diff: dict[str, Any], page: str, violations: list[str] | None = None, limit: int = 5) -> str:
    """A compact GitHub-flavoured summary; `page` is the diff page's path relative to the Markdown file."""
    lines = [f"### torch.compile diff: {code(diff['base']['path'], LONG)} → {code(diff['new']['path'], LONG)}", ""]
    for note in diff.get("notes") or []:
        lines += [f"> ⚠️ {text(note, LONG)}", ""]
    if violations:
        lines.append("**Gate failed** (`--fail-on`):")
        for v in violations:
            condition, _, rest = v.partition(": ")
            lines.append(f"- ❌ {code(condition)}" + (f": {text(rest, LONG)}" if rest else ""))
        lines.append("")
    parts = comparisons(diff)
    if parts:
        lines += ["| | base | new | Δ |", "|---|---:|---:|---:|"]
        for total in TOTALS:
            lines.append(_md_row(total.label, value_at(diff["totals"], total.name), total.seconds))
        lines.append("")
    eager = [f for c in parts for f in c["no_longer_compiled"]]
    if eager:
        lines.append(f"**No longer compiled: runs eagerly ({len(eager)})** — [details]({page}{'#no-longer-compiled' if diff.get('comparison') is not None else ''})")
        lines += [f"- {code(f['frame'])}{_inside(f)} {text(f['user_location'] or '')}: {text(f['outcome'])}"
                  + (f": {text(first_line(f['reason']), LONG)}" if f["reason"] else "") for f in eager[:limit]]
        if len(eager) > limit:
            lines.append(f"- … and {len(eager) - limit} more")
        lines.append("")
    single = diff.get("comparison") is not None  # rank sections have their own anchors: link the page
    gbs = [g for c in parts for g in c["graph_breaks"]["new"]]
    if gbs:
        torchs = sum(1 for g in gbs if g.get("torch_break"))
        count = f"{len(gbs) - torchs}" + (f", and {torchs} of torch's own" if torchs else "")
        lines.append(f"**New graph breaks ({count})** — [details]({page}{'#graph-breaks' if single else ''})")
        lines += [f"- {text(break_line(g), LONG)}" for g in gbs[:limit]]
        if len(gbs) > limit:
            lines.append(f"- … and {len(gbs) - limit} more")
        lines.append("")
    failures = [f for c in parts for f in c["failures"]["new"]]
    if failures:
        lines.append(f"**New failures ({len(failures)})** — [details]({page}{'#failures' if single else ''})")
        lines += [f"- {code(f['frame'])} {text((f['new'] or {}).get('id') or '')}: {text(f['type'])}" for f in failures[:limit]]
        if len(failures) > limit:
            lines.append(f"- … and {len(failures) - limit} more")
        lines.append("")
    for c in parts:
        lines += _vllm_lines(c.get("vllm"), page, limit)
    if diff.get("ranks"):
        lines.append(f"{len(diff['ranks'])} ranks compared: [per-rank sections]({page})")
        lines.append("")
    if is_empty(diff) and not violations:
        lines.append("No graph break, recompile, failure or cache change.")
        lines.append("")
    lines.append(f"[Full diff]({page})")
    return "\n".join(lines) + "\n"


def _vllm_lines(vllm: dict[str, Any] | None, page: str, limit: int) -> list[str]:
    """vLLM's pieces only one run compiled, and passes whose effect changed."""
    if not vllm or not (vllm["new_pieces"] or vllm["gone_pieces"] or vllm["passes"]):
        return []
    lines = [f"**vLLM pieces** — [details]({page}#vllm)"]
    lines += [f"- {code(p['submod'])} for {text(p['group'])} ({text(p['call'])}) is new" for p in vllm["new_pieces"][:limit]]
    lines += [f"- {code(p['submod'])} for {text(p['group'])} ({text(p['call'])}) is gone" for p in vllm["gone_pieces"][:limit]]
    lines += [f"- pass {code(p['pass'])} ({text(p['call'])}): {text(p['base'] or 'not run')} → {text(p['new'] or 'not run')}"
              for p in vllm["passes"][:limit]]
    return lines + [""]


def _inside(row: dict[str, Any]) -> str:
    """` (inside the standard library)` after a library frame's name in Markdown; "" for any other frame."""
    return f" (inside {text(row['inside'])})" if row.get("inside") else ""


def _md_row(label: str, values: dict[str, Any], seconds: bool) -> str:
    """One total before and after, as each side's own summary shows it (over ranks: combined)."""
    shown = change(values, seconds=seconds)
    delta = shown["delta"] + (f" ({shown['ratio']})" if shown["ratio"] and shown["changed"] else "")
    if seconds and values.get("ratio") is None and shown["changed"]:
        delta += " (not comparable)"
    return f"| {label} | {text(values['base_shown'])} | {text(values['new_shown'])} | {delta} |"
