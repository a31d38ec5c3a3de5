"""JSON that a model wrote, read with bounds checked before parsing.

A reply (or a genome line in a module it edited) is data from outside: `json.loads` alone
recurses once per nesting level (100k levels raise RecursionError) and reads any length.
`loads` refuses text longer than `MAX_CHARS` or nested deeper than `MAX_DEPTH` before it
parses, and `NaN` / `Infinity` (not JSON); every refusal is a ValueError, which the
callers already count as "not JSON". Integers stay exact (Python refuses more than 4300
digits, also a ValueError); `finite_float` is the one conversion of a parsed number to a
float, so an integer beyond the float range is a ValueError, not an OverflowError.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from lero.training.validation import finite_number

MAX_CHARS = 64 << 10  # a design object or a verdict is well under 2 KiB
MAX_DEPTH = 32  # the schemas nest 3 levels
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def nesting_depth(text: str) -> int:
    """The deepest `[`/`{` nesting of `text`, brackets inside JSON strings not counted."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(1 if b in "[{" else -1 for b in brackets), default=0)


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def loads(text: str) -> Any:
    """`json.loads(text)` (raw control characters allowed in strings: small models write
    them) after the bounds above; ValueError (one line) for anything refused."""
    if len(text) > MAX_CHARS:
        raise ValueError(f"{len(text)} characters, more than the {MAX_CHARS} read as JSON")
    depth = nesting_depth(text)
    if depth > MAX_DEPTH:
        raise ValueError(f"nested {depth} levels deep, more than {MAX_DEPTH}")
    return json.loads(text, strict=False, parse_constant=_no_constant)


def finite_float(value: object) -> float:
    """A parsed JSON number as a finite float; ValueError for anything else (a bool, a string,
    an integer beyond the float range, NaN)."""
    if not finite_number(value):
        raise ValueError(f"not a finite number: {str(value)[:40]}")
    return float(value)
