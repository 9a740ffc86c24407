"""What a report found, as typed plain data: one `CompileSummary` per compile, and the words built on them.

This module is the one place where the report's words are defined (docs/glossary.md says the
same in prose). Every view and command asks these objects, whether they were built from a log
(`Analysis.summary()`) or loaded back from a report's `summary.json` (`summary_load.load_summary`):

- a *compile* is one frame compile (`[0/1]`) in one generation of its id, with all its attempts;
- an *attempt* is one try at it: `[0/1]`, then `[0/1_1]` after Dynamo restarted its analysis;
- a *restart* is Dynamo tracing the frame again within one compile (each extra attempt);
- a *graph break* is a `dynamo_graph_break_reason` a compile logged; one (reason, user location)
  counts once per compile, however often torch logged it;
- a *torch's graph break* is one torch makes on purpose in its own code: its own
  `torch._dynamo.graph_break()` call inside torch (an optimizer's step, `torch/optim/optimizer.py`).
  Shown, marked as torch's, and counted apart from the user's graph breaks (`is_torch_break`);
- a *recompile* is a compile of a frame that had compiled before, because a guard of the earlier
  compile failed (`[0/1]`, `[0/2]`, ...); the compile over the recompile limit is none: it
  compiled nothing;
- a *retry* is a compile of a frame right after its compile failed, with no guard failure logged
  (the program caught the error and called the function again, e.g. without `fullgraph=True`);
- a *failure* is a compile whose metrics logged an exception (`fail_type`), unless torch skipped
  the frame on purpose;
- a *skipped* frame is one torch gave up on and ran eagerly, as it was designed to ("Skipping the
  function and falling back to eager"): the program ran correctly, without this frame compiled;
- the *recompile limit* is torch's cap on the compiles of one frame (`torch._dynamo.config.
  recompile_limit`): the compile over it (status `limit`) compiles nothing, and the frame runs
  eagerly from then on for inputs its compiled graphs do not fit. Not a failure (the program ran
  correctly), not a recompile, and not a time the frame compiled;
- a *capture* is compiled autograd tracing the backward pass into one graph, logged under a
  compiled-autograd id with no frame (`[!0/-/-]`): part of compiled-autograd graph 0, not a compile
  (the graph it captured is compiled as `[!0/1/0]`, a compile);
- a *frame* is a compiled function: its frame id in one generation (an id reused after
  `torch._dynamo.reset()` names another frame);
- a *library frame* is the frame a compile started in when it is not the user's code but torch's,
  the standard library's or a package's (DDP's contextlib helpers, an optimizer's `step`): the
  compile is located at the user's line that led into it (the innermost user-code frame of its
  start stack), the library frame kept beside (`LibraryFrame`, `library.py`). A start stack with no
  user code keeps the library's line. *torch's wrapper* is one: the frame of torch's own (`inner`,
  torch/_dynamo/external_utils.py) that torch compiles `torch.compile(model)` through when the
  model's forward is torch's (nn.Sequential, DistributedDataParallel): such a compile is also named
  after the model's forward (`Sequential.forward`, `wrapper.py`);
- a *generation* is where a compile falls among its process's `torch._dynamo.reset()` calls: 0
  before the first, then 1, 2, ... A reset makes torch number compile ids from `[0/0]` again, and
  every compile of the process after it is in the new generation, whether its id was used before
  or not.

Unknown values are None, never guessed. A summary.json is read back into these objects by
`summary_load`; the questions asked of a run's compiles (graph breaks by kind, recompiled frames,
the recompile limit) are in `compile_groups`, and guards in the user's words in `guard_words`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypeVar

from msgspec import UNSET, Meta, Struct, UnsetType, field

from ..model import CompileId, generation_label
from .configs import ConfigChange, ConfigDiff, UnusualSetting
from .dict_writer import dict_writer
from .program import ProgramExit
from .stacks import LIBRARY_PACKAGE, LIBRARY_STDLIB, LIBRARY_TORCH, library_of, library_path
from .vllm import VllmRun

T = TypeVar("T")

# Status of a compile: what happened to it (summary.json `status`), first match wins.
STATUS_MISSING = "missing"  # no compilation metrics were logged (crash, or still running)
STATUS_SKIPPED = "skipped"  # torch gave up on the frame and ran it eagerly, as designed
STATUS_LIMIT = "limit"  # over torch's recompile limit: nothing compiled, the frame runs eagerly from here on
STATUS_ERROR = "error"  # the compile failed
STATUS_BREAK = "break"  # compiled, with graph breaks
STATUS_EMPTY = "empty"  # compiled to an empty graph
STATUS_RESTART = "restart"  # compiled after Dynamo restarted its analysis for another reason than a graph break
STATUS_OK = "ok"
STATUS_LABELS = {
    STATUS_OK: "Success",
    STATUS_BREAK: "Success with graph breaks",
    STATUS_RESTART: "Success after a restart",
    STATUS_EMPTY: "Empty graph",
    STATUS_SKIPPED: "Skipped: ran eagerly",
    STATUS_LIMIT: "Recompile limit: runs eagerly",
    STATUS_ERROR: "Error",
    STATUS_MISSING: "Metrics were missing",
}
# most severe first: how tables sort statuses, and which one a compile id with several compiles shows
STATUS_SEVERITY = (STATUS_ERROR, STATUS_MISSING, STATUS_LIMIT, STATUS_SKIPPED, STATUS_BREAK, STATUS_RESTART, STATUS_EMPTY, STATUS_OK)
# Why a compile happened (summary.json `cause`).
CAUSE_FIRST = "first"  # the frame's first compile
CAUSE_RECOMPILE = "recompile"  # a guard of the frame's earlier compile failed
CAUSE_RETRY = "retry"  # the frame's previous compile failed, and no guard failure was logged
CACHE_RESULTS = ("hit", "miss", "bypass")
# A compiled function: (process, compiled autograd id, frame id, generation). Frames are numbered per process.
FrameIdentity = tuple[int, int | None, int | None, int]


def identity_key(identity: FrameIdentity) -> int | FrameIdentity:
    """What a table of every frame keys a `FrameIdentity` by: a frame of the first process and
    generation without compiled autograd (most) by its frame id alone, an int, not a tuple a frame
    (a run may have 100,000s); any other by the identity (an int never equals a tuple)."""
    process, autograd, frame, generation = identity
    return frame if process == 0 and autograd is None and generation == 0 and frame is not None else identity


# torch's words for the compile over the limit: "Dynamo recompile limit exceeded" (2.7+), "recompile_limit reached"
# / "cache_size_limit reached" (earlier); "Hard failure due to fail_on_recompile_limit_hit" or "... fullgraph=True"
# (FailOnRecompileLimitHit) is an error: the program raised
_AT_LIMIT = re.compile(r"recompile limit|\b(?:accumulated_)?(?:recompile|cache_size)_limit reached", re.I)
HARD_LIMIT_FAILURE = "FailOnRecompileLimitHit"


def first_line(text: Any, limit: int | None = None) -> str:
    """The headline of a text torch logged (a failure, restart or recompile reason, an artifact): its
    first line that is not blank, whitespace-trimmed, whole. The one rule every view shortens a
    reason by, so that all of them show the same headline. `limit` is for a caller that keeps the
    line per record (memory must stay bounded): the most characters kept, the last of them "…" when
    the line was longer, so that the cut shows. "" for no text."""
    if text is None:
        return ""
    line = str(text).strip().partition("\n")[0].strip()
    return line[: limit - 1] + "…" if limit is not None and len(line) > limit else line


def after_first_line(text: Any) -> str:
    """What follows `first_line(text)`: the lines after it (a view shows them under the headline), "" when none."""
    return "" if text is None else str(text).strip().partition("\n")[2]


def over_recompile_limit(fail_type: str | None, fail_reason: str | None) -> bool:
    """Whether a compile's failure is torch's recompile limit, the frame then running eagerly (not
    the hard failure `fail_on_recompile_limit_hit` or `fullgraph=True` make of it)."""
    return bool(fail_type) and fail_type != HARD_LIMIT_FAILURE and _AT_LIMIT.search(fail_reason or "") is not None


Seconds = Annotated[float, Meta(ge=0)]  # a time in summary.json: a number, at least 0


class CompileTime(Struct, frozen=True, gc=False):
    """A compile's times; also summary.json's `compile_time_s` as it is (fields = keys, in order)."""

    # defaults: what a summary.json that leaves a time out means (unknown)
    forward: Seconds | None = None  # entire_frame_compile_time_s: Dynamo, AOTAutograd and the forward compile
    backward: Seconds | None = None  # the lazy backward compile (bwd_compilation_metrics.inductor_compile_time_s)
    total: Seconds | None = None
    # the backward compiled inside the forward compile (chromium `bw_compiler` spans within
    # `entire_frame_compile`, as under dynamic shapes): part of `forward`, never added again
    backward_in_forward: Seconds | None = None

    def to_dict(self) -> dict[str, float | None]:
        return _write_time(self)


UNKNOWN_TIME = CompileTime(None, None, None)


class GraphBreak(Struct, frozen=True):
    """One graph break of a compile: why, where in the user's code, and the fix torch suggests."""

    reason: str  # its type: torch's headline, e.g. "Failed to trace builtin operator"
    user_location: str
    explanation: str = ""
    user_source: str = ""  # the text of the user code line
    user_function: str = ""  # the function that line is in
    registry_id: str = ""  # torch's graph-break registry id, "GB0123" ("" when the log does not say)
    hints: tuple[str, ...] = ()
    doc_url: str = ""  # torch's page about this break
    library_location: str = ""  # where it broke when that is inside torch or another library ("" when in user code)
    attempt: str = ""  # the attempt that logged it (`[0/0]`), and that attempt's page (pages only)
    page: str | None = None
    url: str = ""  # the artifact with the full text (pages only)
    # the settings its text names (`configs.names_setting`) among those that changed since its frame's
    # previous compile (`CompileSummary.config_changes`): `capture_scalar_outputs=False` was True there
    config_changes: tuple[ConfigChange, ...] = ()

    @property
    def identity(self) -> tuple[str, str, str]:
        """What makes two breaks of one run the same break: where, and why."""
        return (self.reason, self.user_location, self.library_location)

    @property
    def inside(self) -> str:
        """What the library line is in ("torch", "the standard library", "a library"); "" in user code."""
        return library_name(self.library_location)

    @property
    def kind(self) -> str:
        """Its type across the run: the registry id torch gave it, else its headline."""
        return self.registry_id or self.reason

    @property
    def torch_break(self) -> bool:
        """A torch's graph break (`is_torch_break`): torch's own, on purpose; not the user's to fix."""
        return is_torch_break(self.reason, self.registry_id, self.library_location)

    @property
    def owner(self) -> str:
        """Whose break it is, in words: `torch's own break (optimizer.py:79)` for a torch's graph break, else ""."""
        if not self.torch_break:
            return ""
        file_and_line = self.library_location.replace("\\", "/").rpartition("/")[2]
        return f"torch's own break ({file_and_line})"

    @property
    def explained(self) -> str:
        """Why it broke, as a view says it: torch's explanation; for a torch's graph break, that torch
        breaks there on purpose (torch's own words call it "User-inserted")."""
        return TORCH_BREAK_WHY if self.torch_break else self.explanation

    @property
    def advice(self) -> tuple[str, ...]:
        """torch's hints, as advice to the user: none for a torch's graph break, whose hint ("Remove the
        `torch._dynamo.graph_break()` call") is about torch's own code."""
        return () if self.torch_break else self.hints

    def to_dict(self) -> dict[str, Any]:
        return _write_break(self.record())

    def record(self) -> GraphBreakRecord:
        """What summary.json says of it."""
        return GraphBreakRecord(self.reason, self.user_location, self.user_source or None, self.user_function or None,
                                self.registry_id or None, self.explanation or None, list(self.hints), self.doc_url or None,
                                self.library_location or None, self.torch_break, list(self.config_changes))


