"""Public names a package loads on first access (PEP 562), so importing one light module of
the package does not import the heavy ones its other names live in (torch, langchain).

A package's ``__init__`` declares which public names live in which module and takes its
``__getattr__``, ``__dir__`` and ``__all__`` from `lazy_exports`. Imports nothing of lero:
every package may use it (training is the floor of the layering).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: dict[str, Any], homes: Mapping[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """The ``__getattr__``, ``__dir__`` and ``__all__`` of the package whose ``globals()`` is
    PACKAGE, HOMES mapping each module to the public names that live there: a name resolves
    to its module's attribute on first access, then is cached in PACKAGE."""
    home = {name: module for module, names in homes.items() for name in names}
    package_name = package["__name__"]

    def __getattr__(name: str) -> Any:
        if name not in home:
            raise AttributeError(f"module {package_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home[name]), name)
        package[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*package, *home})

    return __getattr__, __dir__, sorted(home)
