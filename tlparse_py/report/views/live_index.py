"""A live report's index, updated by what changed: an update renders the compiles table's rows, the
"Files by compile id" sections and the stack trie's nodes whose compiles logged something, and
assembles the page from the parts it rendered before for the others.

What is kept, per update (`LiveIndex.page`):

- each row of the compiles table, by position: rendered again when its compile was built again
  (`analysis.live_compiles`: a compile is kept, the same object, while its function logs nothing), or
  when it started or stopped compiling;
- the totals: each is told the compiles that changed and keeps itself as its declaration says
  (`totals.Total.live`: a count adds the compiles that changed and takes away those they replace,
  the frames count distinct identities, the compile time adds in log order from the first change);
  none is computed here, or over every compile;
- each compile id's section, by position: built again when its compile id logged something or its
  compile changed (a capture's, when a compile of its graph did), rendered again when what it shows
  changed (a digest of it);
- the stack trie (`LiveTrie`): each node's HTML, and each compile id's link in it.

The page is what `index_page` and the index template make of the same analysis, byte for byte
(tests/test_live.py checks it after every update of a log read in pieces): the parts go into the
template as `IndexPage.fragments`.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson
from markupsafe import Markup

from ... import limits
from ...analysis.compiles import Analysis
from ...analysis.live_compiles import CompileChanges, LiveCompiles
from ...analysis.questions import is_capture
from ...analysis.stacks import Frame, StackTrie, TrieNode, eval_with_key
from ...analysis.store import Reuse
from ...analysis.compile_groups import FrameRecompiles, LimitHit, limit_hits, recompiled_frames
from ...analysis.summary import STATUS_LABELS, STATUS_SEVERITY, CompileSummary
from ...analysis.totals import Tally, Value, live_tallies
from ...model import CompileId
from ..render import render_macro
from .common import Inputs, frame_view
from .index import Fragment, IndexPage, IndexParts, compile_entry, compile_row, index_page, recompile_view, terminal_view

STATUS_RANK = {status: rank for rank, status in enumerate(STATUS_SEVERITY)}  # as the index template's `status_rank`
IDS_OPEN, IDS_CLOSE = '<span class="ids">', "</span>"  # around the `ids` macro's links
BRANCH = '<details class="branch" open><summary>calls from here</summary><ul>'


class LiveIndex:
    """The index of one live report (its `Inputs`), from one update to the next."""

    def __init__(self, inputs: Inputs, compiles: LiveCompiles):
        self.inputs = inputs
        self.live_compiles = compiles
        self.rendered: Counter[str] = Counter()  # what the last update rendered: rows, sections, trie frames, trie links
        self.trie = LiveTrie(inputs, inputs.analysis.trie, self.rendered)
        self.unknown = LiveTrie(inputs, inputs.analysis.unknown_stacks, self.rendered)
        # the compiles table: per position
        self.compiles: list[CompileSummary] = []
        self.rows: list[dict[str, Any]] = []
        self.row_html: list[Markup] = []
        self.has_stack: list[bool] = []
        self.row_of: dict[str, int] = {}  # compile label → its row
        self.compiling: frozenset[str] = frozenset()
        # the totals, each kept as its declaration says (`Total.live`); the slowest compiles, the
        # recompiled functions and those at the recompile limit
        self.tallies: dict[str, Tally] = live_tallies()
        self.times: list[float | None] = []  # position → its compile time
        self.by_time: list[tuple[float, int]] = []  # (-time, position) of each timed compile: the slowest first, as `slowest` sorts
        self.recompiled: dict[Any, tuple[int, FrameRecompiles]] = {}  # frame identity → (position of its first compile, what recompiled_frames says of it)
        self.recompiled_html: dict[Any, Markup] = {}  # frame identity → its "Recompiles" entry, rendered while its compiles stay
        self.hits: dict[Any, list[LimitHit]] = {}  # frame identity → limit_hits of its compiles
        # "Files by compile id": per position
        self.keys: list[CompileId | None] = []
        self.key_at: dict[CompileId | None, int] = {}
        self.entries: list[dict[str, Any]] = []
        self.digests: list[bytes] = []
        self.section_html: list[Markup] = []
        self.captures: dict[tuple[int, int | None], list[CompileId]] = {}  # (process, graph) → its captures listed
        self.started = False  # the first page takes every compile as changed
        self.whole = True  # the last page was made to the end (else what is kept may be half updated)
        self.totals: dict[str, Value] | None = None  # the run's totals, as of the last page (the failures page says them too)

    @property
    def analysis(self) -> Analysis:
        return self.inputs.analysis

    def page(self, changes: CompileChanges, touched: set[CompileId | None], compiling: frozenset[str]) -> IndexPage:
        """The index after an update: `changes` from `LiveCompiles.refresh`, `touched` the compile ids
        that logged something, `compiling` the labels of the compiles started and not ended."""
        self.rendered.clear()
        self.whole = False
        if not self.started:
            self.started = True
            changes = CompileChanges([(i, None, c) for i, c in enumerate(self.live_compiles.compiles)])
        changed = sorted(changes.changed, key=lambda item: item[0])
        self._rows(changed, compiling)  # a row shows the compile's unusual settings, and so does
        self._frames({c.frame_identity for _, _, c in changed} - {None})  # what a recompiled frame's compiles changed
        # nothing else here reads a setting: a compile whose unusual settings alone moved (the run's
        # usual values change with every compile) changes no total, section or trie link
        moved = [item for item in changed if item[0] not in changes.settings_only]
        self._totals(moved)
        self._slowest(moved)
        frames = {c.key for _, _, c in moved}
        self._sections(touched, frames, moved)
        # the rows and sections as kept, a piece each: joined, at 4,000 compiles, they were copied
        # three times over (the join, the Markup, the page) before the page was encoded and written
        fragments: dict[str, Fragment] = {"compile_rows": list(self.row_html), "compiles": list(self.section_html)}
        trie = self.trie.html(frames)
        if trie is not None:
            fragments["trie"] = trie
        unknown = self.unknown.html(frames)
        if unknown is not None:
            fragments["unknown_trie"] = unknown
        no_stack = [row for row, has in zip(self.rows, self.has_stack) if not has]
        compiles = self.live_compiles.compiles
        at = self.live_compiles.at
        recompiled = sorted(self.recompiled.items(), key=lambda item: (-len(item[1][1].compiles), item[1][0]))
        fragments["recompiled_frames"] = [self._recompiled_html(identity, frame) for identity, (_, frame) in recompiled]
        parts = IndexParts(
            rows=self.rows, no_stack=no_stack, totals=self._totals_now(), entries=self.entries, fragments=fragments,
            slowest=[compiles[position] for _, position in self.by_time[:10]],
            recompiled=[frame for _, (_, frame) in recompiled],
            hits=sorted((hit for hits in self.hits.values() for hit in hits), key=lambda h: at[(h.compile.key, h.compile.generation)]),
        )
        page = index_page(self.inputs, parts)
        self.whole = True
        return page

    def _recompiled_html(self, identity: Any, frame: FrameRecompiles) -> Markup:
        """A recompiled frame's entry, rendered again only once its compiles changed (`_frames`)."""
        html = self.recompiled_html.get(identity)
        if html is None:
            html = self.recompiled_html[identity] = render_macro("recompiled_frame", recompile_view(frame))
            self.rendered["recompiled frames"] += 1
        return html

    def _totals_now(self) -> dict[str, Value]:
        self.totals = {name: tally.value() for name, tally in self.tallies.items()}
        return self.totals

    # -- the compiles table ------------------------------------------------------------------------

    def _rows(self, changed: list[tuple[int, CompileSummary | None, CompileSummary]], compiling: frozenset[str]) -> None:
        shown = limits.INDEX_ROWS
        redo: set[int] = set()
        for position, _, compile_ in changed:
            if position >= shown:
                continue
            if position == len(self.compiles):
                self.compiles.append(compile_)
                self.rows.append({})
                self.row_html.append(Markup())
                self.has_stack.append(True)
            else:
                self.row_of.pop(self.compiles[position].label, None)
                self.compiles[position] = compile_
            self.row_of[compile_.label] = position
            redo.add(position)
        # a compile that started or stopped compiling without being built again (it always is: its records say so)
        redo.update(self.row_of[label] for label in compiling ^ self.compiling if label in self.row_of)
        self.compiling = compiling
        report = self.analysis
        for position in sorted(redo):
            compile_ = self.compiles[position]
            row = self.rows[position] = compile_row(compile_)
            self.has_stack[position] = bool(report.start_stack(compile_.key, compile_.generation))
            self.row_html[position] = render_macro("compile_row", row, position + 1, compile_.label in compiling, STATUS_LABELS, STATUS_RANK)
            self.rendered["rows"] += 1

    # -- the totals --------------------------------------------------------------------------------

    def _totals(self, changed: list[tuple[int, CompileSummary | None, CompileSummary]]) -> None:
        """Each total told the compiles that changed (`Total.tally`): none is computed here."""
        for position, _, compile_ in changed:
            for tally in self.tallies.values():
                tally.put(position, compile_)

    def _slowest(self, changed: list[tuple[int, CompileSummary | None, CompileSummary]]) -> None:
        """The timed compiles, the slowest first (`compile_groups.slowest`), kept as their times change."""
        for position, _, compile_ in changed:
            time = compile_.compile_time_s.total
            if position == len(self.times):
                self.times.append(None)
            old = self.times[position]
            if old != time or time is None:
                if old is not None:
                    del self.by_time[bisect.bisect_left(self.by_time, (-old, position))]
                if time is not None:
                    bisect.insort(self.by_time, (-time, position))
                self.times[position] = time

    def _frames(self, identities: set[Any]) -> None:
        """What recompiled_frames and limit_hits say of the compiled functions whose compiles changed."""
        live = self.live_compiles
        for identity in identities:
            process, graph, frame_id, generation = identity
            compiles = [built[generation] for frame in live.functions[(process, graph, frame_id)]
                        if generation in (built := live.by_frame[frame])]
            recompiled = recompiled_frames(compiles)
            self.recompiled_html.pop(identity, None)
            if recompiled:
                self.recompiled[identity] = (live.at[(compiles[0].key, generation)], recompiled[0])
            else:
                self.recompiled.pop(identity, None)
            self.hits[identity] = limit_hits(compiles)

    # -- "Files by compile id" ---------------------------------------------------------------------

    def _sections(self, touched: set[CompileId | None], frames: set[CompileId],
                  changed: list[tuple[int, CompileSummary | None, CompileSummary]]) -> None:
        report = self.analysis
        dirty = set(touched)
        for frame in frames:
            dirty.update(self.live_compiles.attempts_of(frame))
        graphs = {(c.key.process, c.key.compiled_autograd_id) for _, _, c in changed if c.key.compiled_autograd_id is not None}
        for graph in graphs:
            dirty.update(self.captures.get(graph, ()))
        shown = limits.INDEX_ROWS
        if len(self.keys) < shown and len(report.directory) > len(self.keys):
            for key in itertools.islice(report.directory, len(self.keys), shown):
                self.key_at[key] = len(self.keys)
                self.keys.append(key)
                self.entries.append({})
                self.digests.append(b"")
                self.section_html.append(Markup())
                if is_capture(key):
                    assert key is not None
                    self.captures.setdefault((key.process, key.compiled_autograd_id), []).append(key)
                dirty.add(key)
        for key in dirty:
            position = self.key_at.get(key)
            if position is None:
                continue
            entry = self.entries[position] = compile_entry(report, key, report.directory[key])
            self.rendered["section entries"] += 1
            digest = hashlib.blake2b(orjson.dumps(entry, default=str), digest_size=16).digest()
            if digest != self.digests[position]:
                self.digests[position] = digest
                self.section_html[position] = render_macro("compile_id_section", entry, "", STATUS_LABELS)
                self.rendered["sections"] += 1


