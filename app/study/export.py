"""Studies in marl-eval's JSON layout, the format cooperative-MARL results are shared in:

    {env_name: {task_name: {algo_name: {"seed_<n>": {
        "step_<i>": {"step_count": int, "<metric>": [per-episode values]},
        "absolute_metrics": {"<metric>": [values]}}}}}}

env_name is `mpe2` for the built-in tasks (else the env's name), task_name the env with its
arguments, algo_name `<algo>:<arm>`. The lists hold each evaluation episode's value, as
the trusted evaluate job measured it (a cell cached before evaluate jobs returned
episodes holds its one mean instead). Without checkpoints a study evaluates each policy
once, after training: one step (`step_0`, at the arm's env steps), and the absolute
metrics are the same held-out episodes. With `--checkpoints` the steps are the
checkpoints' validation returns at their env steps, and the absolute metrics the best
checkpoint's values on 10x the held-out episodes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lero.graph.safefs import write_atomic
from lero.training.envs import ENV_NAMES

EXPORT_FORMATS = ("marl-eval",)
RETURN = "return"  # the metric checkpoints are scored on
BUILTIN_SUITE = "mpe2"


def env_and_task(env: dict[str, Any]) -> tuple[str, str]:
    """marl-eval's (env_name, task_name) of a study's `{"name", **kwargs}` env."""
    name = env["name"]
    kwargs = ",".join(f"{k}={env[k]}" for k in sorted(env) if k != "name")
    return (BUILTIN_SUITE if name in ENV_NAMES else name), (f"{name}[{kwargs}]" if kwargs else name)


def _values(cell: dict[str, Any], index: int) -> dict[str, list[float]]:
    """Seed INDEX's per-episode values of every metric of CELL (a study cell or its absolute
    part); its mean as a one-value list where the episodes were not kept."""
    episodes = cell.get("per_episode") or {}
    return {m: list(episodes[m][index]) if m in episodes else [v[index]] for m, v in cell["per_seed"].items()}


def marl_eval(studies: list[dict[str, Any]]) -> dict[str, Any]:
    """The marl-eval document of one or more study.json documents (finished seeds only)."""
    document: dict[str, Any] = {}
    for study in studies:
        env_name, task_name = env_and_task(study["config"]["env"])
        task = document.setdefault(env_name, {}).setdefault(task_name, {})
        for cell in study["cells"]:
            algo = task.setdefault(f"{cell['algo']}:{cell['variant']}", {})
            absolute = cell.get("absolute")
            for index, seed in enumerate(cell["seeds"]):
                values = _values(cell, index)
                if absolute is None:
                    algo[f"seed_{seed}"] = {"step_0": {"step_count": int(cell["steps"]), **values},
                                            "absolute_metrics": values}  # fmt: skip
                    continue
                steps = sorted(absolute["validation"][index].items(), key=lambda item: int(item[0]))
                returns = (absolute.get("validation_episodes") or [None] * len(cell["seeds"]))[index] or {}
                algo[f"seed_{seed}"] = {
                    **{f"step_{i}": {"step_count": int(step), RETURN: returns.get(step) or [value]}
                       for i, (step, value) in enumerate(steps)},
                    "absolute_metrics": _values(absolute, index),
                }  # fmt: skip
    return document


def write_export(fmt: str, studies: list[dict[str, Any]], path: Path) -> Path:
    """Write STUDIES to PATH in format FMT (one of EXPORT_FORMATS)."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose from {', '.join(EXPORT_FORMATS)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(marl_eval(studies), indent=2) + "\n")
    return path
