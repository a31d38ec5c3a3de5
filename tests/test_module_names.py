"""No two modules share a file name unless they are one concept in two places, and say so.

A newcomer who meets `runner.py` twice must not have to read both to learn they differ: a
repeated module name is allowed only for twins, and each twin's docstring names the other's
path (`agents/designer.py` <-> `agents/offline/designer.py`). Different concepts get
different names.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("agents", "app", "graph", "sandbox", "training")
PACKAGE_FILES = {"__init__.py", "__main__.py"}  # a package's own entry, named by Python


def repeated_modules(root: Path) -> dict[str, list[str]]:
    """Module file name -> the repo-relative paths that carry it, for names used more than once."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            if path.name not in PACKAGE_FILES and ".venv" not in path.parts:
                by_name[path.name].append(path.relative_to(root).as_posix())
    return {name: paths for name, paths in by_name.items() if len(paths) > 1}


def unnamed_twins(root: Path) -> list[str]:
    """'A does not name B' for every repeated module A whose docstring misses a namesake B's path."""
    problems = []
    for paths in repeated_modules(root).values():
        for path in paths:
            doc = ast.get_docstring(ast.parse((root / path).read_text())) or ""
            doc = " ".join(doc.split())
            problems += [f"{path} does not name {other}" for other in paths if other != path and other not in doc]
    return problems


def test_every_repeated_module_name_is_a_pair_of_twins_that_name_each_other() -> None:
    assert unnamed_twins(REPO) == []


def _module(root: Path, path: str, doc: str) -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(f'"""{doc}"""\n')


def test_a_namesake_that_does_not_name_its_twin_is_found(tmp_path: Path) -> None:
    _module(tmp_path, "graph/runner.py", "Durable runs.")
    _module(tmp_path, "sandbox/runner.py", "The in-sandbox entry (not graph/runner.py).")
    _module(tmp_path, "training/hooks.py", "Unique.")
    assert repeated_modules(tmp_path) == {"runner.py": ["graph/runner.py", "sandbox/runner.py"]}
    assert unnamed_twins(tmp_path) == ["graph/runner.py does not name sandbox/runner.py"]
