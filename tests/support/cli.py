"""Run the `lero` CLI in-process the way a user's terminal would see it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from lero.app.cli.main import main


def lero(argv: list[str], capsys: pytest.CaptureFixture[str], width: int = 300) -> tuple[int, str, str]:
    """Exit code, what the console printed, and stderr (the one-line errors)."""
    out = io.StringIO()
    code = main(argv, console=Console(file=out, width=width))
    return code, out.getvalue(), capsys.readouterr().err


def run_files(run: Path) -> dict[str, bytes]:
    """The files at the top of a run directory, to prove a refused command wrote nothing."""
    return {p.name: p.read_bytes() for p in sorted(run.iterdir()) if p.is_file()}
