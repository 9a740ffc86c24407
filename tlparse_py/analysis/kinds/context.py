"""What a parser may use: typed field access that counts bad fields, and the analysis it adds to.

The pipeline makes one `ParseContext` per log and updates `current_kind` and `number` as it goes;
parsers never see the pipeline, the writer or the output folder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...model import HINTS, Record

if TYPE_CHECKING:
    from ..store import Store


class ParseContext:
    def __init__(self, analysis: Store, label: str, *, export: bool = False, plain_text: bool = False, fingerprints: bool = False):
        self.analysis = analysis
        self.label = label  # the log's file name, for diagnostics
        self.export = export  # -e: only exported programs and guard pages are numbered files
        self.plain_text = plain_text  # -p: output code as .txt
        self.fingerprints = fingerprints  # note compile fingerprints (Options.fingerprints): multi-rank reports only
        self.current_kind: str = ""
        self.number: int = -1  # the global number the latest output got (its place in log order)
        self._reported: tuple[int, str] | None = None
        self.on_chromium_event: Callable[[Record], None] | None = None  # set by the pipeline

    def problem(self, record: Record, counter: str | None, problem: str, detail: str = "") -> None:
        if counter:
            self.analysis.stats.add(counter)
        self.analysis.diagnostics.add(self.label, record.lineno, problem, detail, HINTS.get(counter or "", ""))

    def dict_field(self, record: Record, kind: str) -> dict[str, Any]:
        """The record's metadata object; anything else counts as a field-type problem and reads as {}."""
        value = record.envelope.get(kind)
        if isinstance(value, dict):
            return value
        if value is not None and self._reported != (id(record), kind):  # once per record and kind
            self._reported = (id(record), kind)
            self.problem(record, "fail_field_type", f"`{kind}` metadata is not an object", repr(value)[:80])
        return {}

    def text_field(self, record: Record, kind: str, name: str) -> str | None:
        value = self.dict_field(record, kind).get(name)
        if value is None or isinstance(value, str):
            return value
        self.problem(record, "fail_field_type", f"`{kind}.{name}` is not a string", repr(value)[:80])
        return str(value)

    def resolve_filename(self, filename: int | tuple[int, int] | str | None) -> str:
        return self.analysis.resolve_filename(filename)
