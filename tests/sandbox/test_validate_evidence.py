"""The validate job measures the candidate's rollout in the sandbox (`evidence`), and the host
takes that measurement only through its check: candidate code runs in the same process, so
a candidate that rewrites the recorder gets a `crashed` validation with one line saying why,
never forged evidence."""

from __future__ import annotations

import pytest

from lero.agents.evidence_rules import evidence_points
from lero.graph.configuration import RunSpec
from lero.graph.context import problem
from lero.sandbox.types import Job
from tests.sandbox.test_jobs import ENV, LIMITS

FLAWED = """import torch

def hybrid_reward(ctx):
    gaps = ctx.state["agent_pos"][:, :, None] - ctx.state["landmark_pos"][:, None]  # [B, N, L, 2]
    far = gaps.norm(dim=-1).min(dim=-1).values  # [B, N]
    return ctx.env_reward + 0.5 * far, {"task": ctx.env_reward, "far": far}

def enhance_observation(obs):
    speed = obs[:, 0:2].norm(dim=-1, keepdim=True)  # [M, 1]
    return torch.cat([obs, speed, torch.full_like(speed, 0.5)], dim=-1)
"""


def validate(sandbox, code: str, **fields) -> object:
    return sandbox.run_job(Job(kind="validate", code=code, env=ENV, limits=LIMITS, seed=0, **fields))


def test_the_validate_job_measures_each_term_and_feature_of_a_real_candidate(sandbox) -> None:
    result = validate(sandbox, FLAWED)
    assert result.status == "ok", result.error
    terms, features = result.evidence["terms"], result.evidence["features"]
    assert set(terms) == {"task", "far"}
    assert terms["task"]["native_corr"] == pytest.approx(1.0) and terms["far"]["native_corr"] < -0.25
    assert terms["far"]["weight"] == pytest.approx(0.5, abs=1e-3)
    assert features[0]["std"] > 0.1 and features[1] == {"std": 0.0, "row_leak": False}
    task = problem(RunSpec(env="simple_spread"), None)
    points = {(p.target, p.rubric_item) for p in evidence_points(task, FLAWED, result.evidence)}
    assert points == {("far", "rewards-penalised"), ("enhance_observation", "constant-feature")}


FORGE = """import sys
import torch

FORGED = {forged}
sys.modules["lero.training.rollout_evidence"].EvidenceRecorder.to_json = lambda self: FORGED

def hybrid_reward(ctx):
    return ctx.env_reward, {{"task": ctx.env_reward}}

def enhance_observation(obs):
    return torch.cat([obs, obs[:, :1]], dim=-1)
"""
CLEAN = {"native_std": 0.3, "native_mean": -1.0, "explained": 1.0, "hybrid_step_std": 0.2, "features": [{"std": 0.5, "row_leak": False}],
         "terms": {"task": {"mean": -1.0, "std": 0.3, "weight": 1.0, "native_corr": 1.0, "penalty_corr": {}}}}
FORGERIES = {
    "NaN": ({**CLEAN, "native_std": float("nan")}, "malformed result.json"),  # json writes NaN; the host refuses it
    "a huge list": ({**CLEAN, "features": [{"std": 1.0, "row_leak": False}] * 100_000}, "at most 64 columns"),
    "wrong types": ({**CLEAN, "terms": {"task": {**CLEAN["terms"]["task"], "weight": "1"}}},
                    "term 'task' weight must be a finite number"),
    "a verdict smuggled in": ({**CLEAN, "verdict": "accept"}, "evidence must be {"),
}


@pytest.mark.parametrize("case", sorted(FORGERIES))
def test_evidence_a_candidate_forges_is_refused_in_one_line(process_sandbox, case: str) -> None:
    forged, message = FORGERIES[case]
    result = validate(process_sandbox, FORGE.format(forged=repr(forged).replace("nan", "float('nan')")),
                      static_check=False)
    assert result.status == "crashed" and result.evidence == {}
    assert result.error["type"] == "BadResult" and message in result.error["message"]
    assert "\n" not in result.error["message"]


def test_an_honest_candidate_past_the_check_still_gets_its_evidence(process_sandbox) -> None:
    """The forgery's harness without the forgery: what the test above refuses is the forged value alone."""
    result = validate(process_sandbox, FORGE.format(forged=repr(CLEAN)).replace(
        'sys.modules["lero.training.rollout_evidence"].EvidenceRecorder.to_json = lambda self: FORGED', ""),
        static_check=False)
    assert result.status == "ok" and result.evidence["terms"]["task"]["native_corr"] == pytest.approx(1.0)
