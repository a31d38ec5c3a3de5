"""train() output: curves, HRF components in curves and reflection stats, progress, JSON."""

import json

import pytest
import torch

from lero.training import Hooks, TrainConfig, train
from lero.training.curves import split_greedy
from lero.training.episode_stats import TrainingLog, summarize

torch.set_num_threads(1)

# curves every run has; an HRF adds one per component
BASE_CURVES = {"steps", "return", "coverage", "occupied", "collisions", "train_reward"}


def hrf(ctx):
    nearest = torch.cdist(ctx.state["landmark_pos"], ctx.state["agent_pos"]).amin(dim=2)  # [B, L]
    coverage = -nearest.sum(dim=1)  # [B]
    return ctx.env_reward + 0.5 * coverage[:, None], {
        "coverage_bonus": coverage,
        "native": ctx.env_reward,
    }


@pytest.mark.parametrize("algo", ["ippo", "vdn"])
def test_components_reach_curves_and_reflection_stats(algo: str) -> None:
    reports = []
    cfg = TrainConfig(
        algo=algo,
        steps=4000,
        n_envs=16,
        eval_episodes=16,
        threads=1,
        env_kwargs={"N": 2},
        hparams={"rollout_len": 8} if algo == "vdn" else {},
    )
    result = train(
        cfg,
        Hooks(hybrid_reward=hrf),
        progress=lambda done, total, info: reports.append((done, total, info)),
    )

    expected = BASE_CURVES | {"coverage_bonus", "native"}
    training, greedy = split_greedy(result.curves)  # the greedy evaluation curve has points of its own
    assert set(training) == expected and set(greedy) == {"steps", *result.eval}
    lengths = {len(values) for values in training.values()}
    assert len(lengths) == 1 and lengths.pop() >= 10
    # native component summed over an episode is exactly the native return
    assert result.curves["native"] == pytest.approx(result.curves["return"], abs=1e-3)
    assert result.curves["train_reward"] == pytest.approx(
        [
            r + 0.5 * c
            for r, c in zip(result.curves["return"], result.curves["coverage_bonus"], strict=True)
        ],
        abs=1e-3,
    )
    assert set(result.reflection_stats) == expected - {"steps"}
    stats = result.reflection_stats["coverage_bonus"]
    assert len(stats["snapshots"]) == 10
    assert stats["min"] <= stats["mean"] <= stats["max"] < 0
    assert set(result.eval) == {"return", "coverage", "occupied", "collisions"}
    assert result.steps >= cfg.steps and result.steps_per_s > 0
    assert reports and reports[-1][0] == result.steps and reports[-1][1] == cfg.steps
    assert reports[-1][2]["return"] == result.curves["return"][-1]
    payload = json.loads(json.dumps(result.to_json()))
    assert payload["config"]["algo"] == algo and "policy" not in payload


def test_baseline_curves_have_no_components() -> None:
    result = train(
        TrainConfig(steps=2000, n_envs=16, eval_episodes=16, threads=1, env_kwargs={"N": 2})
    )
    assert set(split_greedy(result.curves)[0]) == BASE_CURVES
    assert result.curves["train_reward"] == pytest.approx(result.curves["return"])


def test_summarize_snapshots_are_evenly_spaced() -> None:
    summary = summarize([float(i) for i in range(100)])
    assert summary["snapshots"] == [0, 11, 22, 33, 44, 55, 66, 77, 88, 99]
    assert (summary["max"], summary["mean"], summary["min"]) == (99, 49.5, 0)
    assert summarize([3.0])["snapshots"] == [3.0]


def test_log_counts_episode_metrics_at_episode_end() -> None:
    names = ("return", "coverage", "occupied", "collisions")
    log = TrainingLog(n_envs=2, metric_names=names, total_steps=4, n_points=2)
    reward = torch.tensor([[-1.0, -3.0], [-2.0, -2.0]])  # [B=2, N=2]
    not_done, done = torch.tensor([False, False]), torch.tensor([True, True])
    ignored = {name: torch.full((2,), 99.0) for name in names[1:]}  # not read where not done
    log.on_step(reward, reward, {}, not_done, ignored)
    at_end = {
        "coverage": torch.tensor([1.0, 0.0]),
        "occupied": torch.tensor([3.0, 1.0]),
        "collisions": torch.tensor([1.0, 2.0]),
    }
    log.on_step(reward, reward, {}, done, at_end)
    log.maybe_record(4)
    # both slots: 2 steps x mean(-1, -3) = 2 steps x mean(-2, -2) = -4
    assert log.curves["return"] == [-4.0]
    assert log.curves["coverage"] == [0.5]
    assert log.curves["occupied"] == [2.0]
    assert log.curves["collisions"] == [1.5]


def test_bad_train_arguments_raise_value_error() -> None:
    cfg = TrainConfig(steps=100, n_envs=4, eval_episodes=4)
    with pytest.raises(ValueError, match="expects a TrainConfig"):
        train(cfg.to_dict())
    with pytest.raises(ValueError, match=r"hooks must be a training\.Hooks"):
        train(cfg, hooks={"hybrid_reward": None})
    with pytest.raises(ValueError, match="progress must be callable"):
        train(cfg, progress=3)
