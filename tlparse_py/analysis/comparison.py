"""Two runs compared: the diff dict (what `diff.json` holds; schema: diff.schema.json).

Pure: no I/O. The summaries are the analysis' typed objects (`summary.py`), built from a log or
loaded back from a report's summary.json; every word (a recompile, a failure, a skipped frame, a
graph break, the totals) is theirs, and every figure over ranks is combined as its total's
declaration says (`totals.py`). Compiles are paired by what survives between runs, not by compile
id or line number (`pairing.py`); within a frame the 1st compile pairs with the 1st, and so on.

Like is compared with like:
- compile time is compared only where it can be: paired compiles with the same cache results,
  and compiles only one run has. When a paired compile hit the cache in one run and missed in
  the other, the times measure the cache, not the code: the diff says so and the time gate is
  not checked;
- a frame that compiled in BASE and runs eagerly in NEW (torch skipped it, or it hit the
  recompile limit) is a regression of its own ("no longer compiled"), never a failure, and its
  lost compile time is never counted as a saving.

A value that either side does not tell is None (null), never guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from msgspec import Struct, field

from .._version import __version__
from .pairing import (
    BreakKey, BreakSite, Files, Frame, FramePair, break_sites, compiles_of, file_map, frames_of, pair_frames, renamed_functions, user_files,
    user_paths,
)
from .spools import SpooledRows
from .summary import CACHE_RESULTS, CompileSummary, Failure, RanksSummary, Summary, load_summary
from .totals import DIFF_GATES, TOTALS, measure_gates, nested, totals_of, value_at

SCHEMA_VERSION = "4.0"  # MAJOR.MINOR: MAJOR when a field changes meaning, MINOR when fields are added
DIFFERENT_PROGRAMS = ("No frame of BASE pairs with a frame of NEW: they look like different programs, so every frame "
                      "and graph break is listed as gone or new")
EAGER = "no longer compiled: runs eagerly"  # a frame that compiled in BASE and runs eagerly in NEW
UNKNOWN_NAMED = 3  # compiles of unknown time named in why the times cannot be compared
# rows a comparison keeps in a list: past it, in a scratch file (`spools.SpooledRows`), so that a diff of
# 10^6 compiles never holds its row per frame in memory
ROWS_IN_MEMORY = 5000
NO_CACHE_RESULTS = "a side's summary.json records no cache results (an older schema): compile times cannot be compared"

Dict = dict[str, Any]


class Pairing(Struct, frozen=True):
    """How to tell the same code in two runs: `--pair` file pairs and `--source-root`."""

    pairs: tuple[tuple[str, str], ...] = ()
    source_root: str = ""


# ------------------------------------------------------------------------------------------------
# small values


def _num(value: Any) -> float | int | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def pair(base: Any, new: Any) -> Dict:
    """{"base", "new", "delta"} of two counts; delta is None when either is unknown."""
    b, n = _num(base), _num(new)
    return {"base": b, "new": n, "delta": None if b is None or n is None else _round(n - b)}


def timed(base: Any, new: Any, comparable: bool = True) -> Dict:
    """{"base", "new", "delta", "ratio"} of two durations; ratio is None when base is unknown or 0,
    or when the two are not comparable."""
    out = pair(_round(_num(base)), _round(_num(new)))
    b, n = out["base"], out["new"]
    out["ratio"] = None if not comparable or b is None or n is None or b == 0 else round(n / b, 4)
    return out


def _round(value: Any) -> Any:
    return round(value, 6) if isinstance(value, float) else value


def _sum(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(sum(known), 6) if known else None


def _total(compile_: CompileSummary | None) -> float | None:
    return compile_.compile_time_s.total if compile_ is not None else None


def _ref(compile_: CompileSummary | None) -> Dict | None:
    if compile_ is None:
        return None
    return {"id": compile_.id, "generation": compile_.generation, "status": compile_.status}


def _nth(items: list[CompileSummary], i: int) -> CompileSummary | None:
    return items[i] if i < len(items) else None


def runs_eagerly(compile_: CompileSummary | None) -> bool:
    """The frame ran without this compile: torch skipped it, or it hit the recompile limit."""
    return compile_ is not None and (compile_.skipped or compile_.hit_recompile_limit)


def _failed(compile_: CompileSummary | None) -> Failure | None:
    """The compile's failure, in the report's words: an exception, not a frame that runs eagerly."""
    if compile_ is None or not compile_.failed or compile_.hit_recompile_limit:
        return None
    return compile_.failure


def cache_results(compile_: CompileSummary) -> tuple[tuple[str, str], ...]:
    """What the compile's cache lookups found, order aside: two compiles with the same are timed alike."""
    return tuple(sorted((lookup.cache, lookup.result) for lookup in compile_.cache))


