"""Interval checkpoints: `train` hands the learning policy to its callback once every
`checkpoint_every` env steps, for every algorithm family, and never keeps it."""

from __future__ import annotations

import pytest
import torch

from lero.training import TrainConfig, load_policy, save_policy, train


@pytest.mark.parametrize("algo", ["mappo", "qmix"])
def test_checkpoints_come_every_interval_and_hold_the_weights_of_then(algo: str, tmp_path) -> None:
    torch.set_num_threads(1)
    cfg = TrainConfig(env="simple_spread", env_kwargs={"N": 2}, algo=algo, steps=800, seed=3, n_envs=8,
                      eval_episodes=8, hparams={"rollout_len": 25}, checkpoint_every=300)  # fmt: skip
    saved: dict[int, str] = {}

    def checkpoint(step: int, policy) -> None:
        folder = tmp_path / f"step-{step}"
        folder.mkdir()
        saved[step] = str(save_policy(policy, folder))

    result = train(cfg, checkpoint=checkpoint)
    # iterations end at 200, 400, 600, 800 steps: the first at or past 300, then past 600
    assert sorted(saved) == [400, 600]
    early = load_policy(saved[400])
    final = result.policy.state_dict()
    assert any(not torch.equal(early.state_dict()[k], final[k]) for k in final)  # training went on


def test_checkpoint_every_is_validated() -> None:
    with pytest.raises(ValueError, match="checkpoint_every must be a positive int"):
        TrainConfig(checkpoint_every=0)
