"""The docs and the code carry no history: no tracker numbers.

A sentence that points at a tracker entry tells a newcomer nothing the sentence itself does
not (the fact, the measurement, the threat), and it goes stale when the tracker moves; git
holds the history. Checked over every file a contributor reads: the code, its tests and
benchmarks, README.md and docs/.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("agents", "app", "graph", "sandbox", "training", "benchmarks", "tests")
SUFFIXES = (".py", ".md", ".html")
TRACKER_NUMBER = re.compile(r"issues?\s+#?\d+", re.IGNORECASE)  # the review's grep, also across a line break


def read_files() -> list[Path]:
    """Every .py, .md and .html file of the code folders, README.md and docs/*.md."""
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for folder in FOLDERS:
        files += sorted(p for p in (REPO / folder).rglob("*") if p.suffix in SUFFIXES and ".venv" not in p.parts)
    return files


def tracker_numbers(text: str) -> list[tuple[int, str]]:
    """(line, words) of every tracker number in `text`."""
    return [(text.count("\n", 0, found.start()) + 1, " ".join(found.group().split()))
            for found in TRACKER_NUMBER.finditer(text)]  # fmt: skip


def test_the_pattern_finds_a_number_on_one_line_and_across_a_break():
    text = "fixed (Issue #" + "7) and\nthen issue\n" + "12 too"  # split so this file holds no number
    assert tracker_numbers(text) == [(1, "Issue #" + "7"), (2, "issue " + "12")]
    assert tracker_numbers("the issue's target, 3 issues, issue #x") == []


def test_no_file_names_a_tracker_number():
    files = read_files()
    assert REPO / "docs" / "internals.md" in files and Path(__file__) in files
    found = [f"{path.relative_to(REPO)}:{line}: {words}"
             for path in files for line, words in tracker_numbers(path.read_text())]  # fmt: skip
    assert not found, "say the fact, not the tracker number:\n" + "\n".join(found)
