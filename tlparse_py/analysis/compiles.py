"""The analysis of one log: every view reads it (pages, `summary.json`, multi-rank, diff).

`Analysis` is the store the reading pass filled (`store.Store`) plus the questions asked of it:
one typed `CompileSummary` per compile (generation included), the totals, and `to_dict()`, which is
exactly what `summary.json` holds (schema: `summary.schema.json`, versioned by `SCHEMA_VERSION`).
Unknown values are `None`, never guessed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import questions
from .._version import __version__
from ..model import CompileId, display_key
from .store import STATUS_LABELS, MetricsEntry, Store

SCHEMA_VERSION = "1.1"  # bump the major part whenever a field changes meaning, the minor when fields are added


@dataclass(slots=True, frozen=True)
class CompileTime:
    forward: float | None  # entire_frame_compile_time_s: Dynamo, AOTAutograd and the forward compile
    backward: float | None  # the lazy backward compile (bwd_compilation_metrics.inductor_compile_time_s)
    total: float | None


UNKNOWN_TIME = CompileTime(None, None, None)
_UNKNOWN_TIME_JSON = {"forward": None, "backward": None, "total": None}  # shared by to_dict: read it, never change it


@dataclass(slots=True)
class CompileSummary:
    """One compile: a compile id (attempt included) in one generation."""

    key: CompileId
    id: str
    url: str | None  # None: listed without a page (limits.PAGED_START_ONLY)
    generation: int
    attempts: list[str]  # the ids its attempts logged under: `[0/0]`, `[0/0_1]` after a restart
    frame: str | None
    user_location: str | None
    status: str
    compile_time_s: CompileTime
    graph_breaks: list[dict[str, str]] = field(default_factory=list)
    recompile_reasons: list[str] = field(default_factory=list)
    cache: list[dict[str, str]] = field(default_factory=list)
    graph_op_count: int | None = None
    failure: dict[str, str | None] | None = None
    headline: str = ""  # why it failed, restarted or recompiled, in one line (pages only)
    pages: list[tuple[str, str | None]] = field(default_factory=list)  # (attempt id, its page) (pages only)

    @property
    def label(self) -> str:
        """The id, and which reuse of it this is: `[0/0]`, `[0/0] #2` (after one reset())."""
        return f"{self.id} #{self.generation + 1}" if self.generation else self.id

    def to_dict(self) -> dict[str, Any]:
        """What summary.json says of it. By hand, not `dataclasses.asdict`, whose deep copies cost
        seconds and 100s of MB on logs with 100,000s of compiles: its lists are shared (read them,
        do not change them)."""
        times = self.compile_time_s
        return {
            "id": self.id,
            "url": self.url,
            "generation": self.generation,
            "attempts": self.attempts,
            "frame": self.frame,
            "user_location": self.user_location,
            "status": self.status,
            "compile_time_s": _UNKNOWN_TIME_JSON if times is UNKNOWN_TIME else {"forward": times.forward, "backward": times.backward, "total": times.total},
            "graph_breaks": self.graph_breaks,
            "recompile_reasons": self.recompile_reasons,
            "cache": self.cache,
            "graph_op_count": self.graph_op_count,
            "failure": self.failure,
        }


class Analysis(Store):
    """The typed analysis of one log (or of one process's logs read together)."""

    def compiles(self) -> list[CompileSummary]:
        """One entry per compile, in log order: a frame compile with all its attempts (Dynamo restarts
        after a graph break log their graphs under `[x/y_1]`, `[x/y_2]`, ...), once per generation of
        its id (an id reused after `torch._dynamo.reset()` names a new compile).

        Built once per state of the store (the index, the search index and summary.json all ask,
        and a log may hold 100,000s of compiles); a new list each time, of the same summaries."""
        stamp = (self.records, len(self.directory), len(self.metrics), len(self.pageless))
        memo = self.__dict__.get("_compiles_memo")
        if memo is not None and memo[0] == stamp:
            return list(memo[1])
        frames: dict[CompileId, list[CompileId]] = {}
        for key in self.directory:
            if questions.is_compile(key):
                frames.setdefault(key.frame_key(), []).append(key)
        compiles = [
            self._compile(frame, attempts, generation)
            for frame, attempts in frames.items()
            for generation in self.generations_of(frame)
        ]
        self.__dict__["_compiles_memo"] = (stamp, compiles)
        return list(compiles)

    def _compile(self, frame: CompileId, attempts: list[CompileId], generation: int) -> CompileSummary:
        metrics = [m for m in self.metrics.get(frame, []) if m.generation == generation]
        fields = metrics[-1].fields if metrics else {}
        logged = metrics[-1].compile_id.directory_key() if metrics and metrics[-1].compile_id else attempts[-1]
        frame_name, location = questions.frame_and_location(self, frame, fields, generation)
        mine = self.in_generation(frame, generation)
        breaks = [b for key in attempts for b in questions.graph_breaks_of(self, key) if mine(b.line)]
        cache = [e for key in attempts for e in self.cache_events_of(key) if mine(e.line)]
        # strings shared where equal: a log may hold 100,000s of compiles
        labels = [display_key(key) for key in attempts]
        url = self.page_of(logged, generation)
        return CompileSummary(
            key=frame,
            id=labels[0] if attempts[0] == frame else display_key(frame),
            url=url,
            generation=generation,
            attempts=labels,
            frame=frame_name,
            user_location=sys.intern(location) if location else location,
            status=self.status_of(frame, generation),
            compile_time_s=self.compile_time(attempts, metrics, generation),
            graph_breaks=[{"reason": g.reason, "user_location": g.location} for g in breaks],
            recompile_reasons=[r for key in attempts for r in self.recompile_reasons_of(key, generation)],
            cache=[{"cache": e.cache, "result": e.state, "reason": e.reason} for e in sorted(cache, key=lambda e: e.line)],
            graph_op_count=fields.get("graph_op_count") if isinstance(fields.get("graph_op_count"), int) else None,
            failure=_failure(fields),
            headline=questions.headline(self, frame, fields, generation),
            pages=[(name, url if key == logged else self.page_of(key, generation)) for name, key in zip(labels, attempts)],
        )

    def in_generation(self, key: CompileId | None, generation: int) -> Callable[[int], bool]:
        """Whether a fact logged at a line belongs to this generation of the compile id."""
        return lambda line: self.generation_at(key, line) == generation

    def compile_time(self, attempts: list[CompileId], metrics: list[MetricsEntry], generation: int = 0) -> CompileTime:
        forward = next((s for m in metrics if (s := questions.seconds(m.get("entire_frame_compile_time_s"))) is not None), None)
        mine = self.in_generation(attempts[0], generation)
        backward_times = [
            questions.seconds(b.get("inductor_compile_time_s")) for key in attempts for line, b in self.backward_metrics_of(key) if mine(line)
        ]
        known = [t for t in backward_times if t is not None]
        backward = sum(known) if known else None
        total = None if forward is None else forward + (backward or 0.0)
        if forward is None and backward is None:
            return UNKNOWN_TIME  # shared: most compiles of a log with 100,000s of them logged no time
        return CompileTime(forward, backward, total)

    def backward_metrics_of(self, key: CompileId) -> list[tuple[int, dict[str, Any]]]:
        """(log line, bwd_compilation_metrics) logged under exactly this compile id."""
        return [(line, meta) for compile_id, line, meta in self.backward_metrics.get(key.frame_key(), []) if compile_id == key]

    def totals(self, compiles: list[CompileSummary] | None = None) -> dict[str, Any]:
        compiles = self.compiles() if compiles is None else compiles
        counts = questions.counts(self)
        times = [c.compile_time_s.total for c in compiles if c.compile_time_s.total is not None]
        return {
            "compiles": len(compiles),
            # a frame id reused after reset() is another frame
            "frames": len({(c.key.compiled_autograd_id, c.key.frame_id, c.generation) for c in compiles if c.key.frame_id is not None}),
            "graph_breaks": counts["graph_breaks"],
            "recompiles": counts["recompiles"],
            "failed": sum(1 for c in compiles if c.failure is not None),
            "compile_time_s": round(sum(times), 6) if times or not compiles else None,
            "cache": {"hit": counts["cache_hits"], "miss": counts["cache_misses"], "bypass": counts["cache_bypasses"]},
        }

    def run_context(self) -> dict[str, Any]:
        """Where the report comes from: torch, the time span of the records read, the rank, this tool.

        The span is the earliest and latest glog time of the records read (other ranks' records left
        out). glog writes no year: it is the log file's modification year, as in raw.jsonl.
        """
        return {
            "torch_version": self.torch_version,
            "first_record": self.first_timestamp,
            "last_record": self.last_timestamp,
            "rank": self.rank,
            "tool": f"tlparse-py {__version__}",
        }

    def to_dict(self) -> dict[str, Any]:
        """What `summary.json` holds (see summary.schema.json)."""
        compiles = self.compiles()
        totals = self.totals(compiles)
        # summary.json is asked last: let go of the summaries as they become dicts, so a log with
        # 100,000s of compiles does not hold both at once (a later `compiles()` builds them again)
        self.__dict__.pop("_compiles_memo", None)
        compiles.reverse()
        dicts = []
        while compiles:
            dicts.append(compiles.pop().to_dict())
        data: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "generator": {"name": "tlparse-py", "version": __version__},
            "inputs": [{"path": path, "bytes": size, "rank": self.rank} for path, size in self.source.files()],
            "torch_version": self.torch_version,
            "stats": dict(self.stats.counts),
            "totals": totals,
            "compiles": dicts,
            "run": self.run_context(),
        }
        if self.export_mode or questions.export_error(self) is not None:
            data["export"] = questions.export_verdict(self)
        return data


def _failure(fields: dict[str, Any]) -> dict[str, str | None] | None:
    if not fields.get("fail_type"):
        return None
    reason = fields.get("fail_reason")
    return {"type": str(fields["fail_type"]), "reason": str(reason) if reason is not None else None}


__all__ = ["Analysis", "CompileSummary", "CompileTime", "SCHEMA_VERSION", "STATUS_LABELS"]
