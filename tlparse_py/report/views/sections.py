"""The texts of a compile page (graphs, code, guards, reasons), grouped by section, with pass diffs.

Where a text goes, its title and its language come from its kind's declaration (`kinds.describe`).
Texts are read back through the payload store, one compile id at a time, so memory stays bounded.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any

from msgspec import Struct, field

from ... import limits
from ...analysis import facts, kinds
from ...analysis.files import FileSizes, crowded_kinds
from ...model import Artifact, CompileId, RecordSummary
from ..highlight import Highlighter, Lines

INLINE_LIMIT = 600_000  # bytes of text shown inline per section; larger ones are linked
DIFF_LINE_LIMIT = 20_000  # lines per side above which a diff is not computed
Reader = Callable[[str], bytes | None]


def artifact_rows(artifacts: Iterable[Artifact], view: Callable[[Artifact], dict[str, Any]],
                  sizes: FileSizes | None = None) -> list[dict[str, Any]]:
    """A compile id's files as a page lists them (`view` makes each row), grouped by the subgraph each
    belongs to (`Artifact.subgraph`, its record's `subgraph_name`): each row has its `subgraph`, and
    the first of each new group `opens_group` (a group of None: back outside any subgraph), which the
    list shows as a row before it, as upstream tlparse's "Subgraph Name: <name>". Files before any
    subgraph open no group. `sizes`: the analysis' file sizes, each row's `size` (none: not shown)."""
    rows = []
    current: str | None = None
    for artifact in artifacts:
        row = sized(view(artifact), artifact, sizes)
        row["subgraph"] = artifact.subgraph
        row["opens_group"] = artifact.subgraph != current
        current = artifact.subgraph
        rows.append(row)
    return rows


def sized(row: dict[str, Any], artifact: Artifact, sizes: FileSizes | None) -> dict[str, Any]:
    """A file's row with its `size`: (lines, bytes) of the text its record logged, or None."""
    row["size"] = sizes.of(artifact.number) if sizes is not None else None
    return row


def at_most_per_kind(artifacts: Iterable[Artifact], most: int) -> Iterator[Artifact]:
    """The files in their order, at most `most` of each record kind (the index's bound,
    `limits.INDEX_FILES_PER_KIND`: a kind past it is a row of `crowded_views`)."""
    seen: Counter[str] = Counter()
    for artifact in artifacts:
        seen[artifact.kind] += 1
        if seen[artifact.kind] <= most:
            yield artifact


def crowded_views(files: Collection[Artifact], records: Mapping[str, int], page: str | None) -> list[dict[str, Any]]:
    """The record kinds a compile id wrote more than `limits.INDEX_FILES_PER_KIND` files of
    (`files.crowded_kinds`), each with its record count (`records`: the id's counts by kind), and
    where its own list is on the compile page `page` (its `anchor`, the same on both pages)."""
    return [
        {"kind": c.kind, "title": kinds.title_of(c.kind), "known": kinds.known(c.kind), "records": records.get(c.kind, 0),
         "files": c.files, "listed": c.listed, "anchor": f"files-kind-{n}", "page": page, "bound": limits.INDEX_FILES_PER_KIND}
        for n, c in enumerate(crowded_kinds(files, limits.INDEX_FILES_PER_KIND, limits.PAGE_FILES), start=1)
    ]


class Section(Struct):
    """One text shown on the page: a graph, code, guards, a reason..."""

    id: str
    title: str
    name: str
    line: int
    url: str | None  # the numbered artifact file
    raw_url: str | None  # the raw text
    lang: str
    size: int
    subgraph: str | None = None
    lines: Lines | None = None
    too_large: bool = False
    note: str = ""  # why it is linked rather than shown
    diff: dict[str, Any] | None = None
    text: str = ""  # kept only while the page is built (for diffs)
    step: kinds.Step | None = None
    lineage: str = ""  # forward / backward / inference / joint, or "" (whole graph, or unknown)
    hops: list[facts.HopSubgraph] = field(default_factory=list)  # higher-order-op subgraphs defined in it


class PageBuilder:
    def __init__(self, read: Reader, highlighter: Highlighter, inline_budget: float = 64e6):
        self.read = read
        self.highlighter = highlighter
        self.inline_budget = inline_budget  # bytes of text shown inline across all compile pages
        self.inlined = 0
        # (compile id, log line) of every text shown inline, decided up front in log order so the
        # pages come out the same however (and in whatever order) they are built
        self.inline: set[tuple[CompileId | None, int]] | None = None

    def plan_inline(self, keys: list[CompileId | None], records_of: Callable[[CompileId | None], list[RecordSummary]],
                    texts: InlineTexts | None = None) -> None:
        """Choose which texts the compile pages show inline, within the budget, in log order: the
        compile ids in `keys`' order, each one's texts in log order. `texts`: the texts noted as the
        log was read, which spares reading every compile id's records back; an id whose records a
        page reads only in part (`texts.read_in_part`) is read back all the same."""
        self.inline = set()
        for key, line, size in texts.in_order(keys, records_of) if texts is not None else _texts_read_back(keys, records_of):
            if size <= INLINE_LIMIT and self.inlined + size <= self.inline_budget:
                self.inlined += size
                self.inline.add((key, line))

    def plan_inline_after(self, keys: list[CompileId | None], records_of: Callable[[CompileId | None], list[RecordSummary]],
                          planned_through: int) -> None:
        """`plan_inline` for a live report, whose plan is kept from one update to the next: the texts
        of `keys` logged after line `planned_through` (an earlier update planned those before) are
        planned in `keys`' order, within what the report's budget has left, as the texts before them
        were. So a live report shows no more text inline than the report it becomes (a fresh budget an
        update showed up to `--inline-mb` more each time, and a compile page rewritten for one link
        read, split and diffed every text again)."""
        if self.inline is None:
            self.inline = set()
        for key, line, size in _texts_read_back(keys, records_of):
            if line > planned_through and size <= INLINE_LIMIT and self.inlined + size <= self.inline_budget:
                self.inlined += size
                self.inline.add((key, line))

    def plan(
        self, records: list[RecordSummary], key: CompileId | None = None, lineages: dict[int, str] | None = None
    ) -> dict[str, list[Section]]:
        """The compile id's texts grouped by page section, in log order, decided without reading them:
        each section's anchor (`s<n>`: the record's place), heading, files, and whether it is shown
        inline. The page and the search index both read this plan. `lineages`: log line → lineage."""
        groups: dict[str, list[Section]] = {name: [] for name in kinds.SECTIONS}
        for index, record in enumerate(records):
            declared = shown_as(record)
            if declared is None:
                continue
            section = self._section(f"s{index}", declared, record, key)
            section.lineage = (lineages or {}).get(record.line, "")
            section.title = titled(section.title, section.lineage)
            groups.setdefault(declared.section or "other", []).append(section)
        return groups

    def sections(
        self, records: list[RecordSummary], key: CompileId | None = None, lineages: dict[int, str] | None = None
    ) -> dict[str, list[Section]]:
        """The plan, with the texts shown inline read back, highlighted and diffed."""
        return self.fill(self.plan(records, key, lineages))

    def fill(self, groups: dict[str, list[Section]]) -> dict[str, list[Section]]:
        """Read back, highlight and diff the texts a plan shows inline."""
        in_log_order = sorted((s for sections in groups.values() for s in sections), key=lambda s: s.line)
        for section in in_log_order:
            if not section.too_large:
                self._fill(section)
        self._add_diffs(groups.get("pipeline", []))
        for sections in groups.values():
            for section in sections:
                section.text = ""
        return groups

    def _section(self, section_id: str, declared: kinds.Kind, record: RecordSummary, key: CompileId | None) -> Section:
        outputs = [o.url for o in record.outputs if not o.external]
        subgraph = record.context.get("subgraph_name")
        section = Section(
            id=section_id,
            title=declared.heading_for(record.kind_meta(record.kinds[0]) if record.kinds else {}),
            name=declared.name,
            line=record.line,
            url=outputs[0] if outputs else None,
            raw_url=record.payload,
            lang=declared.lang,
            size=record.payload_bytes or 0,
            subgraph=str(subgraph) if subgraph is not None else None,
            step=declared.step,
        )
        if section.size > INLINE_LIMIT:
            section.too_large, section.note = True, f"too large to show inline ({section.size:,} bytes)"
            return section
        if self.inline is None:  # no plan: decide as we go
            shown = self.inlined + section.size <= self.inline_budget
            self.inlined += section.size if shown else 0
        else:
            shown = (key, record.line) in self.inline
        if not shown:
            section.too_large = True
            section.note = f"the compile pages of this report already show {self.inline_budget / 1e6:g} MB of text (--inline-mb)"
        return section

    def _fill(self, section: Section) -> None:
        data = self.read(section.raw_url or "")
        if data is None:
            section.too_large, section.note = True, "its file could not be read back"
            return
        section.text = data.decode("utf-8", "replace")
        if section.step is not None:
            section.hops = facts.hop_subgraphs(section.text)
        section.lines = self.highlighter.lines(section.text, section.lang)

    def _add_diffs(self, steps: list[Section]) -> None:
        """Diff each pass/end step against the step before it in the same stage (and subgraph)."""
        last: dict[tuple[str, str | None, str], Section] = {}
        last_inference: dict[str | None, Section] = {}
        for section in steps:
            stage, role = (section.step.stage, section.step.role) if section.step else ("", "graph")
            scope = (stage, section.subgraph, section.lineage)  # a backward graph is never diffed with a forward one
            base = None
            if role in ("pass", "end"):
                base = last.get(scope)
            elif role == "hop":
                base = last_inference.get(section.subgraph)
            if base is not None and not section.too_large and not base.too_large:
                section.diff = self._diff(base, section)
            if role == "start" or role in ("pass", "end"):
                last[scope] = section
            if stage == "aot" and section.lineage == "inference" and role == "graph":  # what hop passes start from
                last_inference[section.subgraph] = section

    def _diff(self, base: Section, step: Section) -> dict[str, Any]:
        old, new = base.text.splitlines(), step.text.splitlines()
        info: dict[str, Any] = {"base_title": base.title, "base_id": base.id, "added": 0, "removed": 0, "lines": None, "skipped": False}
        if len(old) > DIFF_LINE_LIMIT or len(new) > DIFF_LINE_LIMIT:
            info["skipped"] = True
            return info
        import difflib  # only where a text has a step before it

        diff = list(difflib.unified_diff(old, new, base.title, step.title, lineterm="", n=3))
        info["added"] = sum(1 for line in diff if line.startswith("+") and not line.startswith("+++"))
        info["removed"] = sum(1 for line in diff if line.startswith("-") and not line.startswith("---"))
        info["lines"] = self.highlighter.lines("\n".join(diff), "diff", budgeted=False) if diff else None
        return info




Text = tuple[CompileId | None, int, int]  # (compile id, log line, bytes) of a text a compile page shows


def _texts_read_back(keys: list[CompileId | None], records_of: Callable[[CompileId | None], list[RecordSummary]]) -> Iterator[Text]:
    for key in keys:
        for record in records_of(key):
            if shown_as(record) is not None:
                yield key, record.line, record.payload_bytes or 0


class InlineTexts:
    """The texts the compile pages show (`shown_as`), noted in log order as the log is read: what
    `PageBuilder.plan_inline` needs, without reading every compile id's records back from the spool
    (a second at 10,000 small compiles). Three numbers a text, in arrays; the ids are the ones the
    analysis holds anyway. `read_in_part(key)`: whether a page reads only some of the id's records
    (past PAGE_RECORDS_PER_KIND of a kind): those ids' texts are taken from the records read back."""

    def __init__(self, read_in_part: Callable[[CompileId | None], bool]):
        self.read_in_part = read_in_part
        self.keys: list[CompileId | None] = []
        self.lines = array("q")
        self.sizes = array("q")

    def note(self, key: CompileId | None, record: RecordSummary) -> None:
        self.keys.append(key)
        self.lines.append(record.line)
        self.sizes.append(record.payload_bytes or 0)

    def in_order(self, keys: list[CompileId | None], records_of: Callable[[CompileId | None], list[RecordSummary]]) -> Iterator[Text]:
        """The texts of `keys`, an id after another in `keys`' order, each id's in log order."""
        place = {key: at for at, key in enumerate(keys)}
        noted = sorted((at for at, key in enumerate(self.keys) if key in place), key=lambda at: place[self.keys[at]])  # stable: log order within an id
        read_back: set[CompileId | None] = set()
        for at in noted:
            key = self.keys[at]
            if not self.read_in_part(key):
                yield key, self.lines[at], self.sizes[at]
            elif key not in read_back:
                read_back.add(key)
                yield from _texts_read_back([key], records_of)


def shown_as(record: RecordSummary) -> kinds.Kind | None:
    """The declaration a record's payload text is shown under (None: it is not shown as a section)."""
    if record.payload is None or any(kinds.collected(kind) for kind in record.kinds):
        return None
    declared = kinds.describe(record.kinds, record.meta)
    return kinds.with_lang(declared, record.payload) if declared is not None else None


def graph_or_code(record_kinds: list[str], meta: dict[str, Any]) -> bool:
    """Whether a record's text is a graph or generated code (a compile page's "Graphs, in pipeline
    order" and "Generated code"): the files the file lists show with their size (`FileSizes`)."""
    declared = kinds.describe(record_kinds, meta)
    return declared is not None and (declared.step is not None or declared.section == "code")


LINEAGE_NAMES = {"forward": "Forward", "backward": "Backward", "inference": "Inference"}


def titled(title: str, lineage: str) -> str:
    """`Forward · Post-grad graph (after passes)`, unless the title already names its lineage."""
    name = LINEAGE_NAMES.get(lineage)
    if name is None or lineage in title.lower():
        return title
    return f"{name} · {title}"
