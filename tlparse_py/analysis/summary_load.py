"""summary.json back into the same objects (`summary.py`): a report's or a multi-rank landing's,
with the defaults of older schemas; what tlparse-py does not write is refused, naming the field."""

from __future__ import annotations

import sys
from typing import Any, TypeVar

from msgspec import UnsetType, ValidationError, convert

from ..model import CompileId
from .program import ProgramExit
from .summary import CAUSE_FIRST, CAUSE_RECOMPILE, CompileRecord, CompileSummary, RankEntry, RanksSummary, Summary
from .vllm import VllmRun


class SummaryError(ValueError):
    """A summary.json that is not what tlparse-py writes; the message says which field."""


def load_ranks(data: Any) -> RanksSummary:
    """A multi-rank summary.json (parsed) as typed objects; SummaryError if it is not one."""
    loaded = load_summary(data)
    if not isinstance(loaded, RanksSummary):
        raise SummaryError("it holds one report, not ranks")
    return loaded


def load_summary(data: Any) -> Summary | RanksSummary:
    """A report's or a multi-rank landing's summary.json (parsed), as typed objects."""
    if not isinstance(data, dict):
        raise SummaryError("not a JSON object")
    if not str(data.get("schema_version", "")).startswith(("1.", "2.", "3.", "4.")):
        raise SummaryError("not a tlparse-py summary.json (schema 1.x to 3.x)")
    if isinstance(data.get("ranks"), list):
        return _load_ranks(data)
    if isinstance(data.get("compiles"), list):
        return _load_report(data)
    raise SummaryError("it holds neither compiles nor ranks")


def _load_ranks(data: dict[str, Any]) -> RanksSummary:
    entries = []
    for i, entry in enumerate(data["ranks"]):
        where = f"ranks[{i}]"
        entry = _object(entry, where)
        summary = entry.get("summary")
        entries.append(RankEntry(
            _int_or_none(entry.get("rank"), f"{where}.rank"),
            _text(entry.get("folder"), f"{where}.folder"),
            _text_or_none(entry.get("error"), f"{where}.error"),
            _load_report(_object(summary, f"{where}.summary"), f"{where}.summary.") if summary is not None else None,
        ))
    divergences = [_object(d, f"divergences[{i}]") for i, d in enumerate(_list(data.get("divergences", []), "divergences"))]
    notes = [_object(d, f"notes[{i}]") for i, d in enumerate(_list(data.get("notes", []), "notes"))]
    return RanksSummary(entries, divergences, _inputs(data), _generator(data), notes, _program(data))


def _load_report(data: dict[str, Any], where: str = "") -> Summary:
    records = _convert(data.get("compiles"), list[CompileRecord], f"{where}compiles")
    compiles = [_load_compile(record, f"{where}compiles[{i}]") for i, record in enumerate(records)]
    stats = _object(data.get("stats", {}), f"{where}stats")
    export = data.get("export")
    return Summary(
        compiles,
        _inputs(data),
        _text_or_none(data.get("torch_version"), f"{where}torch_version"),
        {str(k): v for k, v in stats.items() if isinstance(v, int)},
        _object(data.get("run", {}), f"{where}run"),
        _object(export, f"{where}export") if export is not None else None,
        _generator(data),
        cache_known=all("cache" in c for c in data["compiles"] if isinstance(c, dict)),
        vllm=_convert(data["vllm"], VllmRun, f"{where}vllm") if data.get("vllm") is not None else None,
        processes=[p for p in data.get("processes") or [] if isinstance(p, dict)],
        program=_program(data, where),
        timeline=[t for t in data["timeline"] if isinstance(t, dict)] if isinstance(data.get("timeline"), list) else None,  # since 4.2
    )


def _load_compile(record: CompileRecord, where: str) -> CompileSummary:
    """A compile of summary.json (validated as a `CompileRecord`), with the defaults of older schemas."""
    label = record.id
    key = CompileId.parse(label)
    if key is None:
        raise SummaryError(f"{where}.id: {label[:60]!r} is not a compile id")
    attempts = [label] if isinstance(record.attempts, UnsetType) else record.attempts
    # schema 1.x wrote no cause: every later compile of a frame was counted a recompile
    cause = (CAUSE_RECOMPILE if key.frame_compile_id else CAUSE_FIRST) if isinstance(record.cause, UnsetType) else record.cause
    return CompileSummary(
        key=key.frame_key(),
        id=sys.intern(label),
        url=record.url,
        generation=record.generation,
        attempts=attempts,
        frame=record.frame,
        user_location=record.user_location,
        status=record.status,
        compile_time_s=record.compile_time_s,
        graph_breaks=[b.graph_break() for b in record.graph_breaks],
        recompile_reasons=record.recompile_reasons,
        cache=record.cache,
        graph_op_count=record.graph_op_count,
        failure=record.failure,
        pages=[(label, record.url)],
        cause=cause,
        restart_reasons=record.restart_reasons,
        library_frame=record.library_frame,
        config_changes=record.config_changes,
        config_unusual=record.config_unusual,
    )


_T = TypeVar("_T")


def _convert(value: Any, kind: type[_T], where: str) -> _T:
    """`value` as `kind` (a type of msgspec's), or SummaryError naming the field that is not what we write."""
    try:
        return convert(value, kind)
    except ValidationError as exc:
        message, _, path = str(exc).partition(" - at `")
        field_ = where + path.rstrip("`").removeprefix("$")
        raise SummaryError(f"{field_}: {message[:1].lower()}{message[1:]}") from None


def _program(data: dict[str, Any], where: str = "") -> ProgramExit | None:
    """The program exit (summary.json 4.1); None when it is null or absent (a report written without `run`)."""
    value = data.get("program")
    return _convert(value, ProgramExit, f"{where}program") if value is not None else None


def _inputs(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [_object(i, "inputs") for i in _list(data.get("inputs", []), "inputs")]


def _generator(data: dict[str, Any]) -> str:
    generator = data.get("generator")
    return str(generator.get("version", "")) if isinstance(generator, dict) else ""


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SummaryError(f"{where}: expected an object, found {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise SummaryError(f"{where}: expected a list, found {type(value).__name__}")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise SummaryError(f"{where}: expected text, found {type(value).__name__}")
    return value


def _text_or_none(value: Any, where: str) -> str | None:
    return None if value is None else _text(value, where)


def _int_or_none(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if type(value) is not int:
        raise SummaryError(f"{where}: expected an integer, found {type(value).__name__}")
    return value
