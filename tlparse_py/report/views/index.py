"""The index and the failures page: the report's summary of what happened and what went wrong.

The index lists up to `limits.INDEX_ROWS` compiles and compile ids, each a row of its own, and the
stack trie a row per node: on a log of thousands of compiles those rows are most of the page, so the
model holds them as `Rows`, made as the page is written (`html.index_page`), never all at once."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from typing import Any, ClassVar, Generic, TypeVar

from markupsafe import Markup
from msgspec import Struct, field

from ... import limits
from ...analysis import kinds
from ...analysis.compiles import Analysis
from ...analysis.facts import ExportIssue, export_issue
from ...analysis.program import ProgramExit
from ...analysis.questions import export_verdict, is_capture, is_compile, is_draft_export
from ...analysis.stacks import StackTrie
from ...analysis.store import Reuse
from ...analysis.compile_groups import (
    FrameRecompiles, LimitHit, compiles_of_graph, failed_compiles, graph_break_groups, limit_hits, recompiled_frames, slowest,
)
from ...analysis.summary import CACHE_RESULTS, UNKNOWN_TIME, CompileSummary, CompileTime, Summary, first_line
from ...analysis.timeline import Timeline
from ...analysis.totals import BY_NAME, Value, columns, nested, totals_of
from ...model import Artifact, CompileId, DiagnosticLog, Stats, generation_label
from ..markdown import time_span
from ..render import trusted_html
from .common import Inputs, Page, anchor, artifact_view, compile_page_url, frame_view, label, page_base
from .sections import artifact_rows, at_most_per_kind, crowded_views


# what each export issue is, in a sentence (`facts.ExportIssue.what`)
EXPORT_TEXTS: dict[str, Callable[[ExportIssue], str]] = {
    "guard_evaluated": lambda i: f"The guard {i.expr} was evaluated during export and may have caused a constraint violation.",
    "data_dependent": lambda i: f"Could not decide whether {i.expr} always holds, so it was specialised to {i.result} and a runtime assert was inserted.",
    "missing_fake_kernel": lambda i: f"torch.ops.{i.op} has no fake kernel implementation.",
    "mismatched_fake_kernel": lambda i: f"torch.ops.{i.op} has a fake kernel whose behaviour differs from the real kernel: {i.reason}",
    "data_dependent_guard": lambda i: f"A guard on the data-dependent expression {i.expr} raised an error.",
}


def export_rows(analysis: Analysis) -> list[dict[str, Any]]:
    """The issues torch.export ran into, as table rows (plain text; the page escapes it)."""
    rows = []
    for failure in analysis.export_failures:
        issue = export_issue(failure)
        rows.append(
            {
                "type": issue.failure_type,
                "text": EXPORT_TEXTS[issue.what](issue),
                "url": failure.url,
                "line": failure.lineno,
                "fake_kernel": issue.fake_kernel,
                "label": label(failure.compile_id),
                "page": compile_page_url(failure.compile_id),
            }
        )
    return rows


T = TypeVar("T")


class Rows(Generic[T]):
    """Rows of one of the index's long lists, made as they are read, and made again if read again:
    the page writes each as it comes (`html.index_page`), so they are never all held. `count`: how
    many (the page says it before the rows)."""

    __slots__ = ("count", "make")

    def __init__(self, count: int, make: Callable[[], Iterator[T]]):
        self.count = count
        self.make = make

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[T]:
        return self.make()

    def __contains__(self, item: object) -> bool:
        return any(row == item for row in self)


def trie_rows(inputs: Inputs, trie: StackTrie) -> Rows[dict[str, Any]]:
    """The stack trie's rows (`StackTrie.rows`: a tuple per node), each made into its view as it is read."""
    nodes = trie.rows()
    return Rows(len(nodes), lambda: (trie_row(inputs, kind, frame, terminals) for kind, frame, terminals in nodes))


