"""Two summaries in, one diff dict out (what `diff.json` holds; schema: diff.schema.json).

Pure: no I/O. The summaries are the analysis' typed objects (`analysis.summary`), built from a log or
loaded back from a report's summary.json; every word (a recompile, a failure, a graph break, the
totals) is theirs. Compiles are paired by what survives between runs, not by compile id (ids shift
when a frame is compiled earlier or later): a frame is its function name and user location
(`frame`, `user_location`), and within a frame the 1st compile pairs with the 1st, the 2nd with the
2nd, and so on. Graph breaks are compared as the analysis groups them: distinct (reason, user
location). A value that either side does not tell is None (null), never guessed.
"""

from __future__ import annotations

from typing import Any

from .._version import __version__
from ..analysis.summary import CACHE_RESULTS, CompileSummary, Failure, RanksSummary, Summary, graph_break_groups, load_summary
from ..analysis.totals import TOTALS, nested, totals_of

SCHEMA_VERSION = "1.0"  # MAJOR.MINOR: MAJOR when a field changes meaning, MINOR when fields are added

# the names `--fail-on` accepts, and what each measures
METRICS = {
    "new_graph_breaks": "distinct graph breaks (reason, user location) in NEW that BASE did not have",
    "new_recompiles": "recompiles NEW has beyond BASE's, summed over frames",
    "new_failures": "compiles that fail in NEW but did not in BASE",
    "compile_time_ratio": "total compile time, NEW / BASE",
    "cache_miss_delta": "cache misses, NEW - BASE",
}

Frame = tuple[str | None, str | None]


# ------------------------------------------------------------------------------------------------
# small values


def _num(value: Any) -> float | int | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def pair(base: Any, new: Any) -> dict[str, Any]:
    """{"base", "new", "delta"} of two counts; delta is None when either is unknown."""
    b, n = _num(base), _num(new)
    return {"base": b, "new": n, "delta": None if b is None or n is None else _round(n - b)}


def timed(base: Any, new: Any) -> dict[str, Any]:
    """{"base", "new", "delta", "ratio"} of two durations; ratio is None when base is unknown or 0."""
    out = pair(_round(_num(base)), _round(_num(new)))
    b, n = out["base"], out["new"]
    out["ratio"] = None if b is None or n is None or b == 0 else round(n / b, 4)
    return out


def _round(value: Any) -> Any:
    return round(value, 6) if isinstance(value, float) else value


def _sum(values: list[Any]) -> float | None:
    known = [v for v in values if _num(v) is not None]
    return round(sum(known), 6) if known else None


def frame_of(compile_: CompileSummary) -> Frame:
    return (compile_.frame, compile_.user_location)


def _total(compile_: CompileSummary | None) -> float | None:
    return compile_.compile_time_s.total if compile_ is not None else None


def _ref(compile_: CompileSummary | None) -> dict[str, Any] | None:
    if compile_ is None:
        return None
    return {"id": compile_.id, "generation": compile_.generation, "status": compile_.status}


def _frames(summary: Summary) -> dict[Frame, list[CompileSummary]]:
    frames: dict[Frame, list[CompileSummary]] = {}
    for c in summary.compiles:
        frames.setdefault(frame_of(c), []).append(c)
    return frames


def _nth(items: list[CompileSummary], i: int) -> CompileSummary | None:
    return items[i] if i < len(items) else None


# ------------------------------------------------------------------------------------------------
# one report against another


def compare(base: Summary, new: Summary) -> dict[str, Any]:
    """The comparison of two single-process summaries."""
    base_frames, new_frames = _frames(base), _frames(new)
    order = list(base_frames) + [f for f in new_frames if f not in base_frames]
    frames, failures_new, failures_fixed, op_counts = [], [], [], []
    for key in order:
        b_list, n_list = base_frames.get(key, []), new_frames.get(key, [])
        frames.append(_frame_row(key, b_list, n_list))
        for i in range(max(len(b_list), len(n_list))):
            b, n = _nth(b_list, i), _nth(n_list, i)
            b_fail, n_fail = (b.failure if b else None), (n.failure if n else None)
            if n_fail and (not b_fail or b_fail.type != n_fail.type):
                failures_new.append(_failure_row(key, b, n, n_fail))
            if b_fail and (not n_fail or b_fail.type != n_fail.type):
                failures_fixed.append(_failure_row(key, b, n, b_fail))
            if b is not None and n is not None and b.graph_op_count != n.graph_op_count:
                op_counts.append({"frame": key[0], "user_location": key[1], "index": i, "base": _ref(b), "new": _ref(n),
                                  "graph_op_count": pair(b.graph_op_count, n.graph_op_count)})
    return {
        "totals": _totals(base, new),
        "graph_breaks": _graph_breaks(base, new),
        "frames": frames,
        "failures": {"new": failures_new, "fixed": failures_fixed},
        "graph_op_counts": op_counts,
    }


