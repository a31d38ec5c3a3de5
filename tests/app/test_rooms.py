"""app/ is rooms a person recognises: its sub-packages are exactly the rooms README.md's
"What it does" names for `app/` (and app/__init__.py's docstring names them too), and no
module lies loose beside them, so a newcomer who reads the README finds each one."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "app"


def readme_rooms(readme: str) -> set[str]:
    """The `name/` folders the README's `app/` bullet names (the bullet runs to the next one)."""
    bullet = re.search(r"^- `app/`:(.*?)(?=^- |^#|\Z)", readme, re.MULTILINE | re.DOTALL)
    assert bullet, "README.md has no `app/` bullet in \"What it does\""
    return set(re.findall(r"`([a-z_]+)/`", bullet.group(1)))


def sub_packages() -> set[str]:
    """app/'s sub-packages: folders that hold an __init__.py."""
    return {p.parent.name for p in APP.glob("*/__init__.py")}


def test_app_sub_packages_are_the_rooms_the_readme_names() -> None:
    rooms = readme_rooms((REPO / "README.md").read_text())
    assert rooms == sub_packages(), f"README names {sorted(rooms)}, app/ holds {sorted(sub_packages())}"


def test_no_module_lies_outside_a_room() -> None:
    loose = sorted(p.name for p in APP.glob("*.py") if p.name != "__init__.py")
    assert loose == [], f"app/ modules outside a room: {loose}"


def test_app_docstring_names_every_room() -> None:
    doc = ast.get_docstring(ast.parse((APP / "__init__.py").read_text())) or ""
    missing = sorted(room for room in sub_packages() if f"({room})" not in doc)
    assert missing == [], f"app/__init__.py's docstring does not name the rooms {missing}"


def test_readme_rooms_reads_the_app_bullet_only() -> None:
    readme = "- `graph/`: the engine (`nodes/`)\n- `app/`: rooms (`cli/`) and\n  (`ui/`).\n- `x/`: (`y/`)\n"
    assert readme_rooms(readme) == {"cli", "ui"}
