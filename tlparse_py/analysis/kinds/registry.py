"""The one registry of record kinds: a declaration holds everything known about a kind.

A *kind* is an envelope key torch writes (`dynamo_output_graph`, `compilation_metrics`, ...). Two
kinds, `artifact` and `graph_dump`, carry many differently *named* payloads (`before_post_grad_graph`,
`fx_graph_cache_hit`, ...); those names are declared here too, with `carrier="artifact"`.

A declaration says:
- how a record is parsed and which numbered files it produces (`parse`), in tlparse's order;
- the facts it adds to the analysis (`facts`; run in every mode, even when files are not written);
- its title, its section on the compile page, its highlighting language, its pipeline step.

Adding a kind is one call to `declare` (or the `kind` decorator), from this package or from a
plugin loaded through the `tlparse_py.kinds` entry-point group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from msgspec import Struct
from msgspec.structs import replace

if TYPE_CHECKING:
    from ...model import Record
    from .context import ParseContext

# Output kinds
FILE = "file"  # a generated page, numbered: `name_N.ext`
GLOBAL = "global"  # a generated page at a fixed path from the report root (dump_file)
PAYLOAD = "payload"  # the payload verbatim, numbered
REFORMAT = "reformat"  # the payload transformed (pretty JSON), numbered
LINK = "link"  # an external URL; consumes a number, writes nothing
PLACED = "placed"  # a generated page at a fixed name in its compile's folder; consumes a number (vLLM's pass diffs)

CARRIERS = ("artifact", "graph_dump")  # kinds whose records carry a named payload


class PageSection(Struct, frozen=True):
    """A section of the compile page that payload texts are shown in (a kind's `section` names one).

    The page shows a declared section's texts under its heading, and the search index names them
    and orders them by it; a section declared here appears on both with no other change.
    """

    name: str
    heading: str  # its heading on the compile page ("Generated code")
    search_kind: str = "text"  # what the search results call one of its texts ("code", "graph", ...)
    priority: int = 2  # the search index takes texts in this order when it is capped (0 first)
    open: bool = False  # shown open on the compile page


# Compile-page sections a payload text can be shown in, in page order (a kind's section None: not shown)
SECTIONS: dict[str, PageSection] = {}


def declare_section(name: str, heading: str, **fields: Any) -> PageSection:
    """Register (or replace) a compile-page section, which kinds then name as their `section`."""
    if not name or not isinstance(name, str):
        raise ValueError(f"a section needs a name, not {name!r}")
    SECTIONS[name] = declared = PageSection(name, heading, **fields)
    return declared


for _name, _heading, _search, _priority, _open in (
    ("graph_breaks", "Graph breaks", "graph break", 0, True),
    ("recompiles", "Why this recompiled", "recompile", 0, True),
    ("guards", "Guards", "guards", 0, False),
    ("pipeline", "Graphs, in pipeline order", "graph", 1, True),
    ("code", "Generated code", "code", 1, False),
    ("other", "Other artifacts", "text", 2, False),
):
    declare_section(_name, _heading, search_kind=_search, priority=_priority, open=_open)


class Output(Struct):
    """A file the report should contain, asked for by a parser; the pipeline numbers and writes it."""

    kind: str
    name: str = ""  # file name (FILE/PAYLOAD/REFORMAT), path from the root (GLOBAL), label (LINK)
    view: str = ""  # FILE/GLOBAL: the page view that renders it (see views.pages.PAGE_VIEWS)
    data: dict[str, Any] | None = None  # what the view needs besides the record
    reformat: Callable[[bytes], bytes] | None = None
    url: str = ""  # LINK
    on_written: Callable[[str], None] | None = None  # told the output's url once it is numbered


Parser = Callable[["Record", "ParseContext"], Iterable[Output]]
Facts = Callable[["Record", "ParseContext", str], None]  # (record, ctx, url of its first output or "")


class Step(Struct, frozen=True):
    """A graph's place in the compile pipeline.

    `role`: "start" opens a pass stage; "pass"/"end" steps are diffed against the previous step of
    the same stage and lineage; "graph" steps stand alone; "hop" steps diff against the inference graph.
    `lineage`: "forward"/"backward"/"inference"/"joint", or "" when the record itself does not say
    (the pipeline then infers it from where the record sits in the compile).
    """

    stage: str
    role: str
    lineage: str = ""


class Symbol(Struct, frozen=True):
    """A symbolic-shapes event a record is, as the compile page's symbol table shows it."""

    event: str  # "created", "specialised", "guard", ...
    name: str
    value: str = ""
    range: str = ""
    source: str = ""


SymbolOf = Callable[[dict[str, Any]], Symbol]
SubjectOf = Callable[[dict[str, Any]], str]


class Kind(Struct, frozen=True):
    name: str
    title: str  # a short description of what the record is
    parse: Parser | None = None  # None: never produces numbered files
    facts: Facts | None = None
    section: str | None = None  # compile-page section of its payload text
    lang: str = "text"  # highlighting language of its payload text
    label: str = ""  # the section's heading (default: the name)
    subject: SubjectOf | None = None  # what one record is about (a bucket's name), added to its heading
    step: Step | None = None
    carrier: str = ""  # "artifact"/"graph_dump" for a named payload; "" for an envelope kind
    in_export: bool = False  # its files are written in export mode too (-e numbers only those, as tlparse)
    # how the compile page tabulates its records besides their text
    symbol: SymbolOf | None = None  # a row of the symbols table
    tensor: str = ""  # its part of an input tensor's row: "tensor", "source" or "storage"
    runtime: bool = False  # its `runtime_*` fields are compile overhead paid at run time
    shape_fact: str = ""  # what it adds to its compile's metrics page: "specializations" or "guards_added"
    collected: bool = False  # its records are gathered into one file of their own (not listed per compile)
    provenance: tuple[str, int] | None = None  # (pane, preference) of the -i provenance page it feeds
    collective: str = ""  # what it is in a cross-rank comparison: "local_state", "sync_decision", "spmd_mismatch"
    source: str = "tlparse-py"  # who declared it (a plugin's entry-point name)
    order: int = 0

    @property
    def heading(self) -> str:
        return self.label or self.name

    def heading_for(self, meta: dict[str, Any]) -> str:
        """The section heading of one record of this kind."""
        return f"{self.heading} {self.subject(meta)}" if self.subject is not None else self.heading


KINDS: dict[str, Kind] = {}  # envelope kinds, in declaration (tlparse parser) order
NAMES: dict[str, Kind] = {}  # named payloads of artifact / graph_dump records


def declare(name: str, title: str, *, carrier: str = "", **fields: Any) -> Kind:
    """Register (or replace) the declaration of a kind or of a named payload."""
    if fields.get("section") is not None and fields["section"] not in SECTIONS:
        raise ValueError(f"unknown section {fields['section']!r}; expected one of {tuple(SECTIONS)} (or one declared with declare_section)")
    if carrier and carrier not in CARRIERS:
        raise ValueError(f"unknown carrier {carrier!r}; expected one of {CARRIERS}")
    table = NAMES if carrier else KINDS
    # after the table's last order, not its length: an undeclare leaves a gap, and a repeated order
    # would let a new kind's files be numbered before an older kind's on a record carrying both
    order = table[name].order if name in table else max((k.order for k in table.values()), default=-1) + 1
    declared = Kind(name, title, carrier=carrier, order=order, **fields)
    table[name] = declared
    return declared


def kind(*names: str, title: str, **fields: Any) -> Callable[[Parser], Parser]:
    """Decorator: declare `names` (envelope keys) with the decorated function as their parser."""

    def register(fn: Parser) -> Parser:
        for name in names:
            declare(name, title, parse=fn, **fields)
        return fn

    return register


def named(*names: str, title: str, **fields: Any) -> Callable[[Facts], Facts]:
    """Decorator: declare artifact `names` with the decorated function as their facts."""

    def register(fn: Facts) -> Facts:
        for name in names:
            declare(name, title, carrier="artifact", facts=fn, **fields)
        return fn

    return register


def undeclare(name: str, carrier: str = "") -> None:
    """Remove a declaration (tests that declare a kind of their own clean up with this)."""
    (NAMES if carrier else KINDS).pop(name, None)


def undeclare_section(name: str) -> None:
    """Remove a section declaration (tests that declare a section of their own clean up with this)."""
    SECTIONS.pop(name, None)


def known(name: str) -> bool:
    return name in KINDS


def declared(name: str) -> Kind | None:
    """The declaration of an envelope kind, or of a named payload."""
    return KINDS.get(name) or NAMES.get(name)


def collected(name: str) -> bool:
    """Whether records of this kind are gathered into a file of their own, not listed per compile."""
    found = KINDS.get(name)
    return found is not None and found.collected


def provenance_inputs() -> dict[str, tuple[str, ...]]:
    """Pane of the provenance page → the names that feed it, preferred first."""
    panes: dict[str, list[tuple[int, str]]] = {}
    for table in (KINDS, NAMES):
        for found in table.values():
            if found.provenance is not None:
                pane, preference = found.provenance
                panes.setdefault(pane, []).append((preference, found.name))
    return {pane: tuple(name for _, name in sorted(names)) for pane, names in panes.items()}


def parsers_for(kinds: list[str]) -> list[Kind]:
    """The declared kinds of a record, in declaration (tlparse) order."""
    if len(kinds) == 1:  # nearly every record: no sort
        found = KINDS.get(kinds[0])
        return [found] if found is not None else []
    return sorted((KINDS[k] for k in kinds if k in KINDS), key=lambda k: k.order)


def title_of(name: str) -> str:
    declared = KINDS.get(name)
    return declared.title if declared else "Unknown record kind (not known to this version of tlparse-py)"


# ------------------------------------------------------------------------------------------------
# what a record is, for the pages


def payload_name(kinds: list[str], meta: dict[str, Any]) -> str:
    """What a record is: its kind, or for artifacts and graph dumps the name they carry."""
    first = kinds[0] if kinds else "(no kind)"
    if first in CARRIERS:
        value = meta.get(first)
        name = value.get("name") if isinstance(value, dict) else None
        return name if isinstance(name, str) else first
    return first


# Named passes torch logs without a fixed list: a declaration made on first sight from the name.
_PASS_PATTERNS = (
    ("_pre_grad", "pre_grad", "Pre-grad pass {}"),
    ("_post_grad", "post_grad", "Post-grad pass {}"),
)


def _pattern(name: str) -> Kind | None:
    for suffix, stage, title in _PASS_PATTERNS:
        if name.endswith(suffix):
            return Kind(name, "A graph after one FX pass", section="pipeline", lang="python",
                        label=title.format(name[: -len(suffix)]), step=Step(stage, "pass"), carrier="artifact")
    if name.startswith(("optimus_", "cff_")):
        return Kind(name, "A graph after one fusion rule", section="pipeline", lang="python",
                    label=f"Fusion rule {name}", step=Step("fusion", "pass"), carrier="artifact")
    return None


def describe(kinds: list[str], meta: dict[str, Any]) -> Kind | None:
    """The declaration that says how a record's payload is shown (None: not shown as a section).

    Named payloads are looked up by name; an unnamed or undeclared artifact, and any kind nobody
    declared, is shown under "other" so its text is never lost.
    """
    first = kinds[0] if kinds else ""
    if first in CARRIERS:
        name = payload_name(kinds, meta)
        # a named payload may carry a kind's own name (torch logs `inductor_post_grad_graph` both ways)
        declared = NAMES.get(name) or (KINDS.get(name) if name not in CARRIERS else None) or _pattern(name)
        if declared is not None and declared.section is not None:
            return declared
        return Kind(name, "A named artifact", section="other", carrier=first)
    declared = KINDS.get(first)
    if declared is None:
        return Kind(first, title_of(first), section="other")
    if declared.section is None:
        return None
    return declared


def with_lang(declared: Kind, payload_url: str) -> Kind:
    """An undeclared language follows the payload file: `.json` text is shown as JSON."""
    if declared.lang == "text" and declared.section == "other" and payload_url.endswith(".json"):
        return replace(declared, lang="json")
    return declared
