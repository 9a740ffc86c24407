"""The user's cache folder: compiled templates and Pygments results, kept between runs.

Where: `$TLPARSE_PY_CACHE_DIR` if set (set it empty to use no cache at all), else the platform's
user cache folder (`platformdirs`, e.g. `~/.cache/tlparse-py`). A cache that cannot be created or
written is simply not used: a report never fails because of it. The tool only ever deletes files it
names itself (`*.html` highlight entries in its own `highlight/` folder), and only to keep that folder
under its cap.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

ENV = "TLPARSE_PY_CACHE_DIR"
HIGHLIGHT_CAP = 256 * 1024 * 1024  # bytes of cached highlighting kept; the oldest entries go first past it
ENTRY_SUFFIX = ".html"


def root() -> Path | None:
    """The cache folder (not created yet), or None when caching is off."""
    configured = os.environ.get(ENV)
    if configured is not None:
        return Path(configured) if configured.strip() else None
    try:
        from platformdirs import user_cache_dir
    except ImportError:  # pragma: no cover - platformdirs is a dependency; a broken install still reports
        return None
    return Path(user_cache_dir("tlparse-py", appauthor=False))


def folder(name: str) -> Path | None:
    """`<cache>/<name>`, created; None when caching is off or the folder cannot be made."""
    base = root()
    if base is None:
        return None
    path = base / name
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path if os.access(path, os.W_OK) else None


class HighlightCache:
    """Pygments HTML by (text md5, language, Pygments version): one file per entry, size-capped."""

    def __init__(self, path: Path, cap: int = HIGHLIGHT_CAP):
        self.path = path
        self.cap = cap
        self.written = 0

    @classmethod
    def open(cls, version: str) -> HighlightCache | None:
        path = folder(f"highlight-{version}")
        return cls(path) if path is not None else None

    def _entry(self, key: str) -> Path:
        return self.path / f"{key}{ENTRY_SUFFIX}"

    def get(self, key: str) -> str | None:
        entry = self._entry(key)
        try:
            html = entry.read_text("utf-8", "surrogatepass")
            os.utime(entry)  # recently used: trimmed last
        except (OSError, UnicodeDecodeError):
            return None
        return html

    def put(self, key: str, html: str) -> None:
        """Write atomically (a temp file renamed into place), so concurrent runs never read half an entry."""
        data = html.encode("utf-8", "surrogatepass")
        try:
            handle, temp = tempfile.mkstemp(dir=self.path, prefix=".tmp-")
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(temp, self._entry(key))
            self.written += len(data)
        except OSError:
            return

    def trim(self) -> None:
        """Past the cap, delete the least recently used entries until 3/4 of the cap is left."""
        if self.written == 0:
            return
        try:
            entries = [(e.stat().st_mtime, e.stat().st_size, e.path) for e in os.scandir(self.path)
                       if e.is_file(follow_symlinks=False) and e.name.endswith(ENTRY_SUFFIX)]
        except OSError:
            return
        total = sum(size for _, size, _ in entries)
        if total <= self.cap:
            return
        for _, size, path in sorted(entries):
            if total <= self.cap * 3 // 4:
                break
            try:
                os.unlink(path)
                total -= size
            except OSError:
                continue
