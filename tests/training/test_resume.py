"""A training plan in pieces (successive halving's rungs): a job stops at `stop_at`, the
next continues its saved learner state on the same schedules."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lero.training import TrainConfig, save_learner, train
from lero.training.resume import LEARNER_FILE

PLAN = {"steps": 6400, "seed": 3, "eval_episodes": 4}
SMALL = {  # 800-step iterations: a plan of 8, a first piece of 4
    "mappo": {"n_envs": 32, "rollout_len": 25, "epochs": 1},
    "qmix": {"n_envs": 32, "rollout_len": 25, "epochs": 1},
}


def optimizer_position(learner: dict) -> tuple[float, float]:
    """(optimizer steps taken, learning rate): where a learner is in its plan."""
    optimizer = learner["optimizer"]
    return float(optimizer["state"][0]["step"]), float(optimizer["param_groups"][0]["lr"])


@pytest.mark.parametrize("algo", sorted(SMALL))
def test_a_continued_plan_ends_where_the_whole_plan_ends(algo: str, tmp_path: Path) -> None:
    hparams = SMALL[algo] | ({"anneal_lr": True} if algo == "mappo" else {})
    whole = train(TrainConfig(algo=algo, hparams=hparams, **PLAN), evaluation=False)
    first = train(TrainConfig(algo=algo, hparams=hparams, stop_at=3200, **PLAN), evaluation=False)
    assert (first.start_steps, first.steps) == (0, 3200)
    saved = save_learner(first.config, first.steps, first.learner, tmp_path)
    assert saved == tmp_path / LEARNER_FILE
    rest = train(TrainConfig(algo=algo, hparams=hparams, resume=str(tmp_path), **PLAN), evaluation=False)
    assert (rest.start_steps, rest.steps) == (3200, 3200)
    assert rest.curves["steps"][0] > 3200 and rest.curves["steps"][-1] == whole.curves["steps"][-1] == 6400
    # the optimiser's moments and step count, and the annealed learning rate, went on from the
    # first piece: a continuation that started afresh would have half the steps
    assert optimizer_position(rest.learner) == pytest.approx(optimizer_position(whole.learner))
    assert optimizer_position(first.learner)[0] == pytest.approx(optimizer_position(whole.learner)[0] / 2)
    if algo == "mappo":
        assert optimizer_position(first.learner)[1] > optimizer_position(rest.learner)[1]


def test_the_first_piece_is_the_whole_plans_beginning(tmp_path: Path) -> None:
    """Stopping early changes nothing before the stop: the same weights as the whole plan's at that step."""
    hparams = SMALL["mappo"]
    kept: dict[int, dict] = {}
    train(TrainConfig(algo="mappo", hparams=hparams, checkpoint_every=3200, **PLAN), evaluation=False,
          checkpoint=lambda step, policy: kept.setdefault(step, {k: v.clone() for k, v in policy.state_dict().items()}))  # fmt: skip
    first = train(TrainConfig(algo="mappo", hparams=hparams, stop_at=3200, **PLAN), evaluation=False)
    assert all(torch.equal(kept[3200][k], v) for k, v in first.policy.state_dict().items())


@pytest.mark.parametrize(
    ("change", "needle"),
    [({"steps": 12800}, "another plan"), ({"algo": "ippo"}, "another plan"), ({"seed": 4}, "another plan")],
)  # fmt: skip
def test_a_learner_state_of_another_plan_is_refused(change: dict, needle: str, tmp_path: Path) -> None:
    first = train(TrainConfig(algo="mappo", hparams=SMALL["mappo"], stop_at=3200, **PLAN), evaluation=False)
    save_learner(first.config, first.steps, first.learner, tmp_path)
    settings = {"algo": "mappo", "hparams": SMALL["mappo"], **PLAN, **change}
    with pytest.raises(ValueError, match=needle):
        train(TrainConfig(resume=str(tmp_path), **settings), evaluation=False)


def test_a_state_already_past_the_stop_trains_nothing_more(tmp_path: Path) -> None:
    """A rung shorter than one iteration: the previous piece's whole iterations already passed it."""
    first = train(TrainConfig(algo="mappo", hparams=SMALL["mappo"], stop_at=3200, **PLAN), evaluation=False)
    save_learner(first.config, first.steps, first.learner, tmp_path)
    again = train(TrainConfig(algo="mappo", hparams=SMALL["mappo"], stop_at=2400, resume=str(tmp_path), **PLAN),
                  evaluation=False)  # fmt: skip
    assert (again.start_steps, again.steps) == (3200, 0)
    assert all(torch.equal(first.policy.state_dict()[k], v) for k, v in again.policy.state_dict().items())


def test_a_file_that_is_no_learner_state_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / LEARNER_FILE).write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match="cannot read the learner state"):
        train(TrainConfig(algo="mappo", hparams=SMALL["mappo"], resume=str(tmp_path), **PLAN), evaluation=False)


@pytest.mark.parametrize("stop_at", [0, 6401, 12.5])
def test_stop_at_outside_the_plan_is_refused(stop_at: object) -> None:
    with pytest.raises(ValueError, match="stop_at"):
        TrainConfig(algo="mappo", stop_at=stop_at, **PLAN)
