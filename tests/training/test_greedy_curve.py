"""The greedy evaluation curve (training.greedy): every `eval_every` updates on the trusted
evaluation's episodes, beside the training curves, without changing the training."""

from __future__ import annotations

import csv

import pytest
import torch

from lero.training import HookError, Hooks, TrainConfig, train
from lero.training.curves import split_greedy
from lero.training.outputs import write_curve_csv

SMALL = {"hparams": {"n_envs": 16, "rollout_len": 25}, "eval_episodes": 32, "steps": 4000, "threads": 1}  # 400 steps per update


@pytest.fixture(scope="module")
def pair():
    """The same training without and with the curve (every 2 updates)."""
    return train(TrainConfig(**SMALL, eval_every=None)), train(TrainConfig(**SMALL, eval_every=2))


def test_every_k_updates_on_the_evaluation_episodes_and_training_unchanged(pair) -> None:
    without, with_curve = pair
    training, greedy = split_greedy(with_curve.curves)
    assert greedy["steps"] == [800.0, 1600.0, 2400.0, 3200.0, 4000.0]  # every 2nd of 10 updates
    assert set(greedy) == {"steps", *with_curve.eval} and all(len(v) == 5 for v in greedy.values())
    assert training == without.curves and not split_greedy(without.curves)[1]
    weights = zip(without.policy.state_dict().values(), with_curve.policy.state_dict().values(), strict=True)
    assert all(torch.equal(a, b) for a, b in weights)  # the evaluations left training's random stream alone
    # the last point is the final policy on the final evaluation's episodes: the same numbers
    assert {name: values[-1] for name, values in greedy.items() if name != "steps"} == with_curve.eval


def test_curve_csv_holds_both_curves_row_by_env_steps(pair, tmp_path) -> None:
    _, with_curve = pair
    write_curve_csv(with_curve.curves, tmp_path / "curve.csv")
    with (tmp_path / "curve.csv").open() as f:
        rows = list(csv.DictReader(f))
    training, greedy = split_greedy(with_curve.curves)
    assert [float(r["steps"]) for r in rows] == sorted(set(training["steps"]) | set(greedy["steps"]))
    measured = {float(r["steps"]): float(r["greedy/return"]) for r in rows if r["greedy/return"]}
    assert measured == dict(zip(greedy["steps"], greedy["return"], strict=True))
    logged = {float(r["steps"]): float(r["return"]) for r in rows if r["return"]}
    assert logged == dict(zip(training["steps"], training["return"], strict=True))


def test_eval_every_is_typed_and_greedy_names_are_the_engines() -> None:
    for bad in (0, -1, 2.5, "5"):
        with pytest.raises(ValueError, match="eval_every must be a positive int or None"):
            TrainConfig(eval_every=bad)

    def hybrid_reward(ctx):
        return ctx.env_reward, {"greedy/return": ctx.env_reward}

    with pytest.raises(HookError, match="component name 'greedy/return' is reserved"):
        train(TrainConfig(**SMALL, eval_every=None), Hooks(hybrid_reward=hybrid_reward))
