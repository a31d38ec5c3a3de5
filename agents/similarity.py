"""Near-duplicate detection for candidate code, so a generation does not train one idea twice.

Code is compared as a token sequence with comments, docstrings, strings and layout
removed; two modules whose token sequences match for at least NEAR_DUPLICATE of their
length (difflib ratio) are the same idea.
"""

from __future__ import annotations

import difflib
import io
import re
import tokenize

NEAR_DUPLICATE = 0.95
IGNORED = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
}


def code_tokens(code: str) -> list[str]:
    """Normalised tokens of `code`; a regex split when the code does not tokenize."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return re.findall(r"\w+|[^\w\s]", code)
    return [
        "STR" if t.type == tokenize.STRING else t.string for t in tokens if t.type not in IGNORED
    ]


def similarity(first: str, second: str) -> float:
    return difflib.SequenceMatcher(
        None, code_tokens(first), code_tokens(second), autojunk=False
    ).ratio()


def is_near_duplicate(code: str, others: list[str], threshold: float = NEAR_DUPLICATE) -> bool:
    return any(similarity(code, other) >= threshold for other in others)
