"""Property-based tests of the reader (hypothesis): no input makes it raise, and a cut log loses only
the record that was cut."""

from __future__ import annotations

import io
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logs import line
from tlparse_py.analysis.summary_load import load_summary
from tlparse_py.analysis.totals import nested, totals_of
from tlparse_py.model import Stats
from tlparse_py.reading.records import DiagnosticLog, EventScanner, LogReader

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def read_bytes(data: bytes):
    reader = LogReader(Path("mem.log"), Stats(), DiagnosticLog(limit=10), year=2026)
    records = list(reader.records_of(EventScanner(reader.max_line).events(io.BytesIO(data))))
    return records, reader.stats


LOG_ALPHABET = st.sampled_from([b"V1202 12:14:23.064000 7 torch/x.py:1] ", b"\t", b"\n", b"\r\n", b"{", b"}", b'"has_payload": "', b'"a": 1', b", ", b"\xff", b"\x00", b"[", b"]", b'"str": ["f", 0]', b"NaN"])


@SETTINGS
@given(st.binary(max_size=4000))
def test_any_bytes_give_records_and_counts_never_an_exception(data):
    records, stats = read_bytes(data)
    assert stats["ok"] + stats["other_rank"] == len(records)
    assert all(isinstance(r.envelope, dict) for r in records)


@SETTINGS
@given(st.lists(LOG_ALPHABET, max_size=200).map(b"".join))
def test_log_shaped_noise_never_raises(data):
    records, stats = read_bytes(data)
    assert stats["ok"] + stats["other_rank"] == len(records)


PAYLOAD_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"), max_size=60)
RECORD = st.tuples(
    st.sampled_from(["dynamo_output_graph", "artifact", "compilation_metrics", "dynamo_start", "export"]),
    st.integers(0, 3),
    st.one_of(st.none(), PAYLOAD_TEXT),
)


def encode(records) -> tuple[bytes, list[tuple[int, int]]]:
    """The log, and for every record the byte offset where it ends (after its last payload line)."""
    data, ends = b"", []
    for kind, frame, payload in records:
        data += line({kind: {}, "frame_id": frame, "frame_compile_id": 0, "attempt": 0}, payload).encode("utf-8")
        ends.append(len(data) - 1)  # the final newline may be cut: the record is still complete
    return data, ends


@SETTINGS
@given(st.lists(RECORD, min_size=1, max_size=12), st.data())
def test_a_log_cut_anywhere_keeps_every_complete_record(records, data):
    log, ends = encode(records)
    cut = data.draw(st.integers(0, len(log)))
    read, _ = read_bytes(log[:cut])
    complete = [i for i, end in enumerate(ends) if end <= cut]
    assert len(read) >= len(complete)
    for index in complete:
        kind, frame, payload = records[index]
        assert read[index].kinds == [kind] and read[index].envelope["frame_id"] == frame
        expected = None if payload is None else payload.encode("utf-8")
        assert read[index].payload == expected


@settings(max_examples=25, deadline=None)
@given(st.binary(max_size=3000))
def test_the_whole_pipeline_survives_any_bytes(tmp_path_factory, data):
    from tlparse_py.pipeline import write_report

    folder = tmp_path_factory.mktemp("fuzz")
    log = folder / "x.log"
    log.write_bytes(data)
    out = folder / "out"
    report = write_report(log, out)
    assert (out / "index.html").is_file()
    # every compile id read is listed, and every file the directory names was written
    directory = json.loads((out / "compile_directory.json").read_text())
    assert set(directory) == {"unknown" if key is None else str(key) for key in report.directory}  # tlparse's key for no id
    for artifact in (a for artifacts in report.directory.values() for a in artifacts if not a.is_link):
        assert (out / artifact.url).is_file() and (not artifact.readable_url or (out / artifact.readable_url).is_file()), artifact
    # summary.json says what the analysis says, and its totals are its compiles' totals
    summary = json.loads((out / "summary.json").read_text())
    assert summary == json.loads(json.dumps(report.to_dict()))
    assert summary["totals"] == nested(totals_of(load_summary(summary).compiles))
    assert summary["stats"]["ok"] == report.records  # every record read reached the analysis