# ------------------------------------------------------------------------------------------------
# compiles paired across the runs


class CompilePair(Struct):
    """The i-th compile of a frame in BASE and in NEW (either may be missing)."""

    base: CompileSummary | None
    new: CompileSummary | None
    # the frame compiled in BASE with no compile run eagerly, and in NEW some compile of it runs
    # eagerly: skipped, or over the recompile limit (a compile BASE may not have had at all)
    frame_regressed: bool = False

    @property
    def no_longer_compiled(self) -> bool:
        """NEW runs this compile eagerly, where BASE compiled the frame."""
        return self.frame_regressed and runs_eagerly(self.new)

    @property
    def cache_differs(self) -> bool:
        return self.base is not None and self.new is not None and cache_results(self.base) != cache_results(self.new)

    @property
    def time_comparable(self) -> bool:
        """Its times say something about the code: not a lost compile, not a cache difference."""
        return not self.no_longer_compiled and not self.cache_differs


def compile_pairs(b_list: list[CompileSummary], n_list: list[CompileSummary]) -> list[CompilePair]:
    """A frame's compiles in BASE and in NEW, paired in order."""
    regressed = bool(b_list) and any(map(runs_eagerly, n_list)) and not any(map(runs_eagerly, b_list))
    return [CompilePair(_nth(b_list, i), _nth(n_list, i), regressed) for i in range(max(len(b_list), len(n_list)))]


class TimeComparison(Struct):
    """Compile time over the compiles that can be compared, and why it cannot be when it cannot."""

    base: float | None = None
    new: float | None = None
    compared: int = 0  # compiles (paired or only in one run) whose time is counted
    cache_differs: int = 0  # paired compiles whose cache results differ
    base_hits: int = 0  # cache hits in those compiles, each side
    new_hits: int = 0
    lost: int = 0  # compiles BASE had that NEW runs eagerly: left out
    cache_known: bool = True
    unknown: list[str] = field(default_factory=list)  # the first compiles whose time no record logged (UNKNOWN_NAMED)
    unknown_count: int = 0

    def add(self, p: CompilePair) -> None:
        if p.no_longer_compiled:
            self.lost += 1
            return
        if p.cache_differs:
            assert p.base is not None and p.new is not None
            self.cache_differs += 1
            self.base_hits += p.base.cache_count("hit")
            self.new_hits += p.new.cache_count("hit")
            return
        b, n = _total(p.base), _total(p.new)
        if (p.base is not None and b is None) or (p.new is not None and n is None):
            shown = p.new if p.new is not None else p.base
            assert shown is not None
            self.unknown_count += 1
            if len(self.unknown) < UNKNOWN_NAMED:  # only these are named: a list of every one would grow with the run
                self.unknown.append(shown.id)
            return
        self.compared += 1
        self.base = _round((self.base or 0.0) + (b or 0.0))
        self.new = _round((self.new or 0.0) + (n or 0.0))

    @property
    def why_not(self) -> str | None:
        """Why the compile times cannot be compared; None when they can."""
        if not self.cache_known:
            return NO_CACHE_RESULTS
        if self.cache_differs:
            if self.base_hits > self.new_hits:
                what = f"BASE hit the cache {self.base_hits - self.new_hits} times where NEW missed"
            elif self.new_hits > self.base_hits:
                what = f"NEW hit the cache {self.new_hits - self.base_hits} times where BASE missed"
            else:
                what = f"{self.cache_differs} paired compiles had different cache results"
            return f"cache states differ: {what}: compile times are not comparable"
        if self.unknown:
            return f"the compile time of {', '.join(self.unknown[:3])}{' and more' if self.unknown_count > 3 else ''} is unknown"
        if not self.compared and self.lost:
            return "every compile the runs share is one NEW no longer compiles: no time is left to compare"
        if not self.compared:
            return "no compile logged a time in either run"
        return None

    def to_dict(self) -> Dict:
        why = self.why_not
        return {**timed(self.base, self.new, why is None), "comparable": why is None, "why_not": why,
                "compared": self.compared, "cache_differs": self.cache_differs, "no_longer_compiled": self.lost}


