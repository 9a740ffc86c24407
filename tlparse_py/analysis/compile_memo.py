"""`Analysis.compiles()` kept once per state of the store, and read back from there.

The index, the search index and summary.json all ask for the compiles, and a log may hold 100,000s
of them: they are built once per state of the store (`CompilesMemo.stamp`). Past SPOOLED_FROM
compiles they are kept packed in a scratch file (`spools.SpooledCompiles`), not as objects, and read
back at each ask (a summary costs a few KB, and the forked page builder would otherwise start from a
heap holding all of them); askers at the same time share one list read back, as they would share
the objects in memory.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any, overload

from ..model import CompileId
from .spools import Reading, Spool, SpooledCompiles
from .store import compile_place
from .summary import CompileSummary

SPOOLED_FROM = 2000  # compiles, from which they are kept packed in a scratch file
# compiles from which a summary reads them from their scratch file at each pass (`kept_for`), not as
# a list read back once: a list of 20,000 costs about 30 MB, and a pass over the spool five times
# one over a list (the index, summary.json and summary.md make about 15)
READ_THROUGH_FROM = 20_000


class _ReadBack(list[CompileSummary]):
    """Compiles read back from their spool (`CompilesMemo.read_back`); `shared`: the list whose
    summaries it holds, kept alive by every list handed out."""

    __slots__ = ("shared", "__weakref__")
    shared: _ReadBack


def spooled(count: int) -> bool:
    """Whether `count` compiles are kept in a scratch file (SPOOLED_FROM, as it is when asked)."""
    return count >= SPOOLED_FROM


def kept_compiles(compiles: list[CompileSummary]) -> Sequence[CompileSummary]:
    """How the memo keeps what was built: past SPOOLED_FROM, packed in a scratch file, written
    through before any page builder forks (`Spool.settle`); a log whose summaries do not pack (a
    lone surrogate in a name) keeps them as they are."""
    if not spooled(len(compiles)):
        return compiles
    try:
        spool = SpooledCompiles(compiles)
    except (UnicodeEncodeError, TypeError, OverflowError):
        return compiles
    spool.settle()
    return spool


class CompilesMemo:
    """The compiles of one state of the store (`stamp`), and where each (frame, generation) is."""

    def __init__(self) -> None:
        self.stamp: tuple[int, ...] | None = None
        self.kept: Sequence[CompileSummary] | None = None
        self.held: weakref.ref[_ReadBack] | None = None  # the list read back now in use, if any
        # where each compile is among them, by `compile_place`
        self.places: dict[CompileId | tuple[CompileId, int], CompileSummary | int] | None = None
        self.places_stamp: tuple[int, ...] | None = None

    def __getstate__(self) -> dict[str, Any]:  # a cache: a copy of the analysis (a rank's, pickled) builds its own
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    @overload
    def kept_for(self, stamp: tuple[int, ...]) -> Sequence[CompileSummary] | None: ...

    @overload
    def kept_for(self, stamp: tuple[int, ...], built: list[CompileSummary]) -> Sequence[CompileSummary]: ...

    def kept_for(self, stamp: tuple[int, ...], built: list[CompileSummary] | None = None) -> Sequence[CompileSummary] | None:
        """The compiles kept for `stamp` as they are kept (their spool, past READ_THROUGH_FROM; else a
        new list); None when they must be built (`built`: just built for `stamp`, kept then)."""
        if self.kept is None or self.stamp != stamp:
            return None if built is None else list(built)
        if isinstance(self.kept, Spool) and len(self.kept) >= READ_THROUGH_FROM:
            return Reading(self.kept)  # what its asker computes over them goes with it (`summary.once`)
        return self.read_back()

    def holds(self, stamp: tuple[int, ...]) -> bool:
        """Whether the compiles of `stamp` are kept (built)."""
        return self.kept is not None and self.stamp == stamp

    def found(self, stamp: tuple[int, ...]) -> list[CompileSummary] | None:
        """The compiles kept for `stamp` (a new list), or None when they must be built."""
        return self.read_back() if self.holds(stamp) else None

    def keep(self, stamp: tuple[int, ...], compiles: list[CompileSummary]) -> list[CompileSummary]:
        """Keep what was just built for `stamp`; a new list of them."""
        self.stamp, self.kept, self.places, self.held = stamp, kept_compiles(compiles), None, None
        if self.kept is not compiles:  # spooled: those just built are the ones shared while held
            shared = _ReadBack(compiles)
            self.held = weakref.ref(shared)
            return self.read_back(shared)
        return list(compiles)

    def keep_spooled(self, stamp: tuple[int, ...], spool: SpooledCompiles, places: dict[CompileId | tuple[CompileId, int], CompileSummary | int]) -> None:
        """Keep compiles built straight into their spool for `stamp`, and where each is in it."""
        self.stamp, self.kept, self.held = stamp, spool, None
        self.places_stamp, self.places = stamp, places

    def take(self, stamp: tuple[int, ...], compiles: list[CompileSummary], places: dict[CompileId | tuple[CompileId, int], CompileSummary]) -> None:
        """Take compiles (and each by its `compile_place`) built elsewhere for `stamp` (a live report's:
        its own table, kept as its compiles change, and read only at this stamp)."""
        self.stamp, self.kept, self.held = stamp, compiles, None
        self.places_stamp, self.places = stamp, places  # type: ignore[assignment]

    def forget(self) -> None:
        self.__init__()  # type: ignore[misc]

    def read_back(self, shared: _ReadBack | None = None) -> list[CompileSummary]:
        """A new list of the compiles kept; read back from their spool only when no list read back
        before is still held."""
        kept = self.kept
        assert kept is not None
        if isinstance(kept, list):
            return list(kept)
        shared = shared if shared is not None else self.held() if self.held is not None else None
        if shared is None:
            shared = _ReadBack(kept)
            self.held = weakref.ref(shared)
        found = _ReadBack(shared)
        found.shared = shared  # alive as long as any list handed out from it
        return found

    def placed(self, stamp: tuple[int, ...], compiles: Callable[[], list[CompileSummary]]) -> dict[CompileId | tuple[CompileId, int], CompileSummary | int]:
        """Where each (frame, generation) is in the compiles of `stamp`, found once per stamp."""
        if self.places is None or self.places_stamp != stamp:
            listed = compiles()
            self.places, self.places_stamp = {compile_place(c.key, c.generation): at for at, c in enumerate(listed)}, stamp
        return self.places

    def compile_at(self, stamp: tuple[int, ...], frame: CompileId, generation: int,
                   compiles: Callable[[], list[CompileSummary]]) -> CompileSummary | None:
        """The compile of (frame, generation) in the compiles of `stamp` (`compiles()` builds them)."""
        found = self.placed(stamp, compiles).get(compile_place(frame, generation))
        if not isinstance(found, int):  # None, or the compile itself (a live report's places hold them)
            return found
        shared = self.held() if self.held is not None else None
        kept = shared if shared is not None else self.kept
        assert kept is not None
        return kept[found]
