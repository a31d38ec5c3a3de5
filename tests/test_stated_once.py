"""The selection episodes' seed is written once, in training.defaults; everyone imports it.

A second literal copy drifts silently: the sandbox would measure candidates on episodes
other than those studies keep their held-out seeds apart from.
"""

from __future__ import annotations

import ast
from pathlib import Path

from lero.training.defaults import EVAL_SEED

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("agents", "app", "graph", "sandbox", "training", "benchmarks", "tests")
OWNER = REPO / "training" / "defaults.py"


def literal_copies(value: int) -> list[str]:
    """path:line of every integer literal equal to `value` in the code, its tests and benchmarks."""
    found = []
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Constant) and type(node.value) is int and node.value == value:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_the_evaluation_seed_is_written_only_where_it_lives():
    assert literal_copies(EVAL_SEED) == [f"{OWNER.relative_to(REPO)}:{_owner_line()}"]


def _owner_line() -> int:
    """The line of `EVAL_SEED = ...` in training/defaults.py."""
    for node in ast.parse(OWNER.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "EVAL_SEED" for t in node.targets):
            return node.lineno
    raise AssertionError("training/defaults.py no longer assigns EVAL_SEED")
