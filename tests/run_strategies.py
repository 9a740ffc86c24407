"""Hypothesis strategies for whole synthetic TORCH_TRACE runs: a folder of logs, one per process.

`runs(features)` draws a program for each process and writes what torch 2.13 would log for it, in
the record formats of the real fixtures (tests/fixtures/traces/*: recompile, recompile_limit,
graph_break, skipped_frame, retry_fullgraph, failure, cache, compiled_autograd, tensorify_restart,
reset_reuse, processes, killed_midcompile) and of /work/shared/spec/torch-2.13-records.md:

- processes: the program, and children it started, each its own log with its own pid: spawned
  (a fresh frame counter and string table) or forked (they inherit both); every dynamo_start of a
  child starts in multiprocessing's `spawn_main`/`_bootstrap`. A child's log overlaps its parent's
  in time, or (`late_children`) begins after the parent's last record;
- frames and their compiles: a first compile, recompiles after a guard failed (a
  `recompile_reasons` artifact: a bare string for one reason, a JSON list for several), retries
  after a failed compile (no recompile reason), restarts (`[0/0]` then `[0/0_1]`, with
  `restart_reasons`) after graph breaks or a TensorifyScalarRestartAnalysis, graph breaks
  (`dynamo_graph_break_reason`, sometimes logged twice; in user code, inside torch as DDP's, and
  torch's own graph_break() of a compiled optimizer step), empty graphs, failures of several kinds
  (`fail_type`/`fail_reason`), frames torch skipped ("Skipping the function and falling back to
  eager", in the break or in the failure), the compile over the recompile limit (no dynamo_start;
  `Unsupported` "Dynamo recompile limit exceeded", or the hard `FailOnRecompileLimitHit`), cache
  lookups (`fx_graph_cache_*`, `aotautograd_cache_*` artifacts), lazy backward compiles
  (`bwd_compilation_metrics`, logged at once or after later compiles);
- `torch._dynamo.reset()`: frame ids start again from `[0/0]` (a new generation);
- compiled autograd: a capture (`[!0/-/-]`) and its compile `[!0/3/0]`;
- the end of a log: clean, killed in the middle of a compile (no metrics), or its last record cut
  in the middle of the line (the compile's metrics are lost).

Runs are kept small (a few compiles a process) so that each example is fast to read.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

USER_FILE = "/work/prog.py"
START_MS = 10 * 3600 * 1000  # 10:00:00.000
GB_SITE = "https://meta-pytorch.github.io/compile-graph-break-site/gb/"


@dataclass(frozen=True)
class Features:
    """What the generated runs may hold (all of it by default)."""

    resets: bool = True
    limits: bool = True
    children: bool = True
    late_children: bool = True
    compiled_autograd: bool = True
    cut_ends: bool = True
    max_steps: int = 5  # steps of the program's own process
    # at least one of these in every run (a property that forces one feature)
    force: tuple[str, ...] = ()


TORCH_FILE = "/venv/lib/python3.11/site-packages/torch/{}"
# where a break happened inside torch: (file, line, function, source line), innermost last
OPTIMIZER_STEP = ((TORCH_FILE.format("optim/optimizer.py"), 530, "wrapper", "out = func(*args, **kwargs)"),
                  (TORCH_FILE.format("optim/optimizer.py"), 79, "_use_grad", "torch._dynamo.graph_break()"))
DDP_FORWARD = ((TORCH_FILE.format("nn/parallel/distributed.py"), 1757, "forward", "self._pre_forward(*inputs, **kwargs)"),)
# (headline, explanation, registry id, user line, function, source line[, torch frames it broke in]): some
# share a headline, a line or both
BREAKS = (
    ("Failed to trace builtin operator", "Dynamo does not know how to trace builtin operator `print` with argument types ['str'] (has_kwargs False)",
     "gb0059", 23, "helper", 'print("helper: side effect that Dynamo cannot trace")'),
    ("Call to `torch._dynamo.graph_break()`", "User-inserted graph break. Message: None", "gb0025", 31, "f", "torch._dynamo.graph_break()"),
    ("Unsupported Tensor.backward() call", "Dynamo currently does not support tracing `Tensor.backward()` when trace_autograd_ops is off.",
     "gb0123", 40, "train_step", "loss.backward()"),
    ("Data-dependent branching", "Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`).", "gb0170", 23, "helper",
     "if x.sum() > 0:"),
    ("Failed to trace builtin operator", "Dynamo does not know how to trace builtin operator `input` with argument types [] (has_kwargs False)",
     "gb0059", 52, "forward", "input()"),
    # the same break as the first (same headline, same line), told in other words: one graph break
    ("Failed to trace builtin operator", "Dynamo does not know how to trace builtin operator `print` with argument types ['int'] (has_kwargs True)",
     "gb0059", 23, "helper", 'print(1, end="")'),
    # torch's own graph_break() in a compiled optimizer step: a torch's graph break
    ("Call to `torch._dynamo.graph_break()`", "User-inserted graph break. Message: None", "gb0025", 70, "train_step", "opt.step()",
     OPTIMIZER_STEP),
    # a break inside torch for another reason (DDP's hooks): the user's
    ("Unsupported method call", "Dynamo does not know how to trace method `register_comm_hook`", "gb0156", 44, "train_step",
     "loss = ddp_model(x)", DDP_FORWARD),
)
ENCOUNTERED = "Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):"
SKIP_PREAMBLE = "Failed to handle graph break gracefully. Skipping the function and falling back to eager. Graph break encountered:"
LOOP_SKIP = ("\n\n*** While handling this graph break, another graph break occurred: ***\n\ngraph break in loop\n"
             "  Explanation: torch.compile detected a graph break in a for/while loop. Skipping the frame and falling back to eager,"
             " as graph breaks in loops are not supported.\n  Hint: This graph break may have been caused by an earlier graph break."
             " Resolving the earlier graph break may resolve this one.\n\n  Developer debug context: frame skipped: {name} "
             f"({USER_FILE} line 31)\n\n For more details about this graph break, please visit: {GB_SITE}gb7000.html")
ERRORS = (
    ("BackendCompilerFailed", "backend='exploding_backend' raised:\nHarnessBackendError: harness: backend refuses graph with 4 nodes"),
    ("Unsupported", "Call to `torch._dynamo.graph_break()`\n  Explanation: User-inserted graph break. Message: None\n"
                    "  Hint: Remove the `torch._dynamo.graph_break()` call.\n\n  Developer debug context: Called "
                    f"`torch._dynamo.graph_break()` with args `[]`, kwargs `{{}}`\n\n For more details about this graph break, "
                    f"please visit: {GB_SITE}gb0025.html"),
    ("InternalTorchDynamoError", "AttributeError: 'NoneType' object has no attribute 'shape'"),
    ("TorchRuntimeError", "Dynamo failed to run FX node with fake tensors: call_function <built-in function add>(*(FakeTensor(..., "
                          "size=(4,)), FakeTensor(..., size=(8,))), **{}): got RuntimeError('The size of tensor a (4) must match the "
                          "size of tensor b (8) at non-singleton dimension 0')"),
)
LIMIT_REASON = ("Dynamo recompile limit exceeded\n  Explanation: Dynamo attempted to recompile the code object too many times, "
                "exceeding the {limit} cache size limit (currently set to {n}). Excessive recompilations can degrade performance "
                "due to the compilation overhead of each recompilation.\n  Hint: To monitor recompilations, enable "
                "TORCH_LOGS=recompiles. If recompilations are expected, consider increasing torch._dynamo.config.{limit} to an "
                "appropriate value.\n  Hint: See https://docs.pytorch.org/docs/main/user_guide/torch_compiler/compile/"
                "programming_model.recompilation.html for tips on dealing with recompilations.\n\n  Developer debug context: "
                f"Limit type: {{limit}}\n\n For more details about this graph break, please visit: {GB_SITE}gb0039.html")
HARD_LIMIT = ("Hard failure due to fail_on_recompile_limit_hit", "Hard failure due to fullgraph=True")
TENSORIFY = "<class 'torch._dynamo.exc.TensorifyScalarRestartAnalysis'>"
FUNCTIONS = ("f", "forward", "train_step", "loss_fn", "helper", "torch_dynamo_resume_in_f_at_17")
CACHE_INFO = {
    "hit": '{{"cache_status_detailed": "hit", "key": "{key}", "components": [], "compile_id": "{cid}"}}',
    "miss": '{{"cache_status_detailed": "full_miss", "key": "{key}", "cache_state": "miss", "components": [], "compile_id": "{cid}"}}',
    "bypass": '{{"cache_bypass_reason": "Unsupported call_function target torch._dynamo.compiled_autograd.ops.validate_outputs", '
              '"cache_bypass_exception_type": "BypassAOTAutogradCache", "compile_id": "{cid}"}}',
}


def md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def ids(ca: int | None, frame: int | None, fcid: int | None, attempt: int | None = 0) -> dict[str, int]:
    """The compile-id fields of an envelope, in torch's order (absent parts left out)."""
    fields = {"compiled_autograd_id": ca, "frame_id": frame, "frame_compile_id": fcid, "attempt": attempt}
    return {k: v for k, v in fields.items() if v is not None}


