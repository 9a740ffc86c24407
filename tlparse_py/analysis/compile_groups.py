"""Questions over a run's compiles, as every view asks them: its graph breaks by kind, the frames
that recompiled, those that reached the recompile limit (and the fix), the compiles that failed and
the slowest."""

from __future__ import annotations

import functools
import heapq
import re
from collections.abc import Iterable, Sequence
from typing import overload

from msgspec import Struct, field

from ..model import CompileId
from .guard_words import GUARD_COMMENT, REASON_OF, dynamo_names, notes_on_dynamo_names
from .summary import CompileSummary, FrameIdentity, GraphBreak, first_line, once


def distinct_breaks(breaks: Iterable[GraphBreak]) -> list[GraphBreak]:
    """A compile's graph breaks, each (reason, user location) once: torch may log the same break
    twice for one compile (pytorch/pytorch#153669), or again in a restart attempt."""
    seen: set[tuple[str, str, str]] = set()
    result = []
    for brk in breaks:
        if brk.identity not in seen:
            seen.add(brk.identity)
            result.append(brk)
    return result


class GraphBreakGroup(Struct):
    """One kind of graph break across the run (torch's registry id, else its headline), the user's or
    torch's own apart: the fix torch suggests for it, and every compile and user code line where it
    happened."""

    kind: str  # the registry id ("GB0025"), else the reason
    first: GraphBreak  # its text, as first logged
    breaks: list[tuple[CompileSummary, GraphBreak]] = field(default_factory=list)

    @property
    def reason(self) -> str:
        return self.first.reason

    @property
    def torch_break(self) -> bool:
        """Its breaks are torch's graph breaks (a group holds the user's or torch's, never both)."""
        return self.first.torch_break

    @property
    def count(self) -> int:
        return len(self.breaks)

    @property
    def compiles(self) -> list[CompileSummary]:
        return [compile_ for compile_, _ in self.breaks]

    @property
    def sites(self) -> list[GraphBreak]:
        """Each place it happened at (user code line, and library line inside it), once, most frequent first."""
        counts: dict[tuple[str, str], int] = {}
        first: dict[tuple[str, str], GraphBreak] = {}
        for _, brk in self.breaks:
            site = (brk.user_location, brk.library_location)
            counts[site] = counts.get(site, 0) + 1
            first.setdefault(site, brk)
        return [first[site] for site in sorted(counts, key=lambda site: (-counts[site], site))]


def _graph_break_groups(compiles: Iterable[CompileSummary]) -> list[GraphBreakGroup]:
    """Graph breaks grouped by kind (registry id, else headline), the user's most frequent first,
    then torch's own (a user's `torch._dynamo.graph_break()` and torch's are two groups)."""
    groups: dict[tuple[str, bool], GraphBreakGroup] = {}
    for compile_ in compiles:
        for brk in compile_.graph_breaks:
            key = (brk.kind, brk.torch_break)
            group = groups.get(key)
            if group is None:
                group = groups[key] = GraphBreakGroup(brk.kind, brk)
            group.breaks.append((compile_, brk))
    return sorted(groups.values(), key=lambda g: (g.torch_break, -g.count, g.reason, g.kind))