class GraphBreakRecord(Struct, gc=False):
    """A graph break in summary.json (`compiles[].graph_breaks[]`): fields = keys, in order. Text
    it does not know is null; schema 1.x before 1.3 wrote only the reason and user location."""

    reason: str
    user_location: str
    user_source: str | None = None
    user_function: str | None = None
    registry_id: str | None = None
    explanation: str | None = None
    hints: list[str] = field(default_factory=list)
    doc_url: str | None = None
    library_location: str | None = None
    # since 4.0: a torch's graph break (`is_torch_break`). Written for readers of summary.json; read
    # back, it is decided again from the fields above (absent before 4.0)
    torch_break: bool = False
    # since 4.0: the settings it names that changed since its frame's previous compile (`GraphBreak.config_changes`)
    config_changes: list[ConfigChange] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return _write_break(self)

    def graph_break(self) -> GraphBreak:
        return GraphBreak(self.reason, self.user_location, self.explanation or "", self.user_source or "", self.user_function or "",
                          self.registry_id or "", tuple(self.hints), self.doc_url or "", self.library_location or "",
                          config_changes=tuple(self.config_changes))


LIBRARY_NAMES = {LIBRARY_TORCH: "torch", LIBRARY_STDLIB: "the standard library", LIBRARY_PACKAGE: "a library"}


