"""Fixtures shared by the tests of `lero eval`, `lero compare`, the figures and the terminal."""

from __future__ import annotations

from collections.abc import Iterator
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


CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator:
    """Debian's Chromium through Playwright (test_ui.py has its own, with more flags)."""
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium")
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        yield chromium
        chromium.close()
