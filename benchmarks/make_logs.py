"""Build large TORCH_TRACE logs from the real harness traces, for benchmarks.

Each copy of a source trace gets its frame ids shifted (so every compile id is new) and a marker
added to every payload (so no two payloads are byte-identical and nothing can be skipped by caching
on an md5); every changed payload's md5 is recomputed. The result is a valid log of the requested size.

With `--tiny-compiles N`, N more compiles of about 1.5 KB each (a `dynamo_start`, a small
`dynamo_output_graph` and the compile's `compilation_metrics`, new frame ids) are spread evenly
among the copies: the log then holds many more compiles for nearly the same size (live.py
measures a live update against the number of compiles already in the report).

    python benchmarks/make_logs.py --size-mb 200 --out /tmp/bench_200.log
    python benchmarks/make_logs.py --size-mb 200 --tiny-compiles 4000 --out /tmp/bench_200_many.log

With `--small-compiles N`, the log is instead the `many_small` harness trace (24 small functions
compiled one by one, 27 compiles of real torch 2.13 records) copied until it holds N compiles.
Torch writes its whole config (~38 KB) into every `compilation_metrics`; `--lean` leaves those
configs and the chromium events out, for the ~1.3 KB-a-compile shape of logs from jobs that log
less (10,000 compiles: 14 MB lean, 540 MB as written).

    python benchmarks/make_logs.py --small-compiles 10000 --lean --out /tmp/bench_small_10k.log
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


TINY_FRAMES = 10_000_000  # the tiny compiles' frame ids start here: past any copy's shifted ids


def tiny_compile(frame: int) -> bytes:
    """One small whole compile of frame `frame`: its start (a user stack), a four-line graph and its metrics."""
    prefix = b"V1202 12:14:23.064000 4242 torch/_dynamo/convert_frame.py:%d] "
    ids = b'"frame_id": %d, "frame_compile_id": 0, "attempt": 0' % frame
    stack = b'[{"line": 10, "name": "<module>", "filename": 0}, {"line": %d, "name": "tiny_%d", "filename": 0}]' % (frame % 997, frame)
    graph = b"\n".join([b"class GraphModule(torch.nn.Module):", b"    def forward(self, L_x_: \"f32[8][1]cpu\"):",
                        b"        mul: \"f32[8][1]cpu\" = L_x_ * %d;  L_x_ = None" % frame, b"        return (mul,)"])
    metrics = (b'{"co_name": "tiny_%d", "co_filename": "bench.py", "co_firstlineno": %d, "graph_op_count": 1, '
               b'"restart_reasons": [], "entire_frame_compile_time_s": 0.01, "start_time": 1733100000.0}' % (frame, frame % 997))
    return b"".join([
        prefix % 1 + b'{"dynamo_start": {"stack": %s}, %s}\n' % (stack, ids),
        prefix % 2 + b'{"dynamo_output_graph": {"sizes": {"l_x_": [8], "mul": [8]}}, %s, "has_payload": "%s"}\n'
        % (ids, hashlib.md5(graph).hexdigest().encode()),
        b"".join(b"\t" + part + b"\n" for part in graph.split(b"\n")),
        prefix % 3 + b'{"compilation_metrics": %s, %s}\n' % (metrics, ids),
    ])


def build(size_mb: float, out_path: Path, sources: tuple[str, ...] = DEFAULT_SOURCES, tiny_compiles: int = 0,
          first_copy: int = 0) -> dict[str, int]:
    """`first_copy`: the number of the first copy (its frame ids are shifted by 1000 per copy): a log
    built from a later copy on holds none of the compile ids of one built from 0 (pieces appended to it)."""
    logs = [read_source(sorted((TRACES / name).glob("dedicated_log*"))[0]) for name in sources]
    target = int(size_mb * 1e6)
    written = copies = tiny = 0
    with open(out_path, "wb") as out:
        while written < target:
            copy = first_copy + copies
            records = logs[copy % len(logs)]
            written += write_copy(out, records, copy, offset=1000 * (copy + 1))
            copies += 1
            # after each copy, as many tiny compiles as its share of the log's size
            while tiny < tiny_compiles and (tiny < tiny_compiles * min(1.0, written / target) or written >= target):
                chunk = tiny_compile(TINY_FRAMES + tiny)
                out.write(chunk)
                written += len(chunk)
                tiny += 1
    return {"bytes": written, "copies": copies, "tiny_compiles": tiny}


LEAN_DROPPED = ("inductor_config", "dynamo_config", "functorch_config", "compiler_config")


def leaned(records: list[tuple[bytes, list[bytes]]]) -> list[tuple[bytes, list[bytes]]]:
    """The records without chromium events, and every compilation_metrics without torch's configs."""
    kept: list[tuple[bytes, list[bytes]]] = []
    for header, payload in records:
        if b'{"chromium_event": ' in header:
            continue
        if b'{"compilation_metrics": ' in header:
            start = header.index(b"{")
            envelope = json.loads(header[start:])
            for key in LEAN_DROPPED:
                envelope["compilation_metrics"].pop(key, None)
            header = header[:start] + json.dumps(envelope).encode()
        kept.append((header, payload))
    return kept


def build_small(compiles: int, out_path: Path, lean: bool) -> dict[str, int]:
    """Copies of the `many_small` trace, each with new frame ids, until the log holds `compiles` compiles."""
    records = read_source(sorted((TRACES / "many_small").glob("dedicated_log*"))[0])
    if lean:
        records = leaned(records)
    per_copy = sum(1 for header, _ in records if b'{"compilation_metrics": ' in header)
    written = copies = 0
    with open(out_path, "wb") as out:
        while copies * per_copy < compiles:
            written += write_copy(out, records, copies, offset=1000 * (copies + 1))
            copies += 1
    return {"bytes": written, "copies": copies, "compiles": copies * per_copy}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tiny-compiles", type=int, default=0, help="this many more small compiles, spread among the copies")
    parser.add_argument("--small-compiles", type=int, default=0, help="copies of the many_small trace up to this many compiles")
    parser.add_argument("--lean", action="store_true", help="with --small-compiles: no torch configs in the metrics, no chromium events")
    args = parser.parse_args()
    if args.small_compiles:
        print(json.dumps(build_small(args.small_compiles, args.out, args.lean)))
        return
    if args.size_mb is None:
        parser.error("--size-mb or --small-compiles is required")
    print(json.dumps(build(args.size_mb, args.out, tiny_compiles=args.tiny_compiles)))


if __name__ == "__main__":
    main()
