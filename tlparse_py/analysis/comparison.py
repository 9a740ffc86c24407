"""Two runs compared: the typed diff (`compared.Diff`, what `diff.json` holds; schema: diff.schema.json).

Pure: no I/O. The summaries are the analysis' typed objects (`summary.py`), built from a log or
loaded back from a report's summary.json; every word (a recompile, a failure, a skipped frame, a
graph break, the totals) is theirs, and every figure over ranks is combined as its total's
declaration says (`totals.py`). Compiles are paired by what survives between runs, not by compile
id or line number (`pairing.py`); within a frame the 1st compile pairs with the 1st, and so on.

Like is compared with like, pair by pair:
- the compile time ratio (`time.ratio`, the gate `compile_time_ratio`) is taken over the paired
  compiles whose cache results match and whose times are known; every other paired compile is
  left apart with its reason ("cache results differ: BASE fx_graph hit / NEW fx_graph miss").
  The ratio is not checked only when too few pairs are comparable (`MIN_COMPARABLE_SHARE`);
- compiles only one run has (gone, lost to the recompile limit, no longer compiled, new) are never
  in the ratio: they are their own figures, base-only and new-only compile work (`time.base_only`,
  `time.new_only`), each with a gate of its own, so lost compile time is never a saving;
- a frame that compiled in BASE and runs eagerly in NEW (torch skipped it, or it hit the
  recompile limit) is a regression of its own ("no longer compiled"), never a failure: every
  compile of BASE from there on is listed, not only the first.

The frames the diff page draws (`Comparison.frame_times`: the ones with the most compile time in either
run, each run's time by part, its pairs' verdicts, the graph breaks new and gone in it) are gathered as
the frame rows are made (`paired_times.TopFrames`), from the same pairs and rows.

A value that either side does not tell is None (null), never guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from msgspec import Struct

from .._version import __version__
from .compared import (
    COMPARED, NO_CACHE_RESULTS, NOT_COMPARED, ONE_RUN, ApartPair, BreakRow, Change, CompileRef, CompileTimes, Comparison, Diff, DiffSide, EagerRow, FailureRow, Failures, FrameRow,
    Generator, GraphBreaks, Moved, OpCountRow, PairRow, PairTime, PassRow, PieceRow, RankRow, Shown, Timed, VllmChange, Work,
)
from .pairing import (
    BreakKey, BreakSite, Files, Frame, FramePair, break_sites, compiles_of, file_map, frames_of, pair_frames, renamed_functions, user_files,
    user_paths,
)
from .paired_times import TopFrames
from .roots import Roots
from .spools import SpooledFrames
from .summary import CACHE_RESULTS, CompileSummary, Failure, RanksSummary, Summary
from .summary_load import load_summary
from .totals import DIFF_GATES, TOTALS, measure_gates, nested, totals_of

SCHEMA_VERSION = "4.2"  # MAJOR.MINOR: MAJOR when a field changes meaning, MINOR when fields are added
EAGER = "no longer compiled: runs eagerly"  # a frame that compiled in BASE and runs eagerly in NEW
APART_NAMED = 5  # paired compiles left out of the ratio that a comparison names (with how many there are)
# The ratio speaks for the compile work both runs share only when the comparable pairs are most of it:
# at least this share of the paired compile time (both runs' seconds, of pairs whose times are known).
# Under half, the pairs left apart (whose times measure the cache) are most of that work and could move
# the whole either way by more than the ratio says: a wrong verdict, worse than none.
MIN_COMPARABLE_SHARE = 0.5
# rows a comparison keeps in a list: past it, in a scratch file (`spools.SpooledFrames`), so that a diff of
# 10^6 compiles never holds its row per frame in memory
ROWS_IN_MEMORY = 5000
ONLY_BASE, ONLY_NEW = "only in BASE", "only in NEW"


class Pairing(Struct, frozen=True):
    """How to tell the same code in two runs: `--pair` file pairs and `--source-root`."""

    pairs: tuple[tuple[str, str], ...] = ()
    source_root: str = ""


# ------------------------------------------------------------------------------------------------
# small values


def _num(value: Any) -> float | int | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def pair(base: Any, new: Any) -> Change:
    """Two counts; delta is None when either is unknown."""
    b, n = _num(base), _num(new)
    return Change(b, n, None if b is None or n is None else _round(n - b))


def timed(base: Any, new: Any, comparable: bool = True) -> Timed:
    """Two durations; ratio is None when base is unknown or 0, or when the two are not comparable."""
    b, n = _round(_num(base)), _round(_num(new))
    delta = None if b is None or n is None else _round(n - b)
    return Timed(b, n, delta, None if not comparable or b is None or n is None or b == 0 else round(n / b, 4))


def _round(value: Any) -> Any:
    return round(value, 6) if isinstance(value, float) else value


def _sum(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(sum(known), 6) if known else None


def _total(compile_: CompileSummary | None) -> float | None:
    return compile_.compile_time_s.total if compile_ is not None else None


def _ref(compile_: CompileSummary | None) -> CompileRef | None:
    if compile_ is None:
        return None
    return CompileRef(compile_.id, compile_.generation, compile_.status)


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


def _cache_words(compile_: CompileSummary) -> str:
    """`fx_graph hit, aotautograd miss` (in log order); "no lookup" for a compile that logged none."""
    return ", ".join(f"{lookup.cache} {lookup.result}" for lookup in compile_.cache) or "no lookup"


# ------------------------------------------------------------------------------------------------
# compiles paired across the runs


class CompilePair(Struct):
    """The i-th compile of a frame in BASE and in NEW (either may be missing)."""

    base: CompileSummary | None
    new: CompileSummary | None
    # the frame compiled in BASE with no compile run eagerly, and in NEW some compile of it runs
    # eagerly: skipped, or over the recompile limit (a compile BASE may not have had at all)
    frame_regressed: bool = False
    cache_known: bool = True  # both summaries say what the cache lookups found

    @property
    def no_longer_compiled(self) -> bool:
        """NEW runs this compile eagerly, or never reaches it (its frame ran eagerly from an earlier
        compile on), where BASE compiled the frame."""
        return self.frame_regressed and (runs_eagerly(self.new) or (self.new is None and self.base is not None))

    @property
    def one_run(self) -> bool:
        """One run's compile work, never in the ratio: only one run has it, or NEW no longer compiles it."""
        return self.base is None or self.new is None or self.no_longer_compiled

    @property
    def verdict(self) -> str:
        """How its time counts: compared (in the ratio), one run's work, or not compared (left apart: `apart` says why)."""
        return COMPARED if self.apart is None else ONE_RUN if self.one_run else NOT_COMPARED

    @property
    def cache_differs(self) -> bool:
        return self.base is not None and self.new is not None and cache_results(self.base) != cache_results(self.new)

    @property
    def apart(self) -> str | None:
        """Why its time is not in the ratio (None: it is): it is one run's compile work, its cache results
        differ (the times measure the cache, not the code), or a time is unknown."""
        if self.no_longer_compiled:
            return EAGER
        if self.base is None:
            return ONLY_NEW
        if self.new is None:
            return ONLY_BASE
        if not self.cache_known:
            return "cache results not recorded (an older summary.json)"
        if self.cache_differs:
            return f"cache results differ: BASE {_cache_words(self.base)} / NEW {_cache_words(self.new)}"
        unknown = [side for side, c in (("BASE", self.base), ("NEW", self.new)) if _total(c) is None]
        if unknown:
            return f"compile time unknown in {' and '.join(unknown)}"
        return None

    @property
    def time_comparable(self) -> bool:
        return self.apart is None


