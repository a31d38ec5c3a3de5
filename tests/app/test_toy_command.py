"""The CLI command recipe's rehearsal: a toy command declared from this module alone.

`lero greet WHO [--times N]` is one `Command` (its name, its help, the function that adds
its flags, its `cmd_greet` here), registered with `app.cli.args.register_command` until the
test's monkeypatch undoes it. `lero` must list it, parse its own flags, run it, and report
its bad input as one line with exit status 2, like any command of lero's own.
"""

from __future__ import annotations

import argparse
import io

import pytest
from rich.console import Console

from lero.app.cli.args import COMMANDS, Command, UsageError, build_parser, register_command
from lero.app.cli.main import main
from tests.app.test_cli import assert_usage_error

GREET_HELP = "say hello (a toy command declared by a test module)"


def add_greet_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("who", help="who to greet")
    parser.add_argument("--times", type=int, default=1, help="how often (at least once)")


def cmd_greet(args: argparse.Namespace, console: Console) -> int:
    if args.times < 1:
        raise UsageError(f"--times must be >= 1, got {args.times}")
    for _ in range(args.times):
        console.print(f"hello {args.who}")
    return 0


def declare_greet(monkeypatch: pytest.MonkeyPatch) -> Command:
    """The toy, registered until MONKEYPATCH undoes it (a fresh map in front of the table
    takes the registration; tests/test_recipes.py performs this too)."""
    monkeypatch.setattr(COMMANDS, "maps", [{}, *COMMANDS.maps])
    return register_command(Command("greet", GREET_HELP, add_greet_flags, f"{__name__}:cmd_greet"))


def lero(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(argv, console=Console(file=out, width=200))
    return code, out.getvalue(), capsys.readouterr().err


def test_lero_runs_a_registered_command_with_its_own_flag(monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)  # as the README runs lero: a working directory, its relative runs/
    declare_greet(monkeypatch)
    assert lero(["greet", "lero", "--times", "2"], capsys) == (0, "hello lero\nhello lero\n", "")
    assert lero(["greet", "you"], capsys)[1] == "hello you\n"  # the flag's default
    assert_usage_error(*lero(["greet", "lero", "--times", "0"], capsys)[::2], "--times must be >= 1, got 0")
    assert_usage_error(*lero(["greet", "lero", "--times", "twice"], capsys)[::2], "invalid int value: 'twice'")
    assert_usage_error(*lero(["greet", "lero", "--time", "2"], capsys)[::2], "unrecognized arguments: --time")
    listed = build_parser().format_help()
    assert "greet" in listed and GREET_HELP in listed
    assert lero(["runs"], capsys)[0] == 0  # lero's own still run beside it


def test_a_registration_is_checked_and_undone(monkeypatch, capsys) -> None:
    with monkeypatch.context() as patch:
        declare_greet(patch)
        with pytest.raises(ValueError, match="declared already"):
            register_command(Command("run", "another run", add_greet_flags, f"{__name__}:cmd_greet"))
        with pytest.raises(ValueError, match="must match"):
            register_command(Command("Greet Me", GREET_HELP, add_greet_flags, f"{__name__}:cmd_greet"))
        assert list(COMMANDS)[-1] == "greet"
    assert "greet" not in COMMANDS  # gone with the monkeypatch
    assert_usage_error(*lero(["greet", "lero"], capsys)[::2], "invalid choice: 'greet'")