def library_name(location: str) -> str:
    """Which library a logged file (a library location) is in, in words (`stacks.library_of`); "" for none."""
    if not location:
        return ""
    return LIBRARY_NAMES.get(library_of(location) or LIBRARY_STDLIB, "")


# torch's headline and registry id for a call of `torch._dynamo.graph_break()` (variables/functions.py)
GRAPH_BREAK_CALL = "Call to `torch._dynamo.graph_break()`"
GRAPH_BREAK_CALL_ID = "GB0025"
TORCH_BREAK_WHY = ("torch calls torch._dynamo.graph_break() here on purpose, in its own code: nothing in yours to remove. "
                   "Counted in torch's graph breaks, not in graph breaks.")


def is_torch_break(reason: str, registry_id: str, library_location: str) -> bool:
    """Whether a graph break is a *torch's graph break*: torch's own `torch._dynamo.graph_break()` call,
    made on purpose inside torch. The optimizers' `step` makes one (torch/optim/optimizer.py
    `_use_grad_for_differentiable`, so that AOTAutograd sees the update as an inference graph:
    pytorch/pytorch#104053), so every compiled optimizer step logs it.

    Kept narrow, since a break called torch's is counted apart from the user's: the headline must be
    torch's for that call (with its registry id, when logged) and the line that called it (the
    break's library location) inside torch. A break inside torch for any other reason (DDP's hooks,
    a context manager Dynamo skips) is the user's code meeting what Dynamo cannot trace, and a
    graph_break() called from the user's code or another library is the user's: both stay the user's."""
    return reason == GRAPH_BREAK_CALL and registry_id in ("", GRAPH_BREAK_CALL_ID) and library_name(library_location) == "torch"


