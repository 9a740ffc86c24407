"""Payload blocks cut out of a log, wherever its read chunks end, against a line-by-line oracle.

The scanner finds a block's end and whether blank lines lie inside it with bytes searches over a
buffer of CHUNK bytes; the oracle below walks the log's lines one at a time, as tlparse does, and
shares no code with `reading/`. Blank lines (LF or CRLF) inside a block are skipped, blank lines
after its last payload line end it, and each payload line loses one CR before its newline.
"""

from __future__ import annotations

import hashlib
import io
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tlparse_py.reading import lines as lines_module
from tlparse_py.reading.records import RECORD, EventScanner

HEADER = b"V1202 12:14:23.064000 7 torch/x.py:1] "


def oracle_payloads(data: bytes) -> list[bytes | None]:
    """Each record's payload, walking the log line by line."""
    rows = data.split(b"\n")
    if rows and rows[-1] == b"":
        rows.pop()
    payloads: list[bytes | None] = []
    i = 0
    while i < len(rows):
        if not rows[i].startswith(HEADER):
            i += 1
            continue
        envelope = json.loads(rows[i][len(HEADER):].rstrip(b"\r"))
        i += 1
        kept: list[bytes] = []
        while i < len(rows):
            row = rows[i]
            if row.startswith(b"\t"):
                kept.append(row[1:-1] if row.endswith(b"\r") else row[1:])
                i += 1
            elif row in (b"", b"\r"):  # blank: inside the block only if payload follows the blank run
                after = i
                while after < len(rows) and rows[after] in (b"", b"\r"):
                    after += 1
                if after < len(rows) and rows[after].startswith(b"\t"):
                    i = after
                    continue
                break
            else:
                break
        payloads.append(b"\n".join(kept) if "has_payload" in envelope else None)
    return payloads


def scanned_payloads(data: bytes) -> list[bytes | None]:
    return [event[4] for event in EventScanner(1 << 30).events(io.BytesIO(data)) if event[0] == RECORD]


PAYLOAD_LINE = st.lists(st.sampled_from([b"a", b"bc", b" ", b"\r", b"x\r", b"{}", b"\t"]), max_size=4).map(b"".join)
BLANKS = st.lists(st.sampled_from([b"\n", b"\r\n"]), max_size=3).map(b"".join)
BLOCK_LINE = st.one_of(PAYLOAD_LINE.map(lambda text: b"\t" + text + b"\n"), BLANKS)


@st.composite
def logs(draw) -> bytes:
    """Records with payload lines, blank lines among and after them, LF and CRLF, and stray lines."""
    data = b""
    for _ in range(draw(st.integers(1, 6))):
        block = draw(st.lists(BLOCK_LINE, max_size=6))
        payload_lines = [line[1:-1] for line in block if line.startswith(b"\t")]
        payload = b"\n".join(line[:-1] if line.endswith(b"\r") else line for line in payload_lines)
        envelope = {"artifact": {}, "has_payload": hashlib.md5(payload).hexdigest()} if draw(st.booleans()) else {"artifact": {}}
        data += HEADER + json.dumps(envelope).encode() + draw(st.sampled_from([b"\n", b"\r\n"])) + b"".join(block)
        data += draw(st.sampled_from([b"", b"stray line\n", b"\r\n"]))
    return data


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(logs(), st.sampled_from([5, 8, 13, 64, 1 << 22]))
def test_payloads_are_cut_as_the_line_by_line_oracle_cuts_them_wherever_chunks_end(monkeypatch, data, chunk):
    monkeypatch.setattr(lines_module.LineScanner, "CHUNK", chunk)
    expected = oracle_payloads(data)
    assert scanned_payloads(data) == expected
