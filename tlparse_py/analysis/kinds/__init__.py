"""Record kinds: the one registry (`registry`), the parser API (`context`) and torch's kinds (`builtin`).

Importing this package declares every built-in kind; `load_plugins()` adds kinds declared by other
packages through the `tlparse_py.kinds` entry-point group.
"""

from __future__ import annotations

from . import builtin as _builtin  # noqa: F401  (declares the built-in kinds)
from .context import ParseContext
from .plugins import load_plugins
from .registry import (
    FILE,
    GLOBAL,
    KINDS,
    LINK,
    NAMES,
    PAYLOAD,
    PLACED,
    REFORMAT,
    SECTIONS,
    Kind,
    Output,
    PageSection,
    Step,
    Symbol,
    collected,
    declare,
    declare_section,
    declared,
    describe,
    kind,
    known,
    named,
    parsers_for,
    payload_name,
    title_of,
    undeclare,
    undeclare_section,
    with_lang,
)

__all__ = [
    "FILE", "GLOBAL", "KINDS", "LINK", "NAMES", "PAYLOAD", "PLACED", "REFORMAT", "SECTIONS", "Kind", "Output",
    "PageSection", "ParseContext", "Step", "Symbol", "collected", "declare", "declare_section", "declared", "describe", "kind", "known", "load_plugins", "named", "parsers_for",
    "payload_name", "title_of", "undeclare", "undeclare_section", "with_lang",
]
