"""The validation rollout's measurements (`training.rollout_evidence`) on a real simple_spread
batch, and the host's check of them (`checked_evidence`): what the sandbox returns is
untrusted output of candidate code, so only the declared shape of finite numbers passes."""

from __future__ import annotations

import copy
import math
import re

import pytest
import torch

from lero.training import make_env
from lero.training.rollout_evidence import (
    MAX_FEATURES,
    MAX_NAME,
    MAX_TERMS,
    EvidenceRecorder,
    checked_evidence,
    penalty_signals,
)

STEPS = 4


def measured(hrf, oef) -> dict:
    """EVIDENCE of HRF/OEF (plain functions written here, trusted) on 256 envs x STEPS random steps."""
    env = make_env("simple_spread", 256, N=3)
    recorder = EvidenceRecorder(env.obs_dim, penalty_signals(env.task))
    generator = torch.Generator().manual_seed(0)
    obs = env.reset(seed=0)  # [B, N, D]
    for index in range(STEPS):
        enhanced = oef(obs)  # [B, N, D + k]
        next_obs, reward, _, info = env.step(env.random_actions(generator))
        hybrid, components = hrf(reward, env.world())
        recorder.add_step(reward, hybrid, components, info)
        recorder.add_features(enhanced)
        if index == 0:
            recorder.add_leak_check(enhanced, oef(obs), oef(obs[:128]))
        obs = next_obs
    return recorder.to_json()


def own_distance(world) -> torch.Tensor:
    gaps = world["agent_pos"][:, :, None] - world["landmark_pos"][:, None]  # [B, N, L, 2]
    return gaps.norm(dim=-1).min(dim=-1).values  # [B, N]


def test_a_negated_team_term_shows_its_minus_and_a_paid_distance_its_anticorrelation() -> None:
    def hrf(reward, world):
        team = reward.mean(dim=-1)  # [B]
        far = own_distance(world)  # [B, N]
        return 0.5 * reward - 0.5 * team[:, None] + 0.3 * far, {"own": reward, "team": team, "far": far}

    def oef(obs):
        return torch.cat([obs, obs[..., :1] * 0 + 0.5, obs[..., :2].norm(dim=-1, keepdim=True)], dim=-1)

    evidence = measured(hrf, oef)
    terms = evidence["terms"]
    assert terms["team"]["weight"] == pytest.approx(-0.5, abs=1e-3)  # read off the hybrid reward, not the name
    assert terms["own"]["weight"] == pytest.approx(0.5, abs=1e-3) and terms["own"]["native_corr"] > 0.99
    assert terms["team"]["native_corr"] < -0.9
    assert terms["far"]["native_corr"] < -0.25
    assert evidence["explained"] > 0.999 and evidence["hybrid_step_std"] > 0.01  # it moves as the agents act
    assert evidence["features"][0] == {"std": 0.0, "row_leak": False}  # the constant column
    assert evidence["features"][1]["std"] > 0.1 and not evidence["features"][1]["row_leak"]
    assert checked_evidence(evidence) == evidence


def test_a_term_paying_for_contact_correlates_with_the_collisions_the_task_reports() -> None:
    def hrf(reward, world):
        pos = world["agent_pos"]  # [B, N, 2]
        touching = ((pos[:, :, None] - pos[:, None]).norm(dim=-1) < 0.3).float().sum(dim=-1) - 1.0  # [B, N]
        return reward + 0.5 * touching, {"task": reward, "touching": touching}

    evidence = measured(hrf, lambda obs: obs)
    assert penalty_signals(make_env("simple_spread", 1).task) == ("collisions",)
    assert evidence["terms"]["touching"]["penalty_corr"]["collisions"] > 0.5
    assert evidence["terms"]["task"]["penalty_corr"]["collisions"] < 0  # the task punishes them
    assert evidence["features"] == []


def test_a_feature_that_reads_other_agents_rows_moves_when_they_leave_the_batch() -> None:
    def oef(obs):
        everyone = obs[..., 2:4].reshape(-1, 2).mean(dim=0)  # [2]: all rows of the batch
        return torch.cat([obs, everyone.expand(*obs.shape[:-1], 2)], dim=-1)

    evidence = measured(lambda reward, world: (reward, {"task": reward}), oef)
    assert [f["row_leak"] for f in evidence["features"]] == [True, True]


def test_a_random_feature_is_no_leak() -> None:
    """Noise differs between two calls on the same batch: that says nothing of what it reads."""
    evidence = measured(lambda reward, world: (reward, {"task": reward}),
                        lambda obs: torch.cat([obs, torch.rand(*obs.shape[:-1], 1)], dim=-1))
    assert evidence["features"][0]["row_leak"] is False and evidence["features"][0]["std"] > 0.1


def sound() -> dict:
    return {"native_std": 0.3, "native_mean": -1.0, "explained": 1.0, "hybrid_step_std": 0.2,
            "terms": {"task": {"mean": -1.0, "std": 0.3, "weight": 1.0, "native_corr": 1.0,
                               "penalty_corr": {"collisions": -0.4}}},
            "features": [{"std": 0.5, "row_leak": False}]}


def hostile(edit) -> dict:
    raw = copy.deepcopy(sound())
    edit(raw)
    return raw


HOSTILE = {
    "NaN std": (lambda r: r["terms"]["task"].update(std=math.nan), "term 'task' std must be a finite number"),
    "inf native": (lambda r: r.update(native_std=math.inf), "native_std must be a finite number"),
    "a bool weight": (lambda r: r["terms"]["task"].update(weight=True), "term 'task' weight must be a finite number"),
    "a string corr": (lambda r: r["terms"]["task"].update(native_corr="1"), "native_corr must be a finite number"),
    "too many terms": (lambda r: r["terms"].update({f"t{i}": r["terms"]["task"] for i in range(MAX_TERMS)}),
                       f"at most {MAX_TERMS} names"),
    "a huge feature list": (lambda r: r.update(features=[{"std": 1.0, "row_leak": False}] * 10**5),
                            f"at most {MAX_FEATURES} columns"),
    "a long name": (lambda r: r["terms"].update({"x" * (MAX_NAME + 1): r["terms"]["task"]}), "a term name must be"),
    "an extra key": (lambda r: r.update(verdict="accept"), "evidence must be {"),
    "a leak as a number": (lambda r: r["features"][0].update(row_leak=0), "row_leak (a bool)"),
    "penalties as a list": (lambda r: r["terms"]["task"].update(penalty_corr=[1.0]), "penalty_corr must map"),
    "not a dict": (lambda r: r.clear(), "evidence must be {"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_forged_evidence_is_refused_in_one_line(case: str) -> None:
    edit, message = HOSTILE[case]
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        checked_evidence(hostile(edit))
    assert "\n" not in str(raised.value)


def test_a_reward_of_the_layout_alone_does_not_move_while_the_agents_act() -> None:
    def hrf(reward, world):
        layout = -world["landmark_pos"].amax(dim=-1).amin(dim=-1)  # [B]: landmarks never move
        return layout[:, None].expand_as(reward).clone(), {"task": layout}

    evidence = measured(hrf, lambda obs: obs)
    assert evidence["hybrid_step_std"] == 0.0 and evidence["terms"]["task"]["std"] > 0.1  # varies across envs only
