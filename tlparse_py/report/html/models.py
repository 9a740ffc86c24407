"""What the page functions read of the view models: their shape, as Protocols.

The view models themselves (`views.*`: msgspec records) are built above `render`, which calls the
page functions of this package; naming them here would tie this package to the views, the views to
`render` and `render` back to this package. Each Protocol lists what a page reads of its model, and
the records of `views` have those fields (tests/test_record_pages.py holds them to it). Nested
values the pages read as dicts stay dicts.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ...analysis.facts import HopSubgraph
    from ...analysis.summary import GraphBreak
    from ...analysis.tables import SymbolRow, TensorRow
    from ..highlight import Lines
    from .links import SourceLinks


class FrameModel(Protocol):
    """A stack frame as pages show it (`views.common.FrameView`)."""

    file: str
    line: int
    name: str
    loc: str
    href: str | None  # root-relative link to FX-generated source
    source_href: str | None  # absolute link into the user's repository


class SectionModel(Protocol):
    """A text section of a compile page (`views.sections.Section`)."""

    id: str
    title: str
    line: int
    url: str | None
    raw_url: str | None
    size: int
    subgraph: str | None
    lines: Lines | None
    too_large: bool
    note: str
    diff: dict[str, Any] | None


class OpenCompileModel(Protocol):
    """A compile a live page names as still compiling (`views.live.OpenCompile`)."""

    label: str
    url: str | None
    since: str
    since_epoch: float | None
    elapsed: str | None


class LiveBannerModel(Protocol):
    """What a live page says at its top (`views.live.LiveBanner`)."""

    last_record: str | None
    compiles: int
    compiling: list[OpenCompileModel]
    note: str
    ranks: int


class LiveMarkModel(Protocol):
    """A page written while the log is still read (`views.live.LiveMark`)."""

    page: str
    version: str
    banner: LiveBannerModel | None
    compiling: Collection[str]


class PageModel(Protocol):
    """What every page shows around its content (`views.common.Page`)."""

    title: str
    root: str
    source: Any  # an InputInfo, or a dict of one
    source_links: SourceLinks
    compile_id: Any  # a CompileId, or None
    kind: str
    lineno: int | None
    usual_index: str
    compile_page: str | None
    failures_link: bool


class PageRefModel(Protocol):
    """Another compile page (`views.compile.PageRef`)."""

    url: str
    label: str


class SymbolModel(Protocol):
    """A row of a compile page's symbols table (`views.compile.SymbolView`)."""

    row: SymbolRow
    where: FrameModel | None


class CompilePageModel(PageModel, Protocol):
    """The page of one compile id (`views.compile.CompilePage`)."""

    label: str
    anchor: str
    status: str | None
    artifacts: list[dict[str, Any]]
    metrics: list[dict[str, Any]]
    backward: list[float]
    backward_in_forward: float | None
    other_attempts: list[dict[str, Any]]
    reuses: list[PageRefModel]
    generation: int
    stack: list[FrameModel]
    sections: dict[str, list[SectionModel]]  # by block
    declared_sections: list[dict[str, Any]]
    guard_count: int | None
    hops: list[tuple[SectionModel, HopSubgraph]]
    graph_breaks: list[GraphBreak]
    recompiles: list[dict[str, Any]]
    tensors: list[TensorRow]
    symbols: list[SymbolModel]
    runtime: list[tuple[str, str]]
    cache: list[dict[str, Any]]
    pass_timings: dict[str, list[tuple[str, float]]]
    phases: list[dict[str, Any]]
    subgraphs: list[str]
    groups: list[dict[str, Any]]
    omitted: dict[str, int]
    page_bound: int
    files_omitted: int
    crowded: list[dict[str, Any]]
    previous: str | None
    next: str | None
    previous_label: str | None
    next_label: str | None
    capture: dict[str, Any] | None
    captured_by: dict[str, Any] | None
    name_notes: list[str]
    config: dict[str, Any] | None
    break_config_notes: list[list[str]]
    library_frame: dict[str, Any] | None


class MetricModel(Protocol):
    """A row of a metrics page's "Other Metrics" (`views.pages.MetricView`)."""

    name: str
    text: str
    preview: str
    chars: int


class ShapeFactModel(Protocol):
    """A specialisation or fast guard of a metrics page (`views.pages.ShapeFactView`)."""

    symbol: str
    sources: list[str]
    value: str
    reason: str
    expr: str
    user_stack: list[FrameModel]
    stack: list[FrameModel]


