"""A compact GitHub-flavoured Markdown summary of a report, for a CI job's summary or a PR comment.

`summary_markdown(summary)` builds it from what `summary.json` holds (a pure function of that dict):
the run, the totals, the top graph breaks, recompiles per frame, the slowest compiles and any
`--fail-on` gate failures, in about 40 lines whatever the log. Links point into the report:
`link_prefix` is the report folder as seen from where the Markdown lives (`""` for the report's own
`summary.md`, e.g. `"../tl_out/"` for `--markdown`). A multi-rank landing summary (with `ranks`)
gets the totals summed over ranks and a row per rank.

Text from the log (reasons, frame names, file names) is escaped, so it cannot make links, tables
or HTML of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any
from urllib.parse import quote

from .render import format_seconds

ROWS = 5  # rows per section: the whole summary fits in about 40 lines
IDS_PER_ROW = 4  # compile ids named per row before "+N more"
TEXT_CHARS = 90

_SPECIAL = re.compile(r"([\\`*_{}\[\]<>#|~&])")


def text(value: Any, limit: int = TEXT_CHARS) -> str:
    """One line of plain text, escaped for Markdown (tables included) and cut to `limit` characters."""
    line = " ".join(str(value if value is not None else "").split())
    if len(line) > limit:
        line = line[: limit - 1].rstrip() + "…"
    return _SPECIAL.sub(r"\\\1", line)


def link(label: str, url: str, prefix: str = "") -> str:
    return f"[{text(label)}]({quote(prefix + url, safe='/#')})"


def time_span(first: str | None, last: str | None) -> str:
    """`2026-12-02 13:34:31 → 13:36:10 (1 min 39 s)` from two record timestamps; "" when unknown."""
    if not first or not last:
        return ""
    start, end = _instant(first), _instant(last)
    if start is None or end is None:
        return f"{first} → {last}"
    shown_end = end.strftime("%H:%M:%S") if end.date() == start.date() else end.strftime("%Y-%m-%d %H:%M:%S")
    return f"{start.strftime('%Y-%m-%d %H:%M:%S')} → {shown_end} ({duration((end - start).total_seconds())})"


def duration(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _instant(stamp: str) -> datetime | None:
    try:
        return datetime.fromisoformat(stamp)
    except ValueError:
        return None


def summary_markdown(summary: dict[str, Any], link_prefix: str = "", gate_failures: Iterable[str] = ()) -> str:
    """The Markdown summary of a report (or of a multi-rank landing) from its summary.json dict."""
    prefix = link_prefix if not link_prefix or link_prefix.endswith("/") else link_prefix + "/"
    if "ranks" in summary:
        lines = _landing(summary, prefix)
    else:
        lines = _report(summary, prefix)
    failures = list(gate_failures)
    if failures:
        lines += ["", f"**Gate failed** ({len(failures)}):"]
        lines += [f"- {text(line, 200)}" for line in failures]
    return "\n".join(lines) + "\n"


# -- one report ------------------------------------------------------------------------------------


def _report(summary: dict[str, Any], prefix: str) -> list[str]:
    totals = summary.get("totals") or {}
    compiles = summary.get("compiles") or []
    lines = [f"### torch.compile report: {text(_log_name(summary))}", "", _context(summary, prefix), ""]
    lines += _totals_table([("", totals)], prefix)
    lines += _graph_breaks(compiles, prefix)
    lines += _recompiles(compiles, prefix)
    lines += _slowest(compiles, prefix)
    return lines


def _log_name(summary: dict[str, Any]) -> str:
    inputs = summary.get("inputs") or []
    path = str(inputs[0].get("path", "")) if inputs else ""
    return re.split(r"[\\/]", path)[-1] or "(no log)"


def _context(summary: dict[str, Any], prefix: str) -> str:
    run = summary.get("run") or {}
    parts = [f"torch {text(run.get('torch_version') or summary.get('torch_version') or 'unknown')}"]
    span = time_span(run.get("first_record"), run.get("last_record"))
    if span:
        parts.append(text(span, 200))
    if run.get("rank") is not None:
        parts.append(f"rank {run['rank']}")
    generator = summary.get("generator") or {}
    parts.append(text(run.get("tool") or f"tlparse-py {generator.get('version', '')}".strip()))
    parts.append(link("full report", "index.html", prefix))
    return " · ".join(parts)


def _totals_table(rows: list[tuple[str, dict[str, Any]]], prefix: str) -> list[str]:
    """A header and one row per (label, totals); label "" for a single report."""
    labelled = any(label for label, _ in rows)
    head = ["compiles", "frames", "graph breaks", "recompiles", "failed", "compile time", "cache hit / miss / bypass"]
    lines = [
        "| " + " | ".join((["rank"] if labelled else []) + head) + " |",
        "|" + "|".join((["---"] if labelled else []) + ["---:"] * 6 + ["---"]) + "|",
    ]
    for label, totals in rows:
        cache = totals.get("cache") or {}
        seconds = totals.get("compile_time_s")
        cells = [
            str(totals.get("compiles", 0)),
            str(totals.get("frames", 0)),
            str(totals.get("graph_breaks", 0)),
            str(totals.get("recompiles", 0)),
            str(totals.get("failed", 0)),
            format_seconds(seconds) if seconds is not None else "unknown",
            f"{cache.get('hit', 0)} / {cache.get('miss', 0)} / {cache.get('bypass', 0)}",
        ]
        lines.append("| " + " | ".join(([label] if labelled else []) + cells) + " |")
    return lines


def _ids(compiles: list[dict[str, Any]], prefix: str) -> str:
    labels = [(c["id"] if not c.get("generation") else f"{c['id']} #{c['generation'] + 1}", c["url"]) for c in compiles[:IDS_PER_ROW]]
    shown = [link(name, url, prefix) if url else text(name) for name, url in labels]  # url None: no page (README, "Limits")
    more = len(compiles) - IDS_PER_ROW
    return " ".join(shown) + (f" +{more} more" if more > 0 else "")


def _more(count: int, anchor: str, prefix: str) -> list[str]:
    return [f"…and {count} more in the {link('report', f'index.html#{anchor}', prefix)}."] if count > 0 else []


def graph_break_groups(compiles: list[dict[str, Any]]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(reason, user location, the compiles that broke there), most frequent first; a break counted
    once per compile (torch may log the same break again in a restart attempt)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for compile_ in compiles:
        seen = set()
        for brk in compile_.get("graph_breaks") or []:
            key = (str(brk.get("reason", "")), str(brk.get("user_location", "")))
            if key not in seen:
                seen.add(key)
                groups.setdefault(key, []).append(compile_)
    return sorted(((r, loc, cs) for (r, loc), cs in groups.items()), key=lambda g: (-len(g[2]), g[0], g[1]))


def _graph_breaks(compiles: list[dict[str, Any]], prefix: str) -> list[str]:
    groups = graph_break_groups(compiles)
    if not groups:
        return []
    lines = ["", f"**{link('Graph breaks', 'index.html#graph-breaks', prefix)}** (top {min(ROWS, len(groups))} of {len(groups)} distinct)", ""]
    lines += ["| count | reason | user code | compiles |", "|---:|---|---|---|"]
    for reason, location, where in groups[:ROWS]:
        lines.append(f"| {len(where)} | {text(reason)} | {text(location, 60)} | {_ids(where, prefix)} |")
    return lines + _more(len(groups) - ROWS, "graph-breaks", prefix)


_FRAME = re.compile(r"^\[(.*)/\d+\]$")


def recompiled_frames(compiles: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """(frame id, its compiles) for every frame compiled more than once, most compiles first."""
    frames: dict[str, list[dict[str, Any]]] = {}
    for compile_ in compiles:
        match = _FRAME.match(str(compile_.get("id", "")))
        if match:
            frames.setdefault(match.group(1), []).append(compile_)
    found = [(frame, cs) for frame, cs in frames.items() if len(cs) > 1]
    return sorted(found, key=lambda f: -len(f[1]))


def _recompiles(compiles: list[dict[str, Any]], prefix: str) -> list[str]:
    frames = recompiled_frames(compiles)
    if not frames:
        return []
    lines = ["", f"**{link('Recompiles', 'index.html#recompiles', prefix)}** per frame", ""]
    for frame, where in frames[:ROWS]:
        name = next((c["frame"] for c in where if c.get("frame")), None)
        reason = next((r for c in where for r in c.get("recompile_reasons") or []), None)
        why = f"; first reason: {text(reason, 70)}" if reason else ""
        lines.append(f"- frame {text(frame)}{' ' + text(name, 40) if name else ''}: {len(where)} compiles {_ids(where, prefix)}{why}")
    return lines + _more(len(frames) - ROWS, "recompiles", prefix)


def slowest(compiles: list[dict[str, Any]]) -> list[dict[str, Any]]:
    timed = [c for c in compiles if (c.get("compile_time_s") or {}).get("total") is not None]
    return sorted(timed, key=lambda c: -c["compile_time_s"]["total"])


def _slowest(compiles: list[dict[str, Any]], prefix: str) -> list[str]:
    timed = slowest(compiles)
    if not timed:
        return []
    lines = ["", f"**{link('Slowest compiles', 'index.html#slowest', prefix)}**", ""]
    lines += ["| compile | frame | time | status |", "|---|---|---:|---|"]
    for c in timed[:ROWS]:
        lines.append(f"| {_ids([c], prefix)} | {text(c.get('frame') or '', 40)} | {format_seconds(c['compile_time_s']['total'])} | {text(c.get('status', ''))} |")
    return lines


# -- a multi-rank landing --------------------------------------------------------------------------


def _landing(summary: dict[str, Any], prefix: str) -> list[str]:
    ranks = summary.get("ranks") or []
    lines = [f"### torch.compile report: {len(ranks)} ranks", ""]
    generator = summary.get("generator") or {}
    lines += [f"tlparse-py {text(generator.get('version', ''))} · {link('landing page', 'index.html', prefix)}", ""]
    rows = []
    for entry in ranks[: ROWS * 2]:
        folder = str(entry.get("folder", ""))
        name = f"rank {entry.get('rank')}" if entry.get("rank") is not None else folder
        if entry.get("summary"):
            rows.append((link(name, f"{folder}/index.html", prefix), entry["summary"].get("totals") or {}))
    rows.append(("**all**", summed_totals(summary)))
    lines += _totals_table(rows, prefix)
    lines += _more(len(ranks) - ROWS * 2, "", prefix)
    errors = [e for e in ranks if e.get("error")]
    if errors:
        lines += ["", f"{len(errors)} rank(s) could not be read: " + ", ".join(text(e.get("folder")) for e in errors[:ROWS])]
    divergences = summary.get("divergences") or []
    if divergences:
        lines += ["", f"**{link('Ranks diverge', 'index.html', prefix)}** ({len(divergences)}):"]
        lines += [f"- {text(d.get('kind'))} {text(d.get('compile_id') or '')}: {text(d.get('detail'), 80)}" for d in divergences[:ROWS]]
        lines += _more(len(divergences) - ROWS, "", prefix)
    return lines


def summed_totals(summary: dict[str, Any]) -> dict[str, Any]:
    """A multi-rank landing's totals: the sum over the ranks that could be read. compile_time_s is
    null (unknown) when any rank's is."""
    totals: dict[str, Any] = {"compiles": 0, "frames": 0, "graph_breaks": 0, "recompiles": 0, "failed": 0,
                              "compile_time_s": 0.0, "cache": {"hit": 0, "miss": 0, "bypass": 0}}
    for entry in summary.get("ranks") or []:
        rank = (entry.get("summary") or {}).get("totals")
        if not rank:
            continue
        for name in ("compiles", "frames", "graph_breaks", "recompiles", "failed"):
            totals[name] += rank.get(name) or 0
        for state in ("hit", "miss", "bypass"):
            totals["cache"][state] += (rank.get("cache") or {}).get(state) or 0
        seconds = rank.get("compile_time_s")
        totals["compile_time_s"] = None if seconds is None or totals["compile_time_s"] is None else round(totals["compile_time_s"] + seconds, 6)
    return totals