def cid_text(ca: int | None, frame: int, fcid: int) -> str:
    """str(CompileId): `0/1`, `!0/3/0`."""
    return f"{'' if ca is None else f'!{ca}/'}{frame}/{fcid}"


class Log:
    """One process's trace log, written a record at a time with its glog prefix and TAB-prefixed payload."""

    def __init__(self, pid: int, start_ms: int, strings: dict[str, int] | None = None) -> None:
        self.pid, self.ms, self.start_ms, self.lines = pid, start_ms, start_ms, []
        self.strings = dict(strings or {})
        self.cut_at: int | None = None  # the last line is cut after this many characters

    def stamp(self) -> str:
        hours, rest = divmod(self.ms, 3_600_000)
        minutes, rest = divmod(rest, 60_000)
        seconds, millis = divmod(rest, 1000)
        return f"{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}000"

    @property
    def first_ms(self) -> int:
        return self.start_ms + 3

    def record(self, meta: dict[str, Any], payload: str | None = None, where: str = "torch/_dynamo/utils.py:2350") -> None:
        self.ms += 3
        if payload is not None:
            meta = {**meta, "has_payload": md5(payload)}
        header = f"V1202 {self.stamp()} {self.pid} {where}] {json.dumps(meta)}"
        self.lines.append(header + ("".join(f"\n\t{part}" for part in payload.split("\n")) if payload is not None else ""))

    def intern(self, path: str) -> int:
        if path not in self.strings:
            self.strings[path] = len(self.strings)
            self.record({"str": [path, self.strings[path]]}, where="torch/_logging/structured.py:28")
        return self.strings[path]

    def chromium(self, name: str, phase: str, ca: int | None, frame: int, fcid: int, attempt: int = 0) -> None:
        event = {"name": name, "ts": self.ms * 1000.0, "args": {"compile_id": cid_text(ca, frame, fcid)}, "ph": phase,
                 "cat": "dynamo_timed", "tid": 0, "pid": 0}
        self.record({"chromium_event": {}, **ids(ca, frame, fcid, attempt)}, json.dumps(event, indent=0))

    def text(self) -> str:
        if self.cut_at is None:
            return "\n".join(self.lines) + "\n"
        return "\n".join(self.lines[:-1] + [self.lines[-1][: self.cut_at]])


