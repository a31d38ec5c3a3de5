"""Seeds in one process (`train_seeds`): each seed of a job is bitwise the seed trained alone,
so no seed's data, gradient or random draw reaches another."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from lero.sandbox.types import JOB_PROCESS_ENV
from lero.training import Hooks, TrainConfig, save_learner, train
from lero.training.algos.ppo import STACK_ROWS
from lero.training.networks import (
    RunningMeanStd,
    StackedParameters,
    clip_grad_norm_per_seed,
    mlp,
    mlp_layers,
    stacked_mlp,
)
from lero.training.optim import FlatAdam, joined_state, seed_states
from lero.training.seeds import RngStream
from lero.training.trainer import train_seeds

SEEDS = (3, 5, 8)
SMALL = {  # 400-step iterations
    "mappo": {"n_envs": 16, "rollout_len": 25, "epochs": 2},
    "ippo": {"n_envs": 16, "rollout_len": 25, "epochs": 2},
    "qmix": {"n_envs": 16, "rollout_len": 25, "epochs": 1},
    "vdn": {"n_envs": 16, "rollout_len": 25, "epochs": 1},
}


def noisy_hrf(ctx):
    """A candidate reward that draws from torch's global generator, as LLM code may."""
    jitter = 0.01 * torch.rand(ctx.env_reward.shape[0])  # [B]
    return ctx.env_reward + jitter[:, None], {"jitter": jitter}


def oef(obs):
    return torch.cat([obs, obs[:, 2:4].norm(dim=1, keepdim=True)], dim=1)


def configs(algo: str, **extra) -> list[TrainConfig]:
    fields = {"steps": 2400, "hparams": SMALL[algo], **extra}
    cfg = TrainConfig(algo=algo, eval_episodes=4, threads=1, env_kwargs={"N": 2}, **fields)
    return [replace(cfg, seed=seed) for seed in SEEDS]


def assert_same_result(joint, alone) -> None:
    assert joint.config == alone.config
    assert joint.curves == alone.curves and joint.eval == alone.eval
    assert joint.steps == alone.steps and joint.reflection_stats == alone.reflection_stats
    for name, weight in alone.policy.state_dict().items():
        assert torch.equal(joint.policy.state_dict()[name], weight), name
    assert_same_tensors(joint.learner, alone.learner)


def assert_same_tensors(mine, theirs, where: str = "learner") -> None:
    if isinstance(theirs, dict):
        assert mine.keys() == theirs.keys(), where
        for key in theirs:
            assert_same_tensors(mine[key], theirs[key], f"{where}.{key}")
    elif isinstance(theirs, torch.Tensor):
        assert mine.shape == theirs.shape and torch.equal(mine, theirs), where
    else:
        assert mine == theirs, where