class CacheLookup(Struct, frozen=True, gc=False):
    """One cache lookup of a compile; also summary.json's `cache[]` item as it is (fields = keys, in order)."""

    cache: str  # "fx_graph" / "aotautograd" / ...
    result: str  # hit / miss / bypass
    reason: str = ""  # why it was bypassed, when it was

    def to_dict(self) -> dict[str, str]:
        return _write_cache(self)


class Failure(Struct, frozen=True, gc=False):
    """Why a compile failed; also summary.json's `failure` as it is (fields = keys, in order)."""

    type: str  # the exception's type, as torch logged it (`BackendCompilerFailed`)
    reason: str | None = None
    # since 3.0: the line of user code torch says the compile failed at (`fail_user_frame_*`): null
    # when it names none, as for a backend that raised
    user_location: str | None = None
    # since 3.0: whether torch._dynamo.config.suppress_errors was on (null: not logged). torch then
    # logs such an error and runs the frame eagerly instead of raising it, unless fullgraph=True
    suppressed: bool | None = None

    @property
    def message(self) -> str:
        """Its reason's first line; with the line after when the first only introduces it, as torch's
        wrapper of a backend's error does (`backend='x' raised:`, then `RuntimeError: boom`)."""
        first = first_line(self.reason)
        following = first_line(after_first_line(self.reason)) if first.endswith(":") else ""
        return f"{first} {following}" if following else first

    @property
    def headline(self) -> str:
        """The exception in one line: its type and `message`."""
        return f"{self.type}: {self.message}".rstrip(": ")

    def to_dict(self) -> dict[str, Any]:
        return _write_failure(self)