def compile_pairs(b_list: list[CompileSummary], n_list: list[CompileSummary], cache_known: bool = True) -> list[CompilePair]:
    """A frame's compiles in BASE and in NEW, paired in order."""
    regressed = bool(b_list) and any(map(runs_eagerly, n_list)) and not any(map(runs_eagerly, b_list))
    return [CompilePair(_nth(b_list, i), _nth(n_list, i), regressed, cache_known) for i in range(max(len(b_list), len(n_list)))]


def _add_work(work: Work, seconds: float | None) -> None:
    work.compiles += 1
    if seconds is None:
        work.unknown += 1
    else:
        work.seconds = _round(work.seconds + seconds)


class TimeTally:
    """Compile time added up pair by pair: the comparable pairs (the ratio), the pairs left apart, and
    the compile work only one run did."""

    def __init__(self, cache_known: bool) -> None:
        self.cache_known = cache_known
        self.base = self.new = 0.0
        self.compared = self.paired = self.cache_differs = self.lost = 0
        self.base_hits = self.new_hits = 0
        self.paired_seconds = 0.0  # both runs' seconds of the pairs whose times are known
        self.apart: list[ApartPair] = []
        self.apart_count = 0
        self.base_only, self.new_only = Work(), Work()

    def add(self, p: CompilePair) -> None:
        b, n = _total(p.base), _total(p.new)
        why = p.apart
        if p.base is not None and p.new is not None and not p.no_longer_compiled:
            self.paired += 1
            self.paired_seconds += (b or 0.0) + (n or 0.0)
        if why is None:
            self.compared += 1
            self.base += b or 0.0
            self.new += n or 0.0
            return
        if p.no_longer_compiled:
            self.lost += 1
        if p.one_run:  # one run's compile work
            if p.base is not None:
                _add_work(self.base_only, b)
            if p.new is not None:
                _add_work(self.new_only, n)
            return
        assert p.base is not None and p.new is not None  # both runs have it (not `one_run`)
        if p.cache_differs:
            self.cache_differs += 1
            self.base_hits += p.base.cache_count("hit")
            self.new_hits += p.new.cache_count("hit")
        self.apart_count += 1
        if len(self.apart) < APART_NAMED:  # only these are named: a list of every one would grow with the run
            self.apart.append(ApartPair(p.base.id, p.new.id, why))

    @property
    def share(self) -> float | None:
        """Of the paired compile time, the comparable pairs' part."""
        if not self.paired_seconds:
            return None
        return round((self.base + self.new) / self.paired_seconds, 4)

    @property
    def why_not(self) -> str | None:
        """Why the compile times cannot be compared; None when they can."""
        if not self.cache_known:
            return NO_CACHE_RESULTS
        share = self.share
        enough = self.compared > 0 and share is not None and share >= MIN_COMPARABLE_SHARE
        if enough:
            return None
        if self.cache_differs:
            if self.base_hits > self.new_hits:
                what = f"BASE hit the cache {self.base_hits - self.new_hits} times where NEW missed"
            elif self.new_hits > self.base_hits:
                what = f"NEW hit the cache {self.new_hits - self.base_hits} times where BASE missed"
            else:
                what = f"{self.cache_differs} paired compiles had different cache results"
            if self.compared:
                what += (f"; the {self.compared} paired compile(s) with the same cache results are {share or 0:.0%} of the paired "
                         f"compile time, under {MIN_COMPARABLE_SHARE:.0%}")
            return f"cache states differ: {what}: compile times are not comparable"
        if self.apart_count:
            named = ", ".join(f"{a.base} → {a.new} ({a.why})" for a in self.apart[:3])
            return f"too few paired compiles can be compared: {named}{' and more' if self.apart_count > 3 else ''}"
        if self.lost and not self.paired:
            return "every compile the runs share is one NEW no longer compiles: no time is left to compare"
        if not self.paired:
            return "no compile is in both runs: no time is left to compare (see base-only and new-only compile work)"
        return "no paired compile logged a time in either run"

    def done(self) -> CompileTimes:
        why = self.why_not
        time = timed(self.base if self.compared else None, self.new if self.compared else None, why is None)
        return CompileTimes(
            base=time.base, new=time.new, delta=time.delta, ratio=time.ratio, comparable=why is None, why_not=why, compared=self.compared,
            cache_differs=self.cache_differs, no_longer_compiled=self.lost, paired=self.paired, comparable_share=self.share,
            apart=self.apart, apart_count=self.apart_count, base_only=self.base_only, new_only=self.new_only,
        )