def trie_row(inputs: Inputs, kind: str, frame: Any, terminals: list[Any]) -> dict[str, Any]:
    return {
        "kind": kind,
        "frame": frame_view(frame, inputs) if frame is not None else None,
        "ids": [terminal_view(inputs.analysis, t) for t in terminals[: limits.INDEX_ROWS]],
        "more": max(len(terminals) - limits.INDEX_ROWS, 0),  # not listed (limits.INDEX_ROWS)
    }


def terminal_view(report: Analysis, terminal: CompileId | Reuse | None) -> dict[str, Any]:
    if terminal is None:
        return {"label": "(unknown)", "url": None, "status": "missing"}
    if isinstance(terminal, Reuse):  # a compile after reset(): its own generation's page
        compile_id, generation = terminal
        return {"label": generation_label(str(compile_id), generation), "url": report.page_of(compile_id, generation),
                "status": report.status_of(compile_id, generation)}
    return {"label": str(terminal), "url": report.page_of(terminal), "status": report.status_of(terminal, 0)}


def kind_rows(counts: Counter[str]) -> list[dict[str, Any]]:
    return [
        {"kind": kind, "count": count, "title": kinds.title_of(kind), "known": kinds.known(kind)}
        for kind, count in counts.most_common()
    ]


def key_status(report: Analysis, key: CompileId | None) -> str | None:
    """The outcome of a compile; None for buckets that are not compiles ([-/-], malformed ids, captures)."""
    return report.status_of(key) if is_compile(key) else None


def capture_view(report: Analysis, key: CompileId | None) -> dict[str, Any] | None:
    """A compiled-autograd capture's section: the graph it belongs to and the compiles of that graph
    (`Analysis.compiles_of_capture`); None for any other id."""
    if not is_capture(key) or key is None:
        return None
    return {"graph": key.compiled_autograd_id,
            "compiles": [{"label": c.label, "page": c.url, "status": c.status} for c in compiles_of_graph(report.compiles(), key)]}


FORWARD, FORWARD_AND_BACKWARD = "forward", "forward + backward"


def time_split(times: CompileTime) -> str:
    """A compile time's parts, in words ("" when it has one part)."""
    if times.backward is not None and times.forward is not None:
        return f"forward {times.forward:.2f} s + backward {times.backward:.2f} s"
    if times.backward_in_forward is not None and times.forward is not None:
        return f"forward {times.forward:.2f} s, of which {times.backward_in_forward:.2f} s compiled the backward"
    return ""


def compile_entries(report: Analysis, limit: int) -> Rows[dict[str, Any]]:
    """"Files by compile id": the first `limit` compile ids, in log order."""
    return Rows(min(len(report.directory), limit),
                lambda: (compile_entry(report, key, artifacts) for key, artifacts in itertools.islice(report.directory.items(), limit)))


def compile_entry(report: Analysis, key: CompileId | None, artifacts: list[Artifact]) -> dict[str, Any]:
    """One compile id's section of "Files by compile id"."""
    times = report.logged_time(key) if key is not None else UNKNOWN_TIME  # the attempt that logged it
    page = report.page_of(key)
    counts = report.kinds.get(key, Counter())
    crowded = crowded_views(artifacts, counts, page)
    listed = artifacts[:limits.PAGE_FILES]
    if crowded:  # a kind's files past the bound are not linked here: its row of `crowded` links its list
        listed = list(at_most_per_kind(listed, limits.INDEX_FILES_PER_KIND))
    return {
        "label": label(key),
        "anchor": anchor(key),
        "page": page,
        "status": key_status(report, key),
        "capture": capture_view(report, key),
        "artifacts": artifact_rows(listed, artifact_view, report.file_sizes),
        "files_omitted": max(0, len(artifacts) - limits.PAGE_FILES),
        "crowded": crowded,
        "kinds": kind_rows(counts),
        "compile_time": times.total,
        "time_is": FORWARD_AND_BACKWARD if times.backward is not None else FORWARD,
        "time_split": time_split(times),
    }