# Whose code a library frame is (summary.json `library_frame.kind`): torch's wrapper, or a library's (`stacks.library_of`)
LIBRARY_TORCH_WRAPPER = "torch_wrapper"
LIBRARY_KINDS = (LIBRARY_TORCH_WRAPPER, LIBRARY_TORCH, LIBRARY_STDLIB, LIBRARY_PACKAGE)


class LibraryFrame(Struct, frozen=True, gc=False):
    """A *library frame*: the frame of torch's, the standard library's or a package's own a compile
    started in, kept beside the compile, which is located at the user's line that led into it
    (`analysis/library.py`); *torch's wrapper* (`inner` of torch/_dynamo/external_utils.py, for
    `torch.compile(model)` of a model whose forward is torch's) is one, and its compile is also named
    after the model it called (`analysis/wrapper.py`). Also summary.json's `library_frame` as it is
    (fields = keys, in order)."""

    frame: str  # the frame as torch logged it: "inner", "helper"
    location: str  # where it is, as logged: ".../torch/_dynamo/external_utils.py:67", "/stdlib/contextlib.py:299"
    kind: str  # whose code it is: one of LIBRARY_KINDS
    module: str | None = None  # torch's wrapper: the compiled model's class, as its guards name it ("torch.nn.modules.container.Sequential"); None: not in the log
    # a standard-library frame: the innermost frame of torch's own that called into it (torch's machinery
    # for calling a module or a compiled function left out), its name and where it is as logged; None: none
    caller_frame: str | None = None
    caller_location: str | None = None

    @property
    def is_torch_wrapper(self) -> bool:
        return self.kind == LIBRARY_TORCH_WRAPPER

    @property
    def inside(self) -> str:
        """The library it is in, in words, for a short table cell as a graph break's (`GraphBreak.inside`):
        "the standard library"; "" for torch's wrapper, whose compile is named after its model."""
        return "" if self.is_torch_wrapper else LIBRARY_NAMES.get(self.kind, "a library")

    @property
    def words(self) -> str:
        """It, beside the name of the compile: `via torch's inner at torch/_dynamo/external_utils.py:67`
        when torch's wrapper's model is known (else that nothing says what it called); else as a graph
        break's library line is (`GraphBreak.inside`): `inside the standard library: contextlib.py:105,
        under torch's _run_ddp_forward (torch/nn/parallel/distributed.py:1714)`."""
        where = library_path(self.location)
        if self.is_torch_wrapper:
            if self.module:
                return f"via torch's {self.frame} at {where}"
            return f"torch's wrapper {self.frame} at {where}: the log does not name what it called"
        words = f"inside {self.inside}: {where}"
        if self.caller_frame and self.caller_location:
            words += f", under torch's {self.caller_frame} ({library_path(self.caller_location)})"
        return words

    def to_dict(self) -> dict[str, Any]:
        return _write_library_frame(self)