@dataclass
class Frame:
    """A compiled function of one process, in the current generation."""

    ca: int | None
    fid: int
    name: str
    line: int
    compiles: int = 0  # its next frame compile id
    guarded: bool = False  # a compile of it succeeded (a guard of it can fail)
    failed: bool = False  # its last compile failed
    done: bool = False  # torch runs it eagerly from now on (skipped, recompile limit), or compiled autograd's


@dataclass
class Run:
    """The logs of one run, by file name; `story` says what was drawn (shown when a property fails)."""

    logs: dict[str, bytes]
    story: list[str] = field(default_factory=list)

    def write(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in self.logs.items():
            (folder / name).write_bytes(data)
        return folder

    def __repr__(self) -> str:
        texts = []
        for name, data in self.logs.items():
            text = gzip.decompress(data).decode() if name.endswith(".gz") else data.decode()
            texts.append(f"--- {name}\n{text}")
        return "Run(\n" + "\n".join(self.story) + "\n" + "\n".join(texts) + ")"


def break_payload(index: int, style: str) -> str:
    headline, explanation, gb, line, function, source, *inside = BREAKS[index]
    frames = ((USER_FILE, line, function, source), *(inside[0] if inside else ()))
    reason = {"plain": headline, "encountered": f"{ENCOUNTERED}\n\n{headline}", "skip": f"{SKIP_PREAMBLE}\n\n{headline}"}[style]
    traceback = "".join(f"  File \"{file}\", line {number}, in {name}\n    {text}\n" for file, number, name, text in frames)
    return (f"Graph break in user code at {frames[-1][0]}:{frames[-1][1]}\nGraph Break Reason: {reason}\n  Explanation: {explanation}\n"
            f"  Hint: Avoid it.\n\n  Developer debug context: context {index}\n\n For more details about this graph break, please "
            f"visit: {GB_SITE}{gb}.html\n\nUser code traceback:\n  File \"{USER_FILE}\", line 60, in <module>\n    main()\n"
            f"{traceback}")


def break_reason(index: int) -> str:
    headline, explanation, gb, *_ = BREAKS[index]
    return f"{headline}\n  Explanation: {explanation}\n\n For more details about this graph break, please visit: {GB_SITE}{gb}.html"


@st.composite
def outcomes(draw: st.DrawFn) -> dict[str, Any]:
    """What happens in one frame compile (not the compile over the recompile limit)."""
    fail = draw(st.sampled_from(["none", "none", "error", "skipped"]))
    return {
        "breaks": draw(st.lists(st.integers(0, len(BREAKS) - 1), max_size=2)),
        "break_style": draw(st.sampled_from(["encountered", "plain"])),
        "logged_twice": draw(st.booleans()),  # torch logs a break again in the restarted attempt
        "tensorify": draw(st.booleans()),
        "ops": draw(st.sampled_from([1, 3, 0, None])),  # None: no graph at all (a resume function with no ops)
        "fail": fail,
        "error": draw(st.integers(0, len(ERRORS) - 1)),
        "skip_style": draw(st.sampled_from(["break", "reason", "both"])),
        "dynamo_error": draw(st.booleans()),
        "cache": draw(st.lists(st.tuples(st.sampled_from(["fx_graph", "aotautograd"]), st.sampled_from(["hit", "miss", "bypass"])),
                               max_size=3)),
        "seconds": draw(st.integers(1, 40_000)) / 1000,
        "backward": draw(st.sampled_from(["none", "now", "later"])),
        "backward_seconds": draw(st.integers(1, 9_000)) / 1000,
    }


class Program:
    """Writes what torch logs for one process while the steps of its program are drawn."""

    def __init__(self, draw: st.DrawFn, log: Log, prefix: list[dict[str, Any]], frame_start: int, timed: bool, chromium: bool,
                 features: Features, story: list[str], label: str) -> None:
        self.draw, self.log, self.prefix, self.timed, self.chromium = draw, log, prefix, timed, chromium
        self.features, self.story, self.label = features, story, label
        self.frames: list[Frame] = []
        self.resettable = False  # this generation's first compile was a frame compile [0/0] that finished
        self.next_frame, self.next_ca = frame_start, 0
        self.backlog: list[tuple[Frame, int, float]] = []  # lazy backward compiles not run yet
        self.compiled = 0  # compiles in this generation

    # -- the steps -------------------------------------------------------------------------------

    def run(self, steps: int, ending: str) -> None:
        for _ in range(steps):
            self.step()
        self.flush_backward()
        if ending == "clean":
            return
        # the process dies in the middle of its last compile (killed), or its last line is cut
        choices = ["new"] + [c for c in ("recompile", "retry", "limit") if self.candidates(c)]
        self.again(self.draw(st.sampled_from(choices)), ending)

    def candidates(self, choice: str) -> list[Frame]:
        """The frames a recompile (a guard of theirs can fail), a retry (their last compile failed) or the
        compile over the recompile limit can happen to."""
        if choice == "limit" and not self.features.limits:
            return []
        fits = {"recompile": lambda f: f.guarded, "retry": lambda f: f.failed, "limit": lambda f: f.guarded and not f.failed}[choice]
        return [f for f in self.frames if not f.done and fits(f)]

    def again(self, choice: str, ending: str = "clean") -> None:
        """A first compile of a new frame, or a recompile, retry or the compile over the limit of a frame."""
        if choice == "new":
            frame = self.new_frame()
            self.story.append(f"{self.label}: frame {frame.fid} {frame.name}: first compile{'' if ending == 'clean' else ', ' + ending}")
            self.compile(frame, [], self.draw(outcomes()), ending=ending)
            return
        frame = self.draw(st.sampled_from(self.candidates(choice)))
        self.story.append(f"{self.label}: frame {frame.fid}: {choice} [{frame.fid}/{frame.compiles}]{'' if ending == 'clean' else ', ' + ending}")
        reasons = [] if choice == "retry" else self.guard_failures(frame)
        if choice == "limit":
            self.over_the_limit(frame, reasons, ending)
        else:
            self.compile(frame, reasons, self.draw(outcomes()), ending=ending)

    def step(self) -> None:
        choices = ["new"] + [c for c in ("recompile", "retry", "limit") if self.candidates(c)]
        if self.features.compiled_autograd:
            choices.append("compiled_autograd")
        if self.features.resets and self.resettable:
            choices.append("reset")
        if self.backlog:
            choices.append("backward")
        choice = self.draw(st.sampled_from(choices))
        if choice in ("new", "recompile", "retry", "limit"):
            self.again(choice)
        elif choice == "compiled_autograd":
            self.compiled_autograd()
        elif choice == "reset":
            self.reset()
            self.first_compile()  # [0/0] again: the reuse that tells a reset() from the log
        else:
            self.flush_backward()

    def first_compile(self, **forced: Any) -> Frame:
        frame = self.new_frame()
        self.story.append(f"{self.label}: frame {frame.fid} {frame.name}: first compile")
        self.compile(frame, [], {**self.draw(outcomes()), **forced})
        return frame

    def reset(self) -> None:
        """torch._dynamo.reset(): torch logs nothing, and numbers frames (and compiled-autograd graphs) from 0 again."""
        self.flush_backward()
        self.story.append(f"{self.label}: torch._dynamo.reset()")
        self.frames, self.next_frame, self.next_ca, self.compiled, self.resettable = [], 0, 0, 0, False

    def new_frame(self, ca: int | None = None, name: str | None = None) -> Frame:
        frame = Frame(ca, self.next_frame, name or self.draw(st.sampled_from(FUNCTIONS)), 10 + 5 * self.next_frame)
        self.next_frame += 1
        self.frames.append(frame)
        return frame

    def guard_failures(self, frame: Frame) -> list[str]:
        """One line per earlier compile of the frame, the newest first (torch's recompile_reasons)."""
        what = self.draw(st.sampled_from(["tensor 'x' size mismatch at index 0. expected 4, actual 8",
                                          "tensor 'x' dtype mismatch. expected Float, actual Double", "tag == 'a'"]))
        return [f"{frame.fid}/{k}: {what}" for k in reversed(range(frame.compiles))]

    # -- what torch logs ---------------------------------------------------------------------------

    def begin(self, frame: Frame, fcid: int, reasons: list[str]) -> None:
        log, ca = self.log, frame.ca
        if self.chromium:
            log.chromium("dynamo", "B", ca, frame.fid, fcid)
            log.chromium("entire_frame_compile", "B", ca, frame.fid, fcid)
        if reasons:
            payload = reasons[0] if len(reasons) == 1 else "[\n" + ",\n".join(json.dumps(r) for r in reasons) + "\n]"
            log.record({"artifact": {"name": "recompile_reasons", "encoding": "json"}, **ids(ca, frame.fid, fcid)}, payload,
                       where="torch/_dynamo/guards.py:5400")

    def metrics(self, frame: Frame, fcid: int, attempt: int, fields: dict[str, Any], cut: bool = False) -> None:
        log = self.log
        if self.chromium:
            log.chromium("entire_frame_compile", "E", frame.ca, frame.fid, fcid, attempt)
        base = {"compile_id": cid_text(frame.ca, frame.fid, fcid), "frame_key": str(len(log.lines)), "co_name": frame.name,
                "co_filename": USER_FILE, "co_firstlineno": frame.line, "cache_size": fcid, "guard_count": 3,
                "graph_op_count": None, "entire_frame_compile_time_s": None, "fail_type": None, "fail_reason": None,
                "restart_reasons": [], "recompile_reason": None, "has_guarded_code": False, "num_graph_breaks": None,
                "is_forward": True, "pytorch_version": "2.13.0+cpu"}
        base.update(fields)
        log.record({"compilation_metrics": base, **ids(frame.ca, frame.fid, fcid, attempt)}, where="torch/_dynamo/utils.py:2009")
        if cut:
            log.cut_at = self.draw(st.integers(1, len(log.lines[-1]) - 1))
            return
        if self.chromium:
            log.chromium("dynamo", "E", frame.ca, frame.fid, fcid, attempt)

    def compile(self, frame: Frame, reasons: list[str], o: dict[str, Any], ending: str = "clean") -> None:
        """A frame compile with all its attempts (ending "killed": no metrics; "cut": its metrics line cut)."""
        log, ca, fcid = self.log, frame.ca, frame.compiles
        frame.compiles += 1
        self.compiled += 1
        # a reset() is told from the log by the reuse of a finished id: only after a first frame [0/0]
        self.resettable = self.resettable or (self.compiled == 1 and ca is None and frame.fid == 0 and ending == "clean")
        self.begin(frame, fcid, reasons)
        where = log.intern(USER_FILE if ca is None else "<eval_with_key>.4")
        stack = [*self.prefix, {"line": frame.line, "name": frame.name, "filename": where}]
        log.record({"dynamo_start": {"stack": stack}, **ids(ca, frame.fid, fcid)}, where="torch/_dynamo/convert_frame.py:303")
        attempt, restart_reasons = 0, []
        breaks = list(o["breaks"])
        skip_break = o["fail"] == "skipped" and o["skip_style"] in ("break", "both")
        if skip_break and not breaks:
            breaks = [1]
        for n, index in enumerate(breaks):
            last = n == len(breaks) - 1
            style = "skip" if skip_break and last else o["break_style"]
            where = "torch/_dynamo/symbolic_convert.py:5098"
            log.record({"artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"}, **ids(ca, frame.fid, fcid, attempt)},
                       break_payload(index, style), where=where)
            if last and o["fail"] != "none":
                break  # the compile fails at this break
            restart_reasons.append(break_reason(index))
            attempt = self.restart(frame, fcid, attempt)
            if o["logged_twice"]:
                log.record({"artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"},
                            **ids(ca, frame.fid, fcid, attempt)}, break_payload(index, o["break_style"]), where=where)
        if o["tensorify"] and o["fail"] == "none":
            restart_reasons.append(TENSORIFY)
            attempt = self.restart(frame, fcid, attempt)
        if ending == "killed":
            log.record({"dynamo_output_graph": {"sizes": {"l_x_": [4]}}, **ids(ca, frame.fid, fcid, attempt)}, "class GraphModule: ...",
                       where="torch/_dynamo/output_graph.py:2841")
            return
        fields: dict[str, Any] = {"restart_reasons": restart_reasons, "recompile_reason": reasons[0] if reasons else None,
                                  "entire_frame_compile_time_s": o["seconds"] if self.timed else None}
        if o["fail"] == "none":
            log.record({"dynamo_output_graph": {"sizes": {"l_x_": [4]}}, **ids(ca, frame.fid, fcid, attempt)},
                       f"class GraphModule(torch.nn.Module):\n    def forward(self, L_x_):\n        return ({o['ops']} ops,)",
                       where="torch/_dynamo/output_graph.py:2841")
            for cache, result in o["cache"]:
                info = CACHE_INFO[result].format(key=md5(f"{cache}{fcid}{result}"), cid=cid_text(ca, frame.fid, fcid))
                log.record({"artifact": {"name": f"{cache}_cache_{result}", "encoding": "json"}, **ids(ca, frame.fid, fcid, attempt)},
                           info, where="torch/_logging/_internal.py:1440")
            fields.update(graph_op_count=o["ops"], has_guarded_code=True, num_graph_breaks=len(o["breaks"]) or None)
            frame.guarded, frame.failed = True, False
        else:
            fail_type, fail_reason = ERRORS[o["error"]]
            if o["fail"] == "skipped":
                headline = break_reason(breaks[-1]) if breaks else ERRORS[1][1]
                fail_type = "Unsupported"
                fail_reason = headline + (LOOP_SKIP.format(name=frame.name) if o["skip_style"] in ("reason", "both") else "")
                frame.done = True
            frame.failed = True
            if o["dynamo_error"]:
                log.record({"artifact": {"name": "dynamo_error", "encoding": "string"}, **ids(ca, frame.fid, fcid, attempt)},
                           f"Traceback (most recent call last):\n  File \"/site-packages/torch/_dynamo/convert_frame.py\", line 2102, "
                           f"in _compile\ntorch._dynamo.exc.{fail_type}: {fail_reason}", where="torch/_dynamo/convert_frame.py:2134")
            fields.update(fail_type=fail_type, fail_reason=fail_reason)
        self.metrics(frame, fcid, attempt, fields, cut=ending == "cut")
        if o["fail"] == "none" and o["backward"] != "none" and ending == "clean":
            self.backlog.append((frame, fcid, o["backward_seconds"]))
            if o["backward"] == "now":
                self.flush_backward()

    def restart(self, frame: Frame, fcid: int, attempt: int) -> int:
        """Dynamo restarts its analysis: the next attempt, which describes the frame's inputs again."""
        attempt += 1
        if self.chromium:
            self.log.chromium(f"compile_attempt_{attempt}", "B", frame.ca, frame.fid, fcid, attempt)
        self.log.record({"describe_source": {"describer_id": 0, "id": 0, "source": "L['x']"}, **ids(frame.ca, frame.fid, fcid, attempt)},
                        where="torch/_subclasses/meta_utils.py:2271")
        return attempt

    def flush_backward(self) -> None:
        """The lazy backward compiles of earlier compiles run (the first backward call after them)."""
        for frame, fcid, seconds in self.backlog:
            key = md5(f"bw{frame.fid}/{fcid}")
            self.log.record({"artifact": {"name": "fx_graph_cache_miss", "encoding": "json"}, **ids(frame.ca, frame.fid, fcid)},
                            CACHE_INFO["miss"].format(key=key, cid=cid_text(frame.ca, frame.fid, fcid)),
                            where="torch/_logging/_internal.py:1440")
            if not self.timed:
                seconds = None  # a run whose compiles logged no time (the total is then unknown)
            fields = {"compile_id": cid_text(frame.ca, frame.fid, fcid), "co_name": None, "inductor_compile_time_s": seconds,
                      "duration_us": None if seconds is None else int(seconds * 1e6), "is_forward": False}
            self.log.record({"bwd_compilation_metrics": fields, **ids(frame.ca, frame.fid, fcid)}, where="torch/_dynamo/utils.py:2009")
        self.backlog = []

    def over_the_limit(self, frame: Frame, reasons: list[str], ending: str = "clean") -> None:
        """The compile over the recompile limit: recompile reasons, then metrics with no dynamo_start."""
        fcid = frame.compiles
        frame.compiles += 1
        self.compiled += 1
        self.begin(frame, fcid, reasons)
        if ending == "killed":
            return
        hard = self.draw(st.sampled_from([None, None, 0, 1]))
        if hard is None:
            limit = self.draw(st.sampled_from(["recompile_limit", "accumulated_recompile_limit"]))
            fail_type, fail_reason = "Unsupported", LIMIT_REASON.format(limit=limit, n=fcid)
        else:
            fail_type, fail_reason = "FailOnRecompileLimitHit", HARD_LIMIT[hard]
        fields = {"co_name": None, "co_filename": None, "co_firstlineno": None, "guard_count": None, "restart_reasons": None,
                  "fail_type": fail_type, "fail_reason": fail_reason, "recompile_reason": reasons[0] if reasons else None,
                  "entire_frame_compile_time_s": 0.002 if self.timed else None}
        self.metrics(frame, fcid, 0, fields, cut=ending == "cut")
        frame.done = True

    def compiled_autograd(self) -> None:
        """Compiled autograd captures the backward graph (`[!N/-/-]`, not a compile) and compiles it as a new frame."""
        ca = self.next_ca
        self.next_ca += 1
        reasons = f'[\n"!{ca}: Cache miss due to new autograd node: torch::autograd::GraphRoot (NodeCall 0) with key size 39"\n]'
        self.log.record({"artifact": {"name": "compiled_autograd_compile_reasons", "encoding": "json"}, **ids(ca, None, None)}, reasons,
                        where="torch/_logging/_internal.py:1440")
        self.log.record({"compiled_autograd_graph": {}, **ids(ca, None, None)},
                        f"class CompiledAutograd{ca}(torch.nn.Module):\n    def forward(self, inputs, sizes, scalars, hooks):\n"
                        "        getitem = inputs[0]", where="torch/_dynamo/compiled_autograd.py:1208")
        frame = self.new_frame(ca=ca, name="forward")
        frame.done = True  # each backward graph is compiled once here: no recompile of it is drawn
        self.story.append(f"{self.label}: compiled autograd {ca}: frame {frame.fid}")
        self.compile(frame, [], self.draw(outcomes()))


