"""The page of one compile id: everything logged about it, in pipeline order, in one place."""

from __future__ import annotations

import bisect
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, overload

from msgspec import Struct

from ...analysis import kinds, phases, questions
from ...analysis.compiles import Analysis
from ...analysis.phases import TimeSplit
from ...analysis.stacks import Frame
from ...analysis.store import MetricsEntry
from ...analysis.configs import python_literal
from ...analysis.compile_groups import compiles_of_graph
from ...analysis.guard_words import dynamo_names
from ...analysis.summary import CompileSummary, GraphBreak, after_first_line, first_line
from ...analysis.tables import CompileTables, SymbolRow, TensorRow, compile_tables
from ...limits import PAGE_FILES, PAGE_RECORDS_PER_KIND
from ...model import CompileId, RecordSummary, generation_label
from .common import FrameView, Inputs, Page, artifact_view, frame_view, index_anchor, label, page_base, pretty_value
from .sections import PageBuilder, Section, crowded_views, sized

MAX_RECORDS_PER_KIND = 12  # per kind on a compile-id page; all of them are in raw.jsonl


class SymbolView(Struct):
    """A row of the symbols table, with its user code line as a frame the page can link."""

    row: SymbolRow
    where: FrameView | None


def symbol_views(rows: list[SymbolRow], inputs: Inputs) -> list[SymbolView]:
    return [SymbolView(r, frame_view(r.where, inputs) if r.where else None) for r in rows]


def time_bar(split: TimeSplit | None) -> dict[str, Any] | None:
    """A compile's forward time split into its phases (`analysis.phases.time_split`), as SVG-ready
    segments: a phase of unknown time has no width and says so; the phases that did not run are named."""
    if split is None:
        return None
    segments, x = [], 0.0
    for phase in split.phases:
        known = phase.seconds is not None
        width = 1000 * phase.seconds / split.total if phase.seconds is not None else 0.0
        segments.append({"label": phase.name, "css": phase.key, "seconds": phase.seconds, "x": round(x, 2), "width": round(width, 2),
                         "share": phase.seconds / split.total if phase.seconds is not None else None, "known": known})
        x += width
    return {"total": split.total, "segments": segments, "not_run": list(split.not_run)}


MAX_PHASE_ROWS = 80


def phase_tree(report: Analysis, key: CompileId | None, generation: int = 0) -> list[dict[str, Any]]:
    """Where compile time went: the chromium spans of the compile as a tree, with total and self time.

    Spans nest (`compile_fx` inside `backend_compile` inside `entire_frame_compile`), so their times
    add up only along the tree: self time is a span's total less its children's.
    """
    if key is None:
        return []
    tree = report.phase_trees.get((key.frame_key(), generation), {})
    children: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for path in tree:
        children.setdefault(path[:-1], []).append(path)
    rows: list[dict[str, Any]] = []

    def walk(parent: tuple[str, ...]) -> None:
        for path in sorted(children.get(parent, []), key=lambda p: -tree[p]):
            if len(rows) >= MAX_PHASE_ROWS:
                return
            total = tree[path]
            inner = sum(tree[c] for c in children.get(path, []))
            rows.append({"name": path[-1], "depth": len(path) - 1, "total": total / 1e6, "self": max(0.0, total - inner) / 1e6})
            walk(path)

    walk(())
    return rows


def cache_rows(report: Analysis, key: CompileId | None) -> list[dict[str, Any]]:
    return [
        {
            "cache": event.cache,
            "state": event.state,
            "key": event.key,
            "reason": event.reason,
            "saved": event.time_saved_ns / 1e9 if event.time_saved_ns else None,
            "url": event.url,
            "line": event.line,
        }
        for event in report.cache_events_of(key)
    ]


def recompile_rows(report: Analysis, key: CompileId | None, generation: int | None = None) -> list[dict[str, Any]]:
    rows = []
    for reason in report.recompile_reasons_of(key, generation):
        head = first_line(reason)
        rows.append({"head": head, "rest": after_first_line(reason), "names": dynamo_names(head)})
    return rows


