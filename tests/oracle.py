"""An independent oracle: the words of docs/glossary.md and the README's totals, counted straight from the raw records.

Deliberately simple, and sharing no code with tlparse_py (it must not import it): each header line is
a glog prefix and a JSON envelope, the lines after it that start with a TAB are its payload. The
property tests (test_properties.py) hold the tool's summary.json, index, summary.md, `--fail-on` and
`analyze()` to what this returns for a TORCH_TRACE folder whose logs are all one run.

What it counts, as the glossary (docs/glossary.md) says:
- a process is one log; processes are numbered the program first, then its children, each in the
  order its first record was logged, and
  every log of the folder belongs to the run (spawned children included);
- a compile is one (compiled autograd id, frame id, frame compile id) of one process and generation,
  with all its attempts; compiles are listed in log order;
- a new generation begins, for every later compile of the process, when a `dynamo_start` of attempt
  0 names an id whose compilation_metrics was already logged in the current one;
- status is the first that holds of missing, skipped, limit, error, break, empty, restart, ok (a
  compile whose only breaks are torch's own is `break` too);
- a graph break is torch's own (counted in torch_graph_breaks, not graph_breaks) when its headline
  is "Call to `torch._dynamo.graph_break()`" and the line torch says it broke at ("Graph break in
  user code at ...") is in a `torch/` folder;
- the compile over the recompile limit is not a recompile.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

HEADER = re.compile(r"^[VIWEC](\d{4} \d\d:\d\d:\d\d\.\d{6}) (\d+) [^:\]]+:\d+\] (\{.*)$")
CACHE = re.compile(r"^(?:fx_graph|aotautograd)_cache_(hit|miss|bypass)$")
PREAMBLES = ("Encountered graph break when attempting to trace", "Failed to handle graph break gracefully.")
TORCH_BREAK = "Call to `torch._dynamo.graph_break()`"
SKIPPING = ("Skipping the function and falling back to eager", "Skipping the frame and falling back to eager")


def _lines(log: Path) -> list[str]:
    data = log.read_bytes()
    return (gzip.decompress(data) if log.name.endswith(".gz") else data).decode("utf-8", "replace").split("\n")


def records(log: Path):
    """(timestamp, envelope, payload text) of each record whose envelope is JSON, in log order."""
    lines = _lines(log)
    for i, line in enumerate(lines):
        found = HEADER.match(line)
        if found is None:
            continue
        try:
            envelope = json.loads(found[3])
        except ValueError:
            continue
        end = i + 1
        while end < len(lines) and lines[end].startswith("\t"):
            end += 1
        yield found[1], envelope, "\n".join(l[1:] for l in lines[i + 1:end])


def graph_break(text: str) -> tuple[str, str]:
    """(reason, user location) of a dynamo_graph_break_reason: the headline, read through preambles."""
    lines = text.split("\n")
    location = next((l.split(" at ", 1)[1].strip() for l in lines if l.startswith("Graph break in user code at ")), "")
    at = next(i for i, l in enumerate(lines) if l.startswith("Graph Break Reason:"))
    candidates = [lines[at][len("Graph Break Reason:"):].strip(), *(l.strip() for l in lines[at + 1:])]
    reason = next(c for c in candidates if c and not c.startswith(PREAMBLES))
    return reason, location


def is_torch_break(brk: tuple[str, str]) -> bool:
    reason, location = brk
    return reason == TORCH_BREAK and "/torch/" in location


def is_child(log: Path) -> bool:
    """Whether a log's first compile started in a child process's start-up code."""
    start = next((env["dynamo_start"] for _, env, _ in records(log) if "dynamo_start" in env), {"stack": []})
    return any(frame.get("name") in ("_bootstrap", "_worker_loop") for frame in start["stack"])


def oracle(folder: Path) -> dict[str, Any]:
    # process 0 is the program, then its children (a child's first stack starts in multiprocessing's
    # or the DataLoader's start-up code), each by its first record
    logs = sorted(folder.glob("dedicated_log_torch_trace*.log*"), key=lambda log: (is_child(log), next(records(log))[0]))
    compiles: list[dict[str, Any]] = []
    processes = []
    for process, log in enumerate(logs):
        generation, finished, current = 0, set(), {}
        pid = HEADER.match(next(l for l in _lines(log) if HEADER.match(l)))[2]
        processes.append({"process": process, "pid": int(pid), "logs": [log.name]})
        for _, env, payload in records(log):
            if env.get("frame_id") is None:
                continue  # outside any frame compile (a compiled-autograd capture is not a compile)
            key = (env.get("compiled_autograd_id"), env["frame_id"], env.get("frame_compile_id"))
            kind = next(iter(env))
            if kind == "dynamo_start" and env.get("attempt") == 0 and key in finished:
                generation, finished, current = generation + 1, set(), {}
            c = current.get(key)
            if c is None:
                c = current[key] = {"process": process, "generation": generation, "key": key, "attempts": set(), "started": False,
                                    "frame": None, "metrics": None, "reasons": False, "breaks": [], "skipping": False,
                                    "cache": {"hit": 0, "miss": 0, "bypass": 0}, "backward": []}
                compiles.append(c)
            if "attempt" in env:
                c["attempts"].add(env["attempt"])
            name = env["artifact"].get("name") if kind == "artifact" else kind
            if kind == "dynamo_start":
                c["started"], c["frame"] = True, env["dynamo_start"]["stack"][-1]["name"]
            elif kind == "compilation_metrics":
                c["metrics"] = env[kind]
                finished.add(key)
            elif kind == "bwd_compilation_metrics" and env[kind].get("inductor_compile_time_s") is not None:
                c["backward"].append(env[kind]["inductor_compile_time_s"])
            elif name == "recompile_reasons" and payload.strip() not in ("", "[]"):
                c["reasons"] = True
            elif name == "dynamo_graph_break_reason":
                if graph_break(payload) not in c["breaks"]:
                    c["breaks"].append(graph_break(payload))
                c["skipping"] |= any(s in payload for s in SKIPPING)
            elif CACHE.match(name or ""):
                c["cache"][CACHE.match(name)[1]] += 1
    previous: dict[tuple, dict[str, Any]] = {}
    for c in compiles:
        m = c["metrics"]
        fail_type, fail_reason = (m.get("fail_type"), str(m.get("fail_reason") or "")) if m else (None, "")
        if m is None:
            c["status"] = "missing"
        elif c["skipping"] or any(s in fail_reason for s in SKIPPING):
            c["status"] = "skipped"
        elif fail_type and fail_type != "FailOnRecompileLimitHit" and not c["started"] and "recompile limit" in fail_reason:
            c["status"] = "limit"
        elif fail_type:
            c["status"] = "error"
        elif c["breaks"]:
            c["status"] = "break"
        elif not m.get("graph_op_count"):  # no ops, or no graph at all (null)
            c["status"] = "empty"
        elif m.get("restart_reasons"):
            c["status"] = "restart"
        else:
            c["status"] = "ok"
        frame = (c["process"], c["generation"], c["key"][0], c["key"][1])
        before = previous.get(frame)
        previous[frame] = c
        c["cause"] = "first" if before is None else "retry" if before["status"] == "error" and not c["reasons"] else "recompile"
        c["frame"] = c["frame"] or (m or {}).get("co_name") or (before["frame"] if before else None)
        forward = m.get("entire_frame_compile_time_s") if m else None
        c["time"] = None if forward is None and not c["backward"] else (forward or 0) + sum(c["backward"])

    def label(c: dict[str, Any], attempt: int = 0) -> str:
        ca, frame, fcid = c["key"]
        process = f"p{c['process']}:" if c["process"] else ""
        return f"[{process}{'' if ca is None else f'!{ca}/'}{frame}/{fcid}{f'_{attempt}' if attempt else ''}]"

    times = [c["time"] for c in compiles if c["time"] is not None]

    def count(test: Any) -> int:
        return sum(1 for c in compiles if test(c))

    totals = {
        "compiles": len(compiles),
        "frames": len({(c["process"], c["generation"], c["key"][0], c["key"][1]) for c in compiles}),
        "graph_breaks": sum(1 for c in compiles for b in c["breaks"] if not is_torch_break(b)),
        "torch_graph_breaks": sum(1 for c in compiles for b in c["breaks"] if is_torch_break(b)),
        "recompiles": count(lambda c: c["cause"] == "recompile" and c["status"] != "limit"),
        "retries": count(lambda c: c["cause"] == "retry"),
        "restarts": sum(max(len(c["attempts"]) - 1, 0) for c in compiles),
        "failed": count(lambda c: c["status"] == "error"),
        "skipped": count(lambda c: c["status"] == "skipped"),
        "recompile_limit": count(lambda c: c["status"] == "limit"),
        "compile_time_s": round(sum(times), 6) if times else None,
        "cache": {r: sum(c["cache"][r] for c in compiles) for r in ("hit", "miss", "bypass")},
    }
    for entry in processes:
        entry["compiles"] = sum(1 for c in compiles if c["process"] == entry["process"])
    return {"totals": totals, "processes": processes, "compiles": [
        {"id": label(c), "generation": c["generation"], "frame": c["frame"], "status": c["status"], "cause": c["cause"],
         "process": c["process"], "attempts": [label(c, a) for a in sorted(c["attempts"])], "graph_breaks": len(c["breaks"]),
         "compile_time_s": c["time"]} for c in compiles]}
