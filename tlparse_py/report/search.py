"""The report's search index: what the search box of every page looks through.

Built once, at the end of the reading pass, from the analysis and the spooled record summaries (the
payload texts read back through the payload store); pure: `build_index` returns the files, the
pipeline writes them. Pages load it from script files, not JSON (a `file://` page may not fetch):

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
symbols and file names; then the texts of graph breaks, recompiles and guards; then the graphs
and generated code; then the other texts. The index is capped (`total_bytes`, 20 MB by default):
past it, texts are left out and the manifest's note says how many are covered. A text longer than
`text_chars` is indexed in part (its first lines).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..analysis.compiles import Analysis, CompileSummary
from ..model import CompileId, RecordSummary
from ..analysis.summary import STATUS_LABELS
from .views import compile as compile_view
from .views.sections import INLINE_LIMIT, shown_as, titled

MANIFEST = "static/search-index.js"
SHARD = "static/search/index-{}.js"
TOTAL_BYTES = 20_000_000  # the whole index, at most (the manifest's note says what was left out)
SHARD_BYTES = 1_000_000  # per shard file (roughly: one entry may take a shard past it)
TEXT_CHARS = 1_000_000  # of one text; a longer one is indexed up to the last line within it
SECTION_KINDS = {"graph_breaks": "graph break", "recompiles": "recompile", "guards": "guards", "pipeline": "graph", "code": "code"}
PRIORITY = {"graph_breaks": 0, "recompiles": 0, "guards": 0, "pipeline": 1, "code": 1}  # others: 2

Reader = Callable[[str], bytes | None]
RecordsOf = Callable[[CompileId | None], list[RecordSummary]]


@dataclass
class _Text:
    """A payload text to index once every small entry is in."""

    priority: int
    order: int
    kind: str
    title: str
    url: str
    path: str  # the payload's file, read back through the payload store
    prefix: str | None
    alt: list[Any] | None


@dataclass
class _Shards:
    total_bytes: int
    shard_bytes: int
    # each shard's entries, joined as the shard file holds them: orjson hands back bytes with room to
    # grow (up to 8x their length), so keeping them one by one would hold several times the index
    shards: list[bytearray] = field(default_factory=lambda: [bytearray()])
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
            self.shards.append(bytearray())
            self.current = 0
        shard = self.shards[-1]
        if shard:
            shard += b",\n"
        shard += data
        self.current += len(data) + 1
        self.size += len(data) + 1
        self.entries += 1
        return True


def clean(text: Any) -> str:
    """A value as text that encodes as UTF-8 (logs may hold lone surrogates)."""
    value = text if isinstance(text, str) else "" if text is None else str(text)
    return value.encode("utf-8", "replace").decode("utf-8")


def build_index(
    analysis: Analysis,
    records_of: RecordsOf,
    read: Reader,
    inline: set[tuple[CompileId | None, int]] | None = None,
    *,
    total_bytes: int = TOTAL_BYTES,
    shard_bytes: int = SHARD_BYTES,
    text_chars: int = TEXT_CHARS,
) -> list[tuple[str, bytes]]:
    """The search index of a report: [(path, file content)], the manifest last.

    `records_of(key)`: the spooled record summaries of a compile id; `read(path)`: a payload file;
    `inline`: the (compile id, log line) of the texts compile pages show inline (None: all that fit
    `INLINE_LIMIT`), so that matches link to their line where the page shows it.
    """
    shards = _Shards(total_bytes, shard_bytes)
    texts: list[_Text] = []
    compiles = {url: c for c in analysis.compiles() for _, url in c.pages}
    small = 0
    for page, records in _pages(analysis, records_of):
        for entry in _page_entries(analysis, page, records, compiles.get(page.url)):
            small += 1
            shards.add(entry)
        texts.extend(_page_texts(page, records, analysis.lineages_of(page.key), inline, len(texts)))
    texts.sort(key=lambda t: (t.priority, t.order))
    covered = partial = 0
    for text in texts:
        if shards.full:
            break
        data = read(text.path)
        if data is None:
            continue
        body, cut = _cut(data[: 4 * text_chars + 4].decode("utf-8", "replace"), text_chars)  # no more than it keeps
        entry: list[Any] = [text.kind, text.title, text.url, body]
        if text.prefix is not None or text.alt is not None:
            entry += [text.prefix, text.alt]
        if not shards.add(entry):
            break
        covered += 1
        partial += cut
    return _files(shards, _note(shards, small, covered, len(texts), partial, total_bytes, text_chars))


def _pages(analysis: Analysis, records_of: RecordsOf) -> Iterable[tuple[compile_view.PageRef, list[RecordSummary]]]:
    """Every compile page with its records (those of its generation), reading each id's records once."""
    last_key: Any = object()
    records: list[RecordSummary] = []
    for page in compile_view.page_refs(analysis):
        if page.key != last_key:
            last_key, records = page.key, records_of(page.key)
        mine = [r for r in records if analysis.generation_at(page.key, r.line) == page.generation]
        yield page, mine


