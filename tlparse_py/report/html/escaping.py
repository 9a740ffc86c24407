"""What a page may contain: a value as escaped text, a URL safe to link to, trusted HTML as Markup.

Every function of this package builds HTML as a plain str from literal markup and `esc` of each
value: markupsafe's escaping exactly (`&<>'"`), a `Markup` as it is (the highlighter's and our own
trusted HTML), an int as its digits. The only trusted HTML a page gets from outside this package
(JSON for a script, the user's own --custom-header-html) is made Markup here: `script_json`,
`trusted_html`.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from markupsafe import Markup, escape

__all__ = ["Markup", "esc", "safe_href", "script_json", "trusted_html", "SAFE_SCHEMES"]


def esc(value: Any) -> str:
    """`value` as HTML text, as the templates' autoescape writes it (`str(escape(value))`, without
    the Markup copies: a text is escaped by str.replace in C)."""
    kind = type(value)
    if kind is str:
        # most texts have nothing to escape: looking is cheaper than five replaces that find nothing
        if "&" in value or "<" in value or ">" in value or "'" in value or '"' in value:
            if len(value) > LONG_TEXT:  # (a record's metadata as JSON: one pass in C beats five replaces, 8 against 12 µs at 3.5 KB)
                return str(escape(value))
            return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#39;").replace('"', "&#34;")
        return value
    if kind is int:
        return str(value)
    if kind is Markup:  # trusted HTML: as it is
        return value
    return str(escape(value))


LONG_TEXT = 256  # characters past which a text to escape is escaped by markupsafe in one pass

SAFE_SCHEMES = {"http", "https"}


def safe_href(url: str) -> str | None:
    """A URL from a log, if it is safe to link to (http/https only); None otherwise."""
    try:
        scheme = urlsplit(url.strip()).scheme.lower()
    except ValueError:
        return None
    return url if scheme in SAFE_SCHEMES else None


def script_json(value: Any) -> Markup:
    """JSON for a `<script type="application/json">` block: `<`, `>` and `&` become \\u escapes, so
    no text from a log can close the script element, and the JSON stays parseable as is."""
    text = json.dumps(value, indent=2, sort_keys=True)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def trusted_html(text: str) -> Markup:
    """The user's own --custom-header-html: inserted as HTML on purpose (it never comes from a log)."""
    return Markup(text)
