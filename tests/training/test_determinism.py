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


# Learner results of commit a0800ac's code, before the throughput changes: sum
# of |weights| of the trained policy and the greedy evaluation return, one record per CPU
# they were measured on (another CPU's kernels round otherwise, and training amplifies it).
# The changes keep the maths: the result here must match one record, within the
# tolerance, and a regression matches none.
BEFORE_THROUGHPUT_WORK = {
    "the first machine (2026-12-02)": {
        "mappo": (719.2780856662939, -22.31594467163086),
        "ippo": (723.118134124079, -30.93434715270996),
        "qmix": (1895.994578193191, -20.657976150512695),
        "vdn": (1956.1101092853546, -39.45643615722656),
    },
    "AMD EPYC, AVX-512, MKL_CBWR=AUTO,STRICT (a0800ac run there, 2026-12-03)": {
        "mappo": (719.2780715376575, -22.315946578979492),
        "ippo": (723.1181223073218, -30.934349060058594),
        "qmix": (1895.9932182165448, -20.52725601196289),
        "vdn": (1956.1101303201053, -39.45643615722656),
    },
    "Intel Xeon, AVX-512 and AMX, MKL_CBWR=AUTO,STRICT (a0800ac run there, 2026-12-06)": {
        "mappo": (719.2780856662939, -22.31594467163086),
        "ippo": (723.1181339368686, -30.93434715270996),
        "qmix": (1895.9853978600754, -20.64206314086914),
        "vdn": (1956.1101092853546, -39.45643615722656),
    },
}
ALGOS_RECORDED = sorted(next(iter(BEFORE_THROUGHPUT_WORK.values())))


@pytest.mark.parametrize("algo", ALGOS_RECORDED)
def test_learners_match_their_results_before_the_throughput_work(algo: str) -> None:
    hparams = {"rollout_len": 8} if algo in ("qmix", "vdn") else {"epochs": 2}
    cfg = TrainConfig(algo=algo, steps=3000, n_envs=16, eval_episodes=16, threads=1,
                      env_kwargs={"N": 2}, hparams=hparams)  # fmt: skip
    result = train(cfg)
    weights = sum(float(p.detach().double().abs().sum()) for p in result.policy.parameters())
    matches = [
        cpu
        for cpu, records in BEFORE_THROUGHPUT_WORK.items()
        if weights == pytest.approx(records[algo][0], rel=1e-6)
        and result.eval["return"] == pytest.approx(records[algo][1], rel=1e-5)
    ]
    assert matches, f"{algo}: weights {weights!r}, return {result.eval['return']!r} match no record"
