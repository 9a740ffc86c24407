"""Turning text from a log into file names that are safe to write and to link to."""

from __future__ import annotations

import hashlib

from .patterns import lazy

_UNSAFE = lazy(r"[^A-Za-z0-9._+=,@-]")
MAX_COMPONENT = 150


def safe_component(name: str) -> str:
    """A file-name component made from log text: no separators, no `..`, no hidden files, bounded length.

    Names that are too long keep a short hash of the original so two different names never collide.
    """
    cleaned = _UNSAFE.sub("_", name)
    if cleaned.startswith("."):
        cleaned = "_" + cleaned[1:]
    cleaned = cleaned or "_"
    if len(cleaned) > MAX_COMPONENT:
        digest = hashlib.md5(name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        cleaned = f"{cleaned[:MAX_COMPONENT]}-{digest}"
    return cleaned


def safe_relpath(path: str) -> str:
    """Every component of a `/`-separated path made safe (an absolute or `..` path stays inside)."""
    return "/".join(safe_component(part) for part in path.split("/") if part)


def numbered(name: str, number: int) -> str:
    """`dynamo_guards.html` → `dynamo_guards_4.html`: tlparse's unique suffix before the extension."""
    stem, dot, ext = name.rpartition(".")
    if not dot:
        return f"{safe_component(name)}_{number}"
    return f"{safe_component(stem)}_{number}.{safe_component(ext)}"


def compile_page_url(compile_id, generation: int = 0) -> str:  # CompileId | None (paths stays below the model)
    """The page of a compile id, as tlparse lays it out: `<dirname>/index.html`.

    A compile id reused after `torch._dynamo.reset()` names several compiles: generation N > 0 gets
    `<dirname>/generation_N.html` beside it (the files stay where tlparse puts them).
    """
    if compile_id is None:
        return "unknown/index.html"
    page = f"generation_{generation}.html" if generation else "index.html"
    return f"{compile_id.directory_key().dirname}/{page}"


def provenance_page_url(compile_id) -> str:
    return f"provenance_tracking_{'unknown' if compile_id is None else compile_id.directory_key().dirname}.html"
