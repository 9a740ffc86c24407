"""Causes: what some ranks did and the others did not. A divergence's first cause, when the
compiles' own facts show one: a graph break, a recompile, a failed compile or one that never
finished that some ranks had and the others did not (`Cause`), in the user's words."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from msgspec.structs import replace

from .guard_words import guard_failure
from .pairing import function_name
from .rank_answers import Cause, CauseGroup, CompileSetDivergence, RankFacts, rank_names, words
from .roots import relative_location, user_root
from .stacks import is_user_code, split_location
from .summary import CAUSE_FIRST, STATUS_MISSING, CompileSummary, GraphBreak, first_line

GRAPH_BREAK, RECOMPILE, FAILURE, UNFINISHED = "graph_break", "recompile", "failure", "unfinished"
CAUSE_KINDS = (RECOMPILE, GRAPH_BREAK, FAILURE, UNFINISHED)  # in the order they happen within a compile
CAUSE_TEXT_CHARS = 160  # torch's reason or the user's source line, in a cause's text
RECOMPILES_NAMED = 3  # recompiles named, with their guard, in one cause


class Event(NamedTuple):
    """Something a compile did on one rank that can set ranks apart."""

    kind: str  # CAUSE_KINDS
    compile: CompileSummary
    graph_break: GraphBreak | None  # the break, for a graph break


EventKey = tuple[str, ...]  # what makes an event the same on two ranks


def events_of(compiles: Iterable[CompileSummary]) -> dict[EventKey, Event]:
    """A rank's recompiles, graph breaks, failed compiles and compiles that never finished (status
    `missing`: no metrics, as when the process crashed or was killed), in log order (within a
    compile: why it happened, then what broke its graph, then how it ended)."""
    found: dict[EventKey, Event] = {}
    for c in compiles:
        if c.is_recompile:
            found[(RECOMPILE, c.label)] = Event(RECOMPILE, c, None)
        for brk in c.graph_breaks:
            found[(GRAPH_BREAK, c.label, *brk.identity)] = Event(GRAPH_BREAK, c, brk)
        if c.failed and c.failure is not None:
            found[(FAILURE, c.label, c.failure.type)] = Event(FAILURE, c, None)
        if c.status == STATUS_MISSING:
            found[(UNFINISHED, c.label)] = Event(UNFINISHED, c, None)
    return found


def _cause_group(cause: Cause | None) -> tuple[object, ...]:
    """Which group a missing or extra compile goes to: recompiles on the same ranks together, any
    other cause its own, the compiles without one together."""
    if cause is None:
        return ("unknown",)
    if cause.kind == RECOMPILE:
        return (RECOMPILE, tuple(cause.ranks), tuple(cause.others))
    return (cause.kind, cause.compile_id, cause.text)


class Causes:
    """The first cause of a divergence at a compile, from the compiles of every rank that could be read."""

    def __init__(self, ranks: Sequence[RankFacts]):
        read = [r for r in ranks if r.summary is not None]
        self.events = {r.rank: events_of(r.compiles) for r in read}
        self.compiles = {r.rank: {c.id: c for c in reversed(r.compiles)} for r in read}  # the first compile of an id
        self.at: dict[str, dict[EventKey, None]] = {}  # compile id → its events on any rank, in order
        for events in self.events.values():
            for key, event in events.items():
                self.at.setdefault(event.compile.id, {})[key] = None
        self.root = user_root([c for r in read for c in r.compiles])

    def of(self, compile_id: str, ranks: Sequence[int]) -> Cause | None:
        """Why `ranks` diverge from the others at a compile: its recompile, graph break, failure or no end that
        sets them apart (they all had it and none of the others, or the reverse); else, for the first
        compile of a frame only one side has, the graph break at its line that made it (Dynamo's
        resume function after a break starts at the break's line). None when the compiles show none."""
        departing = set(ranks) & set(self.events)
        others = set(self.events) - departing
        if not departing or not others:
            return None
        for key in sorted(self.at.get(compile_id, {}), key=lambda k: CAUSE_KINDS.index(k[0])):
            if (cause := self._setting_apart(key, departing, others)) is not None:
                return cause
        return self._resumed_after(compile_id, departing, others)

    def grouped(self, ids: CompileSetDivergence) -> list[CauseGroup]:
        """A rank's missing and extra compiles by cause (one verdict each), in the order first met."""
        groups: dict[tuple[object, ...], tuple[CauseGroup, list[Cause]]] = {}
        for missing, keys in ((True, ids.missing), (False, ids.extra)):
            for key in keys:
                cause = self.of(str(key), [ids.rank])
                group, found = groups.setdefault(_cause_group(cause), (CauseGroup([], [], None), []))
                (group.missing if missing else group.extra).append(str(key))
                if cause is not None:
                    found.append(cause)
        for group, found in groups.values():
            group.cause = (self.recompiled(found) if found[0].kind == RECOMPILE else found[0]) if found else None
        return [group for group, _ in groups.values()]

    def recompiled(self, causes: Sequence[Cause]) -> Cause:
        """Several recompiles the same ranks made as one cause: the first, and the guards of the first few."""
        first = causes[0]
        named = [self._recompile_phrase(first.ranks[0], c.compile_id) for c in causes[:RECOMPILES_NAMED]]
        more = len(causes) - RECOMPILES_NAMED
        deed = f"recompiled {words(named + ([f'{more} more'] if more > 0 else []))}"
        return replace(first, text=f"{rank_names(first.ranks)} {deed} where {rank_names(first.others)} did not")

    def _setting_apart(self, key: EventKey, departing: set[int], others: set[int]) -> Cause | None:
        having = {rank for rank, events in self.events.items() if key in events}
        if not ((departing <= having and not others & having) or (not departing & having and others <= having)):
            return None
        rank = min(having)
        return self._cause(self.events[rank][key], sorted(having), sorted(set(self.events) - having))

    def _resumed_after(self, compile_id: str, departing: set[int], others: set[int]) -> Cause | None:
        side = next((s for s in (departing, others) if all(compile_id in self.compiles[r] for r in s)), None)
        if side is None:
            return None
        rank = min(side)
        compile_ = self.compiles[rank][compile_id]
        if compile_.cause != CAUSE_FIRST or not compile_.user_location:
            return None
        for key, event in self.events[rank].items():
            if event.graph_break is not None and event.compile.id != compile_id and event.graph_break.user_location == compile_.user_location:
                if (cause := self._setting_apart(key, departing, others)) is not None:
                    return cause
        return None

    def _cause(self, event: Event, having: list[int], lacking: list[int]) -> Cause:
        c = event.compile
        if event.graph_break is not None:
            brk = event.graph_break
            where = self._where(brk.user_location)
            inside = f", inside {brk.inside}" if brk.inside else ""
            source = f"{first_line(brk.user_source, CAUSE_TEXT_CHARS)}: " if brk.user_source else ""
            deed = f"broke the graph in {c.id} at {where}{inside} ({source}{first_line(brk.reason, CAUSE_TEXT_CHARS)})"
            location, reason = brk.user_location or None, first_line(brk.reason)
        elif event.kind == RECOMPILE:
            deed = f"recompiled {self._recompile_phrase(having[0], c.id)}"
            location, reason = c.user_location, guard_failure(c.recompile_reasons[0]) if c.recompile_reasons else ""
        elif event.kind == UNFINISHED:
            reason = "no compilation metrics were logged: the process crashed, was killed or was still compiling"
            text = f"{rank_names(having)} never finished compiling {c.id} ({reason}) where {rank_names(lacking)} did"
            return Cause(event.kind, c.id, having, lacking, c.user_location, reason, text)
        else:
            assert c.failure is not None  # a failed compile's event
            location = c.failure.user_location or c.user_location
            at = f" at {self._where(location)}" if location else ""
            deed = f"failed to compile {c.id}{at} ({first_line(c.failure.headline, CAUSE_TEXT_CHARS)})"
            reason = c.failure.headline
        text = f"{rank_names(having)} {deed} where {rank_names(lacking)} did not"
        return Cause(event.kind, c.id, having, lacking, location, reason, text)

    def _recompile_phrase(self, rank: int, compile_id: str) -> str:
        """`[4/1] (forward at model.py:14; guard: x.shape[0] changed 8→5)`: the frame when it is the user's code."""
        c = self.compiles[rank][compile_id]
        site = split_location(c.user_location)
        user_code = c.frame and site is not None and is_user_code(site[0])
        parts = [f"{function_name(c.frame)} at {self._where(c.user_location)}"] if user_code else []
        if c.recompile_reasons:
            parts.append(f"guard: {first_line(guard_failure(c.recompile_reasons[0]), CAUSE_TEXT_CHARS)}")
        return f"{compile_id} ({'; '.join(parts)})" if parts else compile_id

    def _where(self, location: str | None) -> str:
        """A user code line relative to the run's common folder of user files (`ddp_debug.py:17`)."""
        return relative_location(location, ("", self.root)) if location else "unknown"
