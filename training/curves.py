"""The curve names a training result carries beside its training curves, torch-free so the
app's readers (curve.csv, TensorBoard, the trackers, the web UI) can split them.

A result's `curves` hold the training curves (`steps` and the rest, one point per interval
of finished training episodes, all the same length) and the greedy evaluation curve
(`training.greedy`): `greedy/steps` and `greedy/<metric>`, the same length as each other,
one point every `TrainConfig.eval_every` updates.
"""

from __future__ import annotations

from collections.abc import Mapping

GREEDY_PREFIX = "greedy/"
GREEDY_STEPS = f"{GREEDY_PREFIX}steps"


def split_greedy(curves: Mapping[str, list]) -> tuple[dict[str, list], dict[str, list]]:
    """(training curves, greedy curve as {"steps": [...], metric: [...]}) of CURVES."""
    training = {name: values for name, values in curves.items() if not name.startswith(GREEDY_PREFIX)}
    greedy = {name.removeprefix(GREEDY_PREFIX): values for name, values in curves.items()
              if name.startswith(GREEDY_PREFIX)}  # fmt: skip
    return training, greedy
