"""Build large TORCH_TRACE logs from the real harness traces, for benchmarks.

Each copy of a source trace gets its frame ids shifted (so every compile id is new) and a marker
added to every payload (so no two payloads are byte-identical and nothing can be skipped by caching
on an md5); every changed payload's md5 is recomputed. The result is a valid log of the requested size.

    python benchmarks/make_logs.py --size-mb 200 --out /tmp/bench_200.log
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRACES = HERE.parent / "tests" / "fixtures" / "traces"
DEFAULT_SOURCES = ("transformer", "graph_break", "recompile", "training", "compiled_autograd", "unbacked", "inference", "failure")
FRAME_ID = re.compile(rb'"frame_id": (\d+)')
CHROMIUM_ID = re.compile(rb'"compile_id": "(!\d+/)?(\d+)/')


def read_source(path: Path) -> list[tuple[bytes, list[bytes]]]:
    """(header, payload lines) records of one log."""
    data = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
    records: list[tuple[bytes, list[bytes]]] = []
    for line in data.split(b"\n"):
        if line.startswith(b"\t") and records:
            records[-1][1].append(line[1:])
        elif line:
            records.append((line, []))
    return records


def shifted(header: bytes, offset: int) -> bytes:
    return FRAME_ID.sub(lambda m: b'"frame_id": %d' % (int(m.group(1)) + offset), header)


def marked(payload: list[bytes], copy: int) -> list[bytes]:
    """The payload with a per-copy marker that keeps JSON payloads valid."""
    if not payload:
        return payload
    first = payload[0]
    if first == b"{" and len(payload) > 1:
        return [b"{", b'"bench_copy": %d,' % copy, *payload[1:]]
    if first.startswith(b"{") and first.endswith(b"}") and len(payload) == 1:
        return [b'{"bench_copy": %d, ' % copy + first[1:]]
    if first == b"[":
        return payload
    return [*payload, b"# bench copy %d" % copy]


def write_copy(out, records: list[tuple[bytes, list[bytes]]], copy: int, offset: int) -> int:
    written = 0
    for header, payload in records:
        header = shifted(header, offset)
        if payload or b'"has_payload"' in header:
            payload = marked(payload, copy)
            body = b"\n".join(payload)
            header = re.sub(rb'"has_payload": "[0-9a-f]{32}"', b'"has_payload": "%s"' % hashlib.md5(body).hexdigest().encode(), header)
            if b'"chromium_event"' in header:
                body_text = CHROMIUM_ID.sub(lambda m: b'"compile_id": "%s%d/' % (m.group(1) or b"", int(m.group(2)) + offset), body)
                if body_text != body:
                    body = body_text
                    header = re.sub(rb'"has_payload": "[0-9a-f]{32}"', b'"has_payload": "%s"' % hashlib.md5(body).hexdigest().encode(), header)
            chunk = header + b"\n" + b"\n".join(b"\t" + line for line in body.split(b"\n")) + b"\n"
        else:
            chunk = header + b"\n"
        out.write(chunk)
        written += len(chunk)
    return written


def build(size_mb: float, out_path: Path, sources: tuple[str, ...] = DEFAULT_SOURCES) -> dict[str, int]:
    logs = [read_source(sorted((TRACES / name).glob("dedicated_log*"))[0]) for name in sources]
    target = int(size_mb * 1e6)
    written = copies = 0
    with open(out_path, "wb") as out:
        while written < target:
            records = logs[copies % len(logs)]
            written += write_copy(out, records, copies, offset=1000 * (copies + 1))
            copies += 1
    return {"bytes": written, "copies": copies}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    print(json.dumps(build(args.size_mb, args.out)))


if __name__ == "__main__":
    main()