def record_groups(records: list[RecordSummary], counts: Counter[str], omitted: Counter[str] | None = None) -> list[dict[str, Any]]:
    """Spooled record summaries grouped by kind (first-appearance order), each record as a field table;
    `omitted`: records of a kind past the page's bound, counted with their kind.

    Kinds counted but not spooled (chromium events live in chromium_events.json) get a count-only group.
    """
    groups: dict[str, dict[str, Any]] = {}
    for record in records:
        for kind in record.kinds or ["(no kind)"]:
            group = groups.get(kind)
            if group is None:
                group = groups[kind] = {"kind": kind, "title": kinds.title_of(kind), "known": kinds.known(kind), "count": 0, "records": []}
            group["count"] += 1
            if len(group["records"]) < MAX_RECORDS_PER_KIND:
                meta = record.meta.get(kind)
                group["records"].append(
                    {
                        "line": record.line,
                        "meta": pretty_value(meta),
                        "context": pretty_value(record.context) if record.context else "",
                        "payload": record.payload,
                        "payload_bytes": record.payload_bytes,
                        "outputs": record.outputs,
                    }
                )
    for kind, count in (omitted or Counter()).items():
        if kind in groups:
            groups[kind]["count"] += count
    for kind, count in counts.items():
        if kind not in groups:
            groups[kind] = {"kind": kind, "title": kinds.title_of(kind), "known": kinds.known(kind), "count": count, "records": []}
    return list(groups.values())


class PageRef(Struct, frozen=True):
    """One compile page: a compile id in one generation (ids reused after reset() get a page each)."""

    key: CompileId | None
    generation: int
    url: str
    label: str
    is_compile: bool
    previous: PageRef | None = None  # the compiles before and after it in log order ([-/-] is none)
    next: PageRef | None = None
    others: tuple[PageRef, ...] = ()  # the other generations of a reused compile id


def page_ref(report: Analysis, key: CompileId | None, generation: int) -> PageRef:
    """The page of a compile id in one generation, not yet linked to its neighbours."""
    return PageRef(key, generation, report.page_url(key, generation), generation_label(label(key), generation), questions.is_compile(key))


def pages_in_log_order(report: Analysis) -> Iterable[tuple[CompileId | None, int]]:
    """Every page (compile id, generation) in log order: an id's first where it was first read, a
    reused id's later generation where it started again, with its restarts' attempts of that
    generation after it. Ids listed without a page (limits.PAGED_START_ONLY) have none."""
    if not report.generations.resets:  # every id in generation 0 alone: its page where it was first read
        # (made as read: a list and a set of 100,000s of pairs cost 15 MB at the peak of `page_refs`)
        return ((key, 0) for key in report.directory if key not in report.pageless)
    return _pages_after_resets(report)


def _pages_after_resets(report: Analysis) -> list[tuple[CompileId | None, int]]:
    attempts: dict[CompileId, list[CompileId]] = {}  # frame compile → its restarts' attempts, in directory order
    for key in report.directory:
        if key is not None and key.attempt:
            attempts.setdefault(key.frame_key(), []).append(key)
    order: list[tuple[CompileId | None, int]] = []
    for key, generation in report.generations.in_log_order(report.directory):
        if generation is None:  # first read: its first generation
            order.append((key, report.generations_of(key)[0]))
            continue
        order.append((key, generation))  # started again after a reset
        restarts = attempts.get(key, []) if key is not None else []
        order.extend((a, generation) for a in restarts if generation in report.generations_of(a)[1:])
    listed = set(order)  # any page the log order did not place (none known) still gets one, last
    order.extend((key, g) for key in report.directory for g in report.generations_of(key) if (key, g) not in listed)
    return [(key, generation) for key, generation in order if key not in report.pageless]


def page_refs(report: Analysis) -> PageRefs:
    """Every compile page, in log order (`pages_in_log_order`), linked to its neighbours."""
    return PageRefs(report)


RECENT_PAGES = 8