class MetricsPageModel(PageModel, Protocol):
    """The page of one compilation_metrics record (`views.pages.MetricsPage`)."""

    fields: str
    meta: dict[str, Any]
    stack: list[FrameModel]
    outputs: list[dict[str, Any]]
    specializations: list[ShapeFactModel]
    guards_added: list[ShapeFactModel]
    restart_reasons: list[Any]
    other_metrics: list[MetricModel]
    null_metrics: list[str]
    value_limit: int


class CodePageModel(PageModel, Protocol):
    """A page of highlighted code (`views.pages.CodePage`)."""

    lines: Lines
    raw_url: str | None


class PassDiffPageModel(PageModel, Protocol):
    """One of vLLM's post-grad passes beside the graph before it (`views.pages.PassDiffPage`)."""

    before: Lines
    after: Lines
    before_url: str
    after_url: str
    baseline: str
    added: int | None
    removed: int | None


class GuardsPageModel(PageModel, Protocol):
    """A dynamo_guards record's guards (`views.pages.GuardsPage`)."""

    guards: list[str]


class ExpressionNodeModel(Protocol):
    """A node of the expressions behind a guard (`views.pages.ExpressionNode`)."""

    depth: int
    result: str
    method: str
    arguments: str
    user_stack: list[FrameModel]
    stack: list[FrameModel]


class GuardInfoPageModel(PageModel, Protocol):
    """A symbolic_guard_information page (`views.pages.GuardInfoPage`)."""

    expr: str
    result: str | None
    user_stack: list[FrameModel]
    stack: list[FrameModel]
    locals: list[tuple[str, str]]
    symbols: list[tuple[str, str]]
    sources: list[tuple[str, str]]
    provenance: list[ExpressionNodeModel]


class StackTracesPageModel(PageModel, Protocol):
    """Kernel → the stack traces of the user code it came from (`views.pages.StackTracesPage`)."""

    kernels: list[tuple[str, list[str]]]


class ProvenancePageModel(PageModel, Protocol):
    """-i: the three-pane provenance highlighter of one compile id (`views.pages.ProvenancePage`)."""

    pre: list[str]
    post: list[str]
    code: list[str]
    code_kind: str
    code_offset: int
    mappings: Any  # Markup: the line maps as JSON (escaping.script_json)
    has_data: bool
    inputs: Mapping[str, str]  # pane → the file feeding it


class IndexPageModel(PageModel, Protocol):
    """The index (`views.index.IndexPage`). The compiles table's rows, the compile ids' sections and
    the stack trie's rows may be made as they are read (`views.index.Rows`): each is read once,
    in order, and its length known before."""

    totals: Mapping[str, Any]
    cards: list[dict[str, Any]]
    records: int
    chromium_events: int
    custom_header: Any  # Markup: the user's --custom-header-html
    stats_line: str
    diagnostics: Any  # a model.DiagnosticLog: `total`, and the `kept` Diagnostics
    compile_rows: Collection[dict[str, Any]]
    no_stack: list[dict[str, Any]]
    graph_breaks: list[dict[str, Any]]
    recompiles: list[dict[str, Any]]
    slowest: list[dict[str, Any]]
    unknown_kinds: list[tuple[str, int]]
    trie: Collection[dict[str, Any]]
    unknown_trie: Collection[dict[str, Any]]
    failures: int
    failures_words: str
    compiles: Collection[dict[str, Any]]
    bounds: Mapping[str, int]
    rank: int | None
    processes: list[dict[str, Any]]
    run: Mapping[str, Any]
    time_span: str
    export_mode: bool
    draft_export: bool
    provenance_pages: list[dict[str, Any]]
    export_rows: list[dict[str, Any]]
    export: Mapping[str, Any]
    exported_programs: list[str]
    problems: list[dict[str, Any]]
    timeline: Any  # an analysis.timeline.Timeline, or None
    program: ProgramExitModel | None
    fragments: Mapping[str, str | list[str]]  # Markup: parts a live report rendered before, whole or in pieces (rows, sections)


class ProgramExitModel(Protocol):
    """How the program `tlparse-py run` ran ended (`analysis.program.ProgramExit`: no view model of its own)."""

    command: str
    failed: bool
    outcome: str


class FailuresPageModel(PageModel, Protocol):
    """The failures page (`views.index.FailuresPage`)."""

    rows: list[dict[str, Any]]
    words: str


class ErrorPageModel(PageModel, Protocol):
    """In place of a page that could not be built (`report.jobs.ErrorPage`)."""

    what: str
    detail: str
