"""A run's user files named as its readers know them: relative to the run's root.

A summary is published (a job summary, a PR comment, a diff), and a runner's absolute paths mean
nothing to its readers. So a user file is named relative to `--source-root` when it is inside it,
else to the common folder of the run's user files (`stacks.user_folder`); a library's file, or one
outside both, as logged. One rule for every view that names a place: a report's short summary
(`digest.py`), the multi-rank causes (`ranks.py`) and each side of a diff (`comparison.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from msgspec import Struct

from .stacks import inside_folder, is_user_code, split_location, user_folder
from .summary import CompileSummary


class Roots(Struct, frozen=True, gc=False):
    """Where one run's user files are named from: `--source-root` first, then the run's common folder."""

    source_root: str = ""
    common: str = ""

    @classmethod
    def of(cls, compiles: Sequence[CompileSummary], source_root: str = "", more_paths: Iterable[str] = ()) -> Roots:
        """The roots of a run: its common folder is over every user file it names (and `more_paths`)."""
        return cls(source_root, user_folder([*user_paths(compiles), *more_paths]))

    def name(self, location: str | None) -> str | None:
        """`model.py:23` for a user code line inside a root; as logged otherwise; None stays None."""
        return relative_location(location, (self.source_root, self.common)) if location else location


def user_root(compiles: Sequence[CompileSummary]) -> str:
    """The common folder of the run's user files, which `relative_location` names them from."""
    return user_folder(user_paths(compiles))


def user_paths(compiles: Sequence[CompileSummary]) -> set[str]:
    """Every file the run's frames, graph breaks and failures name (`user_folder` keeps the user's own),
    read in one pass: a diff's compiles may be in a scratch file, each read back when it is reached."""
    paths = set()
    for c in compiles:
        failed_at = c.failure.user_location if c.failure is not None else None
        for location in (c.user_location, *(b.user_location for b in c.graph_breaks), failed_at):
            if site := split_location(location):
                paths.add(site[0])
    return paths


def relative_location(location: str, roots: tuple[str, ...]) -> str:
    """A `file.py:23` of user code relative to the first of `roots` it is inside; as logged otherwise."""
    site = split_location(location)
    if site is None or not is_user_code(site[0]):
        return location
    relative = next((r for root in roots if (r := inside_folder(site[0], root)) is not None), None)
    return f"{relative}:{site[1]}" if relative is not None else location
