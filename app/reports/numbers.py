"""How the app shows a number (report.md, study.md, the console, the web UI): a leaf
module, so that the study's reports and the run report's confirmation section can share it
without importing each other."""

from __future__ import annotations

import math

from lero.training.validation import finite_number


def fmt_number(value: object, digits: int = 3) -> str:
    """Fixed digits; a number no float holds as it is (`odd_number`); an em dash for a
    missing value or one that is no number."""
    return f"{value:.{digits}f}" if finite_number(value) else odd_number(value) or "—"


def odd_number(value: object) -> str | None:
    """How a number read from a run dir that is not finite is shown: `nan`, `inf`, `-inf`,
    or `out of range` (an integer beyond the float range, `10**400`); None for anything
    else (a finite number, a missing value, text)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or finite_number(value):
        return None
    if isinstance(value, int):
        return "out of range"
    return "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"


def fmt_duration(seconds: object) -> str:
    """Seconds as a person reads them: "38.4 s", "3 min 05 s", "1 h 02 min"; an em dash for a
    missing / non-finite value."""
    if not finite_number(seconds):
        return "—"
    value = float(seconds)  # type: ignore[arg-type]
    if value < 60:
        return f"{value:.1f} s"
    minutes, secs = divmod(round(value), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"
