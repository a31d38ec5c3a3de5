"""The optional `potential`: the static check holds it to two parameters, the validate job
calls it on real batches and names a wrong shape or a non-finite value, and a train job
trains with the shaping it gives."""

from __future__ import annotations

import pytest

from lero.sandbox.types import Job, Limits
from lero.training.contract import static_check
from tests.sandbox.test_contract import VALID

ENV = {"name": "simple_spread", "N": 3, "reward": "sparse"}
LIMITS = Limits(wall_s=60, mem_mb=1024, cpus=1, pids=64, output_bytes=8192, disk_mb=64)
POTENTIAL = '''

def potential(state, obs):
    dist = torch.cdist(state["agent_pos"], state["landmark_pos"])  # [B, N, L]
    return -dist.min(dim=-1).values  # [B, N]: minus the distance to the nearest landmark
'''


def test_static_check_holds_potential_to_two_parameters() -> None:
    assert static_check(VALID + POTENTIAL) == []
    wrong = static_check(VALID + POTENTIAL.replace("(state, obs)", "(state)"))
    assert [(v.rule, v.message) for v in wrong] == [("signature", "'potential' must take exactly 2 positional parameters")]


def test_validate_calls_the_potential_and_times_it(process_sandbox) -> None:
    result = process_sandbox.run_job(Job(kind="validate", code=VALID + POTENTIAL, env=ENV, limits=LIMITS))
    assert result.status == "ok", result.error
    assert result.metrics["potential_s"] > 0 and "potential_step_ratio" in result.metrics


@pytest.mark.parametrize(("body", "problem"), [
    ("    return dist.min(dim=-1).values.sum(dim=1)  # [B]: one value per env", "potential: Phi must have shape [B, N]"),
    ("    return dist.min(dim=-1).values / 0.0", "potential: Phi contains NaN or inf"),
])
def test_validate_names_a_wrong_potential(process_sandbox, body: str, problem: str) -> None:
    code = VALID + POTENTIAL.replace(POTENTIAL.splitlines()[-1], body)
    result = process_sandbox.run_job(Job(kind="validate", code=code, env=ENV, limits=LIMITS))
    assert result.status == "invalid_output", result.error
    assert problem in result.error["message"]


def test_train_job_trains_with_the_potential_shaping(process_sandbox) -> None:
    code = VALID.replace("    reward = (1 - ctx.progress) * team - SCALE * nearest\n", "    reward = team\n") + POTENTIAL
    result = process_sandbox.run_job(Job(kind="train", code=code, env=ENV, algo="mappo", steps=2000, seed=0,
                                         limits=LIMITS, hparams={"n_envs": 50, "rollout_len": 20}))
    assert result.status == "ok", result.error
    stats = result.reflection_stats
    assert stats["potential_shaping"]["max"] != 0.0 and stats["hrf_change"]["max"] == 0.0