def compile_row(compile_: CompileSummary) -> dict[str, Any]:
    """One row of the compiles table: a compile, in one generation of its id."""
    times = compile_.compile_time_s
    return {
        "label": compile_.label,
        "page": compile_.url,
        "status": compile_.status,
        "name": compile_.frame or "",
        "via": compile_.via,
        "location": compile_.user_location or "",
        "seconds": times.total,
        "split": time_split(times),
        "graph_ops": compile_.graph_op_count,
        "cache": [(result, n) for result in CACHE_RESULTS if (n := compile_.cache_count(result))],
        "reason": compile_.headline,
        "config_unusual": [u.text for u in compile_.config_unusual],
        "generation": compile_.generation,
        "attempts": [{"label": name, "page": url} for name, url in compile_.pages] if len(compile_.pages) > 1 else [],
    }


TOP_FAILURES = 10  # failed compiles among the top problems; the failures page lists them all
MAX_CONFIG_NOTES = 3  # per graph-break kind: the changed settings its breaks name (each compile's page has them all)


def failure_problem(compile_: CompileSummary) -> dict[str, Any]:
    """A failed compile among the top problems: its frame and user location, and the exception."""
    failure = compile_.failure
    assert failure is not None  # a failed compile logged one
    return {
        "kind": "failure",
        "frame": compile_.frame_label,
        "name": compile_.frame or "",
        "via": compile_.via,
        "location": compile_.user_location or "",
        "compile": {"label": compile_.label, "page": compile_.url},
        "type": failure.type,
        "message": failure.message,
        "failed_at": failure.user_location or "",
        "suppressed": failure.suppressed,
    }


def problem_rows(failed: list[CompileSummary], hits: list[LimitHit]) -> list[dict[str, Any]]:
    """The index's top problems: the first failed compiles (`TOP_FAILURES`), each with its exception,
    then each frame at the recompile limit, with the guard that kept failing and the fix."""
    return [failure_problem(c) for c in failed[:TOP_FAILURES]] + [
        {
            "kind": "limit",
            "frame": h.frame,
            "name": h.name,
            "via": h.via,
            "location": h.user_location,
            "compile": {"label": h.compile.label, "page": h.compile.url},
            "compiled": [{"label": c.label, "page": c.url} for c in h.compiles if c is not h.compile],
            "limit_type": h.limit_type,
            "limit": h.limit,
            "guards": h.guards,
            "reasons": [{"label": c.label, "page": c.url, "reason": r} for c, r in h.reasons],
            "fixes": h.fixes,
            "name_notes": h.name_notes,
        }
        for h in hits
    ]


# Where the index details a total (its card links there); the cards themselves are the declarations'
CARD_LINKS = {
    "compiles": "#compiles", "graph_breaks": "#graph-breaks", "torch_graph_breaks": "#graph-breaks", "recompiles": "#recompiles",
    "retries": "#recompiles",
    "restarts": "failures_and_restarts.html", "failed": "failures_and_restarts.html", "skipped": "#compiles",
    "recompile_limit": "#problems", "compile_time_s": "#slowest",
}


def singular(words: str) -> str:
    """A total's label for a count of one: "graph breaks" → "graph break", "retries" → "retry"."""
    if words.endswith("ies"):
        return words[:-3] + "y"
    return words[:-1] if words.endswith("s") else words


def counted(values: dict[str, Value], names: tuple[str, ...]) -> str:
    """Those of the totals `names` that are not 0, each as its declaration words it: "1 failed compile
    and 1 recompile limit hit" ("" when all are 0)."""
    parts = [f"{n} {singular(BY_NAME[name].label) if n == 1 else BY_NAME[name].label}" for name in names if (n := values.get(name))]
    return ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else "".join(parts)


# what the failures page lists, by the totals that count it: a restart, a failed compile, a frame torch
# skipped or one over the recompile limit (each logged an exception or a restart reason)
FAILURES_PAGE_TOTALS = ("restarts", "failed", "skipped", "recompile_limit")


