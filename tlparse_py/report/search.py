"""The report's search index: what the search box of every page looks through.

Built once the pages are written, from the compile-page outlines the pages were built from
(`views.compile.compile_outline`: anchors, headings and inline decisions are made there, once; each
page job takes its `PagePieces` from the outline it made, gathered in `IndexParts`), the payload
texts read back through the payload store; pure: `build_index` hands out the files as it makes
them (a shard once full: the index is never held whole), the pipeline writes them. Pages load it from script files, not JSON (a `file://` page may not fetch):

- `static/search-index.js`, the manifest, read by every page: which shards exist, how many
  entries, and a note when the index was cut short. `templates/static/search-index.js` is the
  default (no index, the search box stays hidden) that landing and diff pages keep; a report's
  pipeline writes its own over it.
- `static/search/index-<n>.js`, the shards, loaded only once the search box is used:
  `window.TLPARSE_SEARCH = window.TLPARSE_SEARCH || []; TLPARSE_SEARCH.push([n, [entry, ...]]);`

An entry is `[kind, title, url, text]`, optionally followed by a line prefix and a second link:
`[kind, title, url, text, prefix, [label, url, prefix]]`. `url` is root-relative and may carry an
anchor; with a prefix, a match on line n of `text` links to `<url's page>#<prefix><n>` (compile
pages: `#s5-L12`; code pages: `#L12`).

What goes in, in this order (so that when the cap is reached the small, telling things are in):
every page's compile id, frame, user location, status, failure, graph breaks, recompile reasons,
symbols and file names; then the texts of each compile-page section in the order its declaration
gives (`kinds.PageSection.priority`: graph breaks, recompiles and guards; then the graphs and
generated code; then the other texts), each called what its declaration calls it. The index is capped (`total_bytes`, 20 MB by default):
past it, texts are left out and the manifest's note says how many are covered. A text longer than
`text_chars` is indexed in part (its first lines).
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, Any

import msgspec
from msgspec import Struct, field
import orjson

from ..analysis import kinds
from ..analysis.compiles import Analysis, vllm_run
from ..analysis.spools import FactSpool, Spool, typed_spool
from ..analysis.summary import STATUS_LABELS
from ..limits import PAGE_FILES
from ..model import CompileId, RecordSummary
from .views.compile import CompileOutline, PageRef, compile_outline, page_refs
from .views.sections import PageBuilder

MANIFEST = "static/search-index.js"
SHARD = "static/search/index-{}.js"
TOTAL_BYTES = 20_000_000  # the whole index, at most (the manifest's note says what was left out)
SHARD_BYTES = 1_000_000  # per shard file (roughly: one entry may take a shard past it)
TEXT_CHARS = 1_000_000  # of one text; a longer one is indexed up to the last line within it

Reader = Callable[[str], bytes | None]
RecordsOf = Callable[[CompileId | None], list[RecordSummary]]


class _Text(Struct, array_like=True):
    """A payload text to index once every small entry is in."""

    priority: int
    order: int
    kind: str
    title: str
    url: str
    path: str  # the payload's file, read back through the payload store
    prefix: str | None
    alt: list[Any] | None


class _Shards(Struct):
    """The index's entries, cut into shard files of about `shard_bytes`: each shard is handed out
    (`take`) once the next one opens, so the index is never held whole (it was a report's peak of
    memory: 20 MB of entries and their copy as files)."""

    total_bytes: int
    shard_bytes: int
    # the open shard's entries, joined as the shard file holds them: orjson hands back bytes with room
    # to grow (up to 8x their length), so keeping them one by one would hold several times the shard
    shard: bytearray = field(default_factory=bytearray)
    names: list[str] = field(default_factory=list)  # the shard files made so far, the open one's not yet
    ready: list[tuple[str, bytes]] = field(default_factory=list)  # shard files made and not yet taken
    size: int = 0  # bytes of entries so far, all shards
    current: int = 0  # bytes of the open shard
    entries: int = 0
    full: bool = False

    def add(self, entry: list[Any]) -> bool:
        """Add an entry, unless the index is full; whether it was added."""
        data = orjson.dumps(entry)
        if self.full or self.size + len(data) > self.total_bytes:
            self.full = True
            return False
        if self.current and self.current + len(data) > self.shard_bytes:
            self.close()
        shard = self.shard
        if shard:
            shard += b",\n"
        shard += data
        self.current += len(data) + 1
        self.size += len(data) + 1
        self.entries += 1
        return True

    def close(self) -> None:
        """Make the open shard's file (none for a shard with no entry); the next entry opens another."""
        if not self.shard:
            return
        number = len(self.names)
        name = SHARD.format(number)
        body = b"window.TLPARSE_SEARCH = window.TLPARSE_SEARCH || [];\nTLPARSE_SEARCH.push([" + str(number).encode() + b", [\n"
        self.ready.append((name, body + self.shard + b"\n]]);\n"))
        self.names.append(name.removeprefix("static/"))
        self.shard, self.current = bytearray(), 0

    def take(self) -> list[tuple[str, bytes]]:
        """The shard files made since the last take."""
        ready, self.ready = self.ready, []
        return ready


