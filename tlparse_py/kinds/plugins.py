"""Kinds declared by other packages, through the `tlparse_py.kinds` entry-point group.

A plugin's entry point names a module or a callable. Loading it (and calling it, if callable)
declares its kinds with the same `declare` / `kind` API the built-in kinds use. A plugin that fails
to import or raises is named with its error and skipped; the run goes on without it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from importlib.metadata import EntryPoint, entry_points

from . import registry

GROUP = "tlparse_py.kinds"
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


def load_one(entry: EntryPoint) -> str:
    """Load one plugin; return "" on success, else what went wrong (its declarations are undone)."""
    before = _snapshot()
    try:
        target = entry.load()
        if callable(target):
            target()
    except Exception as exc:  # noqa: BLE001 - someone else's code: any error skips the plugin, not the run
        _restore(before)
        return f"{type(exc).__name__}: {exc}"
    _mark_source(before, entry.name)
    return ""


def _tables() -> dict[str, dict[str, registry.Kind]]:
    return {"kinds": registry.KINDS, "names": registry.NAMES}


def _snapshot() -> dict[str, dict[str, registry.Kind]]:
    # whole copies, not key sets: a plugin may replace a declaration before it fails
    return {name: dict(table) for name, table in _tables().items()}


def _restore(before: dict[str, dict[str, registry.Kind]]) -> None:
    for name, table in _tables().items():
        table.clear()
        table.update(before[name])  # the copy keeps declaration order, which fixes file numbering


def _mark_source(before: dict[str, dict[str, registry.Kind]], source: str) -> None:
    """Credit the plugin with every declaration it added or replaced."""
    for name, table in _tables().items():
        for key, declared in list(table.items()):
            if before[name].get(key) is not declared:
                table[key] = replace(declared, source=source)