class FrameRecompiles(Struct):
    """A frame compiled more than once, with the guard failures that made it recompile."""

    identity: FrameIdentity
    compiles: list[CompileSummary]

    @property
    def frame(self) -> str:
        """The frame as compile ids write it: `0`, `!1/0`, `p1:0` (in a run's second process), with its generation."""
        return self.compiles[0].frame_label

    @property
    def name(self) -> str:
        return next((c.frame for c in self.compiles if c.frame), "")

    @property
    def via(self) -> str:
        """The library frame the compile it is named after started in, in words (`CompileSummary.via`)."""
        return next((c.via for c in self.compiles if c.frame), "")

    @property
    def inside(self) -> str:
        """The library the compile it is named after started in, in words, short (`CompileSummary.inside`)."""
        return next((c.inside for c in self.compiles if c.frame), "")

    @property
    def reasons(self) -> list[tuple[CompileSummary, str]]:
        return [(c, reason) for c in self.compiles for reason in c.recompile_reasons]

    @property
    def first_reason(self) -> str | None:
        """The headline of the first guard failure that made it recompile (`first_line`); None: none logged."""
        return next((first_line(reason) for _, reason in self.reasons), None)

    @property
    def retries(self) -> list[tuple[CompileSummary, CompileSummary]]:
        """(retry, the failed compile before it)."""
        return [(c, before) for before, c in zip(self.compiles, self.compiles[1:]) if c.is_retry]

    @property
    def compiled(self) -> list[CompileSummary]:
        """The times the frame compiled: its compiles but the one over the recompile limit."""
        return [c for c in self.compiles if c.compiled]

    @property
    def over_limit(self) -> CompileSummary | None:
        """Its compile over the recompile limit, after which it runs eagerly; None when it reached none."""
        return next((c for c in self.compiles if c.hit_recompile_limit), None)

    @property
    def hit_limit(self) -> bool:
        return self.over_limit is not None

    @property
    def name_notes(self) -> list[str]:
        """What the names Dynamo made up in its recompile reasons stand for (`notes_on_dynamo_names`)."""
        location = next((c.user_location for c in self.compiles if c.user_location), "")
        return notes_on_dynamo_names((first_line(r) for _, r in self.reasons), self.name, location)


def _recompiled_frames(compiles: Iterable[CompileSummary]) -> RecompiledFrames:
    """Frames with a recompile, a retry or a compile over the recompile limit (a guard failed for it
    too), most compiles first (log order among equals)."""
    compiles = _again(compiles)
    # two passes, keeping only the frames found: a report's compiles may be read back from a scratch file
    wanted = {c.frame_identity for c in compiles if c.is_recompile or c.is_retry or c.hit_recompile_limit} - {None}
    frames: dict[FrameIdentity, list[int]] = {}
    for position, compile_ in enumerate(compiles):
        identity = compile_.frame_identity
        if identity is not None and identity in wanted:
            frames.setdefault(identity, []).append(position)
    return RecompiledFrames(compiles, sorted(frames.items(), key=lambda item: -len(item[1])))


class RecompiledFrames(Sequence[FrameRecompiles]):
    """`recompiled_frames`: each frame is made as it is read, from where its compiles are among the
    run's. From 20,000 compiles they are read back from a scratch file, and what is computed over
    them is kept while the summary is (`summary.once`): the frames made at once held every compile of
    theirs, 9 MB at 25,000 small compiles, through the index, summary.json and summary.md."""

    def __init__(self, compiles: Sequence[CompileSummary], frames: list[tuple[FrameIdentity, list[int]]]):
        self.compiles = compiles
        self.frames = frames  # (identity, the positions of its compiles), in the order listed

    def __len__(self) -> int:
        return len(self.frames)

    @overload
    def __getitem__(self, index: int) -> FrameRecompiles: ...

    @overload
    def __getitem__(self, index: slice) -> list[FrameRecompiles]: ...

    def __getitem__(self, index: int | slice) -> FrameRecompiles | list[FrameRecompiles]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        identity, positions = self.frames[index]
        return FrameRecompiles(identity, [self.compiles[position] for position in positions])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (list, RecompiledFrames)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{len(self)} recompiled frames>"


def _again(compiles: Iterable[CompileSummary]) -> Sequence[CompileSummary]:
    """Compiles that can be read through twice (a list or a spool as they are; an iterator, listed)."""
    return compiles if isinstance(compiles, Sequence) else list(compiles)


def _failed_compiles(compiles: Iterable[CompileSummary]) -> list[CompileSummary]:
    """The compiles that failed (`CompileSummary.failed`), in log order."""
    return [c for c in compiles if c.failed]


_LIMIT_TYPE = re.compile(r"Limit type: (\w+)")
_LIMIT_VALUE = re.compile(r"\(currently set to (\d+)\)")
_SIZE_GUARD = re.compile(r"tensor '([^']+)' size mismatch at index (\d+)")
# a guard on a Python value: `k == 2`, `L['self'].n == 0.5`, `___stack0 == 0.273`
_VALUE_GUARD = re.compile(r"([A-Za-z_]\w*(?:\[[^\]]*\]|\.\w+)*) == (\S+)")
_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


