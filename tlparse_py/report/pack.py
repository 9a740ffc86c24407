"""One self-contained HTML file from a written report folder (`tlparse-py pack`, `--single-file`).

Every page of the report becomes a `<section class="tlp-page" id="page-REL">` of one document
(`REL` is the page's path in the folder: `page-index.html`, `page--_3_0_0/index.html`); links
between pages become `#page-REL` anchors and an element `id` inside a page becomes `page-REL~ID`,
so ids never collide. CSS shows one page at a time (`:target`, `:has(:target)`; the index when
nothing is targeted), so navigation works with scripts off; report.js (and a few lines that keep
the title in step) is inlined once. The file allows nothing but itself: its CSP names the sha256 of
its one `<style>` and its one `<script>`; no `src`/`href` is left but `#` anchors.

What goes in: the index, every compile page, the failures page and the metrics pages (always);
then the files those pages link (graphs, guards, generated code, payloads, ...), in the order they
are first linked, while the whole stays within the budget (`BUDGET_MB`, 20 MB of text by default);
the report-wide data files (raw.log, raw.jsonl, chromium_events.json, ...) come last. A link to a
file left out (past the budget, binary, missing, outside the folder or external) becomes plain text
with a note, and the "left out" page lists them with their sizes.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import heapq
import html
import io
import os
import posixpath
import re
from collections import deque
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote

from msgspec import Struct, field

from ..limits import SINGLE_FILE_MB
from .output_file import replace_output
from .pack_html import PageRewriter, PageScanner
from .targets import MARKER

__all__ = ["BUDGET_MB", "PackError", "Packed", "is_report", "pack_report"]

BUDGET_MB = SINGLE_FILE_MB
HOME = "index.html"
LEFT_OUT_ID = "page-left-out"
# report-wide data files: included last, once every artifact a page links is in
DATA_FILES = frozenset({"raw.log", "raw.jsonl", "chromium_events.json", "compile_directory.json", "summary.json", "summary.md"})
HTML_SUFFIXES = (".html", ".htm")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
UNSAFE_ID = re.compile(r"[^A-Za-z0-9._/-]")
# the scripts carried into the single file (they work with the page ids prefixed); others are left out
CARRIED_SCRIPTS = frozenset({"report.js", "colour.js"})

PACK_CSS = """
/* tlparse-py single file: one page at a time, chosen by the address's #fragment */
.tlp-page { display: none; }
.tlp-page:target, .tlp-page:has(:target) { display: block; }
body:not(:has(:target)) > .tlp-home { display: block; }
.tlp-packed { margin: 0; padding: 0.3em 1.5em; font-size: 0.85em; color: var(--muted); border-bottom: 1px solid var(--border); }
.tlp-note { color: var(--muted); font-size: 0.85em; }
.tlp-gone { border-bottom: 1px dotted var(--muted); }
pre.tlp-text { padding: 0.6em 0.8em; background: var(--panel); border: 1px solid var(--border); overflow: auto; white-space: pre; }
table.tlp-left-out td { padding: 0.15em 0.8em 0.15em 0; vertical-align: top; }
"""

# keeps the document's title on the page shown; colours code that becomes visible (report.js
# listens for "toggle"); an address naming an id that is not there shows its page
PACK_JS = """
(function () {
  "use strict";
  function shown() {
    var id = "";
    try { id = decodeURIComponent(window.location.hash.slice(1)); } catch (e) { id = window.location.hash.slice(1); }
    var target = id && document.getElementById(id);
    if (id && !target && id.indexOf("~") > 0) {
      var page = document.getElementById(id.slice(0, id.indexOf("~")));
      if (page) { window.location.replace("#" + page.id); return; }
    }
    var section = (target && target.closest(".tlp-page")) || document.querySelector(".tlp-home");
    if (section) document.title = section.getAttribute("data-title") + " \\u00b7 tlparse-py";
    document.dispatchEvent(new Event("toggle"));
  }
  window.addEventListener("hashchange", shown);
  shown();
})();
"""


class PackError(Exception):
    """The folder is not a report (or cannot be read): nothing was written."""


class LeftOut(Struct):
    rel: str
    size: int
    why: str


class Packed(Struct):
    target: Path
    pages: int = 0
    size: int = 0  # bytes of the single file
    included: int = 0  # bytes of report files packed
    budget: int = 0
    left_out: list[LeftOut] = field(default_factory=list)

    def line(self) -> str:
        left = f"; {len(self.left_out)} file(s) left out (past the {self.budget / 1e6:g} MB budget, or not packable)" if self.left_out else ""
        return f"Single file: {self.target} ({self.pages} pages, {self.size / 1e6:.1f} MB{left})"


def is_report(folder: Path) -> bool:
    """A report folder: an index.html and our marker (or tlparse's own single- or multi-rank layout)."""
    try:
        if not (folder / HOME).is_file():
            return False
        entries = {p.name for p in folder.iterdir()}
    except OSError:
        return False
    if MARKER in entries:
        return True
    if {"compile_directory.json", "raw.jsonl"} <= entries:
        return True
    return any(name.startswith("rank_") and (folder / name / HOME).is_file() for name in entries)


def pack_report(folder: Path, target: Path, budget_mb: float = BUDGET_MB) -> Packed:
    """Write the report in `folder` as one HTML file `target` (atomically); PackError if `folder`
    is not a report; OSError if writing fails."""
    folder = Path(folder)
    target = Path(target)
    if not is_report(folder):
        raise PackError(f"{folder} is not a tlparse-py report (no {HOME} and {MARKER})")
    plan = _Plan(folder, int(budget_mb * 1e6))
    plan.discover()
    if HOME not in plan.pages:  # a link out of the folder (or not a file): never packed from elsewhere
        raise PackError(f"{folder / HOME} is not a file inside the report folder; nothing was written")
    written = _Counted()

    def fill(fd: int) -> None:
        written.fd = fd
        with io.TextIOWrapper(io.BufferedWriter(written, 1 << 16), encoding="utf-8", newline="\n") as handle:
            _SingleFile(plan).write(handle)

    replace_output(target, fill)  # a file: whole or not at all; /dev/stdout, a pipe: written in place
    return Packed(target, len(plan.pages), written.count, plan.used, plan.budget, plan.left_out_list())


class _Counted(io.RawIOBase):
    """Writes to a descriptor it leaves open, counting the bytes (a pipe has no size to ask for)."""

    def __init__(self) -> None:
        super().__init__()
        self.fd = -1
        self.count = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        written = os.write(self.fd, data)
        self.count += written
        return written


# -- the plan: which files go in ----------------------------------------------------------------


class _Page(Struct):
    rel: str
    id: str
    html: bool
    size: int
    title: str = ""
    ids: set[str] = field(default_factory=set)
    referrer: str | None = None
    home: bool = False


def _is_core(rel: str) -> bool:
    name = posixpath.basename(rel)
    return name == HOME or name == "failures_and_restarts.html" or (name.endswith(HTML_SUFFIXES) and "metrics" in name)


class _Plan:
    def __init__(self, folder: Path, budget: int):
        self.folder = folder
        self.root = folder.resolve()
        self.budget = budget
        self.used = 0
        self.pages: dict[str, _Page] = {}
        self.left_out: dict[str, LeftOut] = {}
        self.styles: list[str] = []  # rel paths of stylesheets, in order
        self.scripts: list[str] = []
        self.dropped_scripts: list[str] = []
        self._page_ids: set[str] = {LEFT_OUT_ID}

    # a link, resolved --------------------------------------------------------------------------

    def resolve(self, page_rel: str, url: str) -> tuple[str, str, str] | None:
        """(kind, rel, fragment) of a link on page `page_rel`: kind "here" (a #fragment),
        "local" (a file of the folder, maybe missing) or "outside" (external or outside the folder)."""
        url = url.strip()
        if url.startswith("#"):
            return "here", page_rel, url[1:]
        if not url:
            return "here", page_rel, ""
        if SCHEME.match(url) or url.startswith(("//", "\\")):
            return "outside", url, ""
        path, _, fragment = url.partition("#")
        path = path.partition("?")[0]
        if not path:
            return "here", page_rel, fragment
        path = unquote(path).replace("\\", "/")
        if path.startswith("/"):
            return "outside", url, ""
        rel = posixpath.normpath(posixpath.join(posixpath.dirname(page_rel), path))
        if rel == ".." or rel.startswith("../") or rel == ".":
            return "outside", url, ""
        full = self.folder / rel
        try:
            if full.is_dir():
                rel = posixpath.join(rel, HOME)
                full = self.folder / rel
            real = full.resolve()
            real.relative_to(self.root)
        except (OSError, ValueError, RuntimeError):
            return "outside", url, ""
        return "local", rel, fragment

    def link(self, page_rel: str, url: str) -> tuple[str | None, tuple[str, str]]:
        """(the #anchor a link on page `page_rel` becomes, or None and (the note, the url) when it becomes plain text)."""
        resolved = self.resolve(page_rel, url)
        if resolved is None:
            return None, ("not in this file", url)
        kind, rel, fragment = resolved
        if kind == "outside":
            return None, ("", url)
        target = self.pages.get(rel)
        if target is None:
            if rel.startswith("static/") or "/static/" in rel:
                return None, ("part of the report folder, not of this file", url)
            left = self.left_out.get(rel)
            if left is not None and left.why == "not in the report folder":
                return None, ("missing from the report folder", url)
            if left is not None:
                return None, (f"left out of this single file ({left.why}, {left.size / 1e6:.1f} MB); it is in the report folder", url)
            return None, ("left out of this single file; it is in the report folder", url)
        fragment = unquote(fragment)
        if fragment and fragment in target.ids:
            return f"#{target.id}~{fragment}", ("", url)
        return f"#{target.id}", ("", url)

    def _page_id(self, rel: str) -> str:
        base = "page-" + UNSAFE_ID.sub("_", rel)
        pid, n = base, 1
        while pid in self._page_ids:
            n += 1
            pid = f"{base}-{n}"
        self._page_ids.add(pid)
        return pid

    def _size(self, rel: str) -> int | None:
        """The size of a file of the report; None when it is not one: missing, not a file, or (a
        symlink included, index.html too) resolving outside the report folder."""
        try:
            full = self.folder / rel
            full.resolve().relative_to(self.root)
            return full.stat().st_size if full.is_file() else None
        except (OSError, ValueError, RuntimeError):
            return None

    # discovery -----------------------------------------------------------------------------------

    def discover(self) -> None:
        """Crawl from index.html: the pages always packed first, then the files they link while the
        budget lasts (artifacts before report-wide data files)."""
        core: deque[tuple[str, str | None]] = deque([(HOME, None)])
        others: list[tuple[int, int, str, str | None]] = []
        seen = {HOME}
        order = 0
        while core or others:
            if core:
                rel, referrer = core.popleft()
                always = True
            else:
                _, _, rel, referrer = heapq.heappop(others)
                always = False
            page = self._take(rel, referrer, always)
            if page is None or not page.html:
                continue
            for url in self._scan(page):
                resolved = self.resolve(rel, url)
                if resolved is None or resolved[0] != "local":
                    continue
                linked = resolved[1]
                if linked in seen or linked.startswith("static/") or "/static/" in linked:
                    continue
                seen.add(linked)
                if _is_core(linked):
                    core.append((linked, rel))
                else:
                    order += 1
                    priority = 1 if posixpath.basename(linked) in DATA_FILES else 0
                    heapq.heappush(others, (priority, order, linked, rel))

    def _take(self, rel: str, referrer: str | None, always: bool) -> _Page | None:
        size = self._size(rel)
        if size is None:
            self.left_out[rel] = LeftOut(rel, 0, "not in the report folder")
            return None
        is_html = rel.lower().endswith(HTML_SUFFIXES)
        if not is_html and _is_binary(self.folder / rel):
            self.left_out[rel] = LeftOut(rel, size, "not text")
            return None
        if not always and self.used + size > self.budget:
            self.left_out[rel] = LeftOut(rel, size, f"past the {self.budget / 1e6:g} MB budget")
            return None
        self.used += size
        page = _Page(rel, self._page_id(rel), is_html, size, referrer=referrer, home=rel == HOME)
        if not is_html:
            page.title = rel
        self.pages[rel] = page
        return page

    def _scan(self, page: _Page) -> list[str]:
        """The links of an HTML page (and its title, ids, stylesheets and scripts, kept on the plan)."""
        scanner = PageScanner(_read_text(self.folder / page.rel))
        page.title = scanner.title.strip() or page.rel
        page.ids = scanner.ids
        for url in scanner.styles:
            resolved = self.resolve(page.rel, url)
            if resolved and resolved[0] == "local" and resolved[1] not in self.styles and self._size(resolved[1]) is not None:
                self.styles.append(resolved[1])
        for url in scanner.scripts:
            resolved = self.resolve(page.rel, url)
            if not resolved or resolved[0] != "local" or self._size(resolved[1]) is None:
                continue
            if posixpath.basename(resolved[1]) in CARRIED_SCRIPTS:
                if resolved[1] not in self.scripts:
                    self.scripts.append(resolved[1])
            elif resolved[1] not in self.dropped_scripts:
                self.dropped_scripts.append(resolved[1])
        return scanner.links

    def left_out_list(self) -> list[LeftOut]:
        return list(self.left_out.values())


class _SingleFile:
    """Writes the planned pages as one document."""

    def __init__(self, plan: _Plan):
        self.plan = plan

    def write(self, out: IO[str]) -> None:
        css = "\n".join(_read_text(self.plan.folder / rel) for rel in self.plan.styles) + PACK_CSS
        css = re.sub(r"</(style)", r"<\\/\1", css, flags=re.IGNORECASE)
        js = "\n".join(_read_text(self.plan.folder / rel) for rel in self.plan.scripts) + PACK_JS
        js = re.sub(r"</(script)", r"<\\/\1", js, flags=re.IGNORECASE).replace("<!--", "<\\!--")
        home = self.plan.pages[HOME]
        csp = (f"default-src 'none'; style-src '{_sha256(css)}'; script-src '{_sha256(js)}'; "
               "base-uri 'none'; form-action 'none'")
        out.write("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                  "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                  f"<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">\n"
                  "<meta name=\"generator\" content=\"tlparse-py single file\">\n"
                  f"<title>{html.escape(home.title)}</title>\n<style>{css}</style>\n</head>\n<body>\n")
        left = self.plan.left_out_list()
        packed = f"{len(self.plan.pages)} pages, {self.plan.used / 1e6:.1f} MB of the report"
        note = f' · <a href="#{LEFT_OUT_ID}">{f"{len(left)} file(s) left out" if left else "nothing left out"}</a>'
        out.write(f'<p class="tlp-packed">Single-file report of <code>{html.escape(self.plan.folder.resolve().name)}</code>'
                  f" · {packed} (budget {self.plan.budget / 1e6:g} MB){note}</p>\n")
        for page in self.plan.pages.values():
            classes = "tlp-page tlp-home" if page.home else "tlp-page"
            out.write(f'<section class="{classes}" id="{page.id}" data-title="{html.escape(_short_title(page.title))}">\n')
            if page.html:
                PageRewriter(page.id, functools.partial(self.plan.link, page.rel), out).run(_read_text(self.plan.folder / page.rel))
            else:
                self._write_text_page(page, out)
            out.write("</section>\n")
        self._write_left_out(left, out)
        out.write(f"<script>{js}</script>\n</body>\n</html>\n")

    def _topbar(self, page: _Page) -> str:
        home = self.plan.pages[HOME]
        back = ""
        # a file of a compile folder links back to that compile page; any other file to where it was found
        folder_page = posixpath.join(posixpath.dirname(page.rel), HOME)
        up = folder_page if folder_page != page.rel and folder_page in self.plan.pages else page.referrer
        if up and up in self.plan.pages and up != HOME:
            ref = self.plan.pages[up]
            back = f'<a href="#{ref.id}">{html.escape(_short_title(ref.title))}</a>\n'
        return (f'<header class="topbar">\n<a class="brand" href="#{home.id}">tlparse-py</a>\n'
                f'<nav>\n<a href="#{home.id}">Index</a>\n{back}</nav>\n'
                f'<span class="where">{html.escape(page.rel)}</span>\n</header>\n')

    def _write_text_page(self, page: _Page, out: IO[str]) -> None:
        out.write(self._topbar(page))
        out.write(f"<main>\n<h1>{html.escape(posixpath.basename(page.rel))}</h1>\n"
                  f'<p class="muted">{html.escape(page.rel)} ({page.size:,} bytes)</p>\n<pre class="tlp-text">')
        out.write(html.escape(_read_text(self.plan.folder / page.rel), quote=False))
        out.write("</pre>\n</main>\n")

    def _write_left_out(self, left: list[LeftOut], out: IO[str]) -> None:
        home = self.plan.pages[HOME]
        out.write(f'<section class="tlp-page" id="{LEFT_OUT_ID}" data-title="Left out of the single file">\n')
        out.write(self._topbar(_Page("left out", LEFT_OUT_ID, False, 0, referrer=HOME)))
        out.write("<main>\n<h1>Left out of the single file</h1>\n")
        out.write(f"<p>This file holds the index, every compile page, the failures page and the metrics pages, then "
                  f"the files they link while the whole stays within {self.plan.budget / 1e6:g} MB "
                  f"({self.plan.used / 1e6:.1f} MB packed). Links to what was left out are plain text; "
                  f'the files are in the report folder. <a href="#{home.id}">Back to the index</a>.</p>\n')
        if left:
            out.write('<table class="tlp-left-out"><thead><tr><th>File</th><th>Size</th><th>Why</th></tr></thead><tbody>\n')
            for item in left:
                out.write(f"<tr><td><code>{html.escape(item.rel)}</code></td><td class=\"num\">{item.size:,} bytes</td>"
                          f"<td>{html.escape(item.why)}</td></tr>\n")
            out.write("</tbody></table>\n")
        else:
            out.write("<p>Nothing was left out.</p>\n")
        if self.plan.dropped_scripts:
            names = ", ".join(f"<code>{html.escape(rel)}</code>" for rel in self.plan.dropped_scripts)
            out.write(f"<p>Scripts not carried (what they drive, e.g. the provenance highlighter, needs the report "
                      f"folder): {names}.</p>\n")
        out.write("</main>\n</section>\n")


def _short_title(title: str) -> str:
    return title.removesuffix(" · tlparse-py").strip()


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def _read_text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def _is_binary(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return b"\0" in handle.read(8192)
    except OSError:
        return True