def clean(text: Any) -> str:
    """A value as text that encodes as UTF-8 (logs may hold lone surrogates)."""
    value = text if isinstance(text, str) else "" if text is None else str(text)
    return value.encode("utf-8", "replace").decode("utf-8")


class PagePieces(Struct, array_like=True):
    """What one compile page adds to the index, taken from the outline its page is built from (so
    the outline is made once a page, by whichever process builds it): its small entries, and the
    texts to index once every small entry is in (their `order` counts from 0 within the page)."""

    entries: list[list[Any]]
    texts: list[_Text]


def page_pieces(analysis: Analysis, outline: CompileOutline) -> PagePieces:
    return PagePieces(list(_page_entries(analysis, outline)), _page_texts(outline, 0))


class IndexParts:
    """The pieces of the compile pages built so far, by their place in log order (`page_refs`), each
    packed (msgpack) and unpacked when the index takes it. The process that made it keeps them in a
    scratch file (`spools.FactSpool`: 40,000 pages' pieces are 40 MB, held until every page is
    built); a forked page builder keeps its own in memory (a fork must not append to the file its
    parent appends to), and they travel to the parent as they are kept."""

    def __init__(self) -> None:
        self.handed: IO[bytes] | None = None  # a forked page builder's own scratch file, as `encode` hands it over
        self.spooled = FactSpool()
        self.owner = os.getpid()

    def add(self, position: int, pieces: PagePieces) -> None:
        self._keep(position, msgspec.msgpack.encode(pieces))

    def _keep(self, position: int, packed: bytes) -> None:
        if os.getpid() == self.owner:
            self.spooled.add(position, packed)
            return
        if self.handed is None:  # made in the child: a fork must not append to the file its parent appends to
            self.handed = tempfile.TemporaryFile()
        self.handed.write(_PLACE.pack(position, len(packed)) + packed)

    def take(self, position: int) -> PagePieces | None:
        """A page's pieces (the index is built once: they are read once)."""
        found = self.spooled.get(position)
        return msgspec.msgpack.decode(found[0], type=PagePieces) if found else None

    def encode(self) -> Iterator[bytes]:
        """A forked builder's pieces for its parent, in chunks of its scratch file: each page's
        position, length and packed pieces, one after another, for `add_from` to take one at a time
        as the pipe brings them. Never held whole: kept in memory until the child's end, they had
        made its peak (20 MB and their copy at 40,000 compile ids)."""
        if self.handed is None:
            return
        self.handed.flush()
        self.handed.seek(0)
        while chunk := self.handed.read(HAND_OVER_BYTES):
            yield chunk

    def close(self) -> None:
        """Once the index is built: its scratch file goes."""
        self.spooled.close()
        if self.handed is not None:
            self.handed.close()

    def add_from(self, stream: IO[bytes]) -> None:
        """The pieces `encode` wrote, read from `stream` a page at a time; one cut short (its child
        died) is left out, and made again by the index."""
        while len(head := stream.read(_PLACE.size)) == _PLACE.size:
            position, size = _PLACE.unpack(head)
            packed = stream.read(size)
            if len(packed) < size:
                return
            self._keep(position, packed)


_PLACE = struct.Struct("<QI")  # a page's position and the length of its packed pieces (`IndexParts.encode`)
HAND_OVER_BYTES = 1 << 20  # what a forked builder reads back and writes into its pipe at a time


