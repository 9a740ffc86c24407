"""Two summaries in, one diff dict out (what `diff.json` holds; schema: diff.schema.json).

Pure: no I/O. The summaries are the analysis' typed objects (`analysis.summary`), built from a log or
loaded back from a report's summary.json; every word (a recompile, a failure, a graph break, the
totals) is theirs. Compiles are paired by what survives between runs, not by compile id or line
number (`pairing.py`): a frame by its file, function and the source text that anchors it, a graph
break by its kind (torch's registry id, else its headline) and the text of its line; within a frame
the 1st compile pairs with the 1st, the 2nd with the 2nd, and so on. A value that either side does
not tell is None (null), never guessed.
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct

from .._version import __version__
from ..analysis.summary import CACHE_RESULTS, CompileSummary, Failure, RanksSummary, Summary, load_summary
from ..analysis.totals import TOTALS, nested, totals_of
from .pairing import (
    BreakKey, BreakSite, Files, Frame, FramePair, break_sites, file_map, frames_of, pair_frames, renamed_functions, user_files, user_paths,
)

SCHEMA_VERSION = "1.2"  # MAJOR.MINOR: MAJOR when a field changes meaning, MINOR when fields are added

# the names `--fail-on` accepts, and what each measures
METRICS = {
    "new_graph_breaks": "graph breaks in NEW that BASE did not have (by kind and source line, wherever the line moved)",
    "new_recompiles": "recompiles NEW has beyond BASE's, summed over frames",
    "new_failures": "compiles that fail in NEW but did not in BASE",
    "compile_time_ratio": "total compile time, NEW / BASE",
    "cache_miss_delta": "cache misses, NEW - BASE",
}
DIFFERENT_PROGRAMS = ("No frame of BASE pairs with a frame of NEW: they look like different programs, so every frame "
                      "and graph break is listed as gone or new")


class Pairing(Struct, frozen=True):
    """How to tell the same code in two runs: `--pair` file pairs and `--source-root`."""

    pairs: tuple[tuple[str, str], ...] = ()
    source_root: str = ""


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


def _total(compile_: CompileSummary | None) -> float | None:
    return compile_.compile_time_s.total if compile_ is not None else None


def _ref(compile_: CompileSummary | None) -> dict[str, Any] | None:
    if compile_ is None:
        return None
    return {"id": compile_.id, "generation": compile_.generation, "status": compile_.status}


def _nth(items: list[CompileSummary], i: int) -> CompileSummary | None:
    return items[i] if i < len(items) else None


# ------------------------------------------------------------------------------------------------
# one report against another


def compare(base: Summary, new: Summary, how: Pairing = Pairing()) -> dict[str, Any]:
    """The comparison of two single-process summaries."""
    base_files, new_files = Files.of(user_paths(base), how.source_root), Files.of(user_paths(new), how.source_root)
    base_frames, new_frames = frames_of(base, base_files), frames_of(new, new_files)
    files = file_map(user_files(base_frames), user_files(new_frames), how.pairs)
    pairs = pair_frames(base_frames, new_frames, files)
    frames, failures_new, failures_fixed, op_counts = [], [], [], []
    for frame_pair in pairs:
        b_list = frame_pair.base.compiles if frame_pair.base else []
        n_list = frame_pair.new.compiles if frame_pair.new else []
        frames.append(_frame_row(frame_pair, b_list, n_list))
        shown = frame_pair.new or frame_pair.base
        assert shown is not None
        key = (shown.raw_name, shown.location)
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
    notes = [DIFFERENT_PROGRAMS] if base_frames and new_frames and all(p.base is None or p.new is None for p in pairs) else []
    return {
        "totals": _totals(base, new),
        "graph_breaks": _graph_breaks(break_sites(base, base_files, files, renamed_functions(pairs)), break_sites(new, new_files)),
        "frames": frames,
        "failures": {"new": failures_new, "fixed": failures_fixed},
        "graph_op_counts": op_counts,
        "notes": notes,
    }


def _totals(base: Summary, new: Summary) -> dict[str, Any]:
    """Every total (analysis.totals), before and after; durations with their ratio."""
    b, n = totals_of(base.compiles), totals_of(new.compiles)
    rows: dict[str, Any] = {t.name: (timed if t.seconds else pair)(b[t.name], n[t.name]) for t in TOTALS}
    return nested(rows)


def _frame_row(frame_pair: FramePair, b_list: list[CompileSummary], n_list: list[CompileSummary]) -> dict[str, Any]:
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
    base, new = frame_pair.base, frame_pair.new
    shown = new or base
    assert shown is not None
    return {
        "frame": shown.raw_name,
        "user_location": shown.location,
        "presence": "both" if base and new else ("new" if new else "gone"),
        "pairing": frame_pair.how,
        "base_frame": base.raw_name if base else None,
        "base_user_location": base.location if base else None,
        "moved": _moved(base, new),
        "compiles": pair(len(b_list), len(n_list)),
        "recompiles": pair(sum(c.is_recompile for c in b_list), sum(c.is_recompile for c in n_list)),
        "new_recompile_reasons": new_reasons,
        "compile_time_s": timed(_sum([_total(c) for c in b_list]) if b_list else None, _sum([_total(c) for c in n_list]) if n_list else None),
        "cache": {r: pair(sum(c.cache_count(r) for c in b_list), sum(c.cache_count(r) for c in n_list)) for r in CACHE_RESULTS},
        "pairs": pairs,
    }


def _moved(base: Frame | BreakSite | None, new: Frame | BreakSite | None) -> dict[str, int] | None:
    """{"from", "to"}: the line it moved from and to, when only its line changed."""
    if base is None or new is None or base.line is None or new.line is None or base.line == new.line:
        return None
    return {"from": base.line, "to": new.line}


def _failure_row(key: tuple[str | None, str | None], b: CompileSummary | None, n: CompileSummary | None, failure: Failure) -> dict[str, Any]:
    return {"frame": key[0], "user_location": key[1], "base": _ref(b), "new": _ref(n), "type": failure.type, "reason": failure.reason}


def _graph_breaks(base: dict[BreakKey, BreakSite], new: dict[BreakKey, BreakSite]) -> dict[str, Any]:
    """Graph breaks new in NEW, gone since BASE, logged a different number of times, and moved."""

    def row(key: BreakKey, side: BreakSite) -> dict[str, Any]:
        brk = side.brk
        return {
            "reason": brk.reason,
            "user_location": brk.user_location,
            "user_source": brk.user_source or None,
            "registry_id": brk.registry_id or None,
            "explanation": brk.explanation or None,
            "hints": list(brk.hints),
            "doc_url": brk.doc_url or None,
            "count": pair(len(base[key].breaks) if key in base else 0, len(new[key].breaks) if key in new else 0),
            "frames": list(dict.fromkeys(c.frame for c, _ in side.breaks)),
            "compiles": list(dict.fromkeys(c.id for c, _ in side.breaks)),
            "moved": _moved(base.get(key), new.get(key)),
        }

    return {
        "new": [row(k, v) for k, v in new.items() if k not in base],
        "gone": [row(k, v) for k, v in base.items() if k not in new],
        "changed": [row(k, v) for k, v in new.items() if k in base and len(base[k].breaks) != len(v.breaks)],
        "moved": [row(k, v) for k, v in new.items() if k in base and _moved(base[k], v) is not None],
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


def diff(base: Side | dict[str, Any], new: Side | dict[str, Any], base_path: str = "BASE", new_path: str = "NEW",
         how: Pairing = Pairing()) -> dict[str, Any]:
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
        out["ranks"] = _ranks(base, new, how)
    elif isinstance(base, Summary) and isinstance(new, Summary):
        out["comparison"] = compare(base, new, how)
    out["notes"] += sorted({note for c in comparisons(out) for note in c.pop("notes")})
    out["metrics"] = metrics(out)
    return out


def _one(versions: list[str]) -> str | None:
    return versions[0] if len(versions) == 1 else (" / ".join(versions) if versions else None)


def _ranks(base: RanksSummary, new: RanksSummary, how: Pairing) -> list[dict[str, Any]]:
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
            comparison = compare(br.summary, nr.summary, how)
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
            items += [f"{where}{break_line(g)}" for g in c["graph_breaks"]["new"]]
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


def break_line(row: dict[str, Any]) -> str:
    """`new graph break GB0025: Call to ... at model.py:30. Hint: ...` (one line of a diff's graph-break row)."""
    kind = f"{row['registry_id']}: " if row.get("registry_id") else ""
    hint = f" Hint: {row['hints'][0]}" if row.get("hints") else ""
    return f"new graph break {kind}{row['reason']} at {row['user_location']}.{hint}"


def _s(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.3f} s"