def headline_cards(values: dict[str, Value], notes: dict[str, str], has_rows: bool) -> list[dict[str, Any]]:
    """The index's headline: a card per column of the declared totals (`totals.TOTALS`, in their
    order; totals sharing a column share a card, "a / b"), each shown as its declaration shows it, so
    an unknown value reads "unknown", never 0. `notes`: words a total's card adds, by total name."""
    cards = []
    for _, totals in columns():
        if len(totals) == 1:
            (total,) = totals
            words = singular(total.label) if values.get(total.name) == 1 and not total.seconds else total.label
        else:  # "cache hits / misses / bypasses": the first word they share said once
            head = totals[0].label.split(" ", 1)[0]
            shared = all(t.label.startswith(head + " ") for t in totals)
            words = " / ".join([totals[0].label] + [t.label.removeprefix(head + " ") if shared else t.label for t in totals[1:]])
        words = " ".join([words, *(notes[t.name] for t in totals if t.name in notes)])
        href = next((CARD_LINKS[t.name] for t in totals if t.name in CARD_LINKS), None)
        if href == "#problems" and not any(values.get(t.name) for t in totals):
            href = None  # the top problems are listed only when there are some
        cards.append({
            "value": " / ".join(total.show(values.get(total.name)) for total in totals),
            "words": words,
            "title": totals[0].description if len(totals) == 1 else "",  # what it counts (a shared column's heading says it)
            "href": href if href != "#compiles" or has_rows else None,  # the compiles table is left out when there are none
        })
    return cards


# A part of the index a live report rendered before: whole, or as the list of its pieces (a row or a
# section each: never joined into one string)
Fragment = Markup | list[Markup]


class IndexPage(Page, kw_only=True, eq=False):  # a view model: never compared or printed
    """The index: what happened and what went wrong, every compile and every compile id."""

    template: ClassVar[str] = ""  # rendered by a function, not a template (render.PYTHON_PAGES)
    totals: dict[str, Any]  # summary.json's totals
    cards: list[dict[str, Any]]  # the headline: the declared totals (headline_cards)
    distinct_graph_breaks: int
    records: int
    chromium_events: int
    custom_header: Any  # the user's --custom-header-html, trusted
    stats: Stats
    stats_line: str
    diagnostics: DiagnosticLog
    compile_rows: Collection[dict[str, Any]]  # Rows, or a live report's list
    no_stack: list[dict[str, Any]]
    graph_breaks: list[dict[str, Any]]
    recompiles: Collection[dict[str, Any]]  # Rows: a frame's view made as it is written (10,000s of frames: 10s of MB)
    slowest: list[dict[str, Any]]
    unknown_kinds: list[tuple[str, int]]
    trie: Collection[dict[str, Any]]  # Rows, or [] (a live report's is a fragment)
    unknown_trie: Collection[dict[str, Any]]
    failures: int  # rows of the failures page
    failures_words: str  # what they are, by the declared totals: "3 restarts and 1 failed compile"
    compiles: Collection[dict[str, Any]]  # "Files by compile id" (compile_entries), or a live report's list
    bounds: dict[str, int]
    rank: int | None
    processes: list[dict[str, Any]]  # the run's processes (summary.json `processes`) when more than one logged
    run: dict[str, Any]
    time_span: str
    export_mode: bool
    draft_export: bool  # the log is draft_export's own trace file (the export report's title says so)
    provenance_pages: list[dict[str, Any]]
    export_rows: list[dict[str, Any]]
    export: dict[str, Any]
    exported_programs: list[str]
    problems: list[dict[str, Any]]  # the top problems: failed compiles, frames at the recompile limit (problem_rows)
    timeline: Timeline | None = None  # the pictures' data (`Analysis.timeline`); None: no compile to draw
    program: ProgramExit | None = None  # how the program ended, under `tlparse-py run` (a red line when it failed)
    # parts already rendered, shown instead of rendering their data: "compile_rows", "compiles", "trie"
    # (a live report's index, assembled from the rows, sections and trie nodes that did not change)
    fragments: dict[str, Fragment] = field(default_factory=dict)