@pytest.mark.parametrize("algo", [*sorted(SMALL), "mappo-large"])
def test_each_seed_of_a_job_is_bitwise_the_seed_trained_alone(algo: str) -> None:
    """With a candidate that draws random numbers: the seeds' streams stay apart too.
    `mappo-large`: a batch past ppo.STACK_ROWS, where the seeds train one after another."""
    hooks = Hooks(hybrid_reward=noisy_hrf, enhance_observation=oef)
    large = {"n_envs": STACK_ROWS // 2 + 8, "rollout_len": 4, "epochs": 1}  # 2 agents: past STACK_ROWS
    cfgs = configs("mappo", hparams=large, steps=8000) if algo == "mappo-large" else configs(algo)
    joint = train_seeds(cfgs, [hooks] * len(cfgs))
    for cfg, result in zip(cfgs, joint, strict=True):
        assert_same_result(result, train(cfg, hooks))
    # the seeds did differ: the test compares three different trainings
    assert len({tuple(r.curves["return"]) for r in joint}) == len(SEEDS)


def test_a_seed_does_not_depend_on_its_companions() -> None:
    """The same seed beside other seeds (and in another position) gives the same bits."""
    cfgs = configs("mappo")
    first = train_seeds(cfgs[:2])[0]
    moved = train_seeds([replace(cfgs[0], seed=99), cfgs[0]])[1]
    assert_same_result(moved, first)


@pytest.mark.parametrize("algo", ["mappo", "qmix"])
def test_a_job_of_seeds_continues_each_seeds_learner_state(algo: str, tmp_path: Path) -> None:
    """Successive halving's rungs: the seeds' saved states resumed in one job = each resumed alone."""
    cfgs = configs(algo, stop_at=1200)
    resumed = []
    for result in train_seeds(cfgs, evaluation=False):
        folder = tmp_path / str(result.config.seed)
        folder.mkdir()
        save_learner(result.config, result.steps, result.learner, folder)
        resumed.append(replace(result.config, stop_at=None, resume=str(folder)))
    joint = train_seeds(resumed, evaluation=False)
    for cfg, result in zip(resumed, joint, strict=True):
        assert result.start_steps == 1200
        assert_same_result(result, train(cfg, evaluation=False))


def test_bad_seed_jobs_are_refused(tmp_path: Path) -> None:
    cfgs = configs("mappo")
    with pytest.raises(ValueError, match="non-empty list"):
        train_seeds([])
    with pytest.raises(ValueError, match="share every setting"):
        train_seeds([cfgs[0], replace(cfgs[1], steps=4800)])
    with pytest.raises(ValueError, match="must differ"):
        train_seeds([cfgs[0], cfgs[0]])
    with pytest.raises(ValueError, match="one hooks and one checkpoint entry per seed"):
        train_seeds(cfgs, hooks=[None])
    first = train(replace(cfgs[0], stop_at=400), evaluation=False)
    save_learner(first.config, first.steps, first.learner, tmp_path)
    with pytest.raises(ValueError, match="same step"):
        train_seeds([replace(cfgs[0], resume=str(tmp_path)), cfgs[1]])


def test_stacked_networks_keep_every_gradient_within_its_seed() -> None:
    """A loss on one seed's output reaches only that seed's parameters; each seed's slice
    of the stacked forward is bitwise its own nn.Linear network, and of the backward
    bitwise the same seed stacked alone (lero trains a seed alone that way), and equal to
    nn.Linear's to rounding (on some CPUs the batched gemm's backward rounds otherwise)."""
    torch.manual_seed(0)
    nets = [mlp(6, 16, 1) for _ in range(3)] + [mlp(6, 16, 4) for _ in range(3)]
    for group in (nets[:3], nets[3:]):
        copies = [mlp(6, 16, group[0][-1].out_features) for _ in group]
        for copy, net in zip(copies, group, strict=True):
            copy.load_state_dict(net.state_dict())
        stack = StackedParameters([list(net.parameters()) for net in group])
        x = torch.randn(3, 40, 6)  # [S, M, D]
        out = stacked_mlp(mlp_layers(stack.tensors), x)  # [S, M, out]
        out[1].square().sum().backward()
        for seed in (0, 2):
            assert all(not t.grad[seed].any() for t in stack.tensors)
        assert any(t.grad[1].any() for t in stack.tensors)
        for seed, copy in enumerate(copies):
            alone = copy(x[seed])
            assert torch.equal(out[seed], alone)
            if seed == 1:
                alone.square().sum().backward()
                single = StackedParameters([[p.detach().clone().requires_grad_() for p in copy.parameters()]])
                stacked_mlp(mlp_layers(single.tensors), x[seed : seed + 1])[0].square().sum().backward()
                for t, p, one in zip(stack.tensors, copy.parameters(), single.tensors, strict=True):
                    assert torch.equal(t.grad[seed], one.grad[0])
                    torch.testing.assert_close(t.grad[seed], p.grad, rtol=1e-5, atol=1e-6)
        # the seeds' own modules are views of the stack: they see every update
        stack.flat.data.add_(1.0)
        assert torch.equal(group[2][0].weight, stack.tensors[0][2])


def test_per_seed_clipping_and_value_statistics_are_torchs_per_seed() -> None:
    torch.manual_seed(1)
    grads = [torch.randn(3, 5, 4) * scale for scale in (1.0, 10.0, 0.1)]  # seed 1's norm is large
    tensors = [torch.nn.Parameter(torch.zeros(3, 5, 4)) for _ in grads]
    for t, g in zip(tensors, grads, strict=True):
        t.grad = g.clone()
    clip_grad_norm_per_seed(tensors, max_norm=2.0)
    for seed in range(3):
        alone = [torch.nn.Parameter(torch.zeros(5, 4)) for _ in grads]
        for p, g in zip(alone, grads, strict=True):
            p.grad = g[seed].clone()
        torch.nn.utils.clip_grad_norm_(alone, 2.0)
        for t, p in zip(tensors, alone, strict=True):
            assert torch.equal(t.grad[seed], p.grad)
    stats = RunningMeanStd(2)
    x = torch.stack([torch.randn(7, 3), 5 + 3 * torch.randn(7, 3)])  # [S, 7, 3]
    stats.update(x)
    assert stats.mean[1] > 1.0 > stats.mean[0]  # each seed its own statistics
    assert torch.equal(stats.normalize(x)[1], (x[1] - stats.mean[1]) / torch.sqrt(stats.var[1] + 1e-8))


def test_optimizer_state_splits_into_one_seed_layouts_and_joins_back() -> None:
    torch.manual_seed(2)
    per_seed = [list(mlp(3, 4, 2).parameters()) for _ in range(3)]
    stack = StackedParameters(per_seed)
    optimizer = FlatAdam(stack.flat, lr=0.1)
    stack.flat.grad.normal_()
    optimizer.step()
    states = seed_states(optimizer.state_dict(), stack)
    for seed, params in enumerate(per_seed):
        # a one-seed layout: the seed's parameters concatenated, as a one-seed job saves it
        own = torch.cat([p.grad.reshape(-1) for p in params])
        moment = optimizer.exp_avg
        assert torch.equal(states[seed]["state"][0]["exp_avg"], stack.split(moment)[seed])
        assert torch.equal(states[seed]["state"][0]["exp_avg"], (1 - 0.9) * own)
    again = joined_state(states, stack)
    assert torch.equal(again["state"][0]["exp_avg_sq"], optimizer.exp_avg_sq)
    states[1]["state"][0]["step"] = torch.tensor(5.0)
    with pytest.raises(ValueError, match="different steps"):
        joined_state(states, stack)


def test_a_stream_alone_draws_what_manual_seed_draws_and_restores_the_outer_stream() -> None:
    torch.manual_seed(11)
    expected = torch.rand(4)
    torch.manual_seed(0)
    outer = torch.get_rng_state()
    stream = RngStream(11)
    with stream:
        first = torch.rand(2)
    assert torch.equal(torch.get_rng_state(), outer)
    with stream:
        second = torch.rand(2)
    assert torch.equal(torch.cat([first, second]), expected)
    with pytest.raises(RuntimeError, match="re-entrant"), stream, stream:
        pass


@pytest.mark.parametrize(("given", "seen"), [(None, "AUTO,STRICT"), ("COMPATIBLE", "COMPATIBLE")])
def test_lero_training_asks_mkl_for_the_same_bits_at_any_alignment(given: str | None, seen: str) -> None:
    """Importing `lero.training` sets MKL_CBWR before MKL's first call (without it an IPPO
    seed in a group drifted from itself alone on an AVX-512 EPYC); a caller's choice stays."""
    env = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"} | ({} if given is None else {"MKL_CBWR": given})
    probe = "import os, lero.training; print(os.environ['MKL_CBWR'])"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == seen
    assert JOB_PROCESS_ENV["MKL_CBWR"] == "AUTO,STRICT"