class PageRefs(Sequence[PageRef]):
    """Every compile page in log order, each linked to its neighbours (the compiles before and after
    it, the other generations of its id) when it is asked for. What is kept is a compile id and a
    generation a page: a list of linked refs, with their urls and labels, held 36 MB at 100,000
    compile ids through the page jobs and the search index."""

    def __init__(self, report: Analysis):
        self.report = report
        self.keys: list[CompileId | None] = []
        self.generations = array("q")
        self.compiles = array("q")  # the positions of the compiles' pages, in order
        self.reused: dict[CompileId | None, list[int]] = {}  # an id with a page in each of several generations → their positions
        self.recent: dict[int, PageRef] = {}  # the last RECENT_PAGES pages made, unlinked, by position
        for key, generation in pages_in_log_order(report):
            position = len(self.keys)
            self.keys.append(key)
            self.generations.append(generation)
            if questions.is_compile(key):
                self.compiles.append(position)
            if len(report.generations_of(key)) > 1:
                self.reused.setdefault(key, []).append(position)

    def __len__(self) -> int:
        return len(self.keys)

    @overload
    def __getitem__(self, position: int) -> PageRef: ...

    @overload
    def __getitem__(self, position: slice) -> list[PageRef]: ...

    def __getitem__(self, position: int | slice) -> PageRef | list[PageRef]:
        if isinstance(position, slice):
            return [self[p] for p in range(*position.indices(len(self)))]
        page = self._plain(position)  # (raises IndexError past the end, which ends an iteration)
        position = position % len(self)
        before = after = None
        if page.is_compile:
            place = bisect.bisect_left(self.compiles, position)
            before = self._plain(self.compiles[place - 1]) if place else None
            after = self._plain(self.compiles[place + 1]) if place + 1 < len(self.compiles) else None
        others = tuple(self._plain(p) for p in self.reused.get(page.key, ()) if p != position)
        return PageRef(page.key, page.generation, page.url, page.label, page.is_compile, before, after, others)

    def _plain(self, position: int) -> PageRef:
        # pages are asked for in log order: a page's neighbours are the pages asked for just before and after it
        found = self.recent.get(position)
        if found is None:
            found = self.recent[position] = page_ref(self.report, self.keys[position], self.generations[position])
            if len(self.recent) > RECENT_PAGES:
                del self.recent[next(iter(self.recent))]
        return found


def page_records(report: Analysis, page: PageRef, records: list[RecordSummary]) -> list[RecordSummary]:
    """A compile id's spooled records that belong to this page's generation."""
    return [r for r in records if report.generation_at(page.key, r.line) == page.generation]


class CompilePage(Page, kw_only=True, eq=False):  # a view model: never compared or printed
    """The page of one compile id in one generation: everything logged about it, in pipeline order."""

    template: ClassVar[str] = ""  # rendered by a function, not a template (render.PYTHON_PAGES)
    label: str
    page: str
    anchor: str
    status: str | None
    artifacts: list[dict[str, Any]]
    metrics: list[dict[str, Any]]
    backward: list[float]
    backward_in_forward: float | None
    other_attempts: list[dict[str, Any]]
    reuses: list[PageRef]
    generation: int
    stack: list[FrameView]
    sections: dict[str, list[Section]]
    declared_sections: list[dict[str, Any]]  # sections with texts the template has no block of its own for
    guard_count: int | None
    hops: list[tuple[Section, Any]]
    graph_breaks: list[GraphBreak]
    recompiles: list[dict[str, Any]]
    tensors: list[TensorRow]
    symbols: list[SymbolView]
    runtime: list[tuple[str, str]]
    cache: list[dict[str, Any]]
    pass_timings: dict[str, list[tuple[str, float]]]
    phases: list[dict[str, Any]]
    subgraphs: list[str]
    groups: list[dict[str, Any]]
    omitted: dict[str, int]  # kind → records past the page's bound (PAGE_RECORDS_PER_KIND), in raw.jsonl only
    page_bound: int = PAGE_RECORDS_PER_KIND
    files_omitted: int = 0  # its files past PAGE_FILES (compile_directory.json lists them all)
    crowded: list[dict[str, Any]] = []  # the kinds it wrote more files of than the index links, each listed apart (`crowded_views`)
    previous: str | None
    next: str | None
    previous_label: str | None
    next_label: str | None
    capture: dict[str, Any] | None = None  # a compiled-autograd capture: its graph and that graph's compiles
    captured_by: dict[str, Any] | None = None  # a compile of a captured backward graph: the capture's page
    name_notes: list[str] = []  # what the names Dynamo made up in its guards and recompile reasons stand for
    config: dict[str, Any] | None = None  # its settings that differ from its frame's previous compile and from the run's usual (`config_view`)
    break_config_notes: list[list[str]] = []  # per graph break (in order): the changed settings it names (`CompileSummary.config_notes`)
    library_frame: dict[str, Any] | None = None  # a compile that started in a library frame: what it compiled, the user's line that led there


