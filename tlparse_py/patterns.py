"""Regular expressions compiled when first used, not when their module is imported.

Compiling a pattern costs about a tenth of a millisecond (Python's `re` compiles in Python), and a
report imports modules holding some sixty of them, most of which a small log never needs: compiled
up front they were a few milliseconds of every run. `lazy(pattern)` stands for `re.compile(pattern)`
in a module's globals: the pattern is compiled by the first call of one of its methods, which are
then the compiled pattern's own (no indirection is left on a hot path). Pass it only where a method
of it is called (`lazy(...).search(text)`), not to the `re` module's functions.
"""

from __future__ import annotations

import re
from typing import Any, AnyStr

_ATTRIBUTES = ("match", "fullmatch", "search", "sub", "subn", "split", "findall", "finditer", "scanner",
               "pattern", "flags", "groups", "groupindex")


class _LazyPattern:
    def __init__(self, pattern: str | bytes, flags: int) -> None:
        self._source: tuple[Any, int] = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        compiled = re.compile(*self._source)
        for attribute in _ATTRIBUTES:
            self.__dict__[attribute] = getattr(compiled, attribute)
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy({self._source[0]!r})"


def lazy(pattern: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """`re.compile(pattern, flags)`, done when the pattern is first used."""
    return _LazyPattern(pattern, flags)  # type: ignore[return-value]