class CompileSummary(Struct):
    """One compile: a frame compile (all its attempts) in one generation of its id."""

    key: CompileId  # the frame compile (`[0/1]`, attempt 0)
    id: str
    url: str | None  # None: listed without a page (limits.PAGED_START_ONLY)
    generation: int
    attempts: list[str]  # the ids its attempts logged under: `[0/0]`, `[0/0_1]` after a restart
    frame: str | None
    user_location: str | None
    status: str
    compile_time_s: CompileTime
    graph_breaks: list[GraphBreak] = field(default_factory=list)
    recompile_reasons: list[str] = field(default_factory=list)
    cache: list[CacheLookup] = field(default_factory=list)
    graph_op_count: int | None = None
    failure: Failure | None = None
    headline: str = ""  # why it failed, restarted or recompiled, in one line (pages only)
    pages: list[tuple[str, str | None]] = field(default_factory=list)  # (attempt id, its page) (pages only)
    cause: str = CAUSE_FIRST  # why it happened: CAUSE_FIRST, CAUSE_RECOMPILE or CAUSE_RETRY
    restart_reasons: list[str] = field(default_factory=list)  # why Dynamo restarted its analysis, in words
    # the library frame it started in, when it did and its start stack names the user's line that led into
    # it (`user_location`); for torch's wrapper, `frame` then names the model's forward
    library_frame: LibraryFrame | None = None
    # the settings that differ from its frame's previous compile's (`configs.ConfigDiff`); None: unknown
    # (its frame's first compile, or a compile of the two logged no config)
    config_changes: ConfigDiff | None = None
    # its settings whose value differs from the one most of the run's compiles had (none known: empty)
    config_unusual: list[UnusualSetting] = field(default_factory=list)
    config: int | None = None  # the number of the config it logged, in its analysis (`configs.ConfigSnapshots`) (analysis only)
    config_since_page: str | None = None  # the page of `config_changes.since` (pages only)

    @property
    def label(self) -> str:
        """The id, and its generation after the first: `[0/0]`, `[0/0] (generation 1)` (after one reset())."""
        return generation_label(self.id, self.generation)

    @property
    def via(self) -> str:
        """The library frame it started in, in words, shown beside `frame` ("" when it started in none)."""
        return self.library_frame.words if self.library_frame is not None else ""

    @property
    def inside(self) -> str:
        """The library its library frame is in, in words, shown short beside `frame` (`LibraryFrame.inside`; "" for none)."""
        return self.library_frame.inside if self.library_frame is not None else ""

    @property
    def frame_label(self) -> str:
        """Its frame as compile ids write it, and the generation after the first: `0`, `p1:0`,
        `1 (generation 1)` (frame 1 after one reset() names another function than before it)."""
        return generation_label(self.key.frame_label, self.generation)

    @property
    def process(self) -> int:
        """Which process of the run compiled it (0: the first, the only one of most runs)."""
        return self.key.process

    @property
    def is_recompile(self) -> bool:
        """A compile of a frame that had compiled before, because a guard failed: not a retry, and not
        the compile over the recompile limit, which compiled nothing (its `cause` is still `recompile`:
        a guard failed for it too). The one definition every count of recompiles asks."""
        return self.cause == CAUSE_RECOMPILE and not self.hit_recompile_limit

    @property
    def compiled(self) -> bool:
        """A time its frame compiled (or tried to): every compile but the one over the recompile limit."""
        return not self.hit_recompile_limit

    @property
    def is_retry(self) -> bool:
        """A compile of a frame whose previous compile failed, with no guard failure logged."""
        return self.cause == CAUSE_RETRY

    @property
    def failed(self) -> bool:
        """The compile failed: an exception, not a frame torch skipped on purpose or one at the recompile limit."""
        return self.failure is not None and self.status not in (STATUS_SKIPPED, STATUS_LIMIT) and not self.hit_recompile_limit

    @property
    def skipped(self) -> bool:
        return self.status == STATUS_SKIPPED

    @property
    def config_texts(self) -> list[str]:
        """What differs in its config, one line each: the settings changed since its frame's previous
        compile (`ConfigDiff.headline`), then each setting unlike most of the run's compiles."""
        diff = self.config_changes
        lines = [diff.headline] if diff is not None and diff.changes else []
        return lines + [f"config unlike most compiles: {u.text}" for u in self.config_unusual]

    def config_notes(self, brk: GraphBreak) -> list[str]:
        """What a graph break of this compile is told of the settings it names that changed since the
        frame's previous compile (`GraphBreak.config_changes`), one line each."""
        diff = self.config_changes
        return [diff.note(change, self.label) for change in brk.config_changes] if diff is not None else []

    @property
    def user_breaks(self) -> list[GraphBreak]:
        """Its graph breaks but torch's own (`GraphBreak.torch_break`): what `graph_breaks` counts."""
        return [b for b in self.graph_breaks if not b.torch_break]

    @property
    def torch_breaks(self) -> list[GraphBreak]:
        """Its torch's graph breaks: what `torch_graph_breaks` counts."""
        return [b for b in self.graph_breaks if b.torch_break]

    @property
    def restarts(self) -> int:
        """How many times Dynamo restarted its analysis of the frame in this compile."""
        return max(len(self.attempts) - 1, 0)

    @property
    def frame_identity(self) -> FrameIdentity | None:
        """The compiled function: (process, compiled autograd id, frame id, generation); None when no
        frame id was logged. Frames are per process: each numbers its own from 0."""
        if self.key.frame_id is None:
            return None
        return (self.key.process, self.key.compiled_autograd_id, self.key.frame_id, self.generation)

    @property
    def hit_recompile_limit(self) -> bool:
        """The compile over torch's recompile limit (status `limit`; an `error` in summary.json before 2.2):
        nothing was compiled, and the frame runs eagerly from then on."""
        if self.status == STATUS_LIMIT:
            return True
        return self.failure is not None and over_recompile_limit(self.failure.type, self.failure.reason)

    def cache_count(self, result: str) -> int:
        return sum(1 for lookup in self.cache if lookup.result == result)

    def to_dict(self) -> dict[str, Any]:
        """What summary.json says of it: its `CompileRecord` as plain data (written by `dict_writer`, as
        fast as a dict written by hand: it runs for each of 100,000s of compiles)."""
        return _write_compile(self)


