"""torch's wrapper: the frame torch compiles `torch.compile(model)` through when the model's forward
is torch's own, and the name and user code line its compiles are shown with instead.

torch 2.13's `OptimizedModule` calls such a model (nn.Sequential, DistributedDataParallel, a subclass
that keeps torch's forward) through `external_utils.wrap_inline`, whose function `inner`
(torch/_dynamo/external_utils.py) is the frame Dynamo starts in: the compile's start stack ends
there, called from `nn.Module.__call__`, and its metrics name `inner`. That names no model. The model
is `inner`'s local `fn`, whose class the compile's guards name (`source=L['fn'], ... type=<class
'torch.nn.modules.container.Sequential'>`), so the compile is named after its forward
(`Sequential.forward`), at the line of the user's code that called the model. One `inner` serves
every model compiled so (one code object, so one frame id): the class is read from each compile's
own guards, never taken from another compile of the frame. A compile whose guards were not logged
(it failed) keeps torch's name, marked as torch's wrapper. torch's wrapper is one of the library
frames (`library.py`): the frame is kept beside the compile as a `LibraryFrame` of kind
LIBRARY_TORCH_WRAPPER.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from msgspec import Struct, field

from ..model import CompileId
from ..patterns import lazy
from .stacks import Frame, simplify_filename
from .summary import LIBRARY_TORCH_WRAPPER, LibraryFrame

WRAPPER_NAME = "inner"
WRAPPER_FILE = "/torch/_dynamo/external_utils.py"
MODULE_CALL_FILE = "/torch/nn/modules/module.py"  # nn.Module.__call__: the wrapper called as a model's forward
_GUARDED_FN = b"source=L['fn'],"  # the guard tree's node for the wrapper's local `fn`: its line names the class
_FN_CLASS = lazy(r"source=L\['fn'\], [^\n]*?type=<class '([^'\n]+)'>")


def in_file(filename: str, suffix: str) -> bool:
    """Whether a logged file name is the file `suffix` names (`/torch/nn/modules/module.py`), wherever torch is installed."""
    return ("/" + filename.replace("\\", "/").lstrip("/")).endswith(suffix)


def is_wrapper(name: str, filename: str) -> bool:
    """Whether a logged frame is torch's wrapper (`inner` of torch/_dynamo/external_utils.py)."""
    return name == WRAPPER_NAME and in_file(filename, WRAPPER_FILE)


def guarded_class(guards: bytes | None, decode: Callable[[], str]) -> str | None:
    """The class the guard tree (a `dynamo_cpp_guards_str` payload) names for the local `fn`, qualified
    as torch writes it (`torch.nn.modules.container.Sequential`); None when it guards no `fn`.
    `decode` gives the payload's text, asked only when it guards one (the common payload is skipped
    without decoding)."""
    if not guards or _GUARDED_FN not in guards:
        return None
    found = _FN_CLASS.search(decode())
    return found.group(1) if found else None


class WrappedModels(Struct):
    """The class each compile's installed guards name for the local `fn` (`guarded_class`), noted as the
    log is read: frame compile → (log line, class), one per guard tree that names one (a few per log)."""

    by_compile: dict[CompileId, list[tuple[int, str]]] = field(default_factory=dict)

    def note(self, compile_id: CompileId, line: int, module: str) -> None:
        self.by_compile.setdefault(compile_id.frame_key(), []).append((line, sys.intern(module)))

    def noted(self, key: CompileId) -> list[tuple[int, str]]:
        """(log line, class) of each guard tree of a frame compile (any generation of its id) that names one, in log order."""
        return self.by_compile.get(key.frame_key(), [])


def forward_of(module: str) -> str:
    """The compiled frame's name for a model of this class: `torch.nn.modules.container.Sequential`
    → `Sequential.forward` (a class defined in a function, `__main__.f.<locals>.Net`, → `Net.forward`)."""
    return f"{module.rpartition('.')[2]}.forward"


def wrapper_frame(frame: str, location: str, module: str | None = None) -> LibraryFrame:
    """torch's wrapper as a library frame: its name and where it is, as logged, and the model's class when known."""
    return LibraryFrame(frame, location, LIBRARY_TORCH_WRAPPER, module)


def started_in_wrapper(stack: list[Frame], resolve: Callable[[Any], str]) -> LibraryFrame | None:
    """torch's wrapper frame a start stack ends in, with the model's class still unknown; None when
    the stack ends elsewhere."""
    if not stack:
        return None
    last = stack[-1]
    filename = simplify_filename(resolve(last.filename))
    return wrapper_frame(last.name, f"{filename}:{last.line}") if is_wrapper(last.name, filename) else None


def called_as_model(stack: list[Frame], resolve: Callable[[Any], str]) -> bool:
    """Whether the wrapper a start stack ends in was called as a model's forward (the frame before it
    is `nn.Module.__call__`), so that its `fn` is the model; torch wraps other callables it compiles
    (a builtin, a polyfilled function) in the same `inner`."""
    return len(stack) > 1 and in_file(resolve(stack[-2].filename), MODULE_CALL_FILE)
