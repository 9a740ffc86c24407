"""Our own generated pages read and rewritten with regular expressions (`pack.py`): the first
pass finds a page's links, ids, title, stylesheets and scripts (`PageScanner`), the second streams
its <body> out with its links and ids rewritten for the single file (`PageRewriter`).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import IO

URL_ATTRIBUTES = frozenset({"href", "src", "srcset", "action", "formaction", "poster", "data", "cite", "background",
                            "longdesc", "manifest", "ping", "codebase", "archive", "xlink:href", "usemap", "imagesrcset"})
ID_LIST_ATTRIBUTES = frozenset({"for", "headers", "aria-labelledby", "aria-describedby", "aria-controls", "aria-owns",
                                "aria-flowto", "aria-details", "aria-errormessage", "aria-activedescendant", "list",
                                "form", "popovertarget", "commandfor", "anchor"})
URL_REF = re.compile(r"url\(\s*#([^)\s]*)\s*\)")
TAGS = re.compile(r"<[^>]*>")
EMBEDS = frozenset({"img", "iframe", "frame", "embed", "object"})
JS_TYPES = frozenset({"", "text/javascript", "application/javascript", "module", "text/ecmascript", "application/ecmascript"})

# The pages are our own generated HTML (autoescaped: no attribute value holds a raw `>` or quote),
# so a regular expression finds the few tags that matter and everything else is copied as it is:
# html.parser would spend a Python call on each of the million <span>s of a highlighted page.

_ATTRS = ("id|name|href|src|srcset|style|on[a-z]+|for|headers|aria-[a-z]+|list|form|data-scope|data-toggle-all|action|"
          "formaction|poster|data|cite|background|longdesc|manifest|ping|codebase|archive|xlink:href|usemap|"
          "imagesrcset|popovertarget|commandfor|anchor")
_SPECIAL = "body|script|style|link|meta|base|a|area|img|iframe|frame|object|embed|source|track|video|audio|input|button"
# one literal "<" first and case-insensitive only where it must be: ~20 MB/s; the <span class="k">
# of highlighted code are passed over without reaching Python
TOKEN = re.compile(
    r"<(?:!--.*?(?:-->|\Z)"
    r"|/((?i:a|body|script|style))\s*>"
    rf"|((?i:{_SPECIAL}))(?=[\s/>])([^>]*)>"
    rf"|(?!span class=\"[^\"]*\">)([a-zA-Z][a-zA-Z0-9:-]*)(?=[^>]*?(?:\s(?i:{_ATTRS})\s*=|url\(#))(\s[^>]*)>)",
    re.DOTALL,
)
ATTR = re.compile(r"""([^\s"'>/=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?""")
TITLE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_RAW_END = {"script": re.compile(r"</script\s*>", re.IGNORECASE), "style": re.compile(r"</style\s*>", re.IGNORECASE)}

Attrs = list[tuple[str, "str | None"]]


def _attributes(text: str) -> tuple[Attrs, bool]:
    """The attributes of a start tag (names lowercased, values unescaped) and whether it ends in `/>`."""
    text = text.rstrip()
    closed = text.endswith("/")
    if closed:
        text = text[:-1]
    attrs: Attrs = []
    for m in ATTR.finditer(text):
        value = m.group(2) if m.group(2) is not None else m.group(3) if m.group(3) is not None else m.group(4)
        attrs.append((m.group(1).lower(), None if value is None else html.unescape(value)))
    return attrs, closed


def _raw_end(tag: str, text: str, start: int) -> int:
    """Where the end tag of a <script>/<style> opened before `start` ends."""
    m = _RAW_END[tag].search(text, start)
    return m.end() if m else len(text)


def _tokens(text: str):
    """(match, kind, tag, attribute text) of the tags that matter, in order; <script>/<style>
    content is skipped (the caller gets a "raw" token with its span)."""
    pos = 0
    while True:
        m = TOKEN.search(text, pos)
        if m is None:
            return
        pos = m.end()
        if m.group(1):
            yield m, "end", m.group(1).lower(), ""
        elif m.group(2):
            tag = m.group(2).lower()
            yield m, "start", tag, m.group(3)
            if tag in _RAW_END and not m.group(3).rstrip().endswith("/"):
                pos = _raw_end(tag, text, pos)
        elif m.group(4):
            yield m, "start", m.group(4).lower(), m.group(5)
        # else a comment: copied as it is


class PageScanner:
    """First pass over a page: its links, ids, title, stylesheets and scripts."""

    def __init__(self, text: str) -> None:
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.styles: list[str] = []
        self.scripts: list[str] = []
        title = TITLE.search(text)
        self.title = html.unescape(TAGS.sub("", title.group(1))) if title else ""
        for _, kind, tag, attr_text in _tokens(text):
            if kind == "start":
                self._start(tag, dict(_attributes(attr_text)[0]))

    def _start(self, tag: str, values: dict[str, str | None]) -> None:
        if values.get("id") is not None:
            self.ids.add(values["id"])  # type: ignore[arg-type]
        if tag == "a" and values.get("name") is not None:
            self.ids.add(values["name"])  # type: ignore[arg-type]
        if tag == "link":
            if "stylesheet" in (values.get("rel") or "").lower().split() and values.get("href"):
                self.styles.append(values["href"])  # type: ignore[arg-type]
            return
        if tag == "script" and values.get("src") is not None:
            self.scripts.append(values["src"])  # type: ignore[arg-type]
            return
        for name in ("href", "src"):
            if values.get(name) is not None:
                self.links.append(values[name])  # type: ignore[arg-type]


class PageRewriter:
    """Second pass: the page's <body> content, streamed out with its links and ids rewritten;
    what needs no change is copied in slices."""

    def __init__(self, page_id: str, link: Callable[[str], tuple[str | None, tuple[str, str]]], out: IO[str]):
        self.page_id = page_id
        self.link = link  # (the #anchor a link becomes, or None and (the note, the url) when it becomes plain text)
        self.out = out

    def run(self, text: str) -> None:
        out = self.out
        copy: int | None = None  # where the slice not yet written starts, inside <body>
        anchors: list[tuple[tuple[str, str] | None, int]] = []  # open <a>: (plain-text note or None, where its text starts)

        def flush(upto: int) -> None:
            if copy is not None and upto > copy:
                out.write(text[copy:upto])

        for m, kind, tag, attr_text in _tokens(text):
            if kind == "end":
                if copy is None:
                    continue
                if tag == "body":
                    flush(m.start())
                    copy = None
                elif tag == "a" and anchors:
                    plain, inner = anchors.pop()
                    if plain is not None:
                        flush(m.start())
                        out.write("</span>" + _note(plain, text[inner:m.start()]))
                        copy = m.end()
                continue
            if tag == "body":
                copy = m.end()
                continue
            if copy is None:
                continue
            attrs, closed = _attributes(attr_text)
            if tag in _RAW_END and not closed:
                end = _raw_end(tag, text, m.end())
                kind_ = (dict(attrs).get("type") or "").strip().lower()
                if tag == "style" or any(k == "src" for k, _ in attrs) or kind_ in JS_TYPES:
                    # an inline script or style would be refused by the CSP (as it was in the report)
                    flush(m.start())
                    copy = end
                    continue
                changed, new_attrs, _ = self._rewrite_attrs(tag, attrs)
                if changed:  # a data block (JSON): kept, its id prefixed
                    flush(m.start())
                    out.write(_tag(tag, new_attrs, False))
                    copy = m.end()
                continue
            if tag in ("link", "meta", "base", "script", "style") or tag in EMBEDS:
                flush(m.start())
                if tag in EMBEDS:  # the file holds no image nor embedded document: its description stays
                    alt = dict(attrs).get("alt") or dict(attrs).get("title") or ""
                    out.write(f'<span class="tlp-note">[{tag} left out{": " if alt else ""}{html.escape(alt)}]</span>')
                copy = m.end()
                continue
            changed, new_attrs, plain = self._rewrite_attrs(tag, attrs)
            if tag == "a" and not closed:
                anchors.append((plain, m.end()))
                if plain is not None:
                    flush(m.start())
                    out.write(_tag("span", [("class", "tlp-gone")] + [(k, v) for k, v in new_attrs if k == "title"], False))
                    copy = m.end()
                    continue
            if changed:
                flush(m.start())
                out.write(_tag(tag, new_attrs, closed))
                copy = m.end()
        flush(len(text))
        for plain, _ in anchors:
            if plain is not None:
                out.write("</span>")

    def _rewrite_attrs(self, tag: str, attrs: Attrs) -> tuple[bool, Attrs, tuple[str, str] | None]:
        changed = False
        plain: tuple[str, str] | None = None
        result: Attrs = []
        prefix = self.page_id + "~"
        toggle = any(k == "data-toggle-all" for k, _ in attrs)
        has_scope = any(k == "data-scope" for k, _ in attrs)
        for name, value in attrs:
            if name == "style" or name.startswith("on"):
                changed = True  # refused by the CSP in the report too
                continue
            if value is None:
                result.append((name, value))
                continue
            if name == "id" or (name == "name" and tag == "a"):
                result.append((name, prefix + value))
                changed = True
            elif name in ID_LIST_ATTRIBUTES:
                result.append((name, " ".join(prefix + v for v in value.split())))
                changed = True
            elif name == "data-scope":
                result.append((name, self._scope(value)))
                changed = True
            elif name in URL_ATTRIBUTES:
                changed = True
                href, note = self.link(value) if name in ("href", "xlink:href") else (None, ("", value))
                if href is not None:
                    result.append((name, href))
                elif tag in ("a", "area") and name in ("href", "xlink:href"):
                    plain = note
                # any other reference (src, srcset, ...) is dropped: the file holds nothing else
            elif "url(#" in value:
                result.append((name, URL_REF.sub(lambda m: f"url(#{prefix}{m.group(1)})", value)))
                changed = True
            else:
                result.append((name, value))
        if toggle and not has_scope:
            result.append(("data-scope", f'[id="{self.page_id}"] main'))
            changed = True
        return changed, result, plain

    def _scope(self, selector: str) -> str:
        selector = selector.strip()
        match = re.match(r"#([A-Za-z0-9_-]+)(.*)$", selector, re.DOTALL)
        if match:
            return f'[id="{self.page_id}~{match.group(1)}"]{match.group(2)}'
        return f'[id="{self.page_id}"] {selector}'


def _note(plain: tuple[str, str], inner_html: str) -> str:
    """What follows a link made plain text: its url when external (unless the text is the url), why otherwise."""
    note, url = plain
    text = html.unescape(TAGS.sub("", inner_html)).strip()
    extra = []
    if url and not note and text != url:
        extra.append(url)
    if note:
        extra.append(note)
    return f' <span class="tlp-note">({html.escape(" — ".join(extra))})</span>' if extra else ""


def _tag(tag: str, attrs: Attrs, closed: bool) -> str:
    parts = [tag]
    for name, value in attrs:
        parts.append(name if value is None else f'{name}="{html.escape(value, quote=True)}"')
    return "<" + " ".join(parts) + (" />" if closed else ">")