# ------------------------------------------------------------------------------------------------
# one report against another


def compare(base: Summary, new: Summary, how: Pairing = Pairing()) -> Comparison:
    """The comparison of two single-process summaries."""
    base_files, new_files = Files.of(user_paths(base), how.source_root), Files.of(user_paths(new), how.source_root)
    base_frames, new_frames = frames_of(base, base_files), frames_of(new, new_files)
    # how every view names a place of each run: relative to its root (a runner's absolute paths mean nothing to a reader)
    names = Roots.of(base.compiles, how.source_root), Roots.of(new.compiles, how.source_root)
    files = file_map(user_files(base_frames), user_files(new_frames), how.pairs)
    pairs = pair_frames(base_frames, new_frames, files)
    cache_known = base.cache_known and new.cache_known
    time = TimeTally(cache_known)
    frames: Rows = Rows()
    failures, eager, op_counts = Failures(), list[EagerRow](), list[OpCountRow]()
    counts = Counts()
    b_sites, n_sites = break_sites(base, base_files, files, renamed_functions(pairs)), break_sites(new, new_files)
    # the frames the page draws, with the graph breaks new and gone (the rows of `graph_breaks`) their compiles logged
    top = TopFrames(base, new, (v for k, v in n_sites.items() if k not in b_sites), (v for k, v in b_sites.items() if k not in n_sites))
    for index, frame_pair in enumerate(pairs):
        b_list, n_list = compiles_of(frame_pair.base, base.compiles), compiles_of(frame_pair.new, new.compiles)
        compiles = compile_pairs(b_list, n_list, cache_known)
        row = _frame_row(frame_pair, b_list, n_list, compiles, counts, (base_files, new_files), names)
        frames.append(row)
        if top.wants(index, row):
            top.add(index, row, (frame_pair.base, frame_pair.new), (b_list, n_list),
                    [PairTime(_round(_total(p.base)), _round(_total(p.new)), p.verdict, p.apart) for p in compiles])
        first = (n_list or b_list)[0]  # the frame's name and place are its first compile's
        key = (first.frame, first.user_location, first.inside, names[1 if n_list else 0].name(first.user_location))
        eager_from = next((c for c in n_list if runs_eagerly(c)), None)  # the compile NEW's frame ran eagerly from
        for i, p in enumerate(compiles):
            time.add(p)
            b_fail, n_fail = _failed(p.base), _failed(p.new)
            if n_fail and (not b_fail or b_fail.type != n_fail.type):
                failures.new.append(_failure_row(key, p, n_fail, names[1]))
            if b_fail and (not n_fail or b_fail.type != n_fail.type):
                failures.fixed.append(_failure_row(key, p, b_fail, names[0]))
            if p.no_longer_compiled:
                assert eager_from is not None
                eager.append(_eager_row(key, p, eager_from))
            if p.base is not None and p.new is not None and p.base.graph_op_count != p.new.graph_op_count:
                op_counts.append(OpCountRow(key[0], key[1], key[2], i, _ref(p.base), _ref(p.new),
                                            pair(p.base.graph_op_count, p.new.graph_op_count), key[3]))
    return Comparison(
        totals=_totals(base, new),
        time=time.done(),
        graph_breaks=_graph_breaks(b_sites, n_sites, names),
        frames=frames.done(),
        failures=failures,
        no_longer_compiled=eager,
        graph_op_counts=op_counts,
        vllm=_vllm(base, new),
        frame_times=top.done(),
    )