def build_index(
    analysis: Analysis,
    records_of: RecordsOf,
    read: Reader,
    builder: PageBuilder,
    *,
    parts: IndexParts | None = None,
    pages: Sequence[PageRef] | None = None,
    total_bytes: int = TOTAL_BYTES,
    shard_bytes: int = SHARD_BYTES,
    text_chars: int = TEXT_CHARS,
) -> Iterator[tuple[str, bytes]]:
    """The search index of a report: (path, file content), each shard as soon as it is full (to be
    written as it comes), the manifest last. A failure part way leaves the shards handed out so far
    unnamed by any manifest: the report keeps the one that hides the search box.

    `records_of(key)`: the spooled record summaries of a compile id; `read(path)`: a payload file;
    `builder`: the compile pages' builder, whose inline plan says where each text is shown;
    `parts`: the pieces the page jobs took from their outlines (a page missing from them, or all
    without them, is outlined here); `pages`: the compile pages (`page_refs`), when known already.
    """
    shards = _Shards(total_bytes, shard_bytes)
    texts = _Waiting()
    small = 0
    for pieces in _pieces(analysis, records_of, builder, parts, pages if pages is not None else page_refs(analysis)):
        for entry in pieces.entries:
            small += 1
            shards.add(entry)
        for text in pieces.texts:
            texts.add(text)
        yield from shards.take()
    if parts is not None:  # each page's pieces are taken once: their scratch file goes
        parts.close()
    for entry in _vllm_entries(analysis):
        small += 1
        shards.add(entry)
    covered = partial = 0
    for text in texts.in_order():
        if shards.full:
            break
        data = read(text.path)
        if data is None:
            continue
        body, cut = _cut(data[: 4 * text_chars + 4].decode("utf-8", "replace"), text_chars)  # no more than it keeps
        item: list[Any] = [text.kind, text.title, text.url, body]
        if text.prefix is not None or text.alt is not None:
            item += [text.prefix, text.alt]
        if not shards.add(item):
            break
        covered += 1
        partial += cut
        yield from shards.take()
    yield from _files(shards, _note(shards, small, covered, len(texts), partial, total_bytes, text_chars))


class _Waiting:
    """The texts to index once every small entry is in, by priority, each in log order: kept in
    scratch files (`Spool`), one a priority, not as objects (100,000 of them held 35 MB at 40,000
    compile ids)."""

    def __init__(self) -> None:
        self.spools: dict[int, Spool[_Text]] = {}

    def add(self, text: _Text) -> None:
        spool = self.spools.get(text.priority)
        if spool is None:
            spool = self.spools[text.priority] = typed_spool(_Text)
        spool.append(text)

    def __len__(self) -> int:
        return sum(map(len, self.spools.values()))

    def in_order(self) -> Iterator[_Text]:
        """Every text, most wanted first, in log order within a priority."""
        for priority in sorted(self.spools):
            yield from self.spools[priority]



def _pieces(analysis: Analysis, records_of: RecordsOf, builder: PageBuilder, parts: IndexParts | None,
            pages: Sequence[PageRef]) -> Iterable[PagePieces]:
    """Every compile page's pieces in log order: from `parts`, else from its outline made here
    (reading each id's records once)."""
    last_key: Any = object()
    records: list[RecordSummary] = []
    for position in range(len(pages)):
        pieces = parts.take(position) if parts is not None else None
        if pieces is None:
            page = pages[position]  # (made only here: a page linked to its neighbours is three made)
            if page.key != last_key:
                last_key, records = page.key, records_of(page.key)
            pieces = page_pieces(analysis, compile_outline(analysis, page, records, builder))
        yield pieces


def _vllm_entries(analysis: Analysis) -> Iterable[list[Any]]:
    """vLLM's pieces and passes, as its summary (index.html) shows them: found by submod, range or size, pass."""
    run = vllm_run(analysis)
    for call in run.calls if run is not None else []:
        name = f"vLLM call {call.number}" + (f" {call.prefix}" if call.prefix else "")
        for piece in call.pieces:
            time = "unknown" if piece.compile_time_s is None else f"{piece.compile_time_s:.3f} s"
            yield ["vllm piece", f"{name} · {piece.submod} · {piece.group}", f"index.html#call-{call.number}",
                   clean(f"{piece.submod} {piece.group} cudagraph {'yes' if piece.cudagraph else 'no'} inductor compile {time}")]
        for change in call.all_passes():
            effect = "unknown" if change.changed is None else "changes the graph" if change.changed else "no change"
            yield ["vllm pass", f"{name} · pass {change.name}", change.diff or change.graph, clean(f"{change.name} {effect}")]