def _page_entries(
    analysis: Analysis, page: compile_view.PageRef, records: list[RecordSummary], summary: CompileSummary | None
) -> Iterable[list[Any]]:
    """The small entries of one compile page: what it is, where it comes from, why it broke or recompiled."""
    key, generation, url = page.key, page.generation, page.url
    title = f"Compile {page.label}"
    about = [page.label]
    if summary is not None:
        about += [summary.frame or "", summary.user_location or "", STATUS_LABELS.get(summary.status, summary.status), summary.headline]
    yield ["compile", title, url, clean("\n".join(part for part in about if part))]
    if key is not None:
        stack = analysis.start_stack(key, generation) or []
        if stack:
            lines = [f"{f.name} {analysis.resolve_filename(f.filename)}:{f.line}" for f in stack]
            yield ["frame", f"{title} · stack", f"{url}#stack", clean("\n".join(lines))]
    metrics = [m for m in analysis.own_metrics(key) if m.generation == generation]
    for entry in metrics[-1:]:
        fields = entry.fields
        if fields.get("fail_type"):
            where = f"{fields.get('fail_user_frame_filename') or ''}:{fields.get('fail_user_frame_lineno') or ''}"
            yield ["failure", f"{title} · failure", url, clean(f"{fields.get('fail_type')}: {fields.get('fail_reason') or ''}\n{where}")]
    for brk in analysis.graph_breaks_of_frame(key):
        if analysis.generation_at(key, brk.line) == generation:
            text = "\n".join(part for part in (brk.reason, brk.explanation, brk.location) if part)
            yield ["graph break", f"{title} · graph break", f"{url}#graph-breaks", clean(text)]
    for row in compile_view.recompile_rows(analysis, key, generation):
        yield ["recompile", f"{title} · recompile reason", f"{url}#recompiles", clean(f"{row['head']}\n{row['rest']}".rstrip())]
    for row in compile_view.symbols(records, analysis):
        where = f" {row['where'].loc}" if row["where"] is not None else ""
        text = " ".join(part for part in (row["event"], row["name"], row["value"], row["range"], row["source"]) if part) + where
        yield ["symbol", f"{title} · symbols", f"{url}#symbols", clean(text)]
    for artifact in analysis.directory.get(key, []) if generation == 0 else []:
        if not artifact.is_link:
            yield ["file", f"{title} · file", artifact.url, clean(artifact.name)]


def _page_texts(
    page: compile_view.PageRef,
    records: list[RecordSummary],
    lineages: dict[int, str],
    inline: set[tuple[CompileId | None, int]] | None,
    start: int,
) -> list[_Text]:
    """The payload texts a compile page shows, as its sections number them (`s<n>`: the record's place)."""
    texts = []
    for index, record in enumerate(records):
        declared = shown_as(record)
        if declared is None or record.payload is None:
            continue
        section = declared.section or "other"
        heading = declared.heading
        if record.kinds and record.kinds[0] == "optimize_ddp_split_child":
            heading = f"{heading} {record.kind_meta('optimize_ddp_split_child').get('name', '')}"
        subgraph = record.context.get("subgraph_name")
        title = f"Compile {page.label} · {titled(heading, lineages.get(record.line, ''))}" + (f" ({subgraph})" if subgraph else "")
        sid = f"s{index}"
        outputs = [o.url for o in record.outputs if not o.external]
        code_page = next((u for u in outputs if u.endswith(".html")), None) if section == "code" else None
        size = record.payload_bytes or 0
        shown = size <= INLINE_LIMIT and (inline is None or (page.key, record.line) in inline)
        if shown:
            url, prefix = f"{page.url}#{sid}", f"{sid}-L"
            alt = ["file", code_page, "L"] if code_page else ["file", outputs[0] if outputs else record.payload, None]
        elif code_page:
            url, prefix, alt = code_page, "L", ["compile page", f"{page.url}#{sid}", None]
        else:
            url, prefix, alt = f"{page.url}#{sid}", None, ["file", outputs[0] if outputs else record.payload, None]
        kind = SECTION_KINDS.get(section, "text")
        texts.append(_Text(PRIORITY.get(section, 2), start + len(texts), kind, clean(title), url, record.payload, prefix, alt))
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
    files = []
    names = []
    for number, entries in enumerate(s for s in shards.shards if s):
        name = SHARD.format(number)
        body = b"window.TLPARSE_SEARCH = window.TLPARSE_SEARCH || [];\nTLPARSE_SEARCH.push([" + str(number).encode() + b", [\n"
        body += entries + b"\n]]);\n"
        files.append((name, body))
        names.append(name.removeprefix("static/"))
    manifest = {"shards": names, "entries": shards.entries, "note": note}
    files.append((MANIFEST, b"window.TLPARSE_SEARCH_INDEX = " + orjson.dumps(manifest) + b";\n"))
    return files


__all__ = ["MANIFEST", "SHARD", "build_index"]