class CompileOutline(Struct):
    """What a compile page says about its compile, without its texts: the part the search index
    indexes too, so both name, anchor and head each thing the same way."""

    page: PageRef
    records: list[RecordSummary]  # its spooled records (of its generation), at most PAGE_RECORDS_PER_KIND of a kind
    omitted: Counter[str]  # kind → its records past that bound (raw.jsonl holds them)
    summary: CompileSummary | None  # its compile, when the id names one
    metrics: list[MetricsEntry]  # logged under exactly this id, in its generation
    stack: list[Frame]
    graph_breaks: list[GraphBreak]
    recompiles: list[dict[str, Any]]
    tables: CompileTables
    sections: dict[str, list[Section]]  # planned: anchors, headings, files, inline or not


def compile_outline(report: Analysis, page: PageRef, records: list[RecordSummary], builder: PageBuilder) -> CompileOutline:
    """The outline of one compile page; `records`: the compile id's spooled records (of every generation)."""
    key, generation = page.key, page.generation
    omitted = Counter({kind: n for (at, kind), n in getattr(records, "omitted", Counter()).items() if at == generation})
    records = page_records(report, page, records)
    return CompileOutline(
        page=page,
        records=records,
        omitted=omitted,
        summary=report.compile_of(key, generation) if key is not None else None,
        metrics=[m for m in report.own_metrics(key) if m.generation == generation],
        stack=(report.start_stack(key, generation) if key is not None else None) or [],
        graph_breaks=graph_breaks_of_page(report, key, generation),
        recompiles=recompile_rows(report, key, generation),
        tables=compile_tables(records, key.process if key is not None else 0),
        sections=builder.plan(records, key, report.lineages_of(key)),
    )


def compile_page(inputs: Inputs, pages: Sequence[PageRef], position: int, records: list[RecordSummary], builder: PageBuilder,
                 outline: CompileOutline | None = None) -> CompilePage:
    """The page of `pages[position]`, with links to the compiles before and after it in log order;
    `records`: the compile id's spooled records (of every generation); `outline`: its outline, if
    made already (the search index takes its entries from it too)."""
    report = inputs.analysis
    page = pages[position]
    key, generation = page.key, page.generation
    outline = outline or compile_outline(report, page, records, builder)
    mine = report.in_generation(key, generation)
    metrics = outline.metrics
    frame_key = key.frame_key() if key is not None else None
    pooled = [m for m in report.metrics.get(frame_key, []) if m.generation == generation] if key is not None and key.frame_compile_id is not None else metrics
    sections = builder.fill(outline.sections)
    before, after = page.previous, page.next
    return CompilePage(
        **page_base(inputs, f"Compile {page.label}", root="../"),
        label=page.label,
        page=page.url,
        anchor=index_anchor(report, key),
        status=report.status_of(key, generation) if page.is_compile else None,
        artifacts=[sized(artifact_view(a), a, report.file_sizes) for a in report.directory[key][:PAGE_FILES]],
        files_omitted=max(0, len(report.directory[key]) - PAGE_FILES),
        crowded=crowded_views(report.directory[key], report.kinds.get(key, Counter()), page.url),
        metrics=[{"url": m.url, "fields": m.fields, "bar": time_bar(phases.compile_time_split(report, m))} for m in metrics],
        backward=phases.backward_times(report, key, generation) if key is not None else [],
        backward_in_forward=_backward_in_forward(report, key, generation) if page.is_compile else None,
        other_attempts=[
            {"label": label(m.compile_id), "page": report.page_url(m.compile_id, generation)} for m in pooled if m not in metrics
        ],
        reuses=list(page.others),
        generation=generation,
        stack=[frame_view(f, inputs) for f in outline.stack],
        sections=sections,
        declared_sections=declared_sections(sections),
        guard_count=report.guard_count(key, generation),
        hops=[(s, hop) for s in sections["pipeline"] for hop in s.hops],
        graph_breaks=outline.graph_breaks,
        recompiles=outline.recompiles,
        tensors=outline.tables.tensors,
        symbols=symbol_views(outline.tables.symbols, inputs),
        runtime=outline.tables.runtime,
        cache=[row for row in cache_rows(report, key) if mine(row["line"])],
        pass_timings=phases.pass_timings(report, key),
        phases=phase_tree(report, key, generation),
        subgraphs=sorted({s.subgraph for group in sections.values() for s in group if s.subgraph}),
        groups=record_groups(outline.records, _unspooled_counts(report, key, generation), outline.omitted),
        omitted=dict(outline.omitted),
        previous=before.url if before else None,
        next=after.url if after else None,
        previous_label=before.label if before else None,
        next_label=after.label if after else None,
        capture=capture_view(report, key),
        captured_by=captured_by(report, key),
        name_notes=questions.dynamo_name_notes(report, key, generation),
        config=config_view(outline.summary),
        break_config_notes=[outline.summary.config_notes(g) for g in outline.graph_breaks] if outline.summary is not None else [],
        library_frame=library_frame_view(outline.summary),
    )