# ------------------------------------------------------------------------------------------------
# one report against another


def compare(base: Summary, new: Summary, how: Pairing = Pairing()) -> Dict:
    """The comparison of two single-process summaries."""
    base_files, new_files = Files.of(user_paths(base), how.source_root), Files.of(user_paths(new), how.source_root)
    base_frames, new_frames = frames_of(base, base_files), frames_of(new, new_files)
    files = file_map(user_files(base_frames), user_files(new_frames), how.pairs)
    pairs = pair_frames(base_frames, new_frames, files)
    time = TimeComparison(cache_known=base.cache_known and new.cache_known)
    frames, failures_new, failures_fixed, eager, op_counts = Rows(), Rows(), Rows(), Rows(), Rows()
    counts = Counts()
    for frame_pair in pairs:
        b_list, n_list = compiles_of(frame_pair.base, base.compiles), compiles_of(frame_pair.new, new.compiles)
        compiles = compile_pairs(b_list, n_list)
        frames.append(_frame_row(frame_pair, b_list, n_list, compiles, counts))
        first = (n_list or b_list)[0]  # the frame's name and place are its first compile's
        key = (first.frame, first.user_location, first.inside)
        for i, p in enumerate(compiles):
            time.add(p)
            b_fail, n_fail = _failed(p.base), _failed(p.new)
            if n_fail and (not b_fail or b_fail.type != n_fail.type):
                failures_new.append(_failure_row(key, p, n_fail))
            if b_fail and (not n_fail or b_fail.type != n_fail.type):
                failures_fixed.append(_failure_row(key, p, b_fail))
            if p.no_longer_compiled:
                eager.append(_eager_row(key, p))
            if p.base is not None and p.new is not None and p.base.graph_op_count != p.new.graph_op_count:
                op_counts.append({"frame": key[0], "user_location": key[1], "inside": key[2], "index": i, "base": _ref(p.base), "new": _ref(p.new),
                                  "graph_op_count": pair(p.base.graph_op_count, p.new.graph_op_count)})
    notes = [DIFFERENT_PROGRAMS] if base_frames and new_frames and all(p.base is None or p.new is None for p in pairs) else []
    if time.why_not and (time.cache_differs or not time.cache_known):
        notes.append(time.why_not[0].upper() + time.why_not[1:])
    return {
        "totals": _totals(base, new, time),
        "time": time.to_dict(),
        "graph_breaks": _graph_breaks(break_sites(base, base_files, files, renamed_functions(pairs)), break_sites(new, new_files)),
        "frames": frames.done(),
        "failures": {"new": failures_new.done(), "fixed": failures_fixed.done()},
        "no_longer_compiled": eager.done(),
        "graph_op_counts": op_counts.done(),
        "vllm": _vllm(base, new),
        "notes": notes,
    }


def _totals(base: Summary, new: Summary, time: TimeComparison) -> Dict:
    """Every total (totals.py), before and after; durations with their ratio, where it is comparable."""
    b, n = totals_of(base.compiles), totals_of(new.compiles)
    rows: Dict = {t.name: (timed(b[t.name], n[t.name], time.why_not is None) if t.seconds else pair(b[t.name], n[t.name])) for t in TOTALS}
    return nested(rows)


class Rows:
    """A list of a comparison's rows that goes to a scratch file past ROWS_IN_MEMORY rows."""

    def __init__(self) -> None:
        self.rows: list[Dict] | SpooledRows = []

    def append(self, row: Dict) -> None:
        if isinstance(self.rows, list) and len(self.rows) >= ROWS_IN_MEMORY:
            self.rows = SpooledRows(self.rows)
        self.rows.append(row)

    def done(self) -> list[Dict] | SpooledRows:
        return self.rows


class Counts(dict[tuple[Any, ...], Dict]):
    """`pair` of two counts, one dict for every row with the same two (of the same types): a diff of
    100,000s of compiles has a few distinct op counts, compile counts and cache counts, and a dict
    each would cost more than the rest of its row. The frame rows hold them; nothing changes them."""

    def __call__(self, base: Any, new: Any) -> Dict:
        key = (type(base), base, type(new), new)
        found = self.get(key)
        if found is None:
            found = self[key] = pair(base, new)
        return found


