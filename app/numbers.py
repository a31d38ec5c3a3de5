"""How the app shows a number (report.md, study.md, the console, the web UI): a leaf
module, so that the study's reports and the run report's confirmation section can share it
without importing each other."""

from __future__ import annotations

import math

from lero.graph.summary import is_number


def fmt_number(value: object, digits: int = 3) -> str:
    """Fixed digits; a number no float holds as it is (`odd_number`); an em dash for a
    missing value or one that is no number."""
    return f"{value:.{digits}f}" if is_number(value) else odd_number(value) or "—"


def odd_number(value: object) -> str | None:
    """How a number read from a run dir that is not finite is shown: `nan`, `inf`, `-inf`,
    or `out of range` (an integer beyond the float range, `10**400`); None for anything
    else (a finite number, a missing value, text)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or is_number(value):
        return None
    if isinstance(value, int):
        return "out of range"
    return "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"