def _totals(base: Summary, new: Summary) -> dict[str, Any]:
    """Every total (totals.py), before and after. A duration's raw totals are times, never a ratio:
    the one ratio is the comparable pairs' (`CompileTimes.ratio`)."""
    b, n = totals_of(base.compiles), totals_of(new.compiles)
    rows = {t.name: (timed(b[t.name], n[t.name], comparable=False) if t.seconds else pair(b[t.name], n[t.name])) for t in TOTALS}
    return nested(rows)


class Rows:
    """A comparison's frame rows, which go to a scratch file past ROWS_IN_MEMORY rows."""

    def __init__(self) -> None:
        self.rows: list[FrameRow] | SpooledFrames = []

    def append(self, row: FrameRow) -> None:
        if isinstance(self.rows, list) and len(self.rows) >= ROWS_IN_MEMORY:
            self.rows = SpooledFrames(self.rows)
        self.rows.append(row)

    def done(self) -> list[FrameRow] | SpooledFrames:
        return self.rows


class Counts(dict[tuple[Any, ...], Change]):
    """`pair` of two counts, one object for every row with the same two (of the same types): a diff of
    100,000s of compiles has a few distinct op counts, compile counts and cache counts, and an object
    each would cost more than the rest of its row. The rows hold them; nothing changes them (frozen)."""

    def __call__(self, base: Any, new: Any) -> Change:
        key = (type(base), base, type(new), new)
        found = self.get(key)
        if found is None:
            found = self[key] = pair(base, new)
        return found


def _in_root(text: str, files: Files) -> str:
    """The text with its run's root taken out of the paths it names (torch writes a guard's file with and
    without its leading slash): the same recompile reason of a checkout at another path is the same."""
    if not files.root or files.root == "/":
        return text
    root = files.root.rstrip("/") + "/"
    return text.replace(root, "").replace(root.lstrip("/"), "")