def _frame_row(frame_pair: FramePair, b_list: list[CompileSummary], n_list: list[CompileSummary], compiles: list[CompilePair],
               counts: Callable[[Any, Any], Dict] = pair) -> Dict:
    b_reasons = {r for c in b_list for r in c.recompile_reasons}
    new_reasons: list[str] = []
    for c in n_list:
        for r in c.recompile_reasons:
            if r not in b_reasons and r not in new_reasons:
                new_reasons.append(r)
    rows = [{
        "base": _ref(p.base),
        "new": _ref(p.new),
        "compile_time_s": timed(_total(p.base), _total(p.new), p.time_comparable),
        "graph_op_count": counts(p.base.graph_op_count if p.base else None, p.new.graph_op_count if p.new else None),
        "time_comparable": p.time_comparable,
    } for p in compiles]
    base, new = frame_pair.base, frame_pair.new
    first = (n_list or b_list)[0]  # a frame's name and place are its first compile's
    regression = EAGER if any(p.no_longer_compiled for p in compiles) else None
    return {
        "frame": first.frame,
        "user_location": first.user_location,
        "inside": first.inside,
        "presence": "both" if base and new else ("new" if new else "gone"),
        "pairing": frame_pair.how,
        "base_frame": b_list[0].frame if b_list else None,
        "base_user_location": b_list[0].user_location if b_list else None,
        "moved": _moved(base, new),
        "regression": regression,
        "compiles": counts(len(b_list), len(n_list)),
        "recompiles": counts(sum(c.is_recompile for c in b_list), sum(c.is_recompile for c in n_list)),
        "new_recompile_reasons": new_reasons,
        "compile_time_s": timed(_sum([_total(c) for c in b_list]) if b_list else None, _sum([_total(c) for c in n_list]) if n_list else None,
                                all(p.time_comparable for p in compiles)),
        "cache": {r: counts(sum(c.cache_count(r) for c in b_list), sum(c.cache_count(r) for c in n_list)) for r in CACHE_RESULTS},
        "pairs": rows,
    }


def _vllm(base: Summary, new: Summary) -> Dict | None:
    """vLLM's pieces paired by compile call (its prefix), submod and range or size: the pieces only one
    run compiled, and the passes whose effect on the graph changed (e.g. "no longer changes the graph")."""
    if base.vllm is None and new.vllm is None:
        return None
    b_pieces, n_pieces = _pieces(base), _pieces(new)
    b_passes, n_passes = _pass_effects(base), _pass_effects(new)
    passes = [
        {"call": call, "pass": name, "base": b_passes.get((call, name)), "new": n_passes.get((call, name))}
        for call, name in list(b_passes) + [k for k in n_passes if k not in b_passes]
        if b_passes.get((call, name)) != n_passes.get((call, name))
    ]
    return {
        "new_pieces": [{"call": k[0], "submod": k[1], "group": k[2]} for k in n_pieces if k not in b_pieces],
        "gone_pieces": [{"call": k[0], "submod": k[1], "group": k[2]} for k in b_pieces if k not in n_pieces],
        "pieces": pair(len(b_pieces), len(n_pieces)),
        "passes": passes,
    }


def _call_name(call: Any) -> str:
    return str(call.prefix or f"call {call.number}")


def _pieces(summary: Summary) -> dict[tuple[str, str, str], Any]:
    if summary.vllm is None:
        return {}
    return {(_call_name(call), p.submod, p.group): p for call in summary.vllm.calls for p in call.pieces}


def _pass_effects(summary: Summary) -> dict[tuple[str, str], str]:
    """(call, pass) → what the pass did to the graphs of the run: "changes the graph" (any piece's),
    "no change" (none's), or "unknown" (no graph before it to compare with)."""
    if summary.vllm is None:
        return {}
    seen: dict[tuple[str, str], set[bool | None]] = {}
    for call in summary.vllm.calls:
        for change in call.all_passes():
            seen.setdefault((_call_name(call), change.pass_name), set()).add(change.changed)
    return {key: "changes the graph" if True in found else "no change" if False in found else "unknown" for key, found in seen.items()}