def _totals(base: Summary, new: Summary) -> dict[str, Any]:
    """Every total (analysis.totals), before and after; durations with their ratio."""
    b, n = totals_of(base.compiles), totals_of(new.compiles)
    rows: dict[str, Any] = {t.name: (timed if t.seconds else pair)(b[t.name], n[t.name]) for t in TOTALS}
    return nested(rows)


def _frame_row(key: Frame, b_list: list[CompileSummary], n_list: list[CompileSummary]) -> dict[str, Any]:
    b_reasons = {r for c in b_list for r in c.recompile_reasons}
    new_reasons: list[str] = []
    for c in n_list:
        for r in c.recompile_reasons:
            if r not in b_reasons and r not in new_reasons:
                new_reasons.append(r)
    pairs = []
    for i in range(max(len(b_list), len(n_list))):
        b, n = _nth(b_list, i), _nth(n_list, i)
        pairs.append({
            "base": _ref(b),
            "new": _ref(n),
            "compile_time_s": timed(_total(b), _total(n)),
            "graph_op_count": pair(b.graph_op_count if b else None, n.graph_op_count if n else None),
        })
    presence = "both" if b_list and n_list else ("new" if n_list else "gone")
    return {
        "frame": key[0],
        "user_location": key[1],
        "presence": presence,
        "compiles": pair(len(b_list), len(n_list)),
        "recompiles": pair(sum(c.is_recompile for c in b_list), sum(c.is_recompile for c in n_list)),
        "new_recompile_reasons": new_reasons,
        "compile_time_s": timed(_sum([_total(c) for c in b_list]) if b_list else None, _sum([_total(c) for c in n_list]) if n_list else None),
        "cache": {r: pair(sum(c.cache_count(r) for c in b_list), sum(c.cache_count(r) for c in n_list)) for r in CACHE_RESULTS},
        "pairs": pairs,
    }


def _failure_row(key: Frame, b: CompileSummary | None, n: CompileSummary | None, failure: Failure) -> dict[str, Any]:
    return {"frame": key[0], "user_location": key[1], "base": _ref(b), "new": _ref(n), "type": failure.type, "reason": failure.reason}


def _graph_breaks(base: Summary, new: Summary) -> dict[str, Any]:
    def distinct(summary: Summary) -> dict[tuple[str, str], dict[str, Any]]:
        found = {}
        for group in graph_break_groups(summary.compiles):
            compiles = group.compiles
            found[(group.reason, group.user_location)] = {
                "count": group.count,
                "frames": list(dict.fromkeys(c.frame for c in compiles)),
                "compiles": list(dict.fromkeys(c.id for c in compiles)),
            }
        return found

    b, n = distinct(base), distinct(new)

    def row(key: tuple[str, str], side: dict[str, Any]) -> dict[str, Any]:
        return {"reason": key[0], "user_location": key[1], "count": pair(b.get(key, {}).get("count", 0), n.get(key, {}).get("count", 0)),
                "frames": side["frames"], "compiles": side["compiles"]}

    return {
        "new": [row(k, v) for k, v in n.items() if k not in b],
        "gone": [row(k, v) for k, v in b.items() if k not in n],
        "changed": [row(k, v) for k, v in n.items() if k in b and b[k]["count"] != v["count"]],
    }


# ------------------------------------------------------------------------------------------------
# the whole diff


Side = Summary | RanksSummary


def torch_versions(summary: Side) -> list[str]:
    if isinstance(summary, RanksSummary):
        found = [entry.summary.torch_version for entry in summary.read if entry.summary is not None]
    else:
        found = [summary.torch_version]
    return sorted({v for v in found if isinstance(v, str)})


def diff(base: Side | dict[str, Any], new: Side | dict[str, Any], base_path: str = "BASE", new_path: str = "NEW") -> dict[str, Any]:
    """The whole diff of two summaries: of two reports, or rank by rank of two multi-rank reports.
    A summary may also be given as the dict summary.json holds (`Analysis.to_dict()`).

    Raises ValueError when one is multi-rank and the other is not.
    """
    base = load_summary(base) if isinstance(base, dict) else base
    new = load_summary(new) if isinstance(new, dict) else new
    if isinstance(base, RanksSummary) != isinstance(new, RanksSummary):
        multi, single = ("BASE", "NEW") if isinstance(base, RanksSummary) else ("NEW", "BASE")
        raise ValueError(f"{multi} holds several ranks and {single} one: diff one rank's log or report folder (rank_N/) against {single}")
    b_versions, n_versions = torch_versions(base), torch_versions(new)
    notes = []
    same = b_versions == n_versions or not b_versions or not n_versions
    if not same:
        notes.append(f"BASE and NEW come from different torch versions ({', '.join(b_versions)} and {', '.join(n_versions)}): "
                     "some differences may come from torch itself")
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "generator": {"name": "tlparse-py", "version": __version__},
        "base": {"path": base_path, "torch_version": _one(b_versions), "ranks": len(base.ranks) if isinstance(base, RanksSummary) else None},
        "new": {"path": new_path, "torch_version": _one(n_versions), "ranks": len(new.ranks) if isinstance(new, RanksSummary) else None},
        "torch_versions_differ": not same,
        "notes": notes,
        "comparison": None,
        "ranks": [],
    }
    if isinstance(base, RanksSummary) and isinstance(new, RanksSummary):
        out["ranks"] = _ranks(base, new)
    elif isinstance(base, Summary) and isinstance(new, Summary):
        out["comparison"] = compare(base, new)
    out["metrics"] = metrics(out)
    return out


