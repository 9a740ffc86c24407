"""What every compile keeps of its compilation_metrics record: the fields the index and statuses
read (`METRIC_SUMMARY_FIELDS`), packed.

A log of 100,000s of small compiles keeps one a compile. As a tuple of 21 values (its floats, its
texts, an empty list) it cost about 600 bytes; packed as msgpack it costs about 150 (a missing
field one byte), and is unpacked when read. Reads come in runs on one compile (a summary reads a
dozen fields of it, then the next compile's), so the last one unpacked is kept.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import msgspec

# compilation_metrics fields summarised for the index and status (all fields stay on the page)
METRIC_SUMMARY_FIELDS = (
    "co_name",
    "co_filename",
    "co_firstlineno",
    "fail_type",
    "fail_reason",
    "fail_user_frame_filename",
    "fail_user_frame_lineno",
    "config_suppress_errors",
    "restart_reasons",
    "graph_op_count",
    "graph_node_count",
    "entire_frame_compile_time_s",
    "backend_compile_time_s",
    "inductor_compile_time_s",
    "code_gen_time_s",
    "dynamo_time_before_restart_s",
    "recompile_reason",
    "cache_size",
    "accumulated_cache_size",
    "guard_count",
    "shape_env_guard_count",
)

_PLACES = {name: place for place, name in enumerate(METRIC_SUMMARY_FIELDS)}
_PACK = msgspec.msgpack.Encoder().encode
_UNPACK = msgspec.msgpack.Decoder().decode
_last: tuple[bytes | None, Any] = (None, None)  # the fields unpacked last: (packed, values)


def _unpacked(packed: bytes) -> Any:
    global _last
    if _last[0] is packed:  # (the packed bytes are held here: never another object at the same address)
        return _last[1]
    values = _UNPACK(packed)
    _last = (packed, values)
    return values


Packed = bytes | tuple[Any, ...]


def pack(meta: Mapping[str, Any], **replaced: Any) -> Packed:
    """`meta`'s METRIC_SUMMARY_FIELDS (those named in `replaced` with the value given there), packed:
    msgpack, or a tuple of them where they do not pack (a lone surrogate, an integer past 64 bits)."""
    values = [replaced[name] if name in replaced else meta.get(name) for name in METRIC_SUMMARY_FIELDS]
    try:
        return _PACK(values)
    except (UnicodeEncodeError, TypeError, OverflowError):
        return tuple(values)


class MetricFields(Mapping[str, Any]):
    """A compilation_metrics record's METRIC_SUMMARY_FIELDS, read as a dict: their values packed, in
    that order (one whose values do not pack, a lone surrogate or an integer past 64 bits, keeps
    them as a tuple)."""

    __slots__ = ("_packed",)

    def __init__(self, meta: Mapping[str, Any], **replaced: Any):
        """The fields of `meta`, those named in `replaced` with the value given there."""
        self._packed: Packed = pack(meta, **replaced)

    @classmethod
    def of(cls, packed: Packed) -> MetricFields:
        """The fields `pack` made (a store keeps those, and makes this view when they are read)."""
        fields = cls.__new__(cls)
        fields._packed = packed
        return fields

    def _values(self) -> Any:
        packed = self._packed
        return _unpacked(packed) if type(packed) is bytes else packed

    def __getitem__(self, name: str) -> Any:
        return self._values()[_PLACES[name]]

    def get(self, name: str, default: Any = None) -> Any:
        place = _PLACES.get(name)
        return default if place is None else self._values()[place]

    def __contains__(self, name: object) -> bool:
        return name in _PLACES

    def __iter__(self) -> Iterator[str]:
        return iter(METRIC_SUMMARY_FIELDS)

    def __len__(self) -> int:
        return len(METRIC_SUMMARY_FIELDS)

    def __eq__(self, other: object) -> bool:
        return dict(self.items()) == other if isinstance(other, Mapping) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(dict(self.items()))

    def __reduce__(self) -> tuple[Any, ...]:
        return (MetricFields, (dict(self.items()),))
