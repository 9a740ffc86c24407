"""User stacks: the frames torch logs with `dynamo_start` (and `stack`), and the trie they form.

Frames are kept as logged (file names may be intern-table indices) and resolved only when a page
is rendered, because `str` records can arrive after the stack that uses them.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from msgspec import Struct, field

from ..model import CompileId
from ..paths import safe_component


class Frame(NamedTuple):
    # intern index, (process, index) in a run's other processes (`model.StringTable`), or the name itself (`uninterned_filename`)
    filename: int | tuple[int, int] | str | None
    line: int
    name: str
    loc: str


def frames_from_json(value: Any, process: int = 0) -> list[Frame] | None:
    """Frames of a logged stack; None when it is not a list. Malformed frames are kept as best we can.
    An interned file name of a process other than the run's first is keyed `(process, index)`."""
    if not isinstance(value, list):
        return None
    frames = []
    for item in value:
        if not isinstance(item, dict):
            continue
        filename = item.get("uninterned_filename")
        if not isinstance(filename, str):
            filename = item.get("filename")
            if not isinstance(filename, (int, str)) or isinstance(filename, bool):
                filename = None
            elif process and type(filename) is int:
                filename = (process, filename)
        line = item.get("line")
        frames.append(
            Frame(
                filename=filename,
                line=line if type(line) is int else 0,
                name=str(item.get("name", "")),
                loc=loc if isinstance(loc := item.get("loc"), str) else "",
            )
        )
    return frames


_SEED_NSPID = re.compile(r"[^/]+-seed-nspid[^/]+/")
_EVAL_WITH_KEY = re.compile(r"<eval_with_key>\.(\d+)")


def simplify_filename(filename: str) -> str:
    """Drop build-system prefixes (fbcode link trees, sandbox dirs) so stacks stay readable."""
    marker = filename.find("#link-tree/")
    if marker >= 0:
        return filename[marker + len("#link-tree/") :]
    match = _SEED_NSPID.search(filename)
    if match:
        return filename[match.end() :]
    return filename


def eval_with_key(filename: str) -> str | None:
    """`<eval_with_key>.7` → `7`: FX-generated code whose source a `dump_file` record carries."""
    match = _EVAL_WITH_KEY.search(filename)
    return match.group(1) if match else None


def dump_file_path(name: str) -> str:
    """Where a dump_file record's source page goes (relative to the report root)."""
    key = eval_with_key(name)
    return f"dump_file/eval_with_key_{key}.html" if key else f"dump_file/{safe_component(name)}.html"


_CONVERT_FRAME_TAILS = (
    ("catch_errors", "_convert_frame", "_convert_frame_assert"),
    ("__call__", "__call__", "__call__"),
)


def strip_convert_frame(frames: list[Frame], resolve: Callable[[Any], str | None]) -> list[Frame]:
    """Drop the three Dynamo-internal frames that fbcode stacks end with (tlparse does the same)."""
    if len(frames) < 3:
        return frames
    tail = frames[-3:]
    files = {simplify_filename(resolve(f.filename) or "") for f in tail}
    if files == {"torch/_dynamo/convert_frame.py"} and tuple(f.name for f in tail) in _CONVERT_FRAME_TAILS:
        return frames[:-3]
    return frames


class TrieNode(Struct):
    children: dict[Frame, TrieNode] = field(default_factory=dict)
    terminals: list[CompileId | None] = field(default_factory=list)
    stack: list[Frame] | None = None  # the first stack that ended here (equal stacks share it)


class StackTrie:
    """Stacks merged on their common prefix; a terminal marks where a compile id's stack ends."""

    def __init__(self) -> None:
        self.root = TrieNode()
        self.size = 0
        # a live report's list of the stacks inserted since it last looked (None: not kept)
        self.inserted: list[tuple[list[Frame], Any]] | None = None

    def insert(self, frames: list[Frame], terminal: Any) -> list[Frame]:
        """Add a stack ending in `terminal`; return the first stack equal to it (to keep instead)."""
        node = self.root
        for frame in frames:
            child = node.children.get(frame)
            if child is None:
                child = node.children[frame] = TrieNode()
            node = child
        node.terminals.append(terminal)
        self.size += 1
        if self.inserted is not None:
            self.inserted.append((frames, terminal))
        if node.stack is None:
            node.stack = frames
        return node.stack

    def rows(self) -> list[tuple[str, Frame | None, list[CompileId | None]]]:
        """Flatten for templates without recursion: ("frame"|"open"|"close", frame, terminals).

        A chain of single children renders as a flat list; only where stacks diverge does each
        branch open a nested, collapsible block (so deep stacks never recurse in Python or Jinja).
        """
        rows: list[tuple[str, Frame | None, list[CompileId | None]]] = []
        work: list[tuple[Any, ...]] = [("children", self.root)]
        while work:
            item = work.pop()
            if item[0] == "close":
                rows.append(("close", None, []))
            elif item[0] == "row":
                _, frame, child, branching = item
                rows.append(("open" if branching else "frame", frame, child.terminals))
            else:
                children = list(item[1].children.items())
                branching = len(children) > 1
                # pushed in reverse so the first child comes out first: its row, its subtree, its close
                for frame, child in reversed(children):
                    if branching:
                        work.append(("close",))
                    work.append(("children", child))
                    work.append(("row", frame, child, branching))
        return rows