class LimitHit(Struct, dict=True):  # dict: what is read from its compiles is kept (cached_property)
    """A frame that reached torch's recompile limit: the compile over it, the frame's compiles before
    it, the guard that kept failing (their recompile reasons), and the fix."""

    compile: CompileSummary  # the compile over the limit (status `limit`)
    compiles: list[CompileSummary]  # the frame's compiles, up to and with it

    @property
    def frame(self) -> str:
        """The frame as compile ids write it: `0`, `!1/0`, `p1:0`, with its generation."""
        return self.compile.frame_label

    @property
    def name(self) -> str:
        return next((c.frame for c in reversed(self.compiles) if c.frame), "")

    @property
    def via(self) -> str:
        """The library frame the compile it is named after started in, in words (`CompileSummary.via`)."""
        return next((c.via for c in reversed(self.compiles) if c.frame), "")

    @property
    def user_location(self) -> str:
        return next((c.user_location for c in reversed(self.compiles) if c.user_location), "")

    @functools.cached_property  # a live index asks at each update, of every frame at the limit
    def limit_type(self) -> str:
        """The config torch checked: `recompile_limit`, or `accumulated_recompile_limit` (over all frames)."""
        found = _LIMIT_TYPE.search(self.compile.failure.reason or "") if self.compile.failure else None
        return found.group(1) if found else "recompile_limit"

    @functools.cached_property
    def limit(self) -> int | None:
        """Its value when torch said it ("currently set to 8"); None when it did not."""
        found = _LIMIT_VALUE.search(self.compile.failure.reason or "") if self.compile.failure else None
        return int(found.group(1)) if found else None

    @functools.cached_property
    def reasons(self) -> list[tuple[CompileSummary, str]]:
        """The recompile reasons of the frame's last compile that logged some (the one over the limit,
        as a rule): the guard of each compile torch had cached that failed for that input."""
        last = next((c for c in reversed(self.compiles) if c.recompile_reasons), None)
        return [(last, first_line(r)) for r in last.recompile_reasons] if last is not None else []

    @functools.cached_property
    def guards(self) -> list[str]:
        """The guards that kept failing, each once, the most frequent first: "tensor 'x' dtype mismatch"
        (the cached compile's id, the values and torch's source comment left out)."""
        counts: dict[str, int] = {}
        for _, reason in self.reasons:
            guard = GUARD_COMMENT.split(REASON_OF.sub("", reason), 1)[0].split(". expected", 1)[0].strip()
            counts[guard] = counts.get(guard, 0) + 1
        return sorted(counts, key=lambda g: -counts[g])

    @functools.cached_property
    def fixes(self) -> list[str]:
        """What to do, the likeliest first, by what the guard that kept failing is on: a tensor's size
        (mark that dimension dynamic), a value Dynamo passed on after a graph break (fix the break), a
        Python number of the program (mark_dynamic does not apply to one: make it a tensor, or let
        Dynamo make it dynamic); else raise the limit."""
        now = f" (now {self.limit})" if self.limit is not None else ""
        raise_it = (f"raise torch._dynamo.config.{self.limit_type}{now} to the number of input variants the frame sees, "
                    "if each is worth a compile of its own")
        sizes = list(dict.fromkeys(m.groups() for _, reason in self.reasons if (m := _SIZE_GUARD.search(reason))))
        if sizes:
            calls = ", ".join(f"torch._dynamo.mark_dynamic({name}, {index})" for name, index in sizes)
            return [f"mark the dimension dynamic, so one compile serves every size: {calls} before the call", raise_it]
        values = [m.groups() for guard in self.guards if (m := _VALUE_GUARD.fullmatch(guard))]
        passed = list(dict.fromkeys(name for name, _ in values if dynamo_names(name)))
        if passed:
            return [f"fix the graph break before this resume function: {' and '.join(passed)} is a value Dynamo hands over "
                    "the break, not a variable of yours, and a guard on it compiles again for every new value", raise_it]
        numbers = list(dict.fromkeys(name for name, value in values if _NUMBER.fullmatch(value)))
        if numbers:
            named = " and ".join(numbers)
            return [f"pass {named} as a tensor (torch.tensor({numbers[0]})): the guard is on the value of a Python number, "
                    "not on a tensor's size, so mark_dynamic does not apply",
                    f"if torch.compile has dynamic=False (or torch._dynamo.config.automatic_dynamic_shapes is off), drop it: "
                    f"Dynamo then makes {named} a symbol once its value changes", raise_it]
        return [raise_it, "if a size changes, mark the dimension dynamic: torch._dynamo.mark_dynamic(tensor, dim) before the call"]

    @property
    def name_notes(self) -> list[str]:
        """What the names Dynamo made up in the guards that kept failing stand for (`notes_on_dynamo_names`)."""
        return notes_on_dynamo_names(self.guards, self.name, self.user_location)


