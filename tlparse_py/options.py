"""How a report was asked for: the run's settings, one object every stage reads (never a fact of the log)."""

from __future__ import annotations


from msgspec import Struct, field

from .limits import Limits


class Options(Struct):
    plain_text: bool = False
    custom_header_html: str = ""
    export: bool = False  # -e: tlparse's export report (only exported programs and guard pages are numbered)
    provenance: bool = False  # -i: a provenance-tracking highlighter page per compile id
    highlight_mb: float = 0.0  # text highlighted with Pygments per report; the rest is coloured by the page's script
    inline_mb: float = 8.0  # text shown inline on compile-id pages per report; the rest is linked
    workers: int | None = None  # highlighting processes beside the reader (None: by input size and cores)
    limits: Limits = field(default_factory=Limits)  # bounds on lines, gunzip and raw.log (limits.py)
    source_url: str = ""  # --source-url: a link template for user code ({path}, optionally {line})
    source_root: str = ""  # --source-root: stripped from logged file names to make {path}
    search_mb: float = 20.0  # the search index, at most (search.py); past it the search box says what it covers
    # compile fingerprints (normalised graphs and code, input shapes): only the multi-rank comparison
    # reads them, and hashing every graph is a good part of reading a big log, so it asks for them
    fingerprints: bool = False
    # a big log is scanned in a forked child beside the reading (reader.py); off where every core
    # already reads a log of its own (the rank builds of --all-ranks-html)
    scanning_child: bool = True
