"""The suite's order under pytest-xdist (tests/support/workers.py): groups stay whole, and the
groups with the most `slow` tests go first, so a long group never runs alone at the end."""

from __future__ import annotations

import pytest

from tests.support.workers import mark_worker_groups


class Item:
    """As much of a pytest item as the grouping reads."""

    def __init__(self, nodeid: str, slow: bool = False, fixtures: tuple[str, ...] = ()) -> None:
        self.nodeid, self.fixturenames, self.slow, self.markers = nodeid, fixtures, slow, []

    def get_closest_marker(self, name: str):
        return pytest.mark.slow if name == "slow" and self.slow else None

    def add_marker(self, marker) -> None:
        self.markers.append(marker)


def test_groups_with_more_slow_tests_come_first_each_in_its_own_order() -> None:
    items = [
        Item("a.py::one"), Item("a.py::two"),
        Item("b.py::one", slow=True), Item("b.py::two"),
        Item("c.py::one", slow=True, fixtures=("tiny_runs",)), Item("d.py::one", slow=True, fixtures=("tiny_runs",)),
        Item("d.py::two"),
    ]  # fmt: skip
    mark_worker_groups(items)
    assert [item.nodeid for item in items] == [
        "c.py::one", "d.py::one", "d.py::two",  # one group (a shared fixture), two slow tests
        "b.py::one", "b.py::two",  # one slow test
        "a.py::one", "a.py::two",  # none
    ]  # fmt: skip
    groups = {item.nodeid: item.markers[0].kwargs.get("name") or item.markers[0].args[0] for item in items}
    assert groups["c.py::one"] == groups["d.py::two"] == "c.py" and groups["b.py::two"] == "b.py"
