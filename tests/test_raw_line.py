"""A record's raw.jsonl line, encoded by the scanning child in two pieces (`reading.raw_line`): with
the payload file's name put in between (`joined`), the pieces are the line `orjson` encodes whole,
keys sorted, whatever the envelope holds; where they cannot be, there are none (the whole line is
encoded where the record is analysed)."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tlparse_py.reading.raw_line import _PLACE, PAYLOAD_KEY, joined, pieces_of

OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
GLOG = ("2026-12-07T17:30:57.123456Z", 5351, "torch/_dynamo/utils.py", 2350)

keys = st.one_of(st.sampled_from(["a", "pathname", "payload", "payloadz", "pay", "thread", "z", "é", "中", PAYLOAD_KEY]), st.text(max_size=4))
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=6), st.just(_PLACE))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)), max_leaves=8)
envelopes = st.dictionaries(keys.filter(lambda k: k not in ("timestamp", "thread", "pathname", "lineno", PAYLOAD_KEY)), values, max_size=5)


def whole(envelope: dict[str, Any], payload_file: str | None) -> bytes | None:
    line = {**envelope, "timestamp": GLOG[0], "thread": GLOG[1], "pathname": GLOG[2], "lineno": GLOG[3]}
    if payload_file is not None:
        line[PAYLOAD_KEY] = payload_file
    try:
        return orjson.dumps(line, option=OPTIONS)
    except (TypeError, orjson.JSONEncodeError):
        return None


@settings(max_examples=300, deadline=None)
@given(envelopes, st.one_of(st.none(), st.text(max_size=8), st.just(_PLACE)))
def test_the_pieces_with_the_name_put_in_are_the_whole_line(envelope, payload_file):
    pieces = pieces_of(envelope, *GLOG)
    expected = whole(envelope, payload_file)
    if pieces is None:  # only where orjson cannot encode the line (an int past 64 bits)
        assert expected is None
        return
    assert joined(pieces, payload_file) == expected


def test_a_value_holding_the_place_of_the_name_is_cut_by_its_keys():
    """The line is cut where the name goes; a log that holds the same bytes in a value of its own
    (nested, under the same key) is cut by the keys instead, to the same line."""
    for envelope in ({"a": {PAYLOAD_KEY: _PLACE}}, {"z": [{PAYLOAD_KEY: _PLACE}]}, {"dynamo_start": {}, "x": _PLACE}):
        for name in (None, "-_0_0_0/dynamo_output_graph_0.txt"):
            pieces = pieces_of(envelope, *GLOG)
            assert pieces is not None and joined(pieces, name) == whole(envelope, name)


def test_a_line_with_a_key_of_tlparses_own_has_no_pieces():
    assert pieces_of({"thread": 3, "dynamo_start": {}}, *GLOG) is None
    assert pieces_of({PAYLOAD_KEY: "x"}, *GLOG) is None
    assert pieces_of({"big": 2**70}, *GLOG) is None  # orjson cannot: the whole line is encoded otherwise
