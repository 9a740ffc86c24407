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

CREATED = "created"  # the event of a `create_symbol` record in the symbols table
TENSOR_FLAGS = ("requires_grad", "is_leaf", "is_view", "is_parameter", "is_sparse", "is_inference")


class TensorRow(Struct):
    """An input tensor of the compile, as fake-tensor conversion described it, with the symbols the
    compile gave its dynamic dimensions (`[s77, 3]`, not the `[4, 3]` of the input it was traced with)."""

    source: str
    shape: str
    dtype: str
    device: str
    stride: str
    storage: str
    flags: str
    example: str = ""  # the sizes of the input it was traced with, when a dimension is a symbol ("" when none is)


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
    symbols: dict[str, str] = {}  # a symbol's source (`L['x'].size()[0]`) → the symbol (`s77`)
    for record in records:
        for kind in record.kinds:
            found = declared(kind)
            if found is None:
                continue
            meta = record.kind_meta(kind)
            if found.tensor:
                parts[found.tensor].append(meta)
            if found.symbol is not None:
                row = _symbol_row(kind, found.symbol(meta), meta, record.line, process)
                tables.symbols.append(row)
                if row.event == CREATED and row.source and row.name:
                    symbols.setdefault(row.source, row.name)
            if found.runtime:
                tables.runtime += [(f"{kind}.{name}", _text(value)) for name, value in meta.items()
                                   if name.startswith("runtime_") and value not in (None, 0, "", [], {})]
    tables.tensors = _tensor_rows(parts, symbols)
    return tables


def _symbol_row(kind: str, symbol: Any, meta: dict[str, Any], line: int, process: int) -> SymbolRow:
    user = frames_from_json(meta.get("user_stack"), process) or []
    return SymbolRow(symbol.event, kind, symbol.name, symbol.value, symbol.range, symbol.source, user[-1] if user else None, line)


def _tensor_rows(parts: dict[str, list[dict[str, Any]]], symbols: dict[str, str]) -> list[TensorRow]:
    """Tensors joined with their sources (by describer and tensor id) and storages (by storage id);
    a dimension the compile made a symbol of (`create_symbol` for `L['x'].size()[0]`) shows the symbol."""
    sources: dict[tuple[Any, Any], list[str]] = {}
    for meta in parts["source"]:
        sources.setdefault((_id(meta.get("describer_id")), _id(meta.get("id"))), []).append(_text(meta.get("source")))
    storages = {(_id(meta.get("describer_id")), _id(meta.get("id"))): meta.get("size") for meta in parts["storage"]}
    rows = []
    for meta in parts["tensor"]:
        key = (_id(meta.get("describer_id")), _id(meta.get("id")))
        names = sources.get(key, [])
        shape = _symbolic(meta.get("size"), names, "size", symbols)
        rows.append(TensorRow(
            source=", ".join(names) or f"tensor {meta.get('id')}",
            shape=shape,
            dtype=_text(meta.get("dtype")).removeprefix("torch."),
            device=_text(meta.get("device")).removeprefix("device(type=").removesuffix(")").replace("'", ""),
            stride=_symbolic(meta.get("stride"), names, "stride", symbols),
            storage=_text(storages.get((_id(meta.get("describer_id")), _id(meta.get("storage"))))),
            flags=", ".join([name for name in TENSOR_FLAGS if meta.get(name)] + _marked_dynamic(meta)),
            example=_text(meta.get("size")) if shape != _text(meta.get("size")) else "",
        ))
    return rows


def _symbolic(values: Any, sources: list[str], method: str, symbols: dict[str, str]) -> str:
    """A tensor's sizes (or strides) with the symbol the compile created for a dimension in its place:
    `[s77, 3]`. As logged when no dimension has one, or when they are not a list."""
    if not isinstance(values, list) or not symbols:
        return _text(values)
    dims = [_symbol_of(sources, f"{method}()[{index}]", symbols) for index in range(len(values))]
    if not any(dims):
        return _text(values)
    return "[" + ", ".join(symbol or _text(value) for symbol, value in zip(dims, values, strict=True)) + "]"


def _symbol_of(sources: list[str], dimension: str, symbols: dict[str, str]) -> str | None:
    """The symbol created for `<source>.<dimension>` (`L['x'].size()[0]`) of any of a tensor's sources."""
    return next((symbols[f"{source}.{dimension}"] for source in sources if f"{source}.{dimension}" in symbols), None)


def _marked_dynamic(meta: dict[str, Any]) -> list[str]:
    """`marked dynamic: 0`: the dimensions the program marked dynamic (torch._dynamo.mark_dynamic)."""
    indices = meta.get("dynamo_dynamic_indices")
    if not isinstance(indices, list) or not indices:
        return []
    return [f"marked dynamic: {', '.join(_text(i) for i in indices)}"]


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if type(value) is list and all(type(v) is int for v in value):
        # sizes and strides, a few a tensor: json.dumps' own text, without its encoder's set-up each time
        return "[" + ", ".join(map(str, value)) + "]"
    return json.dumps(value)


def _id(value: Any) -> Any:
    """An id from a log as a dict key (logs may hold lists or dicts where ints belong)."""
    return value if isinstance(value, (int, str, float, type(None))) else repr(value)