def library_frame_view(compile_: CompileSummary | None) -> dict[str, Any] | None:
    """What a compile that started in a library frame compiled (its frame's name; for torch's wrapper, the
    model's forward), the user's line that led there, and the library frame beside; None for any other compile."""
    if compile_ is None or compile_.library_frame is None:
        return None
    library = compile_.library_frame
    return {"frame": compile_.frame, "location": compile_.user_location, "via": compile_.via, "module": library.module,
            "torch_wrapper": library.is_torch_wrapper}


def config_view(compile_: CompileSummary | None) -> dict[str, Any] | None:
    """What a compile's page says of its config: the settings that changed since its frame's previous
    compile (or that none did), and those unlike most of the run's compiles; None when it knows neither."""
    if compile_ is None or (compile_.config_changes is None and not compile_.config_unusual):
        return None
    diff = compile_.config_changes
    return {"since": diff.since if diff is not None else None, "since_page": compile_.config_since_page,
            "changes": [{"setting": c.setting, "before": python_literal(c.before), "after": python_literal(c.after)} for c in diff.changes] if diff else [],
            "unusual": [{"setting": u.setting, "value": python_literal(u.value), "usual": python_literal(u.usual)} for u in compile_.config_unusual]}


def unusual_shown(compile_: CompileSummary) -> list[tuple[str, Any, Any]]:
    """What a compile's page shows of its unusual settings (`config_view`): not how many compiles had
    the usual value, which changes with every compile that logs its config (the index's row says it)."""
    return [(u.setting, u.value, u.usual) for u in compile_.config_unusual]


def capture_view(report: Analysis, key: CompileId | None) -> dict[str, Any] | None:
    """A compiled-autograd capture's graph and the compiles of that graph; None for any other id."""
    if not questions.is_capture(key) or key is None:
        return None
    return {"graph": key.compiled_autograd_id,
            "compiles": [{"label": c.label, "page": c.url, "status": c.status} for c in compiles_of_graph(report.compiles(), key)]}


def captured_by(report: Analysis, key: CompileId | None) -> dict[str, Any] | None:
    """For a compile inside compiled autograd (`[!0/1/0]`), the capture of its graph (`[!0/-/-]`) and its page."""
    if not questions.is_compile(key) or key is None:
        return None
    capture = questions.capture_of(report, key)
    page = report.page_of(capture) if capture is not None else None
    return {"graph": key.compiled_autograd_id, "label": label(capture), "page": page} if page else None


# The sections compile.html.j2 lays out in blocks of their own (with tables, counts and diffs besides
# their texts); any other declared section (`kinds.declare_section`) is shown by one generic block.
OWN_BLOCKS = frozenset({"graph_breaks", "recompiles", "guards", "pipeline", "code", "other"})


def declared_sections(sections: dict[str, list[Section]]) -> list[dict[str, Any]]:
    """The page's texts in declared sections that have no block of their own, in declaration order:
    each with its declaration's heading and its page anchor."""
    return [
        {"name": name, "id": f"section-{name}", "heading": declared.heading, "open": declared.open, "sections": sections[name]}
        for name, declared in kinds.SECTIONS.items()
        if name not in OWN_BLOCKS and sections.get(name)
    ]


def graph_breaks_of_page(report: Analysis, key: CompileId | None, generation: int) -> list[GraphBreak]:
    """The graph breaks a page lists: its compile's (every attempt's page shows them all, each once);
    outside any compile, those logged under the id."""
    return report.graph_breaks_under(key, generation)


def _unspooled_counts(report: Analysis, key: CompileId | None, generation: int) -> Counter[str]:
    """Counts of the kinds whose records are not spooled (collected elsewhere, like chromium events),
    shown on the first page of an id."""
    counts = report.kinds.get(key, Counter())
    if len(report.generations_of(key)) == 1:
        return counts
    return Counter({kind: n for kind, n in counts.items() if kinds.collected(kind)}) if generation == report.first_generation(key) else Counter()


def _backward_in_forward(report: Analysis, key: CompileId | None, generation: int) -> float | None:
    compile_ = report.compile_of(key, generation) if key is not None else None
    return compile_.compile_time_s.backward_in_forward if compile_ is not None else None