class IndexParts(Struct, kw_only=True):
    """What a live report keeps of its index from one update to the next (`views.live_index`): the
    parts of `index_page` that cost as much as the compiles, given instead of built."""

    rows: list[dict[str, Any]]  # compile_row of the first limits.INDEX_ROWS compiles
    no_stack: list[dict[str, Any]]  # those rows whose compile logged no start stack
    totals: dict[str, Value]  # totals_of(every compile)
    entries: list[dict[str, Any]]  # compile_entry of the first limits.INDEX_ROWS compile ids
    slowest: list[CompileSummary]  # slowest(compiles, 10)
    recompiled: list[FrameRecompiles]  # recompiled_frames(compiles)
    hits: list[LimitHit]  # limit_hits(compiles)
    fragments: dict[str, Fragment]  # IndexPage.fragments


def index_page(inputs: Inputs, parts: IndexParts | None = None, summary: Summary | None = None) -> IndexPage:
    """The index's view model; `summary`: the analysis' summary when the caller has it already (it
    costs as much as the compiles: at 40,000 of them, 30 MB and a second)."""
    report = inputs.analysis
    # as kept: its timeline's items are made as they are read, and the index reads none (a live
    # report asks at each update: a list of them all cost 9 ms of one at 4,000 compiles)
    summary = summary if summary is not None else report.summary(kept=True)
    compiles = summary.compiles
    rows: Collection[dict[str, Any]]
    entries: Collection[dict[str, Any]]
    trie: Collection[dict[str, Any]]
    unknown_trie: Collection[dict[str, Any]]
    if parts is None:
        # summary.json lists them all; the index's first INDEX_ROWS are read as they are written (a
        # list of 5,000 compiles held 7 MB while the index was made)
        def listed() -> Iterator[CompileSummary]:
            return itertools.islice(compiles, limits.INDEX_ROWS)

        rows = Rows(min(len(compiles), limits.INDEX_ROWS), lambda: map(compile_row, listed()))
        no_stack = [compile_row(c) for c in listed() if not report.start_stack(c.key, c.generation)]
        values = totals_of(compiles)
        entries = compile_entries(report, limits.INDEX_ROWS)
        trie = trie_rows(inputs, report.trie)
        unknown_trie = trie_rows(inputs, report.unknown_stacks) if report.unknown_stacks.size else []
        fragments: dict[str, Fragment] = {}
        slow, recompiled, hits = slowest(compiles, 10), recompiled_frames(compiles), limit_hits(compiles)
    else:  # the trie and the unknown stacks are in the fragments
        rows, no_stack, values, entries, fragments = parts.rows, parts.no_stack, parts.totals, parts.entries, parts.fragments
        trie, unknown_trie = [], []
        slow, recompiled, hits = parts.slowest, parts.recompiled, parts.hits
    groups = graph_break_groups(compiles)
    notes = {"graph_breaks": f"({sum(1 for g in groups if not g.torch_break)} distinct)", "torch_graph_breaks": "(by design)", "retries": "after a failed compile", "skipped": "(ran eagerly)",
             "recompile_limit": "(runs eagerly)", "compile_time_s": f"({FORWARD_AND_BACKWARD})"}
    return IndexPage(
        **page_base(inputs, "tlparse-py report"),
        totals=nested(values),
        cards=headline_cards(values, notes, bool(rows)),
        distinct_graph_breaks=len(groups),
        records=report.records,
        chromium_events=report.chromium_events,
        custom_header=trusted_html(inputs.settings.custom_header_html),
        stats=report.stats,
        stats_line=report.stats.format(),
        diagnostics=report.diagnostics,
        compile_rows=rows,
        no_stack=no_stack,
        graph_breaks=[
            {"reason": g.reason, "registry_id": g.first.registry_id, "doc_url": g.first.doc_url, "explanation": g.first.explained,
             "hints": g.first.advice, "owner": g.first.owner, "url": g.first.url, "count": g.count, "sites": g.sites,
             "compile_ids": [{"label": generation_label(brk.attempt, c.generation), "page": brk.page} for c, brk in g.breaks],
             "config_notes": list(dict.fromkeys(note for c, brk in g.breaks for note in c.config_notes(brk)))[:MAX_CONFIG_NOTES]}
            for g in groups
        ],
        recompiles=Rows(len(recompiled), lambda: map(recompile_view, recompiled)),
        slowest=[compile_row(c) for c in slow],
        unknown_kinds=sorted(report.unknown_kinds.items()),
        trie=trie,
        unknown_trie=unknown_trie,
        failures=len(report.failures),
        failures_words=counted(values, FAILURES_PAGE_TOTALS),
        compiles=entries,
        bounds={
            "pageless": len(report.pageless), "paged_start_only": limits.PAGED_START_ONLY, "rows": limits.INDEX_ROWS,
            "compiles": len(compiles), "compile_ids": len(report.directory),
        },
        rank=report.rank,
        processes=summary.processes if len(summary.processes) > 1 else [],
        run=report.run_context(),
        time_span=time_span(report.first_timestamp, report.last_timestamp),
        export_mode=inputs.settings.export,
        draft_export=is_draft_export(report),
        provenance_pages=[{"label": label(k), "url": url, "has_data": has_data} for k, url, has_data in inputs.provenance_pages],
        export_rows=export_rows(report),
        export=summary.export if summary.export is not None else export_verdict(report),
        exported_programs=[url for url in report.exported_programs if url],
        problems=problem_rows(failed_compiles(compiles), hits),
        fragments=fragments,
        program=summary.program,
        timeline=report.timeline() if compiles else None,
    )


