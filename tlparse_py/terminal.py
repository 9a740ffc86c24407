"""Text from a log, made safe to print on a terminal.

A log is input we do not control: a record kind, a file name or a line snippet may hold escape
sequences (`ESC ] 0 ; title BEL`, `CSI 2 J`, ...) that a terminal would obey. Everything the command
line prints that came from a log goes through `sanitize`, whether or not stderr is a terminal
(stderr is often captured and later `cat`-ed into one).
"""

from __future__ import annotations

import re

from .patterns import lazy

# C0 controls, DEL, C1 controls (0x9b is a one-byte CSI), bidi overrides and isolates (they
# reorder what is shown), line/paragraph separators, and lone surrogates (from undecodable file
# names: printing them would raise instead of showing something).
_UNSAFE = lazy("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_KEEP_NEWLINES = lazy("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}"


def sanitize(text: object, keep_newlines: bool = False) -> str:
    """`text` with every control character written as an escape (`\\x1b`, `\\u009b`).

    `keep_newlines` is for whole messages of ours that span lines; pieces of a log are sanitized
    without it, so they cannot start a fake line either.
    """
    pattern = _UNSAFE_KEEP_NEWLINES if keep_newlines else _UNSAFE
    return pattern.sub(_escape, str(text))
