"""What diverges across ranks: every cross-rank question of a multi-rank report, answered once
(`compare`).

Divergence between ranks (different graphs, cache paths, collective order, compiler decisions) is
the classic cause of hangs. The answers are typed plain data, computed from each rank's typed facts
(`RankFacts`: its `Summary`, as its `summary.json` holds it, and the `DistributedFacts` its reading
noted); the multi-rank report (`tlparse_py.multirank`) shows them and writes them, and asks nothing
itself.

Compile ids: the compiles a rank made are compared by their keys (`CompileSummary.key`); the
distributed facts name compile ids as they were logged (attempt included: `[0/0_1]`), and the frame
compile of such an id is found through the compiles whose attempts logged under it
(`CompileSummary.attempts`) or the fingerprint noted for it, never by parsing its text. Cache
lookups are their results (`hit`, `miss`, `bypass`, as `summary.CACHE_RESULTS`), not marks.

What a compile produced is compared like with like: on each rank, the attempt of the compile that
holds its graph (the last that logged a Dynamo graph), whichever attempt that is on each. A verdict
names its first cause when the compiles' own facts show one: a graph break, a recompile, a failed
compile or one that never finished that some ranks had and the others did not (`Cause`).
"""

from __future__ import annotations

from collections.abc import Sequence

from .rank_answers import RankComparison, RankFacts
from .rank_causes import Causes
from .rank_detectors import (
    agreement_divergence, cache_divergence, compile_id_divergence, compiler_collectives, content_divergence, dynamic_divergence,
    execution_order_analysis, frames_of, log_order, runtime_analysis, runtime_estimations, schedule_divergence, spmd_mismatches,
    tensor_meta_groups,
)
from .rank_verdicts import cache_note, divergences


def compare(ranks: Sequence[RankFacts]) -> RankComparison:
    """The comparison of the ranks (one main log each, in rank order)."""
    frames = frames_of(ranks)
    estimations = runtime_estimations(ranks)
    content = content_divergence(ranks, frames)
    causes = Causes(ranks)
    for row in content:
        for departure in row.departures:
            departure.cause = causes.of(row.compile_id, departure.ranks)
    compile_ids = compile_id_divergence(ranks)
    for ids in compile_ids:
        ids.groups = causes.grouped(ids)
    cache = cache_divergence(ranks)
    comparison = RankComparison(
        ranks=[r.rank for r in ranks],
        compile_ids=compile_ids,
        cache=cache,
        schedules=schedule_divergence(ranks),
        tensor_meta=tensor_meta_groups(ranks),
        runtime=runtime_analysis(estimations),
        execution=execution_order_analysis(ranks),
        agreements=agreement_divergence(ranks),
        dynamic=dynamic_divergence(ranks),
        estimations=estimations,
        content=content,
        spmd=spmd_mismatches(ranks),
        collectives=compiler_collectives(ranks, content, frames),
        divergences=[],
        notes=[],
        log_order=log_order(ranks),
    )
    comparison.divergences = divergences(comparison, frames, causes)
    note = cache_note(cache, ranks)
    comparison.notes = [note] if note is not None else []
    return comparison
