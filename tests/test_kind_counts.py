"""Each compile id's records counted by kind, equal counts shared (`analysis.kind_counts`): the
counts are a plain Counter's, whatever order the records come in, and counting one id never
changes another's."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tlparse_py.analysis import kind_counts
from tlparse_py.analysis.kind_counts import KindCounts
from tlparse_py.pipeline import analyze_logs

import oracle
from test_kept_summary import logs_of

records = st.lists(st.tuples(st.integers(0, 5), st.lists(st.sampled_from(["a", "b", "c", "(no kind)"]), min_size=1, max_size=3)),
                   max_size=300)


@given(records, st.integers(1, 8), st.integers(1, 40))
@settings(max_examples=300, deadline=None)
def test_the_counts_are_a_counters_however_they_are_shared(logged, shared_records, shared_counts):
    kind_counts.SHARED_RECORDS, kind_counts.SHARED_COUNTS = shared_records, shared_counts
    try:
        tally, counts, expected = KindCounts(), {}, {}
        for key, names in logged:
            before = {k: Counter(v) for k, v in counts.items()}
            tally.add(counts, key, names)
            expected.setdefault(key, Counter()).update(names)
            assert counts == expected
            assert all(counts[k] == v for k, v in before.items() if k != key)  # no other id's counts changed
            assert len(tally.after) <= shared_counts
    finally:
        kind_counts.SHARED_RECORDS, kind_counts.SHARED_COUNTS = 64, 4096


def test_ids_that_logged_the_same_share_one_counter_and_a_long_one_has_its_own():
    tally, counts = KindCounts(), {}
    for key in range(1000):
        for names in (["dynamo_start"], ["dynamo_output_graph"], ["compilation_metrics"]):
            tally.add(counts, key, names)
    assert len({id(c) for c in counts.values()}) == 1 and counts[0] == Counter(dynamo_start=1, dynamo_output_graph=1, compilation_metrics=1)
    for _ in range(kind_counts.SHARED_RECORDS + 10):
        tally.add(counts, "long", ["inductor_output_code"])
    assert counts["long"]["inductor_output_code"] == kind_counts.SHARED_RECORDS + 10
    assert len(tally.after) <= kind_counts.SHARED_RECORDS + 3  # one shared Counter a step, not one a record past the bound


@pytest.mark.parametrize("scenario", ["many_small", "graph_break", "recompile_limit"])
def test_a_real_runs_counts_are_its_records_kinds(scenario):
    """Each compile id's counts, against a count of its raw records made here (oracle.records)."""
    where = {"rank", "compiled_autograd_id", "frame_id", "frame_compile_id", "attempt", "has_payload", "stack", "subgraph_name"}
    expected: dict[tuple, Counter] = {}
    for log in logs_of(scenario):
        for _, envelope, _ in oracle.records(log):
            if "str" in envelope:  # the string table, not a record
                continue
            key = tuple(envelope.get(k) for k in ("compiled_autograd_id", "frame_id", "frame_compile_id", "attempt"))
            expected.setdefault(key, Counter()).update([k for k in envelope if k not in where] or ["(no kind)"])
    analysis = analyze_logs(logs_of(scenario))
    found = {tuple(k)[:4]: c for k, c in analysis.kinds.items()}
    assert found == expected
    if scenario == "many_small":
        assert max(Counter(id(c) for c in analysis.kinds.values()).values()) > 10  # the small compiles share their counts
