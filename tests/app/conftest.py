"""Fixtures shared by the tests of `lero eval`, `lero compare` and the figures."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.support.tiny_runs import make_runs


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory whose runs/ holds two tiny real runs: `alpha` (2 seeds) and `three`
    (3 seeds). Tests read them; a test that changes a run works on a copy."""
    torch.set_num_threads(1)
    return make_runs(tmp_path_factory.mktemp("tiny-runs"), {"alpha": [], "three": ["--seeds", "3"]})