# Where library code lives (torch itself, installed packages, the standard library): never the
# user's code, never linked to the user's repository. `/stdlib/` and `/site-packages/` are also
# the placeholders the compile harness writes in fixture logs.
LIBRARY_PATHS = ("/site-packages/", "/dist-packages/", "/torch/", "/lib/python3", "/stdlib/")


def is_user_code(path: str) -> bool:
    """Whether a logged file name is the user's code (not torch, a package or the standard library)."""
    if not path or path.startswith("<") or path in ("(unknown)", "N/A"):
        return False
    probe = "/" + path.replace("\\", "/").lstrip("/")
    return not any(part in probe for part in LIBRARY_PATHS)


LIBRARY_TORCH = "torch"
LIBRARY_STDLIB = "stdlib"
LIBRARY_PACKAGE = "package"
_PACKAGE_ROOTS = ("/site-packages/", "/dist-packages/")
_STDLIB_ROOT = re.compile(r"/stdlib/|/lib/python3(?:\.\d+)?/")


def _installed(probe: str) -> str | None:
    """The path of an installed package's file inside its packages folder ("torch/optim/sgd.py"); None when it is no such file."""
    cut = max(probe.rfind(root) + len(root) if root in probe else -1 for root in _PACKAGE_ROOTS)
    return probe[cut:] if cut >= 0 else None


def library_of(path: str) -> str | None:
    """Whose code a logged file name is: torch's (LIBRARY_TORCH), the standard library's (LIBRARY_STDLIB)
    or another installed package's (LIBRARY_PACKAGE); None for the user's code and for code of no known
    library (`<eval_with_key>.3`: code FX generated)."""
    if is_user_code(path) or path.startswith("<"):
        return None
    probe = "/" + path.replace("\\", "/").lstrip("/")
    installed = _installed(probe)
    if installed is not None:
        return LIBRARY_TORCH if installed.startswith("torch/") else LIBRARY_PACKAGE
    if "/torch/" in probe:  # torch from a source checkout
        return LIBRARY_TORCH
    return LIBRARY_STDLIB if _STDLIB_ROOT.search(probe) else None


def library_path(location: str) -> str:
    """A library file (or `file:line`) named inside its library, as people know it: `torch/optim/sgd.py:105`,
    `contextlib.py:299`; any other name as given."""
    probe = "/" + location.replace("\\", "/").lstrip("/")
    installed = _installed(probe)
    if installed is not None:
        return installed
    if "/torch/" in probe:
        return probe[probe.rfind("/torch/") + 1:]
    stdlib = list(_STDLIB_ROOT.finditer(probe))
    return probe[stdlib[-1].end():] if stdlib else location


def split_location(location: str | None) -> tuple[str, int] | None:
    """`file.py:23` → ("file.py", 23); None for anything else."""
    if not location:
        return None
    file, _, line = location.rpartition(":")
    return (file, int(line)) if file and line.isdigit() else None


def user_folder(paths: Iterable[str]) -> str:
    """The common folder of the user-code files among logged file names: where a run's own code
    lives on the machine that ran it ("" when the names hold no user code). Relative and absolute
    names mixed: the common folder of the absolute ones, since only they name the machine's folders."""
    names = [p.replace("\\", "/") for p in paths if is_user_code(p)]
    absolute = [p for p in names if p.startswith("/")]
    folders = sorted({posixpath.dirname(p) for p in (absolute or names)})
    if not folders:
        return ""
    return posixpath.commonpath(folders) if len(folders) > 1 else folders[0]


def inside_folder(path: str, folder: str) -> str | None:
    """A file name relative to `folder` (both as logged, compared as text so that nothing depends on
    this machine's current folder); None when the file is not inside it or `folder` is ""."""
    if not folder:
        return None
    path = path.replace("\\", "/")
    prefix = folder.replace("\\", "/")
    prefix = prefix if prefix.endswith("/") else prefix + "/"
    return path[len(prefix):] if path.startswith(prefix) and len(path) > len(prefix) else None
