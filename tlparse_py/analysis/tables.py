"""What a compile's records say besides their texts: its input tensors, its symbols and shape guards,
and the compile overhead it paid at run time.

Each kind's declaration says what its records are to these tables (`Kind.tensor`, `Kind.symbol`,
`Kind.runtime`); the compile page and the search index both read the tables built here.
"""

from __future__ import annotations

import json
from typing import Any

from msgspec import Struct, field

from ..model import RecordSummary
from .kinds.registry import declared
from .stacks import Frame, frames_from_json

TENSOR_FLAGS = ("requires_grad", "is_leaf", "is_view", "is_parameter", "is_sparse", "is_inference")


class TensorRow(Struct):
    """An input tensor of the compile, as fake-tensor conversion described it."""

    source: str
    shape: str
    dtype: str
    device: str
    stride: str
    storage: str
    flags: str


class SymbolRow(Struct):
    event: str
    kind: str
    name: str
    value: str
    range: str
    source: str
    where: Frame | None  # the user code line that caused it
    line: int


class CompileTables(Struct):
    tensors: list[TensorRow] = field(default_factory=list)
    symbols: list[SymbolRow] = field(default_factory=list)
    runtime: list[tuple[str, str]] = field(default_factory=list)  # (kind.field, value)


def compile_tables(records: list[RecordSummary], process: int = 0) -> CompileTables:
    """The tables of one compile's records (in log order)."""
    tables = CompileTables()
    parts: dict[str, list[dict[str, Any]]] = {"tensor": [], "source": [], "storage": []}
    for record in records:
        for kind in record.kinds:
            found = declared(kind)
            if found is None:
                continue
            meta = record.kind_meta(kind)
            if found.tensor:
                parts[found.tensor].append(meta)
            if found.symbol is not None:
                tables.symbols.append(_symbol_row(kind, found.symbol(meta), meta, record.line, process))
            if found.runtime:
                tables.runtime += [(f"{kind}.{name}", _text(value)) for name, value in meta.items()
                                   if name.startswith("runtime_") and value not in (None, 0, "", [], {})]
    tables.tensors = _tensor_rows(parts)
    return tables


def _symbol_row(kind: str, symbol: Any, meta: dict[str, Any], line: int, process: int) -> SymbolRow:
    user = frames_from_json(meta.get("user_stack"), process) or []
    return SymbolRow(symbol.event, kind, symbol.name, symbol.value, symbol.range, symbol.source, user[-1] if user else None, line)


def _tensor_rows(parts: dict[str, list[dict[str, Any]]]) -> list[TensorRow]:
    """Tensors joined with their sources (by describer and tensor id) and storages (by storage id)."""
    sources: dict[tuple[Any, Any], list[str]] = {}
    for meta in parts["source"]:
        sources.setdefault((_id(meta.get("describer_id")), _id(meta.get("id"))), []).append(_text(meta.get("source")))
    storages = {(_id(meta.get("describer_id")), _id(meta.get("id"))): meta.get("size") for meta in parts["storage"]}
    rows = []
    for meta in parts["tensor"]:
        key = (_id(meta.get("describer_id")), _id(meta.get("id")))
        rows.append(TensorRow(
            source=", ".join(sources.get(key, [])) or f"tensor {meta.get('id')}",
            shape=_text(meta.get("size")),
            dtype=_text(meta.get("dtype")).removeprefix("torch."),
            device=_text(meta.get("device")).removeprefix("device(type=").removesuffix(")").replace("'", ""),
            stride=_text(meta.get("stride")),
            storage=_text(storages.get((_id(meta.get("describer_id")), _id(meta.get("storage"))))),
            flags=", ".join(name for name in TENSOR_FLAGS if meta.get(name)),
        ))
    return rows


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def _id(value: Any) -> Any:
    """An id from a log as a dict key (logs may hold lists or dicts where ints belong)."""
    return value if isinstance(value, (int, str, float, type(None))) else repr(value)