MAIN_PREFIX = [{"line": 60, "name": "<module>", "filename": 1, "loc": "main()"}]


def child_prefix(kind: str, files: dict[str, int]) -> list[dict[str, Any]]:
    """The frames a child's dynamo_start stacks begin with: multiprocessing's bootstrap, as in the processes fixture."""
    process = files["/stdlib/multiprocessing/process.py"]
    if kind == "spawn":
        spawn = files["/stdlib/multiprocessing/spawn.py"]
        head = [{"line": 1, "name": "<module>", "filename": files["<string>"], "loc": ""},
                {"line": 122, "name": "spawn_main", "filename": spawn, "loc": "exitcode = _main(fd, parent_sentinel)"},
                {"line": 135, "name": "_main", "filename": spawn, "loc": "return self._bootstrap(parent_sentinel)"}]
    else:
        fork = files["/stdlib/multiprocessing/popen_fork.py"]
        head = [*MAIN_PREFIX, {"line": 121, "name": "start", "filename": process, "loc": "self._popen = self._Popen(self)"},
                {"line": 71, "name": "_launch", "filename": fork, "loc": "code = process_obj._bootstrap(parent_sentinel=child_r)"}]
    return [*head, {"line": 314, "name": "_bootstrap", "filename": process, "loc": "self.run()"},
            {"line": 108, "name": "run", "filename": process, "loc": "self._target(*self._args, **self._kwargs)"}]


