"""Sequences kept in a scratch file: a diff of 10^6 compiles reads each side's compiles and makes a
row per compile, and neither needs to be in memory whole.

A spool holds its items encoded one after another in a scratch file, and in memory only where each
ends (8 bytes an item). It is read like a list (len, index, slice, iteration, equality with a list
of the same items); reading an item decodes it again, so an item read back is a new, equal object,
and a spool is never changed except by appending. The first MB stays in memory and the rest goes to
an unnamed temporary file, which the system removes however the process ends.

- `SpooledCompiles`: a summary's compiles (msgpack, the typed `CompileSummary`);
- `SpooledRows`: JSON-able rows of a comparison (orjson; a row read back is a plain dict);
- `SpooledFrames`: a comparison's frame rows (msgpack; a row read back is its `compared.FrameRow`).

Keyed, for the reading pass: `FactSpool` keeps facts under a key (what only one compile's pages
show) and reads them back one key at a time; `SpanTotals` sums a frame's chromium span times from it.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar, overload

import msgspec
import orjson

from .compared import FrameRow
from .summary import CompileSummary

IN_MEMORY = 1 << 20  # bytes a spool keeps in memory before it goes to disk
READ_CHUNK = 1 << 18  # bytes read at a time when a spool is iterated (each chunk decoded whole: a 1 MB chunk of small compiles held 3 MB of objects)

T = TypeVar("T")


class Spool(Sequence[T], Generic[T]):
    """Items appended to a scratch file; read like a list."""

    KEEPS_LAST = False  # the item read last is handed out again, not decoded again (items no caller changes)

    def __init__(self, encode: Callable[[T], bytes], decode: Callable[[bytes], T], items: Iterable[T] = (),
                 decode_many: Callable[[bytes], list[T]] | None = None) -> None:
        self._encode = encode
        self._decode = decode
        # items of a msgpack spool, each encoded on its own, are a msgpack array once given its header:
        # a chunk is decoded in one call, not one an item (the same objects: msgspec decodes both alike)
        self._decode_many = decode_many
        # what was computed over all the items (`summary.once`: totals asked by several pages); emptied when one is appended
        self.memo: dict[tuple[str, int], Any] = {}
        self._file = tempfile.SpooledTemporaryFile(max_size=IN_MEMORY, mode="w+b", prefix=".tlparse-py-spool-")
        self._ends = array("Q")  # where each item ends in the file
        self._writing = True  # the file's position is its end
        self._last: tuple[int, Any] = (-1, None)  # the item read last and its index, where `KEEPS_LAST`
        for item in items:
            self.append(item)

    @property
    def _end(self) -> int:
        return self._ends[-1] if self._ends else 0

    def append(self, item: T) -> None:
        self.memo.clear()
        data = self._encode(item)
        if not self._writing:
            self._file.seek(self._end)
            self._writing = True
        self._file.write(data)
        self._ends.append(self._end + len(data))

    def extend(self, items: Iterable[T]) -> None:
        for item in items:
            self.append(item)

    def _read(self, start: int, end: int) -> bytes:
        if getattr(self._file, "_rolled", False):
            # on disk: read at the offset (`os.pread`), never through the file's position, which a
            # forked page builder shares with its parent while both read (in memory, each has its own)
            self.settle()
            return os.pread(self._file.fileno(), end - start, start)
        self._writing = False
        self._file.seek(start)
        return self._file.read(end - start)

    def settle(self) -> None:
        """Write through what is buffered: a process forked from here on only reads the spool (a
        buffer both processes held would be written twice, at the file position they share)."""
        if self._writing:
            self._file.flush()
            self._writing = False

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("spool index out of range")
        if self._last[0] == index:
            return self._last[1]  # type: ignore[no-any-return]
        start = self._ends[index - 1] if index else 0
        item = self._decode(self._read(start, self._ends[index]))
        if self.KEEPS_LAST:
            self._last = (index, item)
        return item

    def __iter__(self) -> Iterator[T]:
        """The items in order, read a chunk of about READ_CHUNK bytes at a time (not one read an item)."""
        count, position = len(self), 0
        while position < count:
            start = self._ends[position - 1] if position else 0
            last = position
            while last + 1 < count and self._ends[last + 1] - start <= READ_CHUNK:
                last += 1
            chunk = self._read(start, self._ends[last])
            if self._decode_many is not None:
                yield from self._decode_many(_array_header(last + 1 - position) + chunk)
            else:
                for i in range(position, last + 1):
                    begin = (self._ends[i - 1] if i else 0) - start
                    yield self._decode(chunk[begin : self._ends[i] - start])
            position = last + 1

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (list, tuple, Spool, Reading)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]  # a spool grows, like a list

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {len(self)} items>"

    def __reduce__(self) -> tuple[Any, ...]:  # a copy (an analysis pickled) travels as a list: a file does not
        return list, (list(self),)

    def close(self) -> None:
        self._file.close()


class Reading(Sequence[T]):
    """A spool as one asker reads it (a report's summary): its items, and what was computed over
    them (`memo`, `summary.once`), which goes when the asker lets it go, not with the spool."""

    def __init__(self, spool: Spool[T]) -> None:
        self.spool = spool
        self.memo: dict[tuple[str, int], Any] = {}

    def __len__(self) -> int:
        return len(self.spool)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        return self.spool[index]

    def __iter__(self) -> Iterator[T]:
        return iter(self.spool)

    def __eq__(self, other: object) -> bool:
        return self.spool.__eq__(other.spool if isinstance(other, Reading) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<reading of {self.spool!r}>"


def _array_header(count: int) -> bytes:
    """msgpack's header of an array of `count` items."""
    if count < 16:
        return bytes([0x90 | count])
    if count < 1 << 16:
        return b"\xdc" + count.to_bytes(2, "big")
    return b"\xdd" + count.to_bytes(4, "big")


_COMPILE_ENCODER = msgspec.msgpack.Encoder()
_COMPILE_DECODER = msgspec.msgpack.Decoder(CompileSummary)
_COMPILES_DECODER = msgspec.msgpack.Decoder(list[CompileSummary])


class SpooledCompiles(Spool[CompileSummary]):
    """A summary's compiles, in a scratch file: a report's summary.json of 10^6 compiles loaded for a
    diff, an analysis' compiles built straight into it. `marked`: what each compile read back is
    given that was only known once all were written (their unusual settings, `compiles.mark_unusual`)."""

    # a page asks for its compile five times or so (its status, times, config...): decoded once. A
    # list of compiles (below SPOOLED_FROM) hands out the same objects too: no caller changes them
    KEEPS_LAST = True

    def __init__(self, items: Iterable[CompileSummary] = ()) -> None:
        self._marked: Callable[[list[CompileSummary]], None] | None = None
        super().__init__(_COMPILE_ENCODER.encode, self._decode_one, items, self._decode_chunk)

    @property
    def marked(self) -> Callable[[list[CompileSummary]], None] | None:
        return self._marked

    @marked.setter
    def marked(self, mark: Callable[[list[CompileSummary]], None] | None) -> None:
        self._marked = mark
        self._last = (-1, None)  # read before it was marked

    def _decode_one(self, data: bytes) -> CompileSummary:
        return self._decode_chunk_of([_COMPILE_DECODER.decode(data)])[0]

    def _decode_chunk(self, data: bytes) -> list[CompileSummary]:
        return self._decode_chunk_of(_COMPILES_DECODER.decode(data))

    def _decode_chunk_of(self, compiles: list[CompileSummary]) -> list[CompileSummary]:
        if self.marked is not None:
            self.marked(compiles)
        return compiles


class SpooledRows(Spool[dict[str, Any]]):
    """Rows of a comparison (JSON-able dicts), in a scratch file: a diff's row per frame of 10^6 compiles."""

    def __init__(self, items: Iterable[dict[str, Any]] = ()) -> None:
        super().__init__(orjson.dumps, orjson.loads, items)


def typed_spool(kind: type[T], items: Iterable[T] = ()) -> Spool[T]:
    """A spool of msgspec Structs of one type (`kind`), each read back as its own type."""
    one, many = msgspec.msgpack.Decoder(kind), msgspec.msgpack.Decoder(list[kind])  # type: ignore[valid-type]
    return Spool(_COMPILE_ENCODER.encode, one.decode, items, many.decode)


_FRAME_DECODER = msgspec.msgpack.Decoder(FrameRow)
_FRAMES_DECODER = msgspec.msgpack.Decoder(list[FrameRow])


class SpooledFrames(Spool[FrameRow]):
    """A comparison's frame rows (typed), in a scratch file: a diff's row per frame of 10^6 compiles."""

    def __init__(self, items: Iterable[FrameRow] = ()) -> None:
        super().__init__(_COMPILE_ENCODER.encode, _FRAME_DECODER.decode, items, _FRAMES_DECODER.decode)


def as_json(value: Any) -> Any:
    """orjson's `default` for a value holding spools and Structs: a spool as the list it reads as, a
    Struct as the dict of its fields (`msgspec.to_builtins`, its field names as JSON names them)."""
    if isinstance(value, Spool):
        return list(value)
    if isinstance(value, msgspec.Struct):
        return msgspec.to_builtins(value, enc_hook=as_json)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def batches(items: Sequence[T], size: int) -> Iterator[list[T]]:
    """The items, `size` at a time (a spool read sequentially, a list sliced)."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


class FactSpool:
    """Facts appended under a key to an unnamed temporary file, read back one key at a time.

    What only one compile's pages show (its specialisations, its chromium span times) would
    otherwise grow with the log. Values are pickled: they come back exactly as they went in (NaN,
    huge integers, tuples). Writes and reads go through `os.pwrite`/`os.pread` at offsets kept here,
    so a forked page builder shares the file without sharing a file position, and a buffer flushed
    twice (once by each process) writes the same bytes to the same place. The file has no name: the
    system frees it when the process ends, however it ends.
    """

    FLUSH_BYTES = 1 << 16

    def __init__(self) -> None:
        self._file: Any = None  # opened on the first fact
        self._where: dict[Any, array[int]] = {}  # key → (offset, size) pairs, flattened
        self._buffer = bytearray()  # pickled facts not yet written, from offset `_flushed`
        self._flushed = 0
        self._last: tuple[Any, list[Any]] | None = None  # `get_shared`'s last key and its values

    def add(self, key: Any, value: Any) -> None:
        self._last = None
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix=".tlparse-py-facts-")
        data = pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
        where = self._where.get(key)
        if where is None:
            where = self._where[key] = array("Q")
        where.extend((self._flushed + len(self._buffer), len(data)))
        self._buffer += data
        if len(self._buffer) >= self.FLUSH_BYTES:
            self._flush()

    def get(self, key: Any) -> list[Any]:
        """The values added under `key`, in the order they were added."""
        where = self._where.get(key)
        if not where:
            return []
        self._flush()
        fd = self._file.fileno()
        start, end = where[0], where[-2] + where[-1]  # offsets grow in the order values were added
        if end - start <= 2 * sum(where[1::2]) + self.FLUSH_BYTES:
            # a key's facts mostly lie close together (a compile's events come in runs): one read
            # for them all rather than one per value, reading at most about twice what they hold
            view = memoryview(os.pread(fd, end - start, start))
            return [pickle.loads(view[where[i] - start : where[i] - start + where[i + 1]]) for i in range(0, len(where), 2)]
        return [pickle.loads(os.pread(fd, where[i + 1], where[i])) for i in range(0, len(where), 2)]

    def get_shared(self, key: Any) -> list[Any]:
        """`get`, the list shared with the next caller asking the same key, read once for both: for
        values nobody changes (tuples of numbers and strings). A compile's span facts are asked for
        two or three times in a row, by its pages and the pictures."""
        if self._last is None or self._last[0] != key:
            self._last = (key, self.get(key))
        return self._last[1]

    def _flush(self) -> None:
        view = memoryview(self._buffer)
        offset = self._flushed
        while view:
            written = os.pwrite(self._file.fileno(), view, offset)
            view, offset = view[written:], offset + written
        view.release()
        self._flushed = offset
        self._buffer.clear()

    def close(self) -> None:
        """Let the scratch file go now (the system would, once nothing holds it)."""
        if self._file is not None:
            self._file.close()
            self._file = None
            self._where.clear()
            self._buffer.clear()
            self._last = None

    def __getstate__(self) -> dict[str, Any]:  # a copied analysis keeps no facts (a file does not travel)
        return {"facts": "left behind"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]


class SpanTotals:
    """Chromium B/E span time of a frame compile, summed from the fact spool in log order when asked.

    `by_path=False`: `get(frame)` → span name → total microseconds (`Store.phase_times`);
    `by_path=True`: `get((frame, generation))` → span path, outermost first → total (`Store.phase_trees`).
    """

    def __init__(self, spool: FactSpool, by_path: bool):
        self.spool = spool
        self.by_path = by_path

    def get(self, key: Any, default: Any = None) -> Any:
        frame, generation = key if self.by_path else (key, None)
        totals: dict[Any, float] = {}
        for span_generation, name, path, duration in self.spool.get_shared(("span", frame)):
            if self.by_path and span_generation != generation:
                continue
            item = path if self.by_path else name
            totals[item] = totals.get(item, 0.0) + duration
        return totals if totals else default
