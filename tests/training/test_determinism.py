"""Same config and seed -> identical curves and weights on CPU; another seed differs."""

import pytest
import torch

from lero.training import Hooks, TrainConfig, train

torch.set_num_threads(1)


def hrf(ctx):
    spread = -ctx.state["agent_pos"].std(dim=1).sum(-1)  # [B]
    return ctx.env_reward + 0.1 * spread[:, None], {"spread": spread}


def oef(obs):
    return torch.cat([obs, obs[:, 2:4].norm(dim=1, keepdim=True)], dim=1)


@pytest.mark.parametrize("algo", ["mappo", "qmix"])
def test_same_seed_same_result(algo: str) -> None:
    hparams = {"rollout_len": 8} if algo == "qmix" else {"epochs": 2}
    cfg = TrainConfig(
        algo=algo,
        steps=3000,
        n_envs=16,
        eval_episodes=16,
        threads=1,
        env_kwargs={"N": 2},
        hparams=hparams,
    )
    hooks = Hooks(hybrid_reward=hrf, enhance_observation=oef)
    first, second = train(cfg, hooks), train(cfg, hooks)
    assert first.curves == second.curves
    assert first.eval == second.eval
    for name, weight in first.policy.state_dict().items():
        assert torch.equal(weight, second.policy.state_dict()[name]), name
    other_seed = train(TrainConfig(**{**cfg.to_dict(), "seed": 1}), hooks)
    assert other_seed.curves["return"] != first.curves["return"]


# Learner results measured at commit a0800ac, before the throughput changes (issue 19):
# sum of |weights| of the trained policy and the greedy evaluation return. The changes
# keep the maths bit for bit here; the tolerance leaves room for another CPU's kernels.
BEFORE_THROUGHPUT_WORK = {
    "mappo": (719.2780856662939, -22.31594467163086),
    "ippo": (723.118134124079, -30.93434715270996),
    "qmix": (1895.994578193191, -20.657976150512695),
    "vdn": (1956.1101092853546, -39.45643615722656),
}


@pytest.mark.parametrize("algo", sorted(BEFORE_THROUGHPUT_WORK))
def test_learners_match_their_results_before_the_throughput_work(algo: str) -> None:
    hparams = {"rollout_len": 8} if algo in ("qmix", "vdn") else {"epochs": 2}
    cfg = TrainConfig(algo=algo, steps=3000, n_envs=16, eval_episodes=16, threads=1,
                      env_kwargs={"N": 2}, hparams=hparams)  # fmt: skip
    result = train(cfg)
    weights = sum(float(p.detach().double().abs().sum()) for p in result.policy.parameters())
    expected_weights, expected_return = BEFORE_THROUGHPUT_WORK[algo]
    assert weights == pytest.approx(expected_weights, rel=1e-6)
    assert result.eval["return"] == pytest.approx(expected_return, rel=1e-5)