class CompileRecord(Struct, gc=False):
    """A compile in summary.json (`compiles[]`): the one declaration of its shape. Fields are its keys,
    in the order written; `CompileSummary.to_dict` encodes one, and `summary_load.load_summary` decodes
    and validates one (`msgspec.convert`). A default is what an older summary.json that leaves the
    field out means; UNSET ones depend on the id (`summary_load._load_compile`). The shipped schema's
    `$defs/compile` describes the same fields (tests/test_record_schema.py holds them equal)."""

    id: str
    url: str | None = None
    generation: Annotated[int, Meta(ge=0)] = 0
    process: Annotated[int, Meta(ge=0)] = 0  # absent (before 2.3): the run's only process
    attempts: list[str] | UnsetType = UNSET  # absent: the id's only attempt
    frame: str | None = None
    user_location: str | None = None
    library_frame: LibraryFrame | None = None  # since 4.0: the library frame it started in (absent before: none known)
    status: str = STATUS_MISSING
    cause: str | UnsetType = UNSET  # absent (schema 1.x): a recompile when frame_compile_id > 0
    restart_reasons: list[str] = field(default_factory=list)
    compile_time_s: CompileTime = UNKNOWN_TIME
    graph_breaks: list[GraphBreakRecord] = field(default_factory=list)
    recompile_reasons: list[str] = field(default_factory=list)
    cache: list[CacheLookup] = field(default_factory=list)
    graph_op_count: int | None = None
    failure: Failure | None = None
    config_changes: ConfigDiff | None = None  # since 4.0: absent before, unknown
    config_unusual: list[UnusualSetting] = field(default_factory=list)  # since 4.0


