"""Every algorithm learns: on simple_spread N=1 a short run beats a uniformly random policy clearly."""

import pytest
import torch

from lero.training import TrainConfig, make_env, train
from lero.training.defaults import EVAL_SEED

torch.set_num_threads(1)

EVAL_EPISODES = 256

PPO_BUDGET = {"steps": 60_000, "n_envs": 64, "hparams": {"lr": 3e-3}}
VALUE_DECOMPOSITION_BUDGET = {
    "steps": 40_000,
    "n_envs": 32,
    "hparams": {"rollout_len": 8, "minibatches": 4, "eps_anneal_frac": 0.3},
}
BUDGETS = {
    "mappo": PPO_BUDGET,
    "ippo": PPO_BUDGET,
    "vdn": VALUE_DECOMPOSITION_BUDGET,
    "qmix": VALUE_DECOMPOSITION_BUDGET,
}


def random_policy_return(seed: int = EVAL_SEED) -> float:
    """Mean per-agent native return of uniformly random actions on the evaluation episodes."""
    env = make_env("simple_spread", EVAL_EPISODES, N=1)
    env.reset(seed=seed)
    generator = torch.Generator().manual_seed(0)
    episode_return = torch.zeros(EVAL_EPISODES)
    for _ in range(env.max_steps):
        _, reward, _, _ = env.step(
            torch.randint(env.n_actions, (EVAL_EPISODES, 1), generator=generator)
        )
        episode_return += reward.mean(dim=1)
    return float(episode_return.mean())


@pytest.mark.parametrize("algo", sorted(BUDGETS))
def test_algorithm_beats_random_policy(algo: str) -> None:
    result = train(
        TrainConfig(
            algo=algo, env_kwargs={"N": 1}, eval_episodes=EVAL_EPISODES, threads=1, **BUDGETS[algo]
        )
    )
    random_return = random_policy_return()  # about -14; a good policy scores about -3
    assert result.eval["return"] > random_return + 4.0, (result.eval, random_return)
    assert result.curves["return"][-1] > result.curves["return"][0]
