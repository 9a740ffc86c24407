"""How numbers are written for people: seconds, the same way on every page, table and message."""

from __future__ import annotations

from typing import Any


def format_seconds(value: Any) -> str:
    """`1.23 s`, `120 s`, `4.5 ms`; a dash for a value that is not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "—"
    if value >= 100:
        return f"{value:.0f} s"
    if value >= 1:
        return f"{value:.2f} s"
    return f"{value * 1000:.1f} ms"