def start_log(log: Log) -> None:
    """A log's first records: a string, then the torch_version artifact torch writes right after the first record."""
    log.intern("/site-packages/torch/_dynamo/convert_frame.py")
    log.record({"artifact": {"name": "torch_version", "encoding": "json"}},
               '{\n"pytorch_version": "2.13.0+cpu",\n"commit": "cf30153c4c131c8164ee7798e5022d810682e2cb",\n"oss": true\n}',
               where="torch/_logging/_internal.py:1328")


@st.composite
def runs(draw: st.DrawFn, features: Features = Features()) -> Run:
    story: list[str] = []
    timed = draw(st.sampled_from([True, True, True, False]))
    chromium = draw(st.booleans())
    ending = st.sampled_from(["clean", "clean", "killed", "cut"]) if features.cut_ends else st.just("clean")
    n_children = draw(st.integers(0, 2)) if features.children else 0
    if "late_child" in features.force:
        n_children = max(n_children, 1)
    names = draw(st.lists(st.sampled_from(["amsj70j4", "_3ber2k8", "wykq40jt", "m9n_jcs9", "zz9y8x7w", "0wc1ttr3"]),
                          min_size=n_children + 1, max_size=n_children + 1, unique=True))
    base_pid = draw(st.integers(1000, 60000))

    main = Log(base_pid, START_MS + draw(st.integers(0, 999)))
    start_log(main)
    main.intern(USER_FILE)
    program = Program(draw, main, MAIN_PREFIX, 0, timed, chromium, features, story, "p0")
    steps = draw(st.integers(1, features.max_steps))
    if "reset" in features.force:
        # two frames, torch._dynamo.reset(), three frames: [0/0] is reused, [2/0] is new (in generation 1), and
        # the second [0/0] comes after [1/0] in the log (log order)
        for _ in range(2):
            program.first_compile()
        program.reset()
        for _ in range(3):
            program.first_compile()
    if "limit" in features.force:
        frame = program.first_compile(fail="none")
        story.append(f"p0: frame {frame.fid}: over the recompile limit [{frame.fid}/{frame.compiles}]")
        program.over_the_limit(frame, program.guard_failures(frame))
    program.run(steps, draw(ending))
    logs = [(main, names[0])]

    first, last = main.first_ms, main.ms
    used = {first}
    for i in range(n_children):
        kind = draw(st.sampled_from(["spawn", "fork"]))
        late = features.late_children and draw(st.booleans()) or ("late_child" in features.force and i == 0)
        # a child's first record comes after its parent's first; within the parent's span, or after its end
        start = last + draw(st.integers(1000, 5000)) if late else first + draw(st.integers(0, max(0, last - first - 3)))
        while start + 3 in used:
            start += 1
        used.add(start + 3)
        pid = base_pid + 1 + i
        if kind == "fork":
            child = Log(pid, start, main.strings)  # a forked worker has its parent's string table
            frame_start = draw(st.integers(0, max(program.next_frame, 0)))
        else:
            child = Log(pid, start)
            frame_start = 0
        start_log(child)
        for path in ("<string>", "/stdlib/multiprocessing/spawn.py", "/stdlib/multiprocessing/process.py",
                     "/stdlib/multiprocessing/popen_fork.py", USER_FILE):
            child.intern(path)
        story.append(f"p?: child {i} pid {pid} ({kind}, {'after its parent ended' if late else 'overlapping its parent'})")
        child_program = Program(draw, child, child_prefix(kind, child.strings), frame_start, timed, chromium, features, story,
                                f"child {i}")
        child_program.run(draw(st.integers(1, 3)), draw(ending))
        logs.append((child, names[i + 1]))

    files: dict[str, bytes] = {}
    for log, name in logs:
        text = log.text().encode("utf-8")
        gz = draw(st.sampled_from([False, False, True]))
        files[f"dedicated_log_torch_trace_{name}.log" + (".gz" if gz else "")] = gzip.compress(text, mtime=0) if gz else text
    return Run(files, story)