def _page_entries(analysis: Analysis, outline: CompileOutline) -> Iterable[list[Any]]:
    """The small entries of one compile page: what it is, where it comes from, why it broke or recompiled."""
    page, summary = outline.page, outline.summary
    url = page.url
    title = f"Compile {page.label}"
    about = [page.label]
    if summary is not None:
        about += [summary.frame or "", summary.user_location or "", summary.via, STATUS_LABELS.get(summary.status, summary.status), summary.headline]
    yield ["compile", title, url, clean("\n".join(part for part in about if part))]
    if outline.stack:
        lines = [f"{f.name} {analysis.resolve_filename(f.filename)}:{f.line}" for f in outline.stack]
        yield ["frame", f"{title} · stack", f"{url}#stack", clean("\n".join(lines))]
    for entry in outline.metrics[-1:]:
        fields = entry.fields
        if fields.get("fail_type"):
            where = f"{fields.get('fail_user_frame_filename') or ''}:{fields.get('fail_user_frame_lineno') or ''}"
            yield ["failure", f"{title} · failure", url, clean(f"{fields.get('fail_type')}: {fields.get('fail_reason') or ''}\n{where}")]
    for brk in outline.graph_breaks:
        text = "\n".join(part for part in (brk.reason, brk.owner, brk.explanation, brk.user_location) if part)
        yield ["graph break", f"{title} · graph break", f"{url}#graph-breaks", clean(text)]
    for row in outline.recompiles:
        yield ["recompile", f"{title} · recompile reason", f"{url}#recompiles", clean(f"{row['head']}\n{row['rest']}".rstrip())]
    for symbol in outline.tables.symbols:
        where = f" {symbol.where.loc}" if symbol.where is not None else ""
        text = " ".join(part for part in (symbol.event, symbol.name, symbol.value, symbol.range, symbol.source) if part) + where
        yield ["symbol", f"{title} · symbols", f"{url}#symbols", clean(text)]
    for artifact in analysis.directory.get(page.key, [])[:PAGE_FILES] if page.generation == analysis.first_generation(page.key) else []:
        if not artifact.is_link:
            yield ["file", f"{title} · file", artifact.url, clean(artifact.name)]


def _page_texts(outline: CompileOutline, start: int) -> list[_Text]:
    """The payload texts a compile page shows, under the anchors and headings its sections have."""
    texts = []
    page = outline.page
    for group, sections in outline.sections.items():
        for section in sections:
            if section.raw_url is None:
                continue
            title = f"Compile {page.label} · {section.title}" + (f" ({section.subgraph})" if section.subgraph else "")
            code_page = section.url if group == "code" and section.url and section.url.endswith(".html") else None
            if not section.too_large:
                url, prefix = f"{page.url}#{section.id}", f"{section.id}-L"
                alt = ["file", code_page, "L"] if code_page else ["file", section.url or section.raw_url, None]
            elif code_page:
                url, prefix, alt = code_page, "L", ["compile page", f"{page.url}#{section.id}", None]
            else:
                url, prefix, alt = f"{page.url}#{section.id}", None, ["file", section.url or section.raw_url, None]
            declared = kinds.SECTIONS.get(group)  # what the section's declaration calls its texts, and their order
            priority, kind = (declared.priority, declared.search_kind) if declared is not None else (2, "text")
            texts.append(_Text(priority, section.line, kind, clean(title), url, section.raw_url, prefix, alt))
    texts.sort(key=lambda t: t.order)  # log order within the page, as its records come
    for offset, text in enumerate(texts):
        text.order = start + offset
    return texts


def _cut(text: str, limit: int) -> tuple[str, bool]:
    """The text up to `limit` characters, cut at a line end so line numbers stay right."""
    if len(text) <= limit:
        return text, False
    end = text.rfind("\n", 0, limit)
    return text[: end if end > 0 else limit], True


def _note(shards: _Shards, small: int, covered: int, texts: int, partial: int, total_bytes: int, text_chars: int) -> str:
    notes = []
    if shards.full:
        items = shards.entries - covered
        facts = "every compile id, frame, reason and file name" if items == small else f"the first {items:,} of {small:,} compile facts"
        notes.append(
            f"The search index covers {facts} and the first {covered:,} of {texts:,} texts "
            f"(it stops at {total_bytes / 1e6:g} MB); open the report's files for the rest."
        )
    if partial:
        notes.append(f"{partial:,} text{'s' if partial != 1 else ''} longer than {text_chars:,} characters {'are' if partial != 1 else 'is'} indexed in part (the first lines).")
    return " ".join(notes)


def _files(shards: _Shards, note: str) -> list[tuple[str, bytes]]:
    """The last shard's file, then the manifest, which names every shard."""
    shards.close()
    manifest = {"shards": shards.names, "entries": shards.entries, "note": note}
    return shards.take() + [(MANIFEST, b"window.TLPARSE_SEARCH_INDEX = " + orjson.dumps(manifest) + b";\n")]


__all__ = ["MANIFEST", "SHARD", "IndexParts", "build_index", "page_pieces"]
