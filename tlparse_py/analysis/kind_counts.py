"""Each compile id's records counted by kind (`Store.kinds`), one Counter shared by the ids that
logged the same.

A run of many small compiles logs the same few kinds, as many times, for each compile id: 40,000
Counters of the same five kinds held 13 MB. An id's counts are a shared Counter that is never
changed: each record replaces it by the one that follows it for the record's kind (`after`), made
once for the whole run. An id past SHARED_RECORDS records, or any id once SHARED_COUNTS shared
Counters exist, gets a Counter of its own, counted in place: a compile of thousands of records
would otherwise leave a shared Counter behind for each of them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

SHARED_RECORDS = 64  # records of an id up to which its counts may be shared
SHARED_COUNTS = 4096  # shared Counters in all, at most


class KindCounts:
    """Counts records by kind into `counts` (compile id → Counter), sharing equal Counters."""

    def __init__(self) -> None:
        self.empty: Counter[str] = Counter()
        self.after: dict[tuple[int, str], Counter[str]] = {}  # (id of a shared Counter, kind) → the one after it
        self.shared = {id(self.empty)}  # the ids of the shared Counters (alive in `after`: ids stay theirs)

    def add(self, counts: dict[Any, Counter[str]], key: Any, names: list[str]) -> None:
        """Count one record of kinds `names` to compile id `key`."""
        current = counts.get(key, self.empty)
        for name in names:
            if id(current) not in self.shared:  # its own: counted in place
                current[name] += 1
                continue
            following = self.after.get((id(current), name))
            if following is None:
                following = Counter(current)
                following[name] += 1
                if len(self.after) < SHARED_COUNTS and following.total() <= SHARED_RECORDS:
                    self.after[(id(current), name)] = following
                    self.shared.add(id(following))
            current = following
        counts[key] = current
