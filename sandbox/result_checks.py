"""The host's checks of the result fields lero's job kinds declare (`sandbox.types.ResultField`):
what the sandbox wrote there, candidate code may have, so each returns only a value of the
field's shape, or raises ValueError naming what is wrong. Pure: `sandbox.jobkinds` declares
them, `sandbox.results` runs them without naming any field."""

from __future__ import annotations

from typing import Any

from lero.training.defaults import MAX_EVAL_EPISODES
from lero.training.validation import finite_number

TRAJECTORY_DEPTH = 4  # [K][T + 1][X][2]: episodes, steps, entities, x/y


def _nested_numbers(value: Any, depth: int) -> bool:
    """VALUE is a list nested at most DEPTH deep whose leaves are finite numbers."""
    level = [value]
    for _ in range(depth):
        if not all(isinstance(item, list) for item in level):
            return False
        level = [x for item in level for x in item]
        if all(finite_number(x) for x in level):
            return True
    return False


def checked_info(raw: Any) -> dict:
    """An env's facts, a dict (`registry.describe_env` reads its keys)."""
    if not isinstance(raw, dict):
        raise ValueError("'info' must be a dict")
    return raw


def checked_episodes(raw: Any) -> dict[str, list]:
    """Metric -> its value in each held-out episode."""
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and len(v) <= MAX_EVAL_EPISODES and all(finite_number(x) for x in v)
        for k, v in raw.items()
    ):
        raise ValueError(f"'episodes' must map names to at most {MAX_EVAL_EPISODES} finite numbers")
    return raw


def checked_trajectories(raw: Any) -> dict[str, list]:
    """Recorded episodes (`training.EpisodeTrace`): name -> [K][T + 1][X][2] (or shallower) finite numbers."""
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and _nested_numbers(v, TRAJECTORY_DEPTH) for k, v in raw.items()
    ):
        raise ValueError("'trajectories' must map names to nested lists of finite numbers")
    return raw


def checked_fitness(raw: Any) -> float | None:
    """The trusted score (only a sealed kind gives one), a finite number or null."""
    if raw is not None and not finite_number(raw):
        raise ValueError("'fitness' must be a finite number or null")
    return None if raw is None else float(raw)


def checked_evidence(raw: Any) -> dict:
    """`training.rollout_evidence.checked_evidence`, imported when a validation result is read:
    its module imports torch, and the CLI's grammar imports the kinds table."""
    from lero.training.rollout_evidence import checked_evidence as check

    return check(raw)