def _limit_hits(compiles: Iterable[CompileSummary]) -> list[LimitHit]:
    """Each compile over the recompile limit, in log order, with its frame's compiles before it."""
    compiles = _again(compiles)
    # two passes, keeping only the frames that hit it: a report's compiles may be read back from a scratch file
    wanted = {c.frame_identity for c in compiles if c.hit_recompile_limit}
    frames: dict[FrameIdentity, list[CompileSummary]] = {}
    hits = []
    for compile_ in compiles:
        identity = compile_.frame_identity
        if identity not in wanted:
            continue
        before = frames.setdefault(identity, []) if identity is not None else []
        before.append(compile_)
        if compile_.hit_recompile_limit:
            hits.append(LimitHit(compile_, list(before)))
    return hits


def compiles_of_graph(compiles: Iterable[CompileSummary], graph: CompileId) -> list[CompileSummary]:
    """The compiles of the compiled-autograd graph `graph` names (`[!N/1/0]`, ... of its process):
    how the backward graph its capture (`[!N/-/-]`) traced was compiled."""
    if graph.compiled_autograd_id is None:
        return []
    return [c for c in compiles if c.key.compiled_autograd_id == graph.compiled_autograd_id and c.key.process == graph.process]


def _slowest(compiles: Iterable[CompileSummary], count: int) -> list[CompileSummary]:
    """The `count` compiles with a known time that took longest, slowest first (log order among
    equals), holding no more than `count` of them: a report's compiles may be read back from a scratch file."""
    timed = (c for c in compiles if c.compile_time_s.total is not None)
    return heapq.nlargest(count, timed, key=_total)  # as sorted(..., reverse=True)[:count]: stable


def _total(compile_: CompileSummary) -> float:
    return compile_.compile_time_s.total or 0.0


# -- asked by both the index and summary.md: of a report's compiles read back from their scratch
# file, each computed once (`summary.once`), a new list (sequence) each time --------------------


def graph_break_groups(compiles: Iterable[CompileSummary]) -> list[GraphBreakGroup]:
    """`_graph_break_groups`."""
    return list(once(_again(compiles), "graph_break_groups", _graph_break_groups))


def recompiled_frames(compiles: Iterable[CompileSummary]) -> Sequence[FrameRecompiles]:
    """`_recompiled_frames` (a new sequence each time, whose frames are made as they are read)."""
    found = once(_again(compiles), "recompiled_frames", _recompiled_frames)
    return RecompiledFrames(found.compiles, found.frames)


def failed_compiles(compiles: Iterable[CompileSummary]) -> list[CompileSummary]:
    """`_failed_compiles`."""
    return list(once(_again(compiles), "failed_compiles", _failed_compiles))


def limit_hits(compiles: Iterable[CompileSummary]) -> list[LimitHit]:
    """`_limit_hits`."""
    return list(once(_again(compiles), "limit_hits", _limit_hits))


def slowest(compiles: Iterable[CompileSummary], count: int) -> list[CompileSummary]:
    """`_slowest`."""
    return list(once(_again(compiles), f"slowest {count}", lambda found: _slowest(found, count)))
