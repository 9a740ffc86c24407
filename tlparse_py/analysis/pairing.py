"""Which frame of BASE is which frame of NEW: pairing by code identity, not by line number.

An edit above a function shifts every line number under it, and a checkout at another path
changes every file name; neither changes what the code is. A frame is known by:

- its file, relative to `--source-root` (or to the common folder of the run's user files);
- its function, with Dynamo's resume functions named by what they resume
  (`torch_dynamo_resume_in_forward_at_17` is "resume in forward");
- the source text that anchors it: for a resume function, the line of the graph break it resumes
  after (from the log's user code traceback);
- the kind of that break (torch's registry id, else its headline): a resume function after an
  `.item()` break is not the one after a `print()` break on the next line, whatever their names.

Frames with the same identity pair (in order, when a function is compiled as several frames).
The rest are aligned per file, in log order (difflib): a frame whose anchor text was edited still
pairs by its function, and a function renamed in place pairs with its new name; but a resume
function only ever pairs with one after the same kind of break (another break is gone plus new,
never moved or edited). A frame that only moved says so ("moved, line 17 → 18"); one with nothing
to pair with is new or gone.

Two runs whose files have different names pair them when each run has one user file; otherwise
`--pair FILE_A=FILE_B` says which file of BASE is which of NEW.
"""

from __future__ import annotations

import difflib
import posixpath
import re
import sys
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence

import msgspec
from msgspec import Struct, field

from .stacks import is_user_code, split_location
from .summary import CompileSummary, GraphBreak, Summary

_RESUME = re.compile(r"^torch_dynamo_resume_in_(.+?)_at_\d+$")


class PairingError(ValueError):
    """A `--pair` that names a file neither run has; the message lists each run's files."""


def function_name(name: str | None) -> str:
    """A frame's function as the user knows it: `torch_dynamo_resume_in_forward_at_17` → "resume in forward"."""
    if not name:
        return ""
    match = _RESUME.match(name)
    return f"resume in {match.group(1)}" if match else name


class Files(Struct):
    """A run's user files, relative to its root."""

    root: str

    def relative(self, path: str) -> str:
        path = path.replace("\\", "/")
        if self.root and (path == self.root or path.startswith(self.root.rstrip("/") + "/")):
            return posixpath.relpath(path, self.root)
        return path

    @classmethod
    def of(cls, paths: Iterable[str], source_root: str = "") -> Files:
        """The root of a run: `--source-root` when given, else the common folder of its user files."""
        if source_root:
            return cls(source_root.replace("\\", "/").rstrip("/") or "/")
        folders = sorted({posixpath.dirname(p.replace("\\", "/")) for p in paths if is_user_code(p)})
        if not folders:
            return cls("")
        try:
            return cls(posixpath.commonpath(folders) if len(folders) > 1 else folders[0])
        except ValueError:  # relative and absolute paths mixed
            return cls("")


class Frame(Struct, gc=False):
    """One frame of one run, with where its compiles are in the run's list of compiles, in log order.

    A diff of 10^6 compiles holds every frame at once, so a frame holds only what pairs it and the
    positions of its compiles (4 bytes each), not the compiles (which may be in a scratch file:
    `spools.SpooledCompiles`): `compiles_of` reads them when its row is made, and its name and
    location as logged are its first compile's. (No reference cycle can run through a frame, so the
    garbage collector need not track it.)"""

    file: str  # relative to its run's root
    name: str  # its function, resume functions normalised
    line: int | None
    anchor: str  # the source text that anchors it ("" when the log gives none)
    # the kind of graph break it resumes after (`GraphBreak.kind`; the kinds logged at its line, sorted and
    # joined, in the rare line that broke two ways); "" when the log places no break at its line
    after: str = ""
    positions: bytes = b""  # where its compiles are, packed as an array("I") (the smallest Python holds them in)
    # set by pair_frames: a BASE frame's NEW frame and how they pair; a NEW frame's mark that it is paired
    partner: Frame | None = None
    how: str = ""
    taken: bool = False

    @property
    def identity(self) -> tuple[str, str, str, str]:
        return (self.file, self.name, self.anchor, self.after)

    @property
    def aligned_as(self) -> tuple[str, str]:
        """What per-file alignment compares: its function, and the kind of break it resumes after
        (an edit may change a resume function's anchor text and still pair it, but never the kind of its break)."""
        return (self.name, self.after)


class FramePair(Struct, gc=False):
    base: Frame | None
    new: Frame | None
    how: str  # "same", "moved", "edited" (its anchor text changed), "renamed", "new" or "gone"


def frames_of(summary: Summary, files: Files) -> list[Frame]:
    """The run's frames (a frame id in one generation), in log order."""
    anchors = _breaks_at(summary.compiles)
    frames: dict[object, tuple[Frame, array[int]]] = {}
    for position, compile_ in enumerate(summary.compiles):
        identity: object = compile_.frame_identity if compile_.frame_identity is not None else ("compile", compile_.key, compile_.generation)
        found = frames.get(identity)
        if found is None:
            site = split_location(compile_.user_location)
            anchor, after = anchors.get(compile_.user_location or "", ("", ""))
            found = frames[identity] = (Frame(
                sys.intern(files.relative(site[0])) if site else "", sys.intern(function_name(compile_.frame)),
                site[1] if site else None, anchor, after,
            ), array("I"))
        found[1].append(position)
    for frame, positions in frames.values():
        frame.positions = positions.tobytes()
    return [frame for frame, _ in frames.values()]