def _one(versions: list[str]) -> str | None:
    return versions[0] if len(versions) == 1 else (" / ".join(versions) if versions else None)


def _ranks(base: RanksSummary, new: RanksSummary) -> list[dict[str, Any]]:
    b = {r.folder: r for r in base.ranks}
    n = {r.folder: r for r in new.ranks}
    order = list(b) + [f for f in n if f not in b]
    rows = []
    for folder in order:
        br, nr = b.get(folder), n.get(folder)
        either = br or nr
        rank = either.rank if either is not None else None
        note = None
        comparison = None
        if br is None or nr is None:
            note = f"only in {'BASE' if nr is None else 'NEW'}"
        elif br.summary is None or nr.summary is None:
            side, entry = ("BASE", br) if br.summary is None else ("NEW", nr)
            note = f"{side} could not be read" + (f": {entry.error}" if entry.error else "")
        else:
            comparison = compare(br.summary, nr.summary)
        rows.append({"rank": rank, "folder": str(folder), "note": note, "comparison": comparison})
    return rows


def comparisons(diff_: dict[str, Any]) -> list[dict[str, Any]]:
    if diff_.get("comparison") is not None:
        return [diff_["comparison"]]
    return [r["comparison"] for r in diff_.get("ranks") or [] if r.get("comparison") is not None]


def metrics(diff_: dict[str, Any]) -> dict[str, float | int | None]:
    """The numbers `--fail-on` tests (METRICS), over every rank compared."""
    parts = comparisons(diff_)
    new_recompiles = 0
    for c in parts:
        for f in c["frames"]:
            delta = f["recompiles"]["delta"]
            new_recompiles += max(0, delta or 0)
    b_time = [c["totals"]["compile_time_s"]["base"] for c in parts]
    n_time = [c["totals"]["compile_time_s"]["new"] for c in parts]
    ratio = None
    if parts and None not in b_time and None not in n_time and sum(b_time) > 0:
        ratio = round(sum(n_time) / sum(b_time), 4)
    misses = [c["totals"]["cache"]["miss"]["delta"] for c in parts]
    return {
        "new_graph_breaks": sum(len(c["graph_breaks"]["new"]) for c in parts),
        "new_recompiles": new_recompiles,
        "new_failures": sum(len(c["failures"]["new"]) for c in parts),
        "compile_time_ratio": ratio,
        "cache_miss_delta": None if not parts or None in misses else sum(misses),
    }


def details(diff_: dict[str, Any], name: str, limit: int = 5) -> list[str]:
    """What is behind a metric, one short line each (for the `--fail-on` report): the new graph breaks..."""
    items: list[str] = []
    sections = [(None, diff_["comparison"])] if diff_.get("comparison") is not None else [
        (r["folder"], r["comparison"]) for r in diff_.get("ranks") or [] if r.get("comparison") is not None]
    for folder, c in sections:
        where = f"{folder}: " if folder else ""
        if name == "new_graph_breaks":
            items += [f"{where}{g['reason']} at {g['user_location']}" for g in c["graph_breaks"]["new"]]
        elif name == "new_recompiles":
            items += [f"{where}{f['frame']} ({f['user_location']}): {f['recompiles']['base']} → {f['recompiles']['new']}"
                      for f in c["frames"] if (f["recompiles"]["delta"] or 0) > 0]
        elif name == "new_failures":
            items += [f"{where}{f['frame']} {(f['new'] or {}).get('id')}: {f['type']}" for f in c["failures"]["new"]]
        elif name == "compile_time_ratio":
            t = c["totals"]["compile_time_s"]
            items.append(f"{where}{_s(t['base'])} → {_s(t['new'])}")
        elif name == "cache_miss_delta":
            m = c["totals"]["cache"]["miss"]
            items.append(f"{where}misses {m['base']} → {m['new']}")
    if len(items) > limit:
        items = items[:limit] + [f"and {len(items) - limit} more"]
    return items


def _s(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.3f} s"
