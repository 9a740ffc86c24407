"""A small link checker for a written report: every relative href/src resolves, every #anchor exists."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.scripts: list[dict[str, str | None]] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        for name in ("href", "src"):
            if attributes.get(name) is not None:
                self.links.append(attributes[name])
        for name in ("id", "name"):
            if attributes.get(name):
                self.ids.add(attributes[name])
        if tag == "script":
            self.scripts.append(attributes)


def parse(page: Path) -> _Collector:
    collector = _Collector()
    collector.feed(page.read_text(encoding="utf-8", errors="replace"))
    return collector


def broken_links(root: Path) -> list[str]:
    """'page: link (reason)' for every relative link in every page of the report that does not resolve."""
    root = root.resolve()
    pages = {page.resolve(): parse(page) for page in root.rglob("*.html")}
    problems = []
    for page, collector in pages.items():
        for link in collector.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc:
                if parts.scheme not in ("http", "https"):
                    problems.append(f"{page.relative_to(root)}: {link} (scheme)")
                continue
            target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
            if not target.is_file():
                problems.append(f"{page.relative_to(root)}: {link} (missing file)")
                continue
            if root not in target.parents:
                problems.append(f"{page.relative_to(root)}: {link} (outside the report)")
                continue
            if parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else parse(target).ids
                if unquote(parts.fragment) not in ids:
                    problems.append(f"{page.relative_to(root)}: {link} (no such anchor)")
    return problems
