"""Jinja, set up for the page templates (templates/*.j2), through its public API only. Imported when
a page that is a template is rendered (`render.environment`), never before: a report that renders
none (a single log's: its pages are Python), `--version` and the notebook's analysis never import Jinja.

The settings the templates are written for: autoescape on, an undefined value fails where it is used
(`StrictUndefined`), and a block tag takes the newline after it. Jinja compiles each template to
Python once per process, from one of two places:

- an installed wheel carries them compiled (`compile_templates`, run by hatch_build.py when the wheel
  is built: Jinja's `Environment.compile_templates`; pip turns the modules into bytecode at
  install), loaded by Jinja's `ModuleLoader` when they were compiled from these very templates by
  this Jinja with these settings (`templates_key`);
- otherwise (a source checkout, an edited template, another Jinja) Jinja compiles the source and keeps
  the code in the user's cache folder (`FileSystemBytecodeCache`, report.cache), so the next run
  only loads it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jinja2

from .._version import __version__
from . import cache

SETTINGS: dict[str, Any] = {"autoescape": True, "trim_blocks": True, "lstrip_blocks": True, "keep_trailing_newline": True}
KEY_FILE = "templates.key"  # in the compiled templates' folder: the `templates_key` they were compiled under


def template_names(template_dir: Path) -> list[str]:
    return sorted(p.relative_to(template_dir).as_posix() for p in template_dir.rglob("*.j2"))


def _compiled_by() -> bytes:
    """What compiled code depends on beside its template: Jinja's version and the settings."""
    return f"{jinja2.__version__}\0{sorted(SETTINGS.items())}\0undefined=StrictUndefined\0".encode()


def templates_key(template_dir: Path) -> str:
    """What the compiled templates were compiled from: every template's source, Jinja's version and the settings."""
    digest = hashlib.sha256(_compiled_by())
    for name in template_names(template_dir):
        digest.update(name.encode() + b"\0" + (template_dir / name).read_bytes() + b"\0")
    return digest.hexdigest()


def environment(template_dir: Path, compiled_dir: Path, globals: Mapping[str, Any], filters: Mapping[str, Callable[..., Any]]) -> jinja2.Environment:
    """The pages' Jinja: the wheel's compiled templates when they are this source's, else the
    source templates with their code cached."""
    if _shipped_key(compiled_dir) == templates_key(template_dir):
        loader: jinja2.BaseLoader = jinja2.ModuleLoader(compiled_dir)
        bytecode_cache = None
    else:
        loader, bytecode_cache = jinja2.FileSystemLoader(template_dir), _bytecode_cache()
    return _environment(loader, bytecode_cache, globals, filters)


def _environment(loader: jinja2.BaseLoader, bytecode_cache: jinja2.BytecodeCache | None, globals: Mapping[str, Any],
                 filters: Mapping[str, Callable[..., Any]]) -> jinja2.Environment:
    # auto_reload off: a report's templates do not change while it is written (no stat per page)
    env = jinja2.Environment(loader=loader, bytecode_cache=bytecode_cache, undefined=jinja2.StrictUndefined, auto_reload=False, **SETTINGS)
    env.globals.update(globals)
    env.filters.update(filters)
    return env


def _shipped_key(compiled_dir: Path) -> str | None:
    try:
        return (compiled_dir / KEY_FILE).read_text().strip()
    except OSError:  # a source checkout: none shipped
        return None


class QuietBytecodeCache(jinja2.FileSystemBytecodeCache):
    """Jinja's cache of compiled templates in a folder, that a report never fails by: an entry that
    cannot be read only costs a compile, one that cannot be written is not kept."""

    def load_bytecode(self, bucket: Any) -> None:  # a jinja2.bccache.Bucket
        try:
            super().load_bytecode(bucket)
        except Exception:  # noqa: BLE001 - a damaged entry (unpickling it can raise anything): compiled again
            bucket.reset()

    def dump_bytecode(self, bucket: Any) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """The compiled templates' folder in the user's cache, named by what the code depends on; None when caching is off."""
    folder = cache.folder(f"templates-{__version__}-{hashlib.sha256(_compiled_by()).hexdigest()[:12]}")
    return QuietBytecodeCache(str(folder)) if folder is not None else None


def compile_templates(folder: Path, template_dir: Path, filters: Mapping[str, Callable[..., Any]]) -> None:
    """Every template compiled by Jinja into `folder` (the package `compiled_templates` of a wheel),
    with the key `environment` checks them by. A template Jinja cannot compile fails the build."""
    env = _environment(jinja2.FileSystemLoader(template_dir), None, {}, filters)
    folder.mkdir(parents=True, exist_ok=True)
    env.compile_templates(str(folder), filter_func=lambda name: name.endswith(".j2"), zip=None, ignore_errors=False)
    (folder / "__init__.py").write_text('"""The page templates, compiled by Jinja when the wheel was built (see report.template_env)."""\n')
    (folder / KEY_FILE).write_text(templates_key(template_dir) + "\n")
