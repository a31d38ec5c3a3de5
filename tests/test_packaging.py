"""The five top-level folders install as `lero.*`: every package folder is listed in
pyproject.toml, and each imports under its `lero.` name from the folder it lives in."""

from __future__ import annotations

import importlib
import json
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("agents", "app", "graph", "sandbox", "training")


def test_every_package_folder_is_installed_under_lero():
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {
        "lero." + ".".join(init.parent.relative_to(REPO).parts)
        for folder in FOLDERS
        for init in (REPO / folder).rglob("__init__.py")
    }
    assert set(setuptools["packages"]) == on_disk
    assert setuptools["package-dir"] == {f"lero.{f}": f for f in FOLDERS}


def test_lero_packages_import_from_the_repository_folders():
    for folder in FOLDERS:
        module = importlib.import_module(f"lero.{folder}")
        assert Path(module.__file__).resolve().parent == REPO / folder


def test_the_console_script_and_langgraph_json_name_modules_that_exist():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts["lero"].partition(":")
    assert callable(getattr(importlib.import_module(module), function))

    path, _, attribute = json.loads((REPO / "langgraph.json").read_text())["graphs"]["lero"].partition(":")
    assert (REPO / path).is_file() and f"def {attribute}(" in (REPO / path).read_text()
