"""What every report page shows around its content: the head, the top bar, the live banner and the
footer. The Python pages wrap their content in `page_shell` (or, written in pieces, put `page_head`
and `page_foot` around it); base.html.j2 calls `shell_head` and `shell_foot` (template globals), so
the markup is defined here only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..._version import __version__
from .escaping import esc
from .parts import plural

if TYPE_CHECKING:
    from .models import LiveBannerModel, LiveMarkModel, PageModel

VERSION = esc(__version__)
HEAD = ('<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'self\'; script-src \'self\'; '
        'img-src \'self\' data:; base-uri \'none\'; form-action \'none\'">\n'
        f'<meta name="generator" content="tlparse-py {VERSION}">\n')


def source_path(source: Any) -> Any:
    """The log the page was written from (`Page.source`: an InputInfo, or a dict of one)."""
    return source["path"] if type(source) is dict else source.path


def page_shell(page: PageModel, live: LiveMarkModel | None, content: str) -> str:
    """A whole page: `content` (the page's own HTML) inside the shell every page has."""
    return f"{page_head(page, live)}{content}{page_foot(page)}"


def page_head(page: PageModel, live: LiveMarkModel | None) -> str:
    """The shell before the page's content (a page written in pieces: `page_shell` less its content)."""
    return shell_head(page.title, page.root, source_path(page.source), live, page.usual_index, page.failures_link, page.compile_page,
                      page.compile_id)


def page_foot(page: PageModel) -> str:
    """The shell after the page's content."""
    return shell_foot(page.root, source_path(page.source))


def shell_head(title: Any, root: str, path: Any, live: LiveMarkModel | None, usual_index: str, failures_link: bool,
               compile_page: str | None, compile_id: Any) -> str:
    """The page up to its content: head, top bar and, on a live page, the live banner."""
    root = esc(root)
    out = [HEAD, f'<title>{esc(title)} · tlparse-py</title>\n']
    out.extend(f'<link rel="stylesheet" href="{root}static/{sheet}.css">\n' for sheet in ("report", "pygments", "search"))
    if live is not None:
        out.append(f'<meta name="tlparse-live" data-root="{root}" data-page="{esc(live.page)}" data-version="{esc(live.version)}">\n')
    out.append(f'</head>\n<body>\n<header class="topbar">\n<a class="brand" href="{root}index.html">tlparse-py</a>\n<nav aria-label="Report">\n')
    if usual_index != "index.html":
        out.append(f'<a href="{root}index.html">vLLM summary</a>\n<a href="{root}{esc(usual_index)}">Index</a>\n')
    else:
        out.append(f'<a href="{root}index.html">Index</a>\n')
    if failures_link:
        out.append(f'<a href="{root}failures_and_restarts.html">Failures &amp; restarts</a>')
    if compile_page:
        named = esc(compile_id) if compile_id is not None else "(unknown)"
        out.append(f'<a href="{root}{esc(compile_page)}">Compile {named}</a>')
    out.append(f'</nav>\n<div class="search" id="search" role="search" data-root="{root}" hidden><input type="search" placeholder="Search the report (/)" '
               'aria-label="Search the report" autocomplete="off" spellcheck="false"><div class="search-results" hidden></div></div>\n'
               f'<span class="where">{esc(path)}</span>\n</header>\n<main>\n')
    if live is not None and live.banner:
        out.append(live_banner(live.banner, root))
    return "".join(out)


def shell_foot(root: str, path: Any) -> str:
    """The page after its content: footer and scripts."""
    root = esc(root)
    scripts = "".join(f'<script src="{root}static/{script}.js"></script>\n' for script in ("colour", "report", "search-index", "search"))
    return f"</main>\n<footer>Written by tlparse-py {VERSION} from <code>{esc(path)}</code>.</footer>\n{scripts}</body>\n</html>\n"


def live_banner(banner: LiveBannerModel, root: str) -> str:
    """What a page written while the log is still read says at its top (`views.live.live_banner`);
    `root` already escaped."""
    last = f"last record {esc(banner.last_record)}" if banner.last_record else "no record yet"
    ranks = f" on {esc(banner.ranks)} {plural(banner.ranks, 'rank')}" if banner.ranks else ""
    compiling = []
    for c in banner.compiling:
        name = f'<a href="{root}{esc(c.url)}">{esc(c.label)}</a>' if c.url else esc(c.label)
        when = (f'for <span data-since-epoch="{esc(c.since_epoch)}">{esc(c.elapsed)}</span>' if c.elapsed is not None
                else f"since {esc(c.since)}")
        compiling.append(f", compiling {name} {when}")
    return ('<div class="live-banner" role="status" id="live-banner">\n'
            f'<p><span class="live-dot" aria-hidden="true"></span><b>live</b>: {last}, {esc(banner.compiles)} {plural(banner.compiles, "compile")} '
            f'so far{ranks}{"".join(compiling)}.</p>\n'
            f'<p class="muted">{esc(banner.note)} This page reloads itself when the report changes; the final report replaces it when the program has exited.</p>\n'
            '</div>\n')
