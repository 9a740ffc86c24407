"""Guards and recompile reasons in the user's words: the guard that failed without torch's prefix
and comment, and what the names Dynamo makes up (`___stack0`) stand for."""

from __future__ import annotations

import re
from collections.abc import Iterable

from .summary import first_line

REASON_OF = re.compile(r"^\s*(?:!\d+/)?\d+/\d+: ")  # "0/1: " before a recompile reason: the cached compile whose guard failed
GUARD_COMMENT = re.compile(r"\s{2,}# ")  # torch's comment after a guard: the source line it guards
# names Dynamo makes up for what it hands a resume function after a graph break (resume_execution.py)
_DYNAMO_NAME = re.compile(r"(?<!\w)___(?:stack|context_manager_)\d+\b")
_RESUME_FUNCTION = re.compile(r"torch_dynamo_resume_in_(\w+?)_at_(\d+)")
_SIZE_CHANGE = re.compile(r"tensor '([^']+)' size mismatch at index (\d+)\. expected (\S+?), actual (\S+?)\.?$")


def guard_failure(reason: str) -> str:
    """A recompile reason in the user's words: the guard that failed, without the id of the cached
    compile torch prefixes it with nor its source comment; a size guard as what changed
    (`x.shape[0] changed 8→5`)."""
    guard = GUARD_COMMENT.split(REASON_OF.sub("", first_line(reason)), 1)[0].strip()
    size = _SIZE_CHANGE.fullmatch(guard)
    return f"{size[1]}.shape[{size[2]}] changed {size[3]}→{size[4]}" if size else guard


def dynamo_names(text: str) -> list[str]:
    """The names Dynamo made up that a guard or a recompile reason mentions (`___stack0`,
    `___context_manager_0`), each once, in order: no variable of the program has them."""
    return list(dict.fromkeys(_DYNAMO_NAME.findall(text)))


def dynamo_name_meaning(name: str, frame: str = "", location: str = "") -> str:
    """What a name Dynamo made up stands for, in plain words. `frame`: the compiled function whose
    guard names it (a resume function, `torch_dynamo_resume_in_f_at_13`); `location`: its user code line."""
    resume = _RESUME_FUNCTION.fullmatch(frame)
    if resume:
        after = f"the graph break in {resume[1]} at line {resume[2]}"
    else:
        after = f"the graph break at {location}" if location else "a graph break"
    if name.startswith("___context_manager_"):
        return (f"{name}: not a variable of your program but a context manager (a with block) that was open at {after}, "
                "which Dynamo passed to the resume function to enter it again.")
    return (f"{name}: not a variable of your program but a value Dynamo passed to the resume function after {after}: "
            "one your code had computed there and not used yet, such as the result of the call that broke the graph "
            "(e.g. .item()). A guard on it compiles the resume function again for every new value; without the graph "
            "break the value would stay inside the graph.")


def notes_on_dynamo_names(texts: Iterable[str], frame: str, location: str, graph_break: tuple[str, str] | None = None) -> list[str]:
    """What each name Dynamo made up that `texts` (the guards or recompile reasons of the compiled
    function `frame`, at user code line `location`) mention stands for; then `graph_break`, (reason,
    hint) of the break that made the resume function, when known."""
    names = list(dict.fromkeys(name for text in texts for name in dynamo_names(text)))
    notes = [dynamo_name_meaning(name, frame, location) for name in names]
    if notes and graph_break is not None:
        reason, hint = graph_break
        notes.append(f"The graph break there: {reason}." + (f" Hint: {hint}" if hint else ""))
    return notes
