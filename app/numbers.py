"""How the app shows a number (report.md, study.md, the console, the web UI): a leaf
module, so that the study's reports and the run report's confirmation section can share it
without importing each other."""

from __future__ import annotations

from lero.graph.summary import is_number


def fmt_number(value: object, digits: int = 3) -> str:
    """Fixed digits, or an em dash for a missing / non-finite value."""
    return f"{value:.{digits}f}" if is_number(value) else "—"
