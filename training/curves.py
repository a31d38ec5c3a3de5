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
# Curve names the engine owns whatever the task (the hooks reserve them, with the task's
# metric names). With a potential: `potential_shaping`, the episode sum of
# F = gamma Phi(s') - Phi(s) (training.shaping), and `hrf_change`, of |hybrid reward - native
# reward| (0 throughout: the HRF kept the native reward, so the candidate is policy-invariant)
SHAPING_CURVE, HRF_CHANGE_CURVE = "potential_shaping", "hrf_change"
ENGINE_CURVE_NAMES = ("steps", "return", "train_reward", SHAPING_CURVE, HRF_CHANGE_CURVE)
# and every name under the greedy evaluation curve's prefix


def split_greedy(curves: Mapping[str, list]) -> tuple[dict[str, list], dict[str, list]]:
    """(training curves, greedy curve as {"steps": [...], metric: [...]}) of CURVES."""
    training = {name: values for name, values in curves.items() if not name.startswith(GREEDY_PREFIX)}
    greedy = {name.removeprefix(GREEDY_PREFIX): values for name, values in curves.items()
              if name.startswith(GREEDY_PREFIX)}  # fmt: skip
    return training, greedy