def recompile_view(f: FrameRecompiles) -> dict[str, Any]:
    """A recompiled frame as the index shows it: its compiles, why each compiled again, its retries."""
    return {
        "frame": f.frame,
        "name": f.name,
        "via": f.via,
        "compiled": [{"label": c.label, "page": c.pages[0][1]} for c in f.compiled],
        "over_limit": {"label": f.over_limit.label, "page": f.over_limit.pages[0][1]} if f.over_limit else None,
        "reasons": [{"label": c.label, "page": c.pages[0][1], "reason": first_line(r)} for c, r in f.reasons],
        "retries": [{"label": c.label, "page": c.pages[0][1], "failed": failed.label, "failed_page": failed.pages[0][1],
                     "failure": failed.failure.type if failed.failure else ""} for c, failed in f.retries],
        "name_notes": f.name_notes,
        "config": [{"label": c.label, "page": c.pages[0][1], "text": text} for c in f.compiles for text in c.config_texts],
    }


class FailuresPage(Page, kw_only=True, eq=False):  # a view model: never compared or printed
    template: ClassVar[str] = ""  # rendered by a function, not a template (render.PYTHON_PAGES)
    rows: list[dict[str, Any]]
    words: str  # what the rows are, by the declared totals (`counted`)


def failures_page(inputs: Inputs, summary: Summary | None = None, totals: dict[str, Value] | None = None) -> FailuresPage:
    """`totals`: the run's totals where they are at hand (a live index tallies them as compiles change)."""
    # what became of each row's compile, in the report's words: a frame torch skipped, or one over
    # the recompile limit, ran eagerly and is no failure, as the index and summary.json say
    report = inputs.analysis

    def status_of(key: CompileId | None, generation: int) -> str | None:
        # the compile of the row's compile id, asked of the analysis (a table of every compile's
        # attempts cost a pass over them all each time a live report wrote this page)
        compile_ = report.compile_of(key, generation) if key is not None else None
        return compile_.status if compile_ is not None and label(key) in compile_.attempts else None

    rows = [
        {
            "label": generation_label(label(row.compile_id), row.generation),
            "url": row.url,
            "page": inputs.analysis.page_url(row.compile_id, row.generation),
            "type": row.failure_type,
            "description": row.description,
            "source": row.source,
            "status": status_of(row.compile_id, row.generation),
        }
        for row in report.failures
    ]
    if totals is None:
        totals = totals_of(summary.compiles if summary is not None else report.compiles())
    words = counted(totals, FAILURES_PAGE_TOTALS)
    return FailuresPage(**page_base(inputs, "Failures and restarts"), rows=rows, words=words)
