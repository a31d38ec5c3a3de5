"""TensorBoard event files for every training job, written host-side from its curves.

The sandbox returns each job's curves (task metrics, training reward, one per HRF
component) as JSON; this turns them into scalar summaries under
`runs/<id>/tensorboard/<candidate_id>/seed-<n>/` so `tensorboard --logdir runs/` shows
every job of every run the way RL researchers expect. Tags: `task/<metric>` for the
task metrics, `train/train_reward`, `hrf/<component>` for each HRF component (all
against env steps), `greedy/<metric>` for the greedy evaluation curve (training.greedy: the
policy acting greedily every few updates) and `eval/<metric>` for the final evaluation.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lero.training.curves import GREEDY_PREFIX, split_greedy

STEPS_KEY = "steps"
TRAIN_REWARD = "train_reward"


def scalar_tag(curve: str, task_metrics: Iterable[str]) -> str:
    """The TensorBoard tag of one curve name (`task_metrics`: the env's metric names)."""
    if curve in task_metrics:
        return f"task/{curve}"
    if curve == TRAIN_REWARD:
        return f"train/{curve}"
    return f"hrf/{curve}"


def write_job_scalars(log_dir: Path, curves: dict[str, list[float]], metrics: dict[str, Any]) -> Path | None:
    """Write one job's curves and final eval metrics as a fresh event file in `log_dir`.

    `metrics` are the job's evaluated task metrics (the env's own names), so its curves of
    the same names are task curves and the others HRF components. Returns the directory,
    or None when the job has no curves (it never trained). An earlier file in the
    directory (a resumed run re-recording the job) is replaced.
    """
    training, greedy = split_greedy(curves)
    steps = training.get(STEPS_KEY) or []
    if not steps:
        return None
    from torch.utils.tensorboard import SummaryWriter  # torch is loaded by the engine anyway

    shutil.rmtree(log_dir, ignore_errors=True)
    writer = SummaryWriter(log_dir=str(log_dir))
    tagged = [(training, lambda name: scalar_tag(name, metrics)), (greedy, lambda name: f"{GREEDY_PREFIX}{name}")]
    try:
        for series, tag in tagged:
            for name, values in series.items():
                if name == STEPS_KEY:
                    continue
                for step, value in zip(series[STEPS_KEY], values, strict=False):
                    if isinstance(value, int | float) and math.isfinite(value):
                        writer.add_scalar(tag(name), float(value), global_step=int(step))
        for name, value in metrics.items():
            if isinstance(value, int | float) and math.isfinite(value):
                writer.add_scalar(f"eval/{name}", float(value), global_step=int(steps[-1]))
    finally:
        writer.close()
    return log_dir
