"""Links into the user's repository (--source-url / --source-root): user-code locations a page shows,
as links to the file and line they name."""

from __future__ import annotations

import posixpath
from urllib.parse import quote

from msgspec import Struct

from ...analysis.stacks import is_user_code
from ...patterns import lazy
from .escaping import safe_href

# a location as logs write it: `file.py:23`
_LOCATION = lazy(r"(.+?):(\d+)")


def check_source_url(template: str) -> str | None:
    """Why a --source-url template cannot be used; None when it can."""
    if "{path}" not in template:
        return "must contain {path} (e.g. https://github.com/org/repo/blob/SHA/{path}#L{line})"
    if safe_href(template.replace("{path}", "x").replace("{line}", "1")) is None:
        return "must be an http:// or https:// URL"
    return None


class SourceLinks(Struct, frozen=True):
    """--source-url / --source-root: user-code locations as links into the user's repository."""

    url: str = ""  # a template with {path} and optionally {line}; empty: no links
    root: str = ""  # stripped from a log's file names to make {path}

    def href(self, filename: str, line: int) -> str | None:
        """The link to `filename:line`, or None (no --source-url, torch or library code, outside the root)."""
        if not self.url or line <= 0 or not is_user_code(filename):
            return None
        # `..` is resolved first: a logged `/repo/../../attacker/x.py` must not climb out of the root,
        # nor a relative `../x.py` out of the repository a browser resolves the link in
        path = posixpath.normpath(filename.replace("\\", "/")) if filename else ""
        if self.root:
            root = posixpath.normpath(self.root).rstrip("/") + "/"
            if path.startswith(root):
                path = path[len(root):]
            elif path.startswith("/"):
                return None  # an absolute path elsewhere: not in the repository
        path = path.lstrip("/")
        if not path or path == "." or path == ".." or path.startswith("../"):
            return None
        url = self.url.replace("{path}", quote(path, safe="/")).replace("{line}", str(line))
        return safe_href(url)

    def href_of(self, location: str) -> str | None:
        """The link for a `file.py:23` location string."""
        match = _LOCATION.fullmatch(location.strip()) if location else None
        return self.href(match.group(1), int(match.group(2))) if match else None
