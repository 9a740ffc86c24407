"""The plugin API for record kinds: what a package declaring kinds of its own imports.

The registry lives in `tlparse_py.analysis.kinds` (records → analysis); this module hands its public
names on under the stable path plugins use (`from tlparse_py.kinds import declare, kind, ...`).
"""

from __future__ import annotations

from .analysis.kinds import (
    FILE,
    GLOBAL,
    KINDS,
    LINK,
    NAMES,
    PAYLOAD,
    REFORMAT,
    SECTIONS,
    Kind,
    Output,
    ParseContext,
    Step,
    Symbol,
    declare,
    describe,
    kind,
    known,
    load_plugins,
    named,
    parsers_for,
    payload_name,
    title_of,
    undeclare,
    with_lang,
)

__all__ = [
    "FILE", "GLOBAL", "KINDS", "LINK", "NAMES", "PAYLOAD", "REFORMAT", "SECTIONS", "Kind", "Output",
    "ParseContext", "Step", "Symbol", "declare", "describe", "kind", "known", "load_plugins", "named", "parsers_for",
    "payload_name", "title_of", "undeclare", "with_lang",
]