def _frame_row(frame_pair: FramePair, b_list: list[CompileSummary], n_list: list[CompileSummary], compiles: list[CompilePair],
               counts: Callable[[Any, Any], Change] = pair, roots: tuple[Files, Files] = (Files(""), Files("")),
               names: tuple[Roots, Roots] = (Roots(), Roots())) -> FrameRow:
    b_reasons = {_in_root(r, roots[0]) for c in b_list for r in c.recompile_reasons}
    new_reasons: list[str] = []
    for c in n_list:
        for r in c.recompile_reasons:
            if _in_root(r, roots[1]) not in b_reasons and r not in new_reasons:
                new_reasons.append(r)
    rows = []
    for p in compiles:
        apart = p.apart
        rows.append(PairRow(_ref(p.base), _ref(p.new), timed(_total(p.base), _total(p.new), apart is None),
                            counts(p.base.graph_op_count if p.base else None, p.new.graph_op_count if p.new else None), apart is None, apart))
    base, new = frame_pair.base, frame_pair.new
    first = (n_list or b_list)[0]  # a frame's name and place are its first compile's
    return FrameRow(
        frame=first.frame,
        user_location=first.user_location,
        inside=first.inside,
        presence="both" if base and new else ("new" if new else "gone"),
        pairing=frame_pair.how,
        base_frame=b_list[0].frame if b_list else None,
        base_user_location=b_list[0].user_location if b_list else None,
        moved=_moved(base, new),
        regression=EAGER if any(p.no_longer_compiled for p in compiles) else None,
        compiles=counts(len(b_list), len(n_list)),
        recompiles=counts(sum(c.is_recompile for c in b_list), sum(c.is_recompile for c in n_list)),
        new_recompile_reasons=new_reasons,
        # the frame's raw times; a ratio only where every pair of it is comparable
        compile_time_s=timed(_sum([_total(c) for c in b_list]) if b_list else None, _sum([_total(c) for c in n_list]) if n_list else None,
                             all(r.time_comparable for r in rows)),
        cache={r: counts(sum(c.cache_count(r) for c in b_list), sum(c.cache_count(r) for c in n_list)) for r in CACHE_RESULTS},
        pairs=rows,
        where=names[1 if n_list else 0].name(first.user_location),
    )


def _vllm(base: Summary, new: Summary) -> VllmChange | None:
    """vLLM's pieces paired by compile call (its prefix), submod and range or size: the pieces only one
    run compiled, and the passes whose effect on the graph changed (e.g. "no longer changes the graph")."""
    if base.vllm is None and new.vllm is None:
        return None
    b_pieces, n_pieces = _pieces(base), _pieces(new)
    b_passes, n_passes = _pass_effects(base), _pass_effects(new)
    passes = [
        PassRow(call, name, b_passes.get((call, name)), n_passes.get((call, name)))
        for call, name in list(b_passes) + [k for k in n_passes if k not in b_passes]
        if b_passes.get((call, name)) != n_passes.get((call, name))
    ]
    return VllmChange(
        new_pieces=[PieceRow(*k) for k in n_pieces if k not in b_pieces],
        gone_pieces=[PieceRow(*k) for k in b_pieces if k not in n_pieces],
        pieces=pair(len(b_pieces), len(n_pieces)),
        passes=passes,
    )


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


def _moved(base: Frame | BreakSite | None, new: Frame | BreakSite | None) -> Moved | None:
    """The line it moved from and to, when only its line changed."""
    if base is None or new is None or base.line is None or new.line is None or base.line == new.line:
        return None
    return Moved(base.line, new.line)


Key = tuple[str | None, str | None, str, str | None]  # a frame's name, user_location, library it is in, and user_location as named


def _failure_row(key: Key, p: CompilePair, failure: Failure, names: Roots) -> FailureRow:
    """A failure of one side (`names`: how that side names its places)."""
    return FailureRow(key[0], key[1], key[2], _ref(p.base), _ref(p.new), failure.type, failure.reason, failure.user_location,
                      where=key[3], failed_where=names.name(failure.user_location), message=failure.message or None)


def _eager_row(key: Key, p: CompilePair, eager_from: CompileSummary) -> EagerRow:
    """A compile BASE had that NEW no longer compiles: how its frame runs eagerly (skipped, or the
    recompile limit: as the compile NEW ran it eagerly from says), and torch's reason."""
    eager = p.new if p.new is not None else eager_from
    failure = eager.failure
    return EagerRow(
        key[0], key[1], key[2], _ref(p.base), _ref(p.new),
        outcome="recompile limit" if eager.hit_recompile_limit else "skipped",
        reason=failure.reason if failure is not None else None,
        lost_compile_time_s=_total(p.base),
        where=key[3],
    )


