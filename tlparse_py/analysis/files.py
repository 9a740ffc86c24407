"""A compile id's numbered files (its compile-directory entries), flat in memory however many it has.

A compile id that wrote millions of files (an artifact logged in a loop) would otherwise keep a
directory entry in memory per file. Pages list at most `limits.PAGE_FILES` of them; the rest are
needed only by what lists them all (compile_directory.json, the metrics page), which read them back.

A log of 100,000s of small compiles keeps a few entries each: those in memory are packed
(`_pack`), a short bytes object each rather than a struct and its strings, and unpacked when read.

Beside them: the size of each graph or generated code file (`FileSizes`: the lines and bytes of
the text its record logged, noted as the file is numbered) and the kinds a compile id wrote many
files of (`crowded_kinds`), which the index and the compile pages read.
"""

from __future__ import annotations

import bisect
import itertools
import sys
from array import array
from collections import Counter
from collections.abc import Collection, Iterable, Iterator
from typing import Any, SupportsIndex

import msgspec
from msgspec import Struct

from ..limits import PAGE_FILES
from ..model import Artifact

_TOKENS = itertools.count()
_ENCODE = msgspec.msgpack.Encoder().encode
_DECODE = msgspec.msgpack.Decoder(tuple).decode
_DECODE_SMALL = msgspec.msgpack.Decoder().decode  # a `Files._small`: arrays (entries), strings and bytes (short ones)
_STR_TYPES = frozenset((*range(0xA0, 0xC0), 0xD9, 0xDA, 0xDB))  # the first byte of a msgpack string


def _pack(item: Artifact) -> bytes | Artifact:
    """An entry as a msgpack tuple of its fields, leaving out what its url says: its name when it is
    the url's last part (None), its raw file when it is the url itself (True), its kind when the
    file is named after it (True: `dynamo_output_graph_12.txt`). One that does not encode (a lone
    surrogate in a subgraph name) stays as it is."""
    url = item.url
    name = None if item.name == url.rpartition("/")[2] else item.name
    raw = True if item.raw == url else item.raw
    kind: str | bool = True if item.kind == _named_after(url, item.number) else item.kind
    try:
        return _ENCODE((url, name, item.number, item.suffix, item.readable_url, kind, item.is_link, raw, item.subgraph))
    except (UnicodeEncodeError, TypeError, OverflowError):
        return item


def _unpack(packed: bytes | Artifact) -> Artifact:
    if type(packed) is not bytes:
        return packed  # type: ignore[return-value]
    return _artifact(_DECODE(packed))


def _artifact(fields: tuple[Any, ...]) -> Artifact:
    url, name, number, suffix, readable_url, kind, is_link, raw, subgraph = fields
    return Artifact(url, url.rpartition("/")[2] if name is None else name, number, suffix, readable_url,
                    _named_after(url, number) if kind is True else kind, is_link, url if raw is True else raw, subgraph)


def _short(item: Artifact) -> tuple[str, str | bytes] | None:
    """(its folder with the slash, its file name) for an entry its url says all of: the name is the
    url's last part, the file is named after its kind and number (`dynamo_output_graph_12.txt`), it
    has no suffix, readable page, link nor subgraph, and its raw file is the url itself (the name a
    str) or none (bytes). None for any other (`_pack` keeps its every field)."""
    url, raw = item.url, item.raw
    folder, slash, name = url.rpartition("/")
    if (not slash or item.name != name or item.suffix or item.readable_url is not None or item.is_link or item.subgraph is not None
            or type(item.number) is not int or not (raw is None or raw == url) or not item.kind or item.kind != _named_after(url, item.number)):
        return None
    return folder + "/", name if raw is not None else name.encode()


def _from_short(folder: str, name: str | bytes) -> Artifact:
    """The entry `_short` gave (folder, name)."""
    text = name if type(name) is str else name.decode()  # type: ignore[union-attr]
    url = folder + text
    number = int(_stem(text).rpartition("_")[2])  # named after its kind and number: `<kind>_<number>`
    return Artifact(url, text, number, "", None, _named_after(url, number), False, url if type(name) is str else None, None)


def _small_folder(small: bytes) -> str | None:
    """The folder a `Files._small` keeps first, for its short entries (None: it keeps none: its
    first entry is no short one, and so none is). Read from the msgpack string's own header."""
    if len(small) < 2 or small[1] not in _STR_TYPES:
        return None
    kind = small[1]
    if kind < 0xD9:
        start, size = 2, kind & 0x1F
    else:
        width = 1 << (kind - 0xD9)  # str8, str16, str32
        start, size = 2 + width, int.from_bytes(small[2 : 2 + width], "big")
    return small[start : start + size].decode()


