"""Library frames: compiles Dynamo started in code that is not the user's, located at the user's line
that led into it.

Dynamo compiles whatever frame it is handed, torch's and the standard library's included: after a
graph break inside DistributedDataParallel's forward it compiles contextlib's `helper` and
`_GeneratorContextManager.__init__` (the `with` blocks DDP's forward enters); a compiled
`opt.step()` compiles the optimizer's `wrapper` (torch/optim/optimizer.py) and its `step`. Such a
compile's start stack ends in the library, where nobody can tell which of their models or calls
it was; its innermost frame in user code (`stacks.is_user_code`) is the line of theirs that led
there (`model(x)`, `opt.step()`). The compile is located at that line, and the library frame is
kept beside it (`summary.LibraryFrame`), with, for the standard library's, the innermost frame of
torch's own that called into it (what DDP was doing). A start stack with no user code names no
such line: the compile keeps the library's (never a line guessed from another compile).
torch's wrapper (`wrapper.py`) is the library frame whose compile is also named after the model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .stacks import LIBRARY_STDLIB, LIBRARY_TORCH, Frame, is_user_code, library_of, simplify_filename
from .summary import LibraryFrame
from .wrapper import MODULE_CALL_FILE, WRAPPER_FILE, in_file

# torch's machinery for calling a module or a compiled function: in every such stack, so it tells
# nothing of what torch was doing when it called into the standard library
CALL_MACHINERY = (MODULE_CALL_FILE, "/torch/_dynamo/eval_frame.py", WRAPPER_FILE)


def _filename(frame: Frame, resolve: Callable[[Any], str]) -> str:
    return simplify_filename(resolve(frame.filename))


def _location(frame: Frame, resolve: Callable[[Any], str]) -> str:
    return f"{_filename(frame, resolve)}:{frame.line}"


def innermost_user_frame(stack: list[Frame], resolve: Callable[[Any], str]) -> int | None:
    """Where the innermost frame of a start stack in user code (`is_user_code`) is in it; None when it holds none."""
    for index in range(len(stack) - 1, -1, -1):
        if is_user_code(_filename(stack[index], resolve)):
            return index
    return None


def call_line(stack: list[Frame], resolve: Callable[[Any], str]) -> str | None:
    """The line of the user's code that led into the library: the innermost frame of a start stack in
    user code, `file:line`; None when the stack holds no user code."""
    index = innermost_user_frame(stack, resolve)
    return _location(stack[index], resolve) if index is not None else None


def _torch_caller(frames: list[Frame], resolve: Callable[[Any], str]) -> Frame | None:
    """The innermost of `frames` in torch's own code, torch's calling machinery left out; None when none."""
    for frame in reversed(frames):
        filename = _filename(frame, resolve)
        machinery = any(in_file(filename, part) for part in CALL_MACHINERY)
        if library_of(filename) == LIBRARY_TORCH and not machinery:
            return frame
    return None


def started_in_library(stack: list[Frame], resolve: Callable[[Any], str]) -> tuple[LibraryFrame, str] | None:
    """The library frame a start stack ends in and the user's line that led into it (`file:line`);
    None when the stack ends in user code or code of no known library (FX's generated code), or holds
    no user code. For the standard library's, the innermost frame of torch's own after that line is
    named as its caller."""
    if not stack:
        return None
    last = stack[-1]
    kind = library_of(_filename(last, resolve))
    if kind is None:  # user code (most stacks), or code of no known library
        return None
    user = innermost_user_frame(stack, resolve)
    if user is None:  # nothing says where the user's code is: the library's line stays
        return None
    caller = _torch_caller(stack[user + 1:-1], resolve) if kind == LIBRARY_STDLIB else None
    library = LibraryFrame(last.name, _location(last, resolve), kind, caller_frame=caller.name if caller else None,
                           caller_location=_location(caller, resolve) if caller else None)
    return library, _location(stack[user], resolve)
