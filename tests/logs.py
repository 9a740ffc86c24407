"""Write TORCH_TRACE-format logs by hand, for tests of what torch does not easily produce."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any


def md5(text: str | bytes) -> str:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.md5(data).hexdigest()


def line(meta: dict[str, Any], payload: str | None = None, *, pid: int = 4242, path: str = "torch/_dynamo/x.py", lineno: int = 7) -> str:
    """One record as torch writes it: glog prefix, JSON envelope, then TAB-prefixed payload lines."""
    if payload is not None:
        meta = {**meta, "has_payload": md5(payload)}
    header = f"V1202 12:14:23.064000 {pid} {path}:{lineno}] {json.dumps(meta)}"
    if payload is None:
        return header + "\n"
    return header + "".join(f"\n\t{part}" for part in payload.split("\n")) + "\n"


def cid(frame: int | None = 0, compile: int | None = 0, attempt: int | None = 0, ca: int | None = None) -> dict[str, Any]:
    """Compile-id fields as torch writes them (absent parts left out)."""
    fields = {"compiled_autograd_id": ca, "frame_id": frame, "frame_compile_id": compile, "attempt": attempt}
    return {k: v for k, v in fields.items() if v is not None}


def write_log(path: Path, lines: list[str] | str, *, gz: bool = False) -> Path:
    text = lines if isinstance(lines, str) else "".join(lines)
    data = text.encode("utf-8")
    if gz:
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path


def start(frame: int = 0, compile: int = 0, attempt: int = 0, filename: int | str = 0, fn: str = "f", lineno: int = 3) -> str:
    """A dynamo_start record with a two-frame user stack."""
    stack = [{"line": 10, "name": "<module>", "filename": filename}, {"line": lineno, "name": fn, "filename": filename}]
    return line({"dynamo_start": {"stack": stack}, **cid(frame, compile, attempt)})


def metrics(frame: int = 0, compile: int = 0, attempt: int | None = 0, **fields: Any) -> str:
    base = {"co_name": "f", "graph_op_count": 2, "restart_reasons": [], "entire_frame_compile_time_s": 0.5}
    base.update(fields)
    return line({"compilation_metrics": base, **cid(frame, compile, attempt)})


# -- reading a log back, independently of the tool ------------------------------------------------


def log_text(path: Path) -> str:
    """A log's text, gunzipped when it is a .gz."""
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8", "replace")


def envelopes_of(folder_or_log: Path, kind: str) -> list[dict[str, Any]]:
    """Every `kind` record's metadata (`{"kind": {...}}` on the envelope line), in log order, from
    the log or from every trace log of the folder: what a test expects, read without the tool."""
    logs = [folder_or_log] if folder_or_log.is_file() else sorted(folder_or_log.glob("dedicated_log*"))
    found = []
    for log in logs:
        for text in log_text(log).splitlines():
            at = text.find('{"%s"' % kind)
            if at >= 0:
                found.append(json.loads(text[at:])[kind])
    return found