# -- the stack trie ------------------------------------------------------------------------------


@dataclass(eq=False)
class NodeState:
    """What is kept of one trie node: its row's parts and the HTML of what hangs below it."""

    node: TrieNode
    frame: Frame | None
    parent: NodeState | None
    depth: int
    links: list[str] = field(default_factory=list)  # each listed terminal's link, as the `ids` macro writes it (and a space)
    frame_html: str = ""
    eval_page: bool = False  # the frame is FX-generated code: it links to its dump_file page once there is one
    head: str = ""  # the row: links, "and N more", the frame
    below: list[Markup] = field(default_factory=list)  # the rows of its children, in pieces (PIECE)
    block: tuple[bool, list[Markup]] | None = None  # (in a branch, its rows with everything below them, in pieces)


class LiveTrie:
    """A stack trie's HTML as the `trie` macro writes it from `trie_rows`, kept per node.

    The macro's flat rows nest: a chain of single children is a flat list, each child of a node
    with several is a branch (`<details>`). So a node's HTML is its row and the HTML of its
    children, and an update renders again only the rows of the nodes with new or changed compile
    ids, the frames of new nodes, and joins the HTML again up the paths to them.
    """

    def __init__(self, inputs: Inputs, trie: StackTrie, rendered: Counter[str]):
        self.inputs = inputs
        self.trie = trie
        self.rendered = rendered
        self.states: dict[int, NodeState] = {}  # id(node) → its state (the state holds the node: ids stay unique)
        self.of_frame: dict[CompileId, list[tuple[NodeState, int]]] = {}  # frame compile → where its terminals are listed
        self.global_files = -1  # len(inputs.global_files) when the frames were rendered
        self.built = False
        self.fresh: set[tuple[int, int]] = set()  # (node, index) of the links listed in this update
        trie.inserted = []  # the stacks inserted from now on are noted for `html`

    def html(self, frames: set[CompileId]) -> list[Markup] | None:
        """The trie's HTML after an update, in pieces (None when it has no rows); `frames`: the frame
        compiles whose compiles changed (their links show their status)."""
        heads: set[NodeState] = set()
        inserted, self.trie.inserted = self.trie.inserted or [], []
        if not self.built:  # the first time: every node
            self.built = True
            inserted = []
            work: list[tuple[TrieNode, Frame | None, NodeState | None]] = [(self.trie.root, None, None)]
            while work:
                node, frame, parent = work.pop()
                state = self._state(node, frame, parent)
                for terminal in node.terminals:
                    self._listed(state, terminal)
                heads.add(state)
                work.extend((child, child_frame, state) for child_frame, child in node.children.items())
        for frames_, terminal in inserted:
            state = self._state(self.trie.root, None, None)
            for frame in frames_:
                node = state.node.children[frame]
                state = self._state(node, frame, state)
                heads.add(state)  # new, or a new child below: its block changes
            self._listed(state, terminal)
            heads.add(state)
        for compiled in frames:
            for state, index in self.of_frame.get(compiled, ()):
                if (id(state), index) not in self.fresh:  # just listed: already as it is now
                    state.links[index] = self._link(state.node.terminals[index])
                    heads.add(state)
        self.fresh.clear()
        if len(self.inputs.global_files) != self.global_files:
            self.global_files = len(self.inputs.global_files)
            for state in self.states.values():
                if state.eval_page:
                    state.frame_html = ""
                    heads.add(state)
        for state in heads:
            if state.frame is not None and not state.frame_html:
                view = frame_view(state.frame, self.inputs)
                state.eval_page = eval_with_key(view.file) is not None
                state.frame_html = str(render_macro("frame", view, ""))
                self.rendered["trie frames"] += 1
            if state.frame is not None:
                more = len(state.node.terminals) - limits.INDEX_ROWS
                state.head = "".join((IDS_OPEN, *state.links, IDS_CLOSE) if state.links else ()) + (
                    f'<span class="muted">and {more:,} more</span> ' if more > 0 else "") + state.frame_html
        # every node with a changed row, and every node above it, joins its children again (deepest first)
        below: dict[int, NodeState] = {}
        for state in heads:
            state.block = None
            up = state.parent
            while up is not None and id(up) not in below:
                below[id(up)] = up
                up.block = None
                up = up.parent
        for state in sorted(below.values(), key=lambda s: -s.depth):
            children = state.node.children
            branching = len(children) > 1
            state.below = _in_pieces([piece for child in children.values() for piece in self._block(self.states[id(child)], branching)])
        root = self.states.get(id(self.trie.root))
        if root is None or not root.node.children:
            return None
        return [TRIE_OPEN, *root.below, TRIE_CLOSE]

    def _state(self, node: TrieNode, frame: Frame | None, parent: NodeState | None) -> NodeState:
        state = self.states.get(id(node))
        if state is None:
            state = self.states[id(node)] = NodeState(node, frame, parent, parent.depth + 1 if parent is not None else 0)
        return state

    def _listed(self, state: NodeState, terminal: CompileId | Reuse | None) -> None:
        """A terminal the node lists (the first limits.INDEX_ROWS of them), in the order inserted."""
        index = len(state.links)
        if index >= limits.INDEX_ROWS:
            state.links.append("")  # counted in "and N more", not listed
            return
        state.links.append(self._link(terminal))
        self.fresh.add((id(state), index))
        frame = _frame_of(terminal)
        if frame is not None:
            self.of_frame.setdefault(frame, []).append((state, index))

    def _link(self, terminal: CompileId | Reuse | None) -> str:
        self.rendered["trie links"] += 1
        html = render_macro("ids", [terminal_view(self.inputs.analysis, terminal)], "")
        assert html.startswith(IDS_OPEN) and html.endswith(IDS_CLOSE), html
        return str(html[len(IDS_OPEN) : -len(IDS_CLOSE)])

    def _block(self, state: NodeState, branching: bool) -> list[Markup]:
        """A node's rows with everything below it, as the child of a node with several children (a
        branch) or of a chain, in pieces."""
        if state.block is not None and state.block[0] == branching:
            return state.block[1]
        if not branching:
            pieces = [Markup(f"<li>{state.head}</li>\n"), *state.below]
        elif state.node.children:
            pieces = [Markup(f"<li>{state.head}{BRANCH}"), *state.below, BRANCH_CLOSE]
        else:
            pieces = [Markup(f"<li>{state.head}</li>\n")]
        state.block = (branching, _in_pieces(pieces))
        return state.block[1]


PIECE = 16_384  # characters of HTML below which a subtree is one string: past it, it stays in its children's pieces


def _in_pieces(pieces: list[Markup]) -> list[Markup]:
    """`pieces` joined when they are small. The trie's HTML is kept in pieces of about PIECE, so an
    update joins only the small subtrees it changed, and hands the page the others as the same
    strings as before (`live.KeptPieces` encodes and hashes only new ones): joined whole, at 4,347
    compiles, 800 KB were copied up every node above a change and encoded and hashed at each update."""
    return [Markup("".join(pieces))] if len(pieces) > 1 and sum(map(len, pieces)) <= PIECE else pieces


TRIE_OPEN, TRIE_CLOSE, BRANCH_CLOSE = Markup('<ul class="trie">\n'), Markup("</ul>"), Markup("</ul></details></li>\n")


def _frame_of(terminal: CompileId | Reuse | None) -> CompileId | None:
    if terminal is None:
        return None
    if isinstance(terminal, Reuse):
        return terminal.compile_id.frame_key()
    return terminal.frame_key()
