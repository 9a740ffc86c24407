"""Records written as the plain data `msgspec.to_builtins` makes of them, by a function generated
from their declaration: as fast as a dict written by hand (summary.json holds 100,000s of compiles)."""

from __future__ import annotations

import itertools
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any

from msgspec import Struct, structs


def dict_writer(record: type[Struct], source: type[Struct] | None = None) -> Callable[[Any], dict[str, Any]]:
    """A function that writes what `msgspec.to_builtins` makes of a `record` with every field set, from
    a `source` object with attributes named as its fields (a `CompileSummary` for a `CompileRecord`).
    Generated from the declaration, to cost no more than a dict written by hand: to_builtins costs
    twice that, and summary.json holds 100,000s of compiles."""
    namespace: dict[str, Any] = {}
    names = (f"v{i}" for i in itertools.count())
    exec(f"def write(o):\n    return {_written(record, source or record, 'o', names)}\n", namespace)  # our own field names
    write: Callable[[Any], dict[str, Any]] = namespace["write"]
    return write


def _written(record: type[Struct], source: type[Struct], value: str, names: Iterator[str]) -> str:
    """The expression of the dict `record` `value` is written as. A nested record (one, a list of
    them, or one or None) of the same type in `record` and `source` is written inline, another by
    its `to_dict()` (a `GraphBreak` of a `CompileSummary`, whose record is a `GraphBreakRecord`)."""
    source_types = {info.name: info.type for info in structs.fields(source)}
    items = []
    for info in structs.fields(record):
        written = f"{value}.{info.name}"
        nested, how = _nested(info.type)
        if nested is not None:
            inline = _nested(source_types[info.name])[0] is nested
            name = written if how == "one" else next(names)
            one = _written(nested, nested, name, names) if inline else f"{name}.to_dict()"
            if how == "list":
                written = f"[{one} for {name} in {written}]"
            elif how == "optional":
                written = f"(None if ({name} := {written}) is None else {one})"
            else:
                written = one
        items.append(f"{info.encode_name!r}: {written}")
    return "{" + ", ".join(items) + "}"


def _nested(hint: Any) -> tuple[type[Struct] | None, str]:
    """The record a field holds, and how: "one", "list" or "optional" (`Record | None`); (None, "") for plain data."""
    def record(kind: Any) -> type[Struct] | None:
        return kind if isinstance(kind, type) and issubclass(kind, Struct) else None

    args = typing.get_args(hint)
    if record(hint):
        return record(hint), "one"
    if typing.get_origin(hint) is list and record(args[0]):
        return record(args[0]), "list"
    if isinstance(hint, types.UnionType) and len(args) == 2 and args[1] is type(None) and record(args[0]):
        return record(args[0]), "optional"
    return None, ""  # anything else (a record in a dict, `Record | UnsetType`) would be left a Struct: tests/test_record_schema.py