def _moved(base: Frame | BreakSite | None, new: Frame | BreakSite | None) -> dict[str, int] | None:
    """{"from", "to"}: the line it moved from and to, when only its line changed."""
    if base is None or new is None or base.line is None or new.line is None or base.line == new.line:
        return None
    return {"from": base.line, "to": new.line}


def _failure_row(key: tuple[str | None, str | None, str], p: CompilePair, failure: Failure) -> Dict:
    return {"frame": key[0], "user_location": key[1], "inside": key[2], "base": _ref(p.base), "new": _ref(p.new), "type": failure.type, "reason": failure.reason}


def _eager_row(key: tuple[str | None, str | None, str], p: CompilePair) -> Dict:
    """A compile BASE had that NEW runs eagerly: how (skipped, or the recompile limit), and torch's reason."""
    assert p.new is not None
    failure = p.new.failure
    return {
        "frame": key[0], "user_location": key[1], "inside": key[2], "base": _ref(p.base), "new": _ref(p.new),
        "outcome": "recompile limit" if p.new.hit_recompile_limit else "skipped",
        "reason": failure.reason if failure is not None else None,
        "lost_compile_time_s": _total(p.base),
    }


def _graph_breaks(base: dict[BreakKey, BreakSite], new: dict[BreakKey, BreakSite]) -> Dict:
    """Graph breaks new in NEW, gone since BASE, logged a different number of times, and moved."""

    def row(key: BreakKey, side: BreakSite) -> Dict:
        brk = side.brk
        return {
            "reason": brk.reason,
            "user_location": brk.user_location,
            "user_source": brk.user_source or None,
            "registry_id": brk.registry_id or None,
            "explanation": brk.explanation or None,
            "hints": list(brk.hints),
            "doc_url": brk.doc_url or None,
            "torch_break": brk.torch_break,
            "count": pair(len(base[key].breaks) if key in base else 0, len(new[key].breaks) if key in new else 0),
            "frames": list(dict.fromkeys(c.frame for c in side.breaks)),
            "compiles": list(dict.fromkeys(c.id for c in side.breaks)),
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


def diff(base: Side | Dict, new: Side | Dict, base_path: str = "BASE", new_path: str = "NEW", how: Pairing = Pairing()) -> Dict:
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
    out: Dict = {
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
    out["totals"] = combined_totals(comparisons(out))
    measured = measure_gates(comparisons(out))
    out["metrics"] = {gate.name: measured[gate.name].value for gate in DIFF_GATES}
    out["unchecked"] = {gate.name: measured[gate.name].why_not for gate in DIFF_GATES if measured[gate.name].why_not}
    return out


def _one(versions: list[str]) -> str | None:
    return versions[0] if len(versions) == 1 else (" / ".join(versions) if versions else None)


def _ranks(base: RanksSummary, new: RanksSummary, how: Pairing) -> list[Dict]:
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


def sections(diff_: Dict) -> list[tuple[str, Dict]]:
    """(rank folder, or "" for two single runs; its comparison): every comparison of the diff."""
    if diff_.get("comparison") is not None:
        return [("", diff_["comparison"])]
    return [(r["folder"], r["comparison"]) for r in diff_.get("ranks") or [] if r.get("comparison") is not None]


def comparisons(diff_: Dict) -> list[Dict]:
    """The comparison of two runs, or one per rank compared."""
    return [c for _, c in sections(diff_)]


def combined_totals(parts: Sequence[Dict]) -> Dict:
    """Every total before and after, over ranks combined as its declaration says (`Total.over_ranks`):
    the figures the diff's Markdown shows, the same as each report's own summary says."""
    rows: Dict = {}
    for total in TOTALS:
        rows_of = [value_at(c["totals"], total.name) for c in parts]
        base = total.combine([r["base"] for r in rows_of])
        new = total.combine([r["new"] for r in rows_of])
        row: Dict = timed(base.value, new.value) if total.seconds else pair(base.value, new.value)
        if total.seconds and any(not c["time"]["comparable"] for c in parts):
            row["ratio"] = None  # a run's (a rank's) compile times cannot be compared: no ratio
        row["base_shown"], row["new_shown"] = (base.text, new.text) if len(parts) > 1 else (total.show(base.value), total.show(new.value))
        rows[total.name] = row
    return nested(rows)