def compiles_of(frame: Frame | None, compiles: Sequence[CompileSummary]) -> list[CompileSummary]:
    """The frame's compiles, in log order, from its run's compiles (none for no frame)."""
    return [compiles[i] for i in array("I", frame.positions)] if frame is not None else []


def _breaks_at(compiles: Iterable[CompileSummary]) -> dict[str, tuple[str, str]]:
    """user location → the graph break there (what a resume function starting there resumes after):
    its source text ("" when the log gives none) and its kind (the kinds logged there, sorted and joined)."""
    texts: dict[str, str] = {}
    kinds: dict[str, set[str]] = {}
    for c in compiles:
        for b in c.graph_breaks:
            if b.user_source:
                texts[b.user_location] = b.user_source
            kinds.setdefault(b.user_location, set()).add(b.kind)
    return {location: (texts.get(location, ""), sys.intern(", ".join(sorted(found)))) for location, found in kinds.items()}


def user_files(frames: Iterable[Frame]) -> list[str]:
    return sorted({f.file for f in frames if f.file})


def file_map(base: list[str], new: list[str], pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """BASE file → NEW file, for files named differently: `--pair`, or each run's only user file."""
    problem = contradiction(pairs)
    if problem:
        raise PairingError(problem)
    mapping: dict[str, str] = {}
    listing = f"BASE has {', '.join(base) or 'no user file'}; NEW has {', '.join(new) or 'no user file'}"
    for a, b in pairs:
        missing = [f"{a} is not a file of BASE"] * (a not in base) + [f"{b} is not a file of NEW"] * (b not in new)
        if missing:
            raise PairingError(f"--pair {a}={b}: {' and '.join(missing)} ({listing})")
        mapping[a] = b
    if not mapping and len(base) == 1 and len(new) == 1 and base != new:
        mapping[base[0]] = new[0]
    return mapping


def contradiction(pairs: Sequence[tuple[str, str]]) -> str | None:
    """Why `--pair`s contradict each other (None when they do not): each file is paired at most once,
    so a BASE file named for two NEW files, or two BASE files for one NEW file, names both pairs. The
    same pair given twice is no contradiction."""
    by_base: dict[str, str] = {}
    by_new: dict[str, str] = {}
    for a, b in pairs:
        if by_base.get(a, b) != b:
            return f"--pair {a}={by_base[a]} and --pair {a}={b} contradict: BASE's {a} is paired with two NEW files; pair each file once"
        if by_new.get(b, a) != a:
            return f"--pair {by_new[b]}={b} and --pair {a}={b} contradict: NEW's {b} is paired with two BASE files; pair each file once"
        by_base[a], by_new[b] = b, a
    return None


def pair_frames(base: list[Frame], new: list[Frame], files: dict[str, str]) -> FramePairs:
    """Every frame of either run, paired where their code is the same: BASE's order, then NEW's new
    ones. Each pair is marked on its frames (`Frame.partner`, `Frame.taken`): a dict of pairs would
    cost more than the frames of a diff of 10^6 compiles."""

    def link(b: Frame, n: Frame, how: str) -> None:
        b.partner, b.how, n.taken = n, how, True

    # NEW's frames by identity; the rare identity of several frames holds them last-first, so that
    # taking the first is a pop (a list, or a deque, for every frame would cost more than the frame)
    by_identity: dict[tuple[str, str, str, str], Frame | list[Frame]] = {}
    for n in reversed(new):
        found = by_identity.setdefault(n.identity, n)
        if isinstance(found, list):
            found.append(n)
        elif found is not n:
            by_identity[n.identity] = [found, n]
    for b in base:
        key = (files.get(b.file, b.file), b.name, b.anchor, b.after)
        candidate = by_identity.get(key)
        if isinstance(candidate, list):
            n = candidate.pop()
            if not candidate:
                del by_identity[key]
        elif candidate is not None:
            n = candidate
            del by_identity[key]
        else:
            continue
        link(b, n, "same" if b.line == n.line else "moved")
    del by_identity
    # grouped once (not a scan of every frame per file: a run has 1,000s of frames in 100s of files)
    base_by_file: dict[str, list[Frame]] = {}
    new_by_file: dict[str, list[Frame]] = {}
    for b in base:
        base_by_file.setdefault(b.file, []).append(b)
    for n in new:
        new_by_file.setdefault(n.file, []).append(n)
    for file in sorted(base_by_file):
        in_base, in_new = base_by_file[file], new_by_file.get(files.get(file, file), [])
        # alignment only pairs frames both unpaired: a file with none on either side has nothing to align
        if all(b.partner is not None for b in in_base) or all(n.taken for n in in_new):
            continue
        _align(in_base, in_new, lambda b, n, how: link(b, n, how) if b.partner is None and not n.taken else None)
    return FramePairs(base, new)


class FramePairs:
    """The pairs of two runs' frames, made as they are read (from the marks `pair_frames` left)."""

    def __init__(self, base: list[Frame], new: list[Frame]) -> None:
        self.base, self.new = base, new

    def __iter__(self) -> Iterator[FramePair]:
        for b in self.base:
            yield FramePair(b, b.partner, b.how) if b.partner is not None else FramePair(b, None, "gone")
        for n in self.new:
            if not n.taken:
                yield FramePair(None, n, "new")


def _align(base: list[Frame], new: list[Frame], link: Callable[[Frame, Frame, str], None]) -> None:
    """Frames of one file (all of them, in log order) that kept their function (and, for a resume
    function, the kind of break it resumes after) pair in order; a block replaced one for one between
    kept frames is renamed, where each resumes after the kind of break its partner does. `link` pairs
    only frames not yet paired."""
    if not base or not new:
        return
    matcher = difflib.SequenceMatcher(a=[f.aligned_as for f in base], b=[f.aligned_as for f in new], autojunk=False)
    for op, b0, b1, n0, n1 in matcher.get_opcodes():
        if op == "equal":
            for b, n in zip(base[b0:b1], new[n0:n1], strict=True):
                link(b, n, "edited")
        elif op == "replace" and b1 - b0 == n1 - n0 and (b0 > 0 or b1 < len(base)):  # renamed in place, between kept frames
            for b, n in zip(base[b0:b1], new[n0:n1], strict=True):
                if b.after == n.after:
                    link(b, n, "renamed")


def renamed_functions(pairs: Iterable[FramePair]) -> dict[str, str]:
    """BASE's function name → NEW's, for frames paired as renamed."""
    return {p.base.name: p.new.name for p in pairs if p.how == "renamed" and p.base is not None and p.new is not None}


class BrokeIn(Struct, frozen=True, gc=False):
    """The compile a graph break was logged in (what a diff names of it)."""

    id: str
    frame: str | None
    generation: int = 0  # of its id: the same id compiles again after a reset()


class BreakSite(Struct):
    """One kind of graph break at one place in the code, on one side: every compile that broke there."""

    brk: GraphBreak
    file: str
    line: int | None
    breaks: list[BrokeIn] = field(default_factory=list)


BreakKey = tuple[str, str, str, str, int]


def break_sites(summary: Summary, files: Files, file_of: dict[str, str] | None = None,
                function_of: dict[str, str] | None = None) -> dict[BreakKey, BreakSite]:
    """Graph breaks by identity: their file and function, their kind (registry id, else headline)
    and the text of their line (its line number when the log gives no text); the same text twice in
    one function is told apart by its order there. `file_of` and `function_of` rename BASE's files
    and functions as NEW names them (`--pair`, frames paired as renamed)."""
    by_line: dict[tuple[str, str, str, str, int | None], BreakSite] = {}
    for compile_ in summary.compiles:
        for brk in compile_.graph_breaks:
            site = split_location(brk.user_location)
            file = sys.intern(files.relative(site[0]) if site else brk.user_location)
            file = (file_of or {}).get(file, file)
            line = site[1] if site else None
            function = sys.intern(function_name(brk.user_function))
            key = (file, (function_of or {}).get(function, function), brk.kind, brk.user_source or f"line {line}", line)
            found = by_line.get(key)
            if found is None:
                found = by_line[key] = BreakSite(_shared_text(brk), file, line)
            found.breaks.append(BrokeIn(compile_.id, sys.intern(compile_.frame) if compile_.frame is not None else None,
                                       compile_.generation))
    sites: dict[BreakKey, BreakSite] = {}
    ordinal: dict[tuple[str, str, str, str], int] = {}
    for key in sorted(by_line, key=lambda k: (k[:4], k[4] if k[4] is not None else -1)):
        identity = key[:4]
        ordinal[identity] = ordinal.get(identity, -1) + 1
        sites[(*identity, ordinal[identity])] = by_line[key]
    return sites


def _shared_text(brk: GraphBreak) -> GraphBreak:
    """The break with its texts that repeat from break to break (torch's explanation, hints and
    page for one kind of break) shared: a run of 10^5 graph breaks has a few kinds."""
    return msgspec.structs.replace(brk, reason=sys.intern(brk.reason), explanation=sys.intern(brk.explanation),
                                   hints=tuple(sys.intern(h) for h in brk.hints), doc_url=sys.intern(brk.doc_url),
                                   registry_id=sys.intern(brk.registry_id))


def user_paths(summary: Summary) -> Iterator[str]:
    """Every user-code file path the run names (frames and graph breaks), read in one pass."""
    for c in summary.compiles:
        for location in [c.user_location, *(b.user_location for b in c.graph_breaks)]:
            site = split_location(location)
            if site and is_user_code(site[0]):
                yield site[0]

