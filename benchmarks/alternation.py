"""Ways of doing one thing timed in one sitting: rounds that alternate their order, so that
a shared machine's drifting load and warm caches hit every way alike."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TypeVar

Result = TypeVar("Result")


def timed_rounds(ways: dict[str, Callable[[], Result]], rounds: int) -> list[dict[str, tuple[Result, float]]]:
    """Call every way of WAYS once per round, every other round in reverse order; per round
    {way: (its result, its wall seconds)}, in WAYS' order."""
    names = list(ways)
    timed = []
    for index in range(rounds):
        this_round: dict[str, tuple[Result, float]] = {}
        for name in names if index % 2 == 0 else names[::-1]:
            started = time.perf_counter()
            result = ways[name]()
            this_round[name] = (result, time.perf_counter() - started)
        timed.append({name: this_round[name] for name in names})
    return timed


def total_seconds(timed: list[dict[str, tuple[Result, float]]]) -> dict[str, float]:
    """Each way's wall seconds summed over the rounds."""
    return {name: sum(round_[name][1] for round_ in timed) for name in timed[0]}


def add_rounds_option(parser: argparse.ArgumentParser, default: int) -> None:
    """`--rounds N` (N >= 1): how many alternating rounds `timed_rounds` runs."""

    def rounds(text: str) -> int:
        if not text.strip().isdigit() or int(text) < 1:
            raise argparse.ArgumentTypeError(f"expected a whole number of rounds >= 1, got {text!r}")
        return int(text)

    parser.add_argument("--rounds", type=rounds, default=default,
                        help=f"alternating rounds, every other one in reverse order (default {default})")  # fmt: skip