_write_time = dict_writer(CompileTime)
_write_break = dict_writer(GraphBreakRecord)
_write_cache = dict_writer(CacheLookup)
_write_failure = dict_writer(Failure)
_write_library_frame = dict_writer(LibraryFrame)
_write_compile = dict_writer(CompileRecord, CompileSummary)


class Summary(Struct):
    """What one report (one process's logs) found: its compiles, and where they come from."""

    compiles: Sequence[CompileSummary]  # a list, or for a diff of a big summary.json a scratch file (`spools`)
    inputs: list[dict[str, Any]] = field(default_factory=list)  # [{path, bytes, rank}]
    torch_version: str | None = None
    stats: dict[str, int] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)  # {torch_version, first_record, last_record, rank, tool}
    export: dict[str, Any] | None = None
    generator_version: str = ""
    # whether its compiles say what their cache lookups found: a summary.json of an older schema
    # may hold compiles without `cache`, and then "no lookup" is not known, so times cannot be compared
    cache_known: bool = True
    vllm: VllmRun | None = None  # vLLM's piecewise compiles, when the log holds its records (summary.json 2.1)
    # the run's processes: [{process, pid, logs}] (summary.json 2.3; empty from an older one)
    processes: list[dict[str, Any]] = field(default_factory=list)
    program: ProgramExit | None = None  # how the program ended, under `tlparse-py run` (summary.json 4.1); None: unknown
    # every compile on the run's time axis (summary.json 4.2, `timeline.Timeline.to_list`); None: not known (read back)
    timeline: Sequence[dict[str, Any]] | None = None

    @property
    def log_name(self) -> str:
        path = str(self.inputs[0].get("path", "")) if self.inputs else ""
        return path.replace("\\", "/").rsplit("/", 1)[-1] or "(no log)"


class RankEntry(Struct):
    rank: int | None
    folder: str
    error: str | None
    summary: Summary | None

    @property
    def name(self) -> str:
        """How a rank is named to a reader: `rank 3`, or its folder when it has no rank."""
        return f"rank {self.rank}" if self.rank is not None else self.folder


class RanksSummary(Struct):
    """What a multi-rank report found: each rank's summary, and where the ranks diverge."""

    ranks: list[RankEntry]
    divergences: list[dict[str, Any]] = field(default_factory=list)  # {kind, compile_id, ranks, detail}
    inputs: list[dict[str, Any]] = field(default_factory=list)
    generator_version: str = ""
    notes: list[dict[str, Any]] = field(default_factory=list)  # differences that are no divergence (cache results)
    program: ProgramExit | None = None  # how the launcher (torchrun) ended, under `tlparse-py run` (summary.json 4.1)

    @property
    def read(self) -> list[RankEntry]:
        """The ranks that could be read."""
        return [entry for entry in self.ranks if entry.summary is not None]


def once(compiles: Sequence[CompileSummary], name: str, compute: Callable[[Sequence[CompileSummary]], T]) -> T:
    """`compute(compiles)`; for compiles kept in a scratch file (`spools.Spool`, whose `memo` is
    emptied when it grows), computed once under `name` and kept there: each pass over them reads
    every compile back. A list is computed each time (a pass over it costs little)."""
    memo: dict[tuple[str, int], Any] | None = getattr(compiles, "memo", None)
    if memo is None:
        return compute(compiles)
    key = (name, len(compiles))  # of these compiles: a spool only grows
    if key not in memo:
        memo[key] = compute(compiles)
    found: T = memo[key]
    return found