def _graph_breaks(base: dict[BreakKey, BreakSite], new: dict[BreakKey, BreakSite], names: tuple[Roots, Roots] = (Roots(), Roots())) -> GraphBreaks:
    """Graph breaks new in NEW, gone since BASE, logged a different number of times, and moved; a row is
    of NEW's break but for a gone one (BASE's), and named as its run names its places (`names`)."""

    def row(key: BreakKey, side: BreakSite, named: Roots = names[1]) -> BreakRow:
        brk = side.brk
        return BreakRow(
            reason=brk.reason,
            user_location=brk.user_location,
            user_source=brk.user_source or None,
            registry_id=brk.registry_id or None,
            explanation=brk.explanation or None,
            hints=list(brk.hints),
            doc_url=brk.doc_url or None,
            torch_break=brk.torch_break,
            count=pair(len(base[key].breaks) if key in base else 0, len(new[key].breaks) if key in new else 0),
            frames=list(dict.fromkeys(c.frame for c in side.breaks)),
            compiles=list(dict.fromkeys(c.id for c in side.breaks)),
            moved=_moved(base.get(key), new.get(key)),
            where=named.name(brk.user_location),
        )

    return GraphBreaks(
        new=[row(k, v) for k, v in new.items() if k not in base],
        gone=[row(k, v, names[0]) for k, v in base.items() if k not in new],
        changed=[row(k, v) for k, v in new.items() if k in base and len(base[k].breaks) != len(v.breaks)],
        moved=[row(k, v) for k, v in new.items() if k in base and _moved(base[k], v) is not None],
    )


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
         how: Pairing = Pairing()) -> Diff:
    """The whole diff of two summaries: of two reports, or rank by rank of two multi-rank reports.
    A summary may also be given as the dict summary.json holds (`Analysis.to_dict()`). Its JSON
    (`diff.json`) is `to_builtins(...)`.

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
    out = Diff(
        schema_version=SCHEMA_VERSION,
        generator=Generator("tlparse-py", __version__),
        base=DiffSide(base_path, _one(b_versions), len(base.ranks) if isinstance(base, RanksSummary) else None, base.program),
        new=DiffSide(new_path, _one(n_versions), len(new.ranks) if isinstance(new, RanksSummary) else None, new.program),
        torch_versions_differ=not same,
        notes=notes,
        comparison=None,
        ranks=[],
    )
    if isinstance(base, RanksSummary) and isinstance(new, RanksSummary):
        out.ranks = _ranks(base, new, how)
    elif isinstance(base, Summary) and isinstance(new, Summary):
        out.comparison = compare(base, new, how)
    parts = out.comparisons()
    out.notes += sorted({note for c in parts for note in c.notes})
    out.totals = combined_totals(parts)
    measured = measure_gates(parts)
    out.metrics = {gate.name: measured[gate.name].value for gate in DIFF_GATES}
    out.unchecked = {gate.name: why for gate in DIFF_GATES if (why := measured[gate.name].why_not)}
    return out


def _one(versions: list[str]) -> str | None:
    return versions[0] if len(versions) == 1 else (" / ".join(versions) if versions else None)


def _ranks(base: RanksSummary, new: RanksSummary, how: Pairing) -> list[RankRow]:
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
        rows.append(RankRow(rank, str(folder), note, comparison))
    return rows


def combined_totals(parts: Sequence[Comparison]) -> dict[str, Any]:
    """Every total before and after, over ranks combined as its declaration says (`Total.over_ranks`):
    the figures the diff's Markdown shows, the same as each report's own summary says. Times, never
    a ratio (the diff's one ratio is `compile_time_ratio`)."""
    rows: dict[str, Shown] = {}
    for total in TOTALS:
        rows_of = [c.total(total.name) for c in parts]
        base = total.combine([r.base for r in rows_of])
        new = total.combine([r.new for r in rows_of])
        change = timed(base.value, new.value) if total.seconds else pair(base.value, new.value)
        shown = (base.text, new.text) if len(parts) > 1 else (total.show(base.value), total.show(new.value))
        rows[total.name] = Shown(change.base, change.new, change.delta, *shown)
    return nested(rows)
