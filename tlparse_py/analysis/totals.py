"""The report's totals, each declared once: what it counts, how it combines over ranks, and which
compiles are behind it.

Everything that shows or checks a total reads these declarations: `summary.json` `totals` (a dotted
name nests: `cache.hit` is `totals.cache.hit`), the index's cards, the Markdown tables, the
`--fail-on` names, help and messages, the rows of `diff`, and the multi-rank figures. Adding a total
is one `Total(...)` below, plus its entry in `summary.schema.json`.

The diff's gates are declared here too (`DIFF_GATES`): what each is called and counts in one
comparison of two runs (`compared.Comparison`, whose fields it reads), which total's rule combines
it over ranks, how its value is shown, and what it names when it fails. Every view of a diff (its
page, Markdown, diff.json `metrics` and the `Diff:` line) lists the gates from there. Both kinds of
gate are checked by `check_report` and `check_diff`, in the condition language of `conditions.py`;
a failed diff gate is data (`GateFailure`) that every view reads.

A total is computed from a report's compiles (`CompileSummary`), so it is the same number whether
the report was just built from a log or loaded back from its `summary.json`. Each also says how a
live report keeps it while the log is still being read (`Total.live`: a count added per compile, a
count of distinct frames, seconds added in log order), so that the live index asks the declarations
for every total and computes none itself, nor any over every compile again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from itertools import islice
from typing import Any, Protocol

from msgspec import Struct
from msgspec.structs import replace

from ..units import format_seconds
from .compared import BreakRow, Change, Comparison, EagerRow, FailureRow, Timed, Work
from .conditions import Condition, unknown, violated
from .roots import Roots
from .compile_groups import slowest
from .summary import CACHE_RESULTS, CompileSummary, RankEntry, RanksSummary, Summary, first_line, once

Value = int | float | None
Involved = list[tuple[CompileSummary, str]]  # (a compile behind the number, a detail such as "(2)")


class Combined(Struct, frozen=True):
    """A total over several ranks: the number a gate compares, how a table shows it, and what it is."""

    value: Value
    text: str
    phrase: str  # for gate messages: "compile_time_s is 12.5 on the slowest rank"
    # the value is one rank's (the most, the slowest): a gate's condition holds on the ranks whose own
    # value it holds for; False when every rank adds to it (summed)
    one_rank: bool = True


def _show(value: Value, seconds: bool) -> str:
    if value is None:
        return "unknown"
    return format_seconds(value) if seconds else str(value)


def summed(values: Sequence[Value], seconds: bool) -> Combined:
    """Ranks add up (failures, cache lookups: each rank's are its own); unknown when any rank's is unknown."""
    if any(v is None for v in values):
        return Combined(None, "unknown", " summed over ranks", one_rank=False)
    total: int | float = sum(v for v in values if v is not None)
    if isinstance(total, float):
        total = round(total, 6)
    return Combined(total, _show(total, seconds), " summed over ranks", one_rank=False)


def per_rank(values: Sequence[Value], seconds: bool) -> Combined:
    """Every rank runs the same program: what one rank did, not the sum ("6 on every rank", "5–6 per
    rank"); a gate compares the rank with the most."""
    known = [v for v in values if v is not None]
    if not known or len(known) < len(values):
        return Combined(None, "unknown", " on the rank with the most")
    low, high = min(known), max(known)
    if len(known) == 1:
        return Combined(high, _show(high, seconds), "")
    text = f"{_show(high, seconds)} on every rank" if low == high else f"{_show(low, seconds)}–{_show(high, seconds)} per rank"
    return Combined(high, text, " on the rank with the most")


def in_parallel(values: Sequence[Value], seconds: bool) -> Combined:
    """Ranks compile at the same time: the slowest rank is what the job waits for, the median what is typical."""
    known = [v for v in values if v is not None]
    if not known or len(known) < len(values):
        return Combined(None, "unknown", " on the slowest rank")
    high = max(known)
    if len(known) == 1:
        return Combined(high, _show(high, seconds), "")
    from statistics import median as median_of  # only over ranks: statistics imports fractions and decimal

    median = median_of(known)
    return Combined(high, f"max {_show(high, seconds)}, median {_show(median, seconds)} per rank", " on the slowest rank")


# -- how a total is kept while a log is still being read (a live report) -------------------------


class Tally(Protocol):
    """A total kept as a live report's compiles arrive and are built again: `put` is told each compile
    at its position in log order (a position seen before is a compile built again, which replaces
    the one there), `value` is the total over the compiles put so far. A live report asks nothing
    else of a total (`views.live_index`)."""

    def put(self, position: int, compile_: CompileSummary) -> None: ...

    def value(self) -> Value: ...


class Added(Struct, frozen=True):
    """How a count or a sum of each compile's counts is kept: its value is the sum of each compile's
    own (`Total.compute([c])`); a compile built again takes its old part away and adds its new one.
    Exact for counts (integers): a float part would drift by subtracting, so a sum of seconds is kept
    as `InOrder`."""

    def tally(self, total: Total) -> Tally:
        return _AddedTally(lambda c: total.compute([c]), total.compute([]))


class Distinct(Struct, frozen=True):
    """How a count of distinct things is kept (the frames compiled): how many compiles have each
    key, a key counted while any has it; None is no key."""

    key: Callable[[CompileSummary], Hashable | None]

    def over(self, compiles: Iterable[CompileSummary]) -> int:
        return len({k for c in compiles if (k := self.key(c)) is not None})

    def tally(self, total: Total) -> Tally:
        return _DistinctTally(self.key)


class InOrder(Struct, frozen=True):
    """How a sum of seconds is kept: each compile's known value (None: unknown, left out) added in log
    order, rounded to `digits`; None when no compile's is known. Floats added in another order may
    round to another last digit, so the live value is the running sum up to each position, added
    again from the first position built again: a new compile adds one number."""

    seconds: Callable[[CompileSummary], float | None]
    digits: int = 6

    def over(self, compiles: Iterable[CompileSummary]) -> Value:
        running, known = 0.0, False
        for c in compiles:
            value = self.seconds(c)
            if value is not None:
                running, known = running + value, True  # in log order: as the live tally adds them
        return round(running, self.digits) if known else None

    def tally(self, total: Total) -> Tally:
        return _InOrderTally(self)


class _AddedTally:
    def __init__(self, part: Callable[[CompileSummary], Value], nothing: Value):
        self.part = part
        self.parts: list[Value] = []  # position → that compile's part
        self.sum = nothing

    def put(self, position: int, compile_: CompileSummary) -> None:
        now = self.part(compile_)
        if position == len(self.parts):
            self.parts.append(now)
            self.sum = _plus(self.sum, now)
        else:
            self.sum = _plus(_minus(self.sum, self.parts[position]), now)
            self.parts[position] = now

    def value(self) -> Value:
        return self.sum


class _DistinctTally:
    def __init__(self, key: Callable[[CompileSummary], Hashable | None]):
        self.key = key
        self.keys: list[Hashable | None] = []  # position → that compile's key
        self.counts: Counter[Hashable] = Counter()  # key → the compiles that have it

    def put(self, position: int, compile_: CompileSummary) -> None:
        now = self.key(compile_)
        if position == len(self.keys):
            self.keys.append(None)
        before = self.keys[position]
        self.keys[position] = now
        if before is not None:
            self.counts[before] -= 1
            if not self.counts[before]:
                del self.counts[before]
        if now is not None:
            self.counts[now] += 1

    def value(self) -> Value:
        return len(self.counts)


class _InOrderTally:
    def __init__(self, rule: InOrder):
        self.rule = rule
        self.values: list[float | None] = []  # position → that compile's known value
        self.running: list[float] = []  # position → the sum of the known values up to it, in order
        self.known = 0  # positions with a known value
        self.stale = 0  # `running` holds from here on a sum to add again

    def put(self, position: int, compile_: CompileSummary) -> None:
        now = self.rule.seconds(compile_)
        if position == len(self.values):
            self.values.append(None)
            self.running.append(0.0)
        elif now == self.values[position]:
            return
        before = self.values[position]
        self.known += (now is not None) - (before is not None)
        self.values[position] = now
        self.stale = min(self.stale, position)

    def value(self) -> Value:
        running = self.running[self.stale - 1] if self.stale else 0.0
        for position in range(self.stale, len(self.values)):
            value = self.values[position]
            if value is not None:
                running += value
            self.running[position] = running
        self.stale = len(self.values)
        return round(running, self.rule.digits) if self.known else None


LiveRule = Added | Distinct | InOrder


def _plus(a: Value, b: Value) -> Value:
    return None if a is None or b is None else a + b


def _minus(a: Value, b: Value) -> Value:
    return None if a is None or b is None else a - b


class Total(Struct, frozen=True):
    name: str  # the summary.json key and the --fail-on name; `a.b` nests b under a
    label: str  # what it counts, in a few words ("failed compiles"): diff rows and cards
    column: str  # the heading it is shown under; totals sharing one are shown together, "a / b"
    description: str  # what it counts (--fail-on help, README)
    compute: Callable[[Sequence[CompileSummary]], Value]
    involved: Callable[[Sequence[CompileSummary]], Involved]  # the compiles behind it, named by a failed gate
    over_ranks: Callable[[Sequence[Value], bool], Combined] = summed
    seconds: bool = False  # a duration: shown in seconds, and diffed as a ratio too
    what: str = "compiles"  # what the involved compiles are, in a gate message ("slowest")
    better: str = "lower"  # which way is an improvement between two runs: "lower", "higher" or "none"
    # how a live report keeps it as compiles arrive and are built again, never computing it over them
    # all (views.live_index): the sum of each compile's (`compute([c])`), unless declared otherwise
    live: LiveRule = Added()

    @property
    def additive(self) -> bool:
        """Its value is the sum of each compile's: added up a batch of compiles at a time (`totals_of`)."""
        return isinstance(self.live, Added)

    def tally(self) -> Tally:
        """A fresh tally of it for a live report, kept as its declaration says (`live`)."""
        return self.live.tally(self)

    def show(self, value: Value) -> str:
        return _show(value, self.seconds)

    def combine(self, values: Sequence[Value]) -> Combined:
        return self.over_ranks(values, self.seconds)


# -- how each total is computed ----------------------------------------------------------------


# a frame id reused after torch._dynamo.reset() is another frame: its identity holds the generation
_FRAMES = Distinct(lambda c: c.frame_identity)
# each compile's forward plus its lazy backward compile; unknown (None, never 0) when none logged one,
# with no compile at all too (an export, AOTInductor or an excerpt compiles outside any compile id)
_COMPILE_TIME = InOrder(lambda c: c.compile_time_s.total)


def _first_of_each_frame(compiles: Sequence[CompileSummary]) -> Involved:
    firsts: dict[Any, CompileSummary] = {}
    for c in compiles:
        firsts.setdefault(c.frame_identity if c.frame_identity is not None else c.key, c)
    return [(c, "") for c in firsts.values()]


def _slowest(compiles: Sequence[CompileSummary]) -> Involved:
    return [(c, format_seconds(c.compile_time_s.total)) for c in slowest(compiles, 5)]


def _breaks_where(compiles: Sequence[CompileSummary]) -> Involved:
    """Each compile with graph breaks of the user's, and where in the user's code they are, named from the
    run's root as every summary names them: `(2 at model.py:30, model.py:41)`."""
    roots = Roots.of(compiles)
    return [(c, f"({len(breaks)} at {', '.join(dict.fromkeys(str(roots.name(b.user_location)) for b in breaks))})")
            for c in compiles if (breaks := c.user_breaks)]


def _torch_breaks_where(compiles: Sequence[CompileSummary]) -> Involved:
    """Each compile with torch's graph breaks, and which: `(torch's own break (optimizer.py:79))`."""
    return [(c, f"({', '.join(dict.fromkeys(b.owner for b in breaks))})") for c in compiles if (breaks := c.torch_breaks)]


def _cache(result: str) -> Total:
    return Total(
        f"cache.{result}", f"cache {result}{'es' if result.endswith('s') else 's'}", "cache hit / miss / bypass",
        f"cache lookups (FX graph, AOTAutograd, ...) that were a {result}",
        compute=lambda cs: sum(c.cache_count(result) for c in cs),
        involved=lambda cs: [(c, f"({n})") for c in cs if (n := c.cache_count(result))],
        better="higher" if result == "hit" else "lower",
    )


TOTALS: tuple[Total, ...] = (
    Total("compiles", "compiles", "compiles", "compiles: a frame compile with all its attempts, once per generation of its id",
          compute=len, involved=lambda cs: [(c, "") for c in cs], over_ranks=per_rank, better="none"),
    Total("frames", "frames", "frames", "compiled functions (a frame id reused after torch._dynamo.reset() is another frame)",
          compute=_FRAMES.over, involved=_first_of_each_frame, over_ranks=per_rank, better="none", live=_FRAMES),
    Total("graph_breaks", "graph breaks", "graph breaks", "graph breaks, each (reason, user location) once per compile; "
          "not torch's own (torch_graph_breaks)",
          compute=lambda cs: sum(len(c.user_breaks) for c in cs), involved=_breaks_where, over_ranks=per_rank),
    # neither fewer nor more is the user's doing: torch breaks there whenever its code (an optimizer step) is compiled
    Total("torch_graph_breaks", "torch's graph breaks", "torch's graph breaks",
          "torch's own graph breaks: its torch._dynamo.graph_break() call inside torch, on purpose (a compiled optimizer "
          "step); not counted in graph_breaks",
          compute=lambda cs: sum(len(c.torch_breaks) for c in cs), involved=_torch_breaks_where, over_ranks=per_rank,
          better="none"),
    Total("recompiles", "recompiles", "recompiles", "compiles of a frame that had compiled before, after a guard failed "
          "(not the compile over the recompile limit, which compiled nothing)",
          compute=lambda cs: sum(1 for c in cs if c.is_recompile), involved=lambda cs: [(c, "") for c in cs if c.is_recompile],
          over_ranks=per_rank),
    Total("retries", "retries", "retries", "compiles of a frame right after its compile failed, with no guard failure logged",
          compute=lambda cs: sum(1 for c in cs if c.is_retry), involved=lambda cs: [(c, "") for c in cs if c.is_retry], over_ranks=per_rank),
    Total("restarts", "restarts", "restarts", "times Dynamo restarted the analysis of a frame within a compile",
          compute=lambda cs: sum(c.restarts for c in cs), involved=lambda cs: [(c, f"({c.restarts})") for c in cs if c.restarts],
          over_ranks=per_rank),
    Total("failed", "failed compiles", "failed", "compiles that failed (their metrics logged an exception)",
          compute=lambda cs: sum(1 for c in cs if c.failed),
          involved=lambda cs: [(c, f"({c.failure.type})") for c in cs if c.failed and c.failure is not None]),
    Total("skipped", "skipped frames", "skipped", "compiles torch gave up on on purpose: the frame ran eagerly",
          compute=lambda cs: sum(1 for c in cs if c.skipped), involved=lambda cs: [(c, "") for c in cs if c.skipped],
          over_ranks=per_rank),
    Total("recompile_limit", "recompile limit hits", "recompile limit",
          "compiles over torch's recompile limit (torch._dynamo.config.recompile_limit): nothing compiled, the frame runs eagerly "
          "from then on; not a failure",
          compute=lambda cs: sum(1 for c in cs if c.hit_recompile_limit),
          involved=lambda cs: [(c, f"({c.frame})" if c.frame else "") for c in cs if c.hit_recompile_limit], over_ranks=per_rank),
    Total("compile_time_s", "compile time", "compile time", "seconds of compile time: each compile's forward plus its lazy backward compile",
          compute=_COMPILE_TIME.over, involved=_slowest, over_ranks=in_parallel, seconds=True, what="slowest", live=_COMPILE_TIME),
    *(_cache(result) for result in CACHE_RESULTS),
)
BY_NAME = {total.name: total for total in TOTALS}


TOTALS_BATCH = 1000  # compiles read at a time for the additive totals


def totals_of(compiles: Sequence[CompileSummary]) -> dict[str, Value]:
    """Every total of a report, by name (of compiles in a scratch file, computed once: the index,
    the failures page, summary.json and summary.md all ask; `summary.once`)."""
    return dict(once(compiles, "totals", _totals_of))


def _totals_of(compiles: Sequence[CompileSummary]) -> dict[str, Value]:
    """Every total of a report, by name.

    The additive totals (a count, the sum of each compile's) are added up a batch at a time, all
    together: a diff's summary of 10^6 compiles is a scratch file (`spools.SpooledCompiles`) read
    once for them, not once a total. Each of the others reads the compiles once more."""
    sums: dict[str, Value] = {total.name: 0 for total in TOTALS if total.additive}
    remaining = iter(compiles)
    while batch := list(islice(remaining, TOTALS_BATCH)):
        for total in TOTALS:
            if total.additive:
                sums[total.name] = (sums[total.name] or 0) + (total.compute(batch) or 0)
    return {total.name: sums[total.name] if total.additive else total.compute(compiles) for total in TOTALS}


def live_tallies() -> dict[str, Tally]:
    """A fresh tally of every total, by name, for a live report (`Total.live`)."""
    return {total.name: total.tally() for total in TOTALS}


def nested(values: Mapping[str, Any]) -> dict[str, Any]:
    """summary.json's `totals`: dotted names nested (`cache.hit` → `{"cache": {"hit": ...}}`)."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        head, _, leaf = name.partition(".")
        if leaf:
            out.setdefault(head, {})[leaf] = value
        else:
            out[name] = value
    return out


def value_at(nested_values: dict[str, Any], name: str) -> Any:
    """A total's entry in a nested totals dict (summary.json's, diff.json's): `cache.hit` → `["cache"]["hit"]`."""
    found: Any = nested_values
    for part in name.split("."):
        found = found.get(part) if isinstance(found, dict) else None
    return found


def columns() -> list[tuple[str, list[Total]]]:
    """The totals grouped by the column they are shown in, in declaration order."""
    grouped: dict[str, list[Total]] = {}
    for total in TOTALS:
        grouped.setdefault(total.column, []).append(total)
    return list(grouped.items())


def over_ranks(per_rank_values: Sequence[dict[str, Value]]) -> dict[str, Combined]:
    """Each total over several ranks' totals, combined as its declaration says."""
    return {total.name: total.combine([values.get(total.name) for values in per_rank_values]) for total in TOTALS}


def totals_line(summary: Summary | RanksSummary) -> str:
    """Every declared total in one line, as the terminal's `Report:` line says it: `compiles 5, frames
    5, graph breaks 3, ..., compile time 17.08 s`; over ranks, each combined as its declaration says
    (`compiles 5–9 per rank, ..., compile time max 11.19 s, median 8.53 s per rank, ...`)."""
    if isinstance(summary, Summary):
        values = totals_of(summary.compiles)
        shown = {total.name: total.show(values[total.name]) for total in TOTALS}
    else:
        combined = over_ranks([totals_of(entry.summary.compiles) for entry in summary.read if entry.summary is not None])
        shown = {name: c.text for name, c in combined.items()}
    return ", ".join(f"{column} {' / '.join(shown[total.name] for total in group)}" for column, group in columns())


# -- checking a report's totals ----------------------------------------------------------------

MAX_IDS = 8  # compile ids named per violated condition


def report_values(summary: Summary | RanksSummary) -> tuple[dict[str, Value], dict[str, str]]:
    """Each total's value (over ranks: combined), and what that value is, for the message."""
    if isinstance(summary, Summary):
        return totals_of(summary.compiles), {}
    combined = over_ranks([totals_of(entry.summary.compiles) for entry in summary.read if entry.summary is not None])
    return {name: c.value for name, c in combined.items()}, {name: c.phrase for name, c in combined.items()}


RankValues = list[tuple[RankEntry, dict[str, Value]]]  # each rank read, with its own totals


def _rank_values(summary: RanksSummary) -> RankValues:
    return [(entry, totals_of(entry.summary.compiles)) for entry in summary.read if entry.summary is not None]


def ranks_behind(total: Total, condition: Condition, ranks: RankValues) -> list[tuple[RankEntry, Value]]:
    """The ranks that make a condition on a total over ranks hold, with their own value, the most
    first: when the total is one rank's (the most, the slowest), those whose own value holds it (not
    a rank under the limit); when every rank adds to it (summed), those that add something."""
    one_rank = total.combine([values.get(total.name) for _, values in ranks]).one_rank
    behind = [(entry, values.get(total.name)) for entry, values in ranks]
    behind = [(entry, value) for entry, value in behind if (condition.holds(value) if one_rank else value)]
    return sorted(behind, key=lambda row: -(row[1] or 0))


def _behind(total: Total, condition: Condition, summary: Summary | RanksSummary, ranks: RankValues) -> tuple[list[str], str]:
    """The compiles behind a violated condition (labelled with their rank over ranks: the ranks that
    make it hold, the most first, only theirs), and those ranks with their values, in words."""
    if isinstance(summary, Summary):
        return [c.label + (f" {detail}" if detail else "") for c, detail in total.involved(summary.compiles)], ""
    behind = ranks_behind(total, condition, ranks)
    ids = [f"{entry.name} {c.label}" + (f" {detail}" if detail else "")
           for entry, _ in behind if entry.summary is not None for c, detail in total.involved(entry.summary.compiles)]
    named = ", ".join(f"{entry.name} ({total.show(value)})" for entry, value in behind[:MAX_IDS])
    more = f", +{len(behind) - MAX_IDS} more" if len(behind) > MAX_IDS else ""
    one_rank = total.combine([values.get(total.name) for _, values in ranks]).one_rank
    return ids, (f"; it holds on {named}{more}" if one_rank else f"; from {named}{more}") if named else ""


def _shown(value: float | int) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def check_report(conditions: Sequence[Condition], summary: Summary | RanksSummary) -> tuple[list[str], list[str]]:
    """(a line per violated condition naming the compiles behind it, a line per condition left
    unchecked because its number is unknown). Over ranks, the ranks that make a condition hold are
    named, and only their compiles (`ranks_behind`)."""
    values, phrases = report_values(summary)
    ranks = _rank_values(summary) if isinstance(summary, RanksSummary) else []
    failed = []
    for violation in violated(conditions, values):
        total = BY_NAME[violation.condition.name]
        ids, where = _behind(total, violation.condition, summary, ranks)
        listed = ", ".join(ids[:MAX_IDS]) + (f", +{len(ids) - MAX_IDS} more" if len(ids) > MAX_IDS else "")
        failed.append(f"{violation.condition}: {total.name} is {_shown(violation.value)}{phrases.get(total.name, '')}{where}"
                      + (f" ({total.what}: {listed})" if ids else ""))
    unchecked = [f"{c}: unknown ({c.name} is not known from this log), not checked" for c in unknown(conditions, values)]
    return failed, unchecked


# -- the diff's gates ---------------------------------------------------------------------------
# A comparison is one pair of runs (or of ranks): `compared.Comparison`, typed. A gate reads its fields.


class Measured(Struct, frozen=True):
    """A gate's value over every comparison, or why it is not known."""

    value: Value
    why_not: str | None = None  # "cache states differ: ..." when value is None


# how a gate's value is shown, by the kind of number it is
_SHOW: dict[str, Callable[[float | int], str]] = {
    "count": str,
    "delta": lambda v: f"{v:+d}" if isinstance(v, int) else f"{v:+g}",
    "ratio": lambda v: f"×{v:.2f}",
    "seconds": format_seconds,
}


class Behind(Struct, frozen=True):
    """One thing behind a diff gate's value, as data: what it is, the user code line it is at (as every
    view names it: relative to its run's root, the rows' `where`; None when it has none), what follows,
    and over ranks the rank folder it is in. Every view (the page, the Markdown, the terminal) words it
    by `text`."""

    what: str
    where: str | None = None
    then: str = ""
    rank: str = ""

    @property
    def text(self) -> str:
        """`rank_1: forward [0/0] at model.py:30: no longer compiled: ...`"""
        rank = f"{self.rank}: " if self.rank else ""
        at = f" at {self.where}" if self.where else ""
        return f"{rank}{self.what}{at}{self.then}"


class Gate(Struct, frozen=True):
    name: str  # the `diff --fail-on` name
    label: str  # what it is, in a few words: the `Diff:` line, the page and the Markdown ("compile time ratio")
    description: str  # what it measures (help, README)
    total: str  # the total whose over-ranks rule combines it (`Total.over_ranks`)
    count: Callable[[Comparison], Value]  # its value in one comparison
    names: Callable[[Comparison], list[Behind]]  # what is behind it in one comparison, one each
    # the whole value from every comparison, when it is not a count combined by `total`'s rule
    measure: Callable[[Sequence[Comparison]], Measured] | None = None
    unit: str = "count"  # how its value is shown: a key of _SHOW

    def of(self, parts: Sequence[Comparison]) -> Measured:
        if self.measure is not None:
            return self.measure(parts)
        if not parts:
            return Measured(None, "nothing was compared")
        combined = BY_NAME[self.total].combine([self.count(c) for c in parts])
        return Measured(combined.value, None if combined.value is not None else "unknown for these inputs")

    def show(self, value: Value) -> str:
        """Its value as every view shows it: `3`, `+2`, `×1.01`, `1.43 s`; "unknown" for None."""
        return "unknown" if value is None else _SHOW[self.unit](value)


def break_behind(row: BreakRow) -> Behind:
    """`new graph break GB0025: Call to ... at model.py:30. Hint: ...` (a diff's new graph-break row);
    a torch's graph break says so, without torch's hint (it is about torch's own code)."""
    kind = f"{row.registry_id}: " if row.registry_id else ""
    where = row.where or row.user_location
    if row.torch_break:
        return Behind(f"new torch's own graph break {kind}{row.reason}", where, " (on purpose, not counted in new_graph_breaks).")
    hint = f" Hint: {row.hints[0]}" if row.hints else ""
    return Behind(f"new graph break {kind}{row.reason}", where, f".{hint}")


def break_line(row: BreakRow) -> str:
    """`break_behind` in words: the Markdown's line for a new graph break."""
    return break_behind(row).text


def _seconds_text(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.3f} s"


def _time_ratio(parts: Sequence[Comparison]) -> Measured:
    """NEW / BASE compile time over the comparable pairs (`CompileTimes`), the slowest rank's over ranks
    (`compile_time_s` combines so); not checked when any run's times cannot be compared."""
    if not parts:
        return Measured(None, "nothing was compared")
    for c in parts:
        if not c.time.comparable:
            return Measured(None, c.time.why_not)
    rule = BY_NAME["compile_time_s"]
    base = rule.combine([c.time.base for c in parts]).value
    new = rule.combine([c.time.new for c in parts]).value
    if base is None or new is None or base == 0:
        return Measured(None, "unknown for these inputs")
    return Measured(round(new / base, 4))


def _ratio_names(c: Comparison) -> list[Behind]:
    t = c.time
    apart = f"; {t.apart_count} paired compile(s) left apart" if t.apart_count else ""
    return [Behind(f"{_seconds_text(t.base)} → {_seconds_text(t.new)} over {t.compared} paired compile(s) with the same cache results{apart}")]


def _work_names(work: Work, side: str) -> list[Behind]:
    if not work.compiles:
        return []
    return [Behind(f"{work.compiles} compile(s) only {side} has: {_seconds_text(work.known_seconds)}")]


def _recompiles_added(c: Comparison) -> int:
    return sum(int(max(0, f.recompiles.delta or 0)) for f in c.frames)


def _eager_behind(f: EagerRow) -> Behind:
    compile_ = f.new.id if f.new is not None else f"{f.base.id if f.base is not None else '?'} of BASE"
    reason = f": {first_line(f.reason)}" if f.reason else ""
    return Behind(f"{f.frame} {compile_}", f.where or f.user_location, f": no longer compiled: runs eagerly ({f.outcome}{reason})")


def _failure_behind(f: FailureRow) -> Behind:
    message = f": {f.message}" if f.message else ""
    return Behind(f"{f.frame} {f.new.id if f.new else ''}".rstrip(), f.where or f.user_location, f": {f.type}{message}")


def _miss(c: Comparison) -> Change | Timed:
    return c.total("cache.miss")


DIFF_GATES: tuple[Gate, ...] = (
    Gate("new_graph_breaks", "new graph breaks",
         "graph breaks in NEW that BASE did not have (by kind and source line, wherever the line moved); not torch's own", "graph_breaks",
         count=lambda c: len(c.graph_breaks.new_user_breaks), names=lambda c: [break_behind(g) for g in c.graph_breaks.new_user_breaks]),
    Gate("new_recompiles", "new recompiles", "recompiles NEW has beyond BASE's, summed over frames", "recompiles", count=_recompiles_added,
         names=lambda c: [Behind(str(f.frame), f.where or f.user_location, f": {f.recompiles.base} → {f.recompiles.new}")
                          for f in c.frames if (f.recompiles.delta or 0) > 0]),
    Gate("new_failures", "new failures",
         "compiles that fail in NEW but did not in BASE (a frame that runs eagerly is no failure: see new_skipped)",
         "failed", count=lambda c: len(c.failures.new),
         names=lambda c: [_failure_behind(f) for f in c.failures.new]),
    Gate("new_skipped", "no longer compiled",
         "compiles of BASE that NEW no longer compiles: torch skips the frame, or it hit the recompile limit, and it runs eagerly "
         "(every compile of BASE from there on)", "skipped", count=lambda c: len(c.no_longer_compiled),
         names=lambda c: [_eager_behind(f) for f in c.no_longer_compiled]),
    Gate("compile_time_ratio", "compile time ratio",
         "compile time NEW / BASE over the paired compiles with the same cache results (compiles only one run has are "
         "base_only_compile_s and new_only_compile_s); not checked when those pairs are under half of the paired compile time",
         "compile_time_s", count=lambda c: None, names=_ratio_names, measure=_time_ratio, unit="ratio"),
    Gate("base_only_compile_s", "base-only compile work",
         "seconds of the compiles only BASE has (gone frames, fewer recompiles, lost to the recompile limit, no longer compiled): "
         "never counted as a saving", "compile_time_s", count=lambda c: c.time.base_only.known_seconds,
         names=lambda c: _work_names(c.time.base_only, "BASE"), unit="seconds"),
    Gate("new_only_compile_s", "new-only compile work",
         "seconds of the compiles only NEW has (new frames, more recompiles, NEW's compiles over the recompile limit)",
         "compile_time_s", count=lambda c: c.time.new_only.known_seconds, names=lambda c: _work_names(c.time.new_only, "NEW"),
         unit="seconds"),
    Gate("cache_miss_delta", "cache misses", "cache misses, NEW - BASE", "cache.miss", count=lambda c: _miss(c).delta,
         names=lambda c: [Behind(f"misses {_miss(c).base} → {_miss(c).new}")], unit="delta"),
)
GATES_BY_NAME = {gate.name: gate for gate in DIFF_GATES}


def measure_gates(parts: Sequence[Comparison]) -> dict[str, Measured]:
    """Every diff gate's value over the comparisons (one, or one per rank)."""
    return {gate.name: gate.of(parts) for gate in DIFF_GATES}


class GateFailure(Struct, frozen=True):
    """A `--fail-on` condition that holds: what the page, the Markdown and the terminal all say of it."""

    gate: str  # its name
    condition: str  # as given: `compile_time_ratio>1.25`
    value: float | int
    limit: float  # the condition's number
    behind: list[Behind]  # what is behind it (over ranks, each with its rank folder), the first `limit` of them
    more: int = 0  # how many more there are

    @property
    def shown(self) -> str:
        return _shown(self.value)

    @property
    def details(self) -> str:
        """What is behind it, in one line: `a; b; and 3 more`."""
        return "; ".join([b.text for b in self.behind] + ([f"and {self.more} more"] if self.more else []))

    @property
    def line(self) -> str:
        """`compile_time_ratio>1.25: compile_time_ratio = 1.31 (...)`: the terminal's line."""
        details = self.details
        return f"{self.condition}: {self.gate} = {self.shown}" + (f" ({details})" if details else "")


class GateUnchecked(Struct, frozen=True):
    """A `--fail-on` condition whose value is unknown: not checked, and why."""

    gate: str
    condition: str
    why: str

    @property
    def line(self) -> str:
        return f"{self.condition}: not checked: {self.why}"


class Verdicts(Struct, frozen=True):
    failed: list[GateFailure]
    unchecked: list[GateUnchecked]


def check_diff(conditions: Sequence[Condition], sections: Sequence[tuple[str, Comparison]], limit: int = 5) -> Verdicts:
    """Each condition that holds, with what is behind it, and each not checked, with why.
    `sections` are (rank folder or "", comparison)."""
    measured = measure_gates([c for _, c in sections])
    values = {name: m.value for name, m in measured.items()}
    failed = []
    for violation in violated(conditions, values):
        gate = GATES_BY_NAME[violation.condition.name]
        items = [replace(behind, rank=folder) if folder else behind for folder, c in sections for behind in gate.names(c)]
        failed.append(GateFailure(gate.name, str(violation.condition), violation.value, violation.condition.threshold, items[:limit],
                                  max(0, len(items) - limit)))
    unchecked = [GateUnchecked(c.name, str(c), measured[c.name].why_not or "unknown for these inputs") for c in unknown(conditions, values)]
    return Verdicts(failed, unchecked)