def _small_entries(small: bytes) -> Iterator[Artifact]:
    elements = _DECODE_SMALL(small)
    folder = elements[0] if elements and type(elements[0]) is str else None
    for element in elements[1:] if folder is not None else elements:
        yield _artifact(element) if type(element) is list else _from_short(folder, element)  # type: ignore[arg-type]


def _stem(name: str) -> str:
    """A file name without its last extension: `dynamo_output_graph_12.txt` → `dynamo_output_graph_12`."""
    stem, dot, _ = name.rpartition(".")
    return stem if dot else name


def _named_after(url: str, number: int) -> str:
    """What a numbered file is named after (`paths.numbered`): `a/dynamo_output_graph_12.txt` → `dynamo_output_graph`
    ("" when it is not numbered so)."""
    stem = _stem(url.rpartition("/")[2])
    tail = f"_{number}"
    return stem[: -len(tail)] if stem.endswith(tail) else ""


class FileSizes:
    """The size of each graph or generated code file: the lines and bytes of the text its record
    logged (for a page, the text it shows, not its HTML), by the file's number.

    Three numbers a sized file, in arrays kept in number order (numbers grow as the log is read):
    24 bytes a graph, nothing for the other files, however many a compile id has."""

    __slots__ = ("numbers", "lines", "bytes")

    def __init__(self) -> None:
        self.numbers = array("q")
        self.lines = array("q")
        self.bytes = array("q")

    def note(self, number: int, payload: bytes) -> None:
        """File `number` holds or shows `payload`: its lines (a last line without a newline counts) and bytes."""
        at = len(self.numbers)
        if at and self.numbers[-1] >= number:  # never out of order when read from one log; kept sorted all the same
            at = bisect.bisect_left(self.numbers, number)
            if at < len(self.numbers) and self.numbers[at] == number:
                self.lines[at], self.bytes[at] = text_lines(payload), len(payload)
                return
        self.numbers.insert(at, number)
        self.lines.insert(at, text_lines(payload))
        self.bytes.insert(at, len(payload))

    def of(self, number: int) -> tuple[int, int] | None:
        """(lines, bytes) of file `number`; None when it is no graph or code (or had no text)."""
        at = bisect.bisect_left(self.numbers, number)
        if at < len(self.numbers) and self.numbers[at] == number:
            return self.lines[at], self.bytes[at]
        return None


def text_lines(payload: bytes) -> int:
    """How many lines a text has, as an editor counts them: its newlines, plus a last line without one."""
    return payload.count(b"\n") + (1 if payload and not payload.endswith(b"\n") else 0)


class CrowdedKind(Struct, frozen=True):
    """A record kind a compile id wrote more than a bound of files of (`crowded_kinds`)."""

    kind: str
    files: int  # every file of the kind (compile_directory.json lists them all)
    listed: int  # those among the compile id's first `head` files (what its page lists)


def crowded_kinds(files: Collection[Artifact], most: int, head: int) -> list[CrowdedKind]:
    """The kinds (`Artifact.kind`, the record kind that made each file) of which there are more
    than `most` files, in the order of their first file, and how many of them lie among the first
    `head`. A compile id with no more than `most` files has none, at the cost of its length."""
    if len(files) <= most:
        return []
    total: Counter[str] = Counter()
    listed: Counter[str] = Counter()
    for place, artifact in enumerate(files):
        total[artifact.kind] += 1
        if place < head:
            listed[artifact.kind] += 1
    return [CrowdedKind(kind, count, listed[kind]) for kind, count in total.items() if count > most]


class _Spilled:
    """The entries past the first `Files.HEAD`: full batches in the fact spool, the last one here."""

    __slots__ = ("spool", "token", "batches", "pending")

    def __init__(self, spool: Any):
        self.spool = spool
        self.token = next(_TOKENS)
        self.batches = 0
        self.pending: list[Artifact] = []

    def batch_key(self, index: int) -> tuple[str, int, int]:
        return ("files", self.token, index)


