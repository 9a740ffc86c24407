"""Kinds declared by other packages, through the `tlparse_py.kinds` entry-point group.

A plugin's entry point names a module or a callable. Loading it (and calling it, if callable)
declares its kinds with the same `declare` / `kind` API the built-in kinds use. A plugin that fails
to import or raises is named with its error and skipped; the run goes on without it.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from msgspec.structs import replace

from . import registry

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

GROUP = "tlparse_py.kinds"
_SECTION = re.compile(r"^\s*\[\s*" + re.escape(GROUP) + r"\s*\]", re.MULTILINE)
_loaded: dict[str, str] = {}  # entry-point name → "" when loaded, else its error


def load_plugins(warn: Callable[[str], None] | None = None) -> dict[str, str]:
    """Load every plugin once per process; `warn` is told about each one that failed."""
    for entry in entry_points(group=GROUP):
        if entry.name in _loaded:
            continue
        _loaded[entry.name] = error = load_one(entry)
        if error and warn is not None:
            warn(f"plugin {entry.name!r} ({entry.value}) was skipped: {error}")
    return dict(_loaded)


def entry_points(group: str) -> list[Any]:
    """The group's entry points. Importing `importlib.metadata` and reading every distribution costs
    more than a small report takes, so the installed `entry_points.txt` files are first searched
    for the group's section, and nearly every run (no plugin installed) stops there."""
    if not declared_anywhere(group):
        return []
    from importlib.metadata import entry_points as installed

    return list(installed(group=group))


def declared_anywhere(group: str = GROUP, paths: list[str] | None = None) -> bool:
    """Whether any distribution on the path has an `entry_points.txt` with a `[group]` section."""
    section = _SECTION if group == GROUP else re.compile(r"^\s*\[\s*" + re.escape(group) + r"\s*\]", re.MULTILINE)
    for base in sys.path if paths is None else paths:
        try:
            names = os.listdir(base or ".")
        except OSError:  # a zip, a missing folder: importlib.metadata would find nothing there either
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(base or ".", name, "entry_points.txt"), encoding="utf-8", errors="replace") as handle:
                    if section.search(handle.read()):
                        return True
            except OSError:
                continue
    return False


def load_one(entry: EntryPoint) -> str:
    """Load one plugin; return "" on success, else what went wrong (its declarations are undone)."""
    before = _snapshot()
    sections = dict(registry.SECTIONS)
    try:
        target = entry.load()
        if callable(target):
            target()
        problem = _mistyped(before)
    # someone else's code: any error skips the plugin, not the run (sys.exit() in it included)
    except (Exception, SystemExit) as exc:  # noqa: BLE001
        _restore(before, sections)
        return f"{type(exc).__name__}: {exc}"
    if problem:
        _restore(before, sections)
        return problem
    _mark_source(before, entry.name)
    return ""


# What each declaration field must hold (a plugin's declarations are checked; tlparse-py's own are
# checked by mypy): a wrong type would crash the run at the first record of the kind.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,), "title": (str,), "section": (str, type(None)), "lang": (str,), "label": (str,), "carrier": (str,),
    "in_export": (bool,), "tensor": (str,), "runtime": (bool,), "shape_fact": (str,), "collected": (bool,),
    "provenance": (tuple, type(None)), "collective": (str,), "step": (registry.Step, type(None)),
}
_CALLABLE_FIELDS = ("parse", "facts", "subject", "symbol")


def _mistyped(before: dict[str, dict[str, registry.Kind]]) -> str:
    """What is wrong with the declarations a plugin added or replaced ("" when nothing)."""
    for name, table in _tables().items():
        for declared in table.values():
            if before[name].get(declared.name) is declared:
                continue
            for field, types in _FIELD_TYPES.items():
                value = getattr(declared, field)
                if not isinstance(value, types):
                    return f"kind {declared.name!r}: {field} is {type(value).__name__} {value!r:.40}, not {' or '.join(t.__name__ for t in types)}"
            for field in _CALLABLE_FIELDS:
                value = getattr(declared, field)
                if value is not None and not callable(value):
                    return f"kind {declared.name!r}: {field} is {type(value).__name__}, not a function"
    return ""


def _tables() -> dict[str, dict[str, registry.Kind]]:
    return {"kinds": registry.KINDS, "names": registry.NAMES}


def _snapshot() -> dict[str, dict[str, registry.Kind]]:
    # whole copies, not key sets: a plugin may replace a declaration before it fails
    return {name: dict(table) for name, table in _tables().items()}


def _restore(before: dict[str, dict[str, registry.Kind]], sections: dict[str, registry.PageSection]) -> None:
    for name, table in _tables().items():
        table.clear()
        table.update(before[name])  # the copy keeps declaration order, which fixes file numbering
    registry.SECTIONS.clear()
    registry.SECTIONS.update(sections)  # and the sections it declared, in page order


def _mark_source(before: dict[str, dict[str, registry.Kind]], source: str) -> None:
    """Credit the plugin with every declaration it added or replaced."""
    for name, table in _tables().items():
        for key, declared in list(table.items()):
            if before[name].get(key) is not declared:
                table[key] = replace(declared, source=source)
