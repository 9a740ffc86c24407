"""The analysis of one log: every view reads it (pages, `summary.json`, multi-rank, diff).

`Analysis` is the store the reading pass filled (`store.Store`) plus the questions asked of it:
one typed `CompileSummary` per compile (generation included), the totals, and `to_dict()`, which is
exactly what `summary.json` holds (schema: `summary.schema.json`, versioned by `SCHEMA_VERSION`).
Unknown values are `None`, never guessed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from . import summary
from ._version import __version__
from .model import CompileId, display_key
from .paths import compile_page_url
from .store import STATUS_LABELS, MetricsEntry, Store

SCHEMA_VERSION = "1.0"  # bump the major part whenever a field changes meaning, the minor when fields are added


@dataclass(slots=True)
class CompileTime:
    forward: float | None  # entire_frame_compile_time_s: Dynamo, AOTAutograd and the forward compile
    backward: float | None  # the lazy backward compile (bwd_compilation_metrics.inductor_compile_time_s)
    total: float | None


@dataclass(slots=True)
class CompileSummary:
    """One compile: a compile id (attempt included) in one generation."""

    key: CompileId
    id: str
    url: str
    generation: int
    frame: str | None
    user_location: str | None
    status: str
    compile_time_s: CompileTime
    graph_breaks: list[dict[str, str]] = field(default_factory=list)
    recompile_reasons: list[str] = field(default_factory=list)
    cache: list[dict[str, str]] = field(default_factory=list)
    graph_op_count: int | None = None
    failure: dict[str, str | None] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["key"]
        return data


class Analysis(Store):
    """The typed analysis of one log (or of one process's logs read together)."""

    def compiles(self) -> list[CompileSummary]:
        """One entry per compile, in log order; a reused compile id gives one entry per generation."""
        result = []
        for key in self.directory:
            if not summary.is_compile(key):
                continue
            own = self.own_metrics(key)
            for generation in sorted({m.generation for m in own} or {self.generations.get(key, 0)}):
                result.append(self._compile(key, generation, [m for m in own if m.generation == generation]))
        return result

    def _compile(self, key: CompileId, generation: int, metrics: list[MetricsEntry]) -> CompileSummary:
        fields = metrics[0].fields if metrics else {}
        frame, location = summary.frame_and_location(self, key, fields, generation)
        return CompileSummary(
            key=key,
            id=display_key(key),
            url=compile_page_url(key),
            generation=generation,
            frame=frame,
            user_location=location,
            status=self.status_of(key),
            compile_time_s=self.compile_time(key, metrics),
            graph_breaks=[{"reason": g.reason, "user_location": g.location} for g in summary.graph_breaks_of(self, key)],
            recompile_reasons=list(self.recompile_reasons.get(key, [])),
            cache=[{"cache": e.cache, "result": e.state, "reason": e.reason} for e in summary.cache_events_of(self, key)],
            graph_op_count=fields.get("graph_op_count") if isinstance(fields.get("graph_op_count"), int) else None,
            failure=_failure(fields),
        )

    def compile_time(self, key: CompileId, metrics: list[MetricsEntry]) -> CompileTime:
        forward = next((s for m in metrics if (s := summary.seconds(m.get("entire_frame_compile_time_s"))) is not None), None)
        backward_times = [summary.seconds(b.get("inductor_compile_time_s")) for b in self.backward_metrics_of(key)]
        known = [t for t in backward_times if t is not None]
        backward = sum(known) if known else None
        total = None if forward is None else forward + (backward or 0.0)
        return CompileTime(forward, backward, total)

    def backward_metrics_of(self, key: CompileId) -> list[dict[str, Any]]:
        """bwd_compilation_metrics logged under exactly this compile id."""
        return [meta for compile_id, meta in self.backward_metrics.get(key.frame_key(), []) if compile_id == key]

    def totals(self, compiles: list[CompileSummary] | None = None) -> dict[str, Any]:
        compiles = self.compiles() if compiles is None else compiles
        counts = summary.counts(self)
        times = [c.compile_time_s.total for c in compiles if c.compile_time_s.total is not None]
        return {
            "compiles": len(compiles),
            "frames": counts["frames"],
            "graph_breaks": counts["graph_breaks"],
            "recompiles": counts["recompiles"],
            "failed": sum(1 for c in compiles if c.failure is not None),
            "compile_time_s": round(sum(times), 6) if times or not compiles else None,
            "cache": {"hit": counts["cache_hits"], "miss": counts["cache_misses"], "bypass": counts["cache_bypasses"]},
        }

    def to_dict(self) -> dict[str, Any]:
        """What `summary.json` holds (see summary.schema.json)."""
        compiles = self.compiles()
        data: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "generator": {"name": "tlparse-py", "version": __version__},
            "inputs": [{"path": path, "bytes": size, "rank": self.rank} for path, size in self.source.files()],
            "torch_version": self.torch_version,
            "stats": dict(self.stats.counts),
            "totals": self.totals(compiles),
            "compiles": [c.to_dict() for c in compiles],
        }
        if self.export_mode:
            data["export"] = summary.export_verdict(self)
        return data


def _failure(fields: dict[str, Any]) -> dict[str, str | None] | None:
    if not fields.get("fail_type"):
        return None
    reason = fields.get("fail_reason")
    return {"type": str(fields["fail_type"]), "reason": str(reason) if reason is not None else None}


__all__ = ["Analysis", "CompileSummary", "CompileTime", "SCHEMA_VERSION", "STATUS_LABELS"]