class Files(list[Artifact]):
    """A list of a compile id's directory entries, in the order they were numbered.

    Up to SMALL entries (a compile id of a small compile has three) are one msgpack array in one
    bytes object (`_small`; the list itself empty): a bytes object and a list slot an entry cost
    more than the entry. An entry its url says all of (`_short`) is its file name alone there, after
    its folder, kept once as the array's first element (163 bytes to 105 for a small compile's three);
    the others are packed (`_pack`). Past SMALL it is the list itself, of packed
    entries, up to HEAD entries (what every page shows, `limits.PAGE_FILES`); later entries are
    pickled to the analysis' fact spool (`spools.FactSpool`) in batches of BATCH, so memory stays
    flat however many there are. Iterating, `len`, indexing, slicing and comparing see them all,
    as Artifacts (a new one at each read: entries are not changed once listed); a slice within the
    first HEAD reads nothing back. It pickles (and copies) as a plain list.
    """

    __slots__ = ("_spill", "_small")
    HEAD = PAGE_FILES
    BATCH = 1000
    SMALL = 15  # the most elements of `_small` (its folder one of them): a msgpack fixarray, its header one byte (0x90 | count)

    def __init__(self, spool: Any, items: Iterable[Artifact] = ()):
        super().__init__()
        self._spill: Any = spool  # the fact spool until the first entry past HEAD, then a _Spilled
        self._small = b""
        for item in items:
            self.append(item)

    def _head_len(self) -> int:
        small = self._small
        if not small:
            return list.__len__(self)
        return (small[0] & 0x0F) - (small[1] in _STR_TYPES)  # less its folder, if it keeps one

    def append(self, item: Artifact) -> None:
        if self._head_len() < self.HEAD:
            if not list.__len__(self) and self._append_small(item):
                return
            small = self._small
            if small:  # past SMALL, or an entry that does not pack: the list holds them from here on
                list.extend(self, [_pack(entry) for entry in _small_entries(small)])  # type: ignore[misc]
                self._small = b""
            list.append(self, _pack(item))  # type: ignore[misc]
            return
        spill = self._spill
        if not isinstance(spill, _Spilled):
            spill = self._spill = _Spilled(spill)
        spill.pending.append(item)
        if len(spill.pending) >= self.BATCH:
            spill.spool.add(spill.batch_key(spill.batches), spill.pending)
            spill.batches += 1
            spill.pending = []

    def _append_small(self, item: Artifact) -> bool:
        """`item` put in `_small`, as a short entry where its folder is the one kept (the first entry's,
        kept first), else packed; False where it does not fit (SMALL elements) or does not pack."""
        small = self._small
        count = small[0] & 0x0F if small else 0
        if count >= self.SMALL:
            return False
        short = _short(item)
        if short is not None and not small:
            self._small = bytes((0x92,)) + _ENCODE(short[0]) + _ENCODE(short[1])
            return True
        if short is not None and short[0] == _small_folder(small):
            element = _ENCODE(short[1])
        else:
            packed = _pack(item)
            if type(packed) is not bytes:
                return False
            element = packed
        self._small = bytes((0x90 | (count + 1),)) + small[1:] + element
        return True

    def extend(self, items: Iterable[Artifact]) -> None:
        for item in items:
            self.append(item)

    def __iadd__(self, items: Iterable[Artifact]) -> Files:  # type: ignore[override]
        self.extend(items)
        return self

    def spilled(self) -> int:
        """How many entries lie past the first HEAD."""
        spill = self._spill
        return spill.batches * self.BATCH + len(spill.pending) if isinstance(spill, _Spilled) else 0

    def __len__(self) -> int:
        return self._head_len() + self.spilled()

    def __bool__(self) -> bool:
        return self._head_len() > 0 or self.spilled() > 0

    def copy(self) -> list[Artifact]:
        return list(self)

    def _head(self) -> Iterator[Artifact]:
        small = self._small
        if small:
            return _small_entries(small)
        return map(_unpack, list.__iter__(self))

    def __iter__(self) -> Iterator[Artifact]:
        yield from self._head()
        spill = self._spill
        if isinstance(spill, _Spilled):
            batches, pending = spill.batches, list(spill.pending)
            for index in range(batches):
                (batch,) = spill.spool.get(spill.batch_key(index))
                yield from batch
            yield from pending

    def __reversed__(self) -> Iterator[Artifact]:
        return reversed(list(self))

    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        if self._small:  # SMALL entries at most in the head
            return list(self._head() if not self.spilled() else self)[index]
        head = list.__len__(self)
        if isinstance(index, slice):
            start, stop, step = index.start or 0, index.stop, index.step or 1
            if not self.spilled() or (stop is not None and 0 <= start and 0 <= stop <= head and step > 0):
                return [_unpack(packed) for packed in list.__getitem__(self, index)]
        elif -head <= index.__index__() < head and (not self.spilled() or index.__index__() >= 0):
            return _unpack(list.__getitem__(self, index))
        return list(self)[index]

    def __contains__(self, item: object) -> bool:
        return any(entry == item for entry in self)

    def index(self, item: Artifact, start: SupportsIndex = 0, stop: SupportsIndex = sys.maxsize) -> int:
        return list(self).index(item, start, stop)

    def count(self, item: Artifact) -> int:
        return list(self).count(item)

    def __add__(self, other: list[Artifact]) -> list[Artifact]:  # type: ignore[override]
        return list(self) + list(other)

    def __radd__(self, other: list[Artifact]) -> list[Artifact]:
        return list(other) + list(self)

    def __eq__(self, other: object) -> bool:
        return list(self) == other

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None

    def __repr__(self) -> str:
        return repr(list(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))

    def __copy__(self) -> list[Artifact]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Artifact]:
        import copy

        return copy.deepcopy(list(self), memo)
