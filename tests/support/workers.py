"""Which tests share a pytest-xdist worker (`--dist loadgroup`, pyproject's addopts).

A test module's tests stay together (its module fixtures are made once), and so do the
modules that use one of `SHARED_FIXTURES`: session fixtures that are dear to make (a run, a
model server), which each worker would otherwise make again. Everything else spreads over the
workers, so the cores that one test's single-threaded work leaves idle run another's.
"""

from __future__ import annotations

from collections import Counter

import pytest

# session fixtures each made once per session: the modules using one share a worker
SHARED_FIXTURES = ("tiny_runs", "tiny_docker_run", "llama_server", "gemma_server", "real_server")


def _root(parent: dict[str, str], name: str) -> str:
    while parent[name] != name:
        name = parent[name]
    return name


def worker_groups(items: list[pytest.Item]) -> dict[str, str]:
    """Module path -> its group's name (one of the group's modules, the same in every worker:
    each collects the tests in one order)."""
    parent: dict[str, str] = {}
    by_fixture: dict[str, str] = {}  # a shared fixture -> the first module that uses it
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        parent.setdefault(module, module)
        for fixture in SHARED_FIXTURES:
            if fixture not in getattr(item, "fixturenames", ()):
                continue
            first = by_fixture.setdefault(fixture, module)
            a, b = _root(parent, first), _root(parent, module)
            if a != b:
                parent[b] = a
    return {module: _root(parent, module) for module in parent}


def mark_worker_groups(items: list[pytest.Item]) -> None:
    """Give every test the `xdist_group` of its module's group, and put the groups with the
    most `slow` tests first (in place; each group's own order kept): the workers take groups
    in collection order (pyproject's `--no-loadscope-reorder`), so the long end-to-end groups
    start early and the short ones even out the end, instead of one long group running alone
    while the other workers have nothing left."""
    groups = worker_groups(items)
    slow: Counter[str] = Counter()
    for item in items:
        group = groups[item.nodeid.split("::", 1)[0]]
        item.add_marker(pytest.mark.xdist_group(group))
        slow[group] += item.get_closest_marker("slow") is not None
    items.sort(key=lambda item: -slow[groups[item.nodeid.split("::", 1)[0]]])
