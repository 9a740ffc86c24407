"""The report's totals, each declared once: what it counts, how it combines over ranks, and which
compiles are behind it.

Everything that shows or checks a total reads these declarations: `summary.json` `totals` (a dotted
name nests: `cache.hit` is `totals.cache.hit`), the Markdown tables, the `--fail-on` names, help and
messages, the rows of `diff`, and the multi-rank figures. Adding a total is one `Total(...)` below,
plus its entry in `summary.schema.json`.

A total is computed from a report's compiles (`CompileSummary`), so it is the same number whether
the report was just built from a log or loaded back from its `summary.json`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from msgspec import Struct

from ..units import format_seconds
from .summary import CACHE_RESULTS, CompileSummary, slowest

Value = int | float | None
Involved = list[tuple[CompileSummary, str]]  # (a compile behind the number, a detail such as "(2)")


class Combined(Struct, frozen=True):
    """A total over several ranks: the number a gate compares, how a table shows it, and what it is."""

    value: Value
    text: str
    phrase: str  # for gate messages: "compile_time_s is 12.5 on the slowest rank"


def _show(value: Value, seconds: bool) -> str:
    if value is None:
        return "unknown"
    return format_seconds(value) if seconds else str(value)


def summed(values: Sequence[Value], seconds: bool) -> Combined:
    """Ranks add up (failures, cache lookups: each rank's are its own); unknown when any rank's is unknown."""
    if any(v is None for v in values):
        return Combined(None, "unknown", " summed over ranks")
    total: int | float = sum(v for v in values if v is not None)
    if isinstance(total, float):
        total = round(total, 6)
    return Combined(total, _show(total, seconds), " summed over ranks")


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
    median = statistics.median(known)
    return Combined(high, f"max {_show(high, seconds)}, median {_show(median, seconds)} per rank", " on the slowest rank")


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

    def show(self, value: Value) -> str:
        return _show(value, self.seconds)

    def combine(self, values: Sequence[Value]) -> Combined:
        return self.over_ranks(values, self.seconds)


# -- how each total is computed ----------------------------------------------------------------


def _frames(compiles: Sequence[CompileSummary]) -> int:
    return len({c.frame_identity for c in compiles if c.frame_identity is not None})


def _first_of_each_frame(compiles: Sequence[CompileSummary]) -> Involved:
    firsts: dict[Any, CompileSummary] = {}
    for c in compiles:
        firsts.setdefault(c.frame_identity if c.frame_identity is not None else c.key, c)
    return [(c, "") for c in firsts.values()]


def _compile_time(compiles: Sequence[CompileSummary]) -> Value:
    times = [c.compile_time_s.total for c in compiles if c.compile_time_s.total is not None]
    return round(sum(times), 6) if times or not compiles else None


def _slowest(compiles: Sequence[CompileSummary]) -> Involved:
    return [(c, format_seconds(c.compile_time_s.total)) for c in slowest(compiles)[:5]]


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
          compute=_frames, involved=_first_of_each_frame, over_ranks=per_rank, better="none"),
    Total("graph_breaks", "graph breaks", "graph breaks", "graph breaks, each (reason, user location) once per compile",
          compute=lambda cs: sum(len(c.graph_breaks) for c in cs),
          involved=lambda cs: [(c, f"({len(c.graph_breaks)})") for c in cs if c.graph_breaks], over_ranks=per_rank),
    Total("recompiles", "recompiles", "recompiles", "compiles of a frame that had compiled before, after a guard failed",
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
          over_ranks=per_rank, better="none"),
    Total("compile_time_s", "compile time", "compile time", "seconds of compile time: each compile's forward plus its lazy backward compile",
          compute=_compile_time, involved=_slowest, over_ranks=in_parallel, seconds=True, what="slowest"),
    *(_cache(result) for result in CACHE_RESULTS),
)
BY_NAME = {total.name: total for total in TOTALS}


def totals_of(compiles: Sequence[CompileSummary]) -> dict[str, Value]:
    """Every total of a report, by name."""
    return {total.name: total.compute(compiles) for total in TOTALS}


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
