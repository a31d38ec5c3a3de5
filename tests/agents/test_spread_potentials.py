"""The simple_spread grammar's potential forms (`team_coverage_potential`, `nearest_potential`,
`assigned_potential`): they render into `potential(state, obs)`, compute the distance terms'
values on the real env, keep a constant schedule, fit the structured schema, and a sparse
simple_spread starts from the native reward shaped through the team coverage potential,
which validates and trains as policy-invariant shaping."""

from __future__ import annotations

import pytest
import torch

from lero.agents import check_candidate
from lero.agents.checks import state_names
from lero.agents.offline.designer import OfflineDesigner
from lero.agents.offline.evolve import prior_genome
from lero.agents.offline.genome import POTENTIAL_OF, Genome, Term, genome_of
from lero.agents.offline.render import render
from lero.agents.offline.schema import design_schema, schema_errors
from lero.graph.configuration import RunSpec
from lero.graph.context import problem
from lero.sandbox import Job, get_sandbox
from lero.sandbox.types import Limits
from lero.training.candidate import load_candidate
from lero.training.envs.registry import make_env
from lero.training.hooks import PotentialCheck

ENV = {"name": "simple_spread", "N": 3, "reward": "sparse"}
KWARGS = {k: v for k, v in ENV.items() if k != "name"}


@pytest.fixture(scope="module")
def sparse():
    return problem(RunSpec(env="simple_spread", env_kwargs=KWARGS))


def every_potential(assignment: str = "optimal") -> Genome:
    return Genome.build([Term("env", 1.0), *(Term(kind, 0.5) for kind in POTENTIAL_OF)], ["speed"], assignment)


def test_the_potential_forms_compute_the_distance_terms_on_the_env(sparse) -> None:
    code = render(every_potential(), sparse)
    assert check_candidate(code, state_names(sparse)) == [], code
    hooks = load_candidate(code)
    env = make_env("simple_spread", 4, **KWARGS)
    obs = env.reset(seed=5)  # [B, N, D]
    world = env.world()
    dist = torch.cdist(world["agent_pos"], world["landmark_pos"])  # [B, N, L]
    best = torch.tensor([min(sum(d[i, p[i]] for i in range(3)).item() for p in _permutations(3)) for d in dist])
    phi = PotentialCheck(hooks.potential)(world, obs)  # [B, N], checked as training checks it
    team = -dist.min(dim=1).values.sum(dim=-1, keepdim=True)  # [B, 1]
    own = phi - 0.5 * team - 0.5 * -dist.min(dim=-1).values  # [B, N] 0.5 x minus the assigned distance
    torch.testing.assert_close(-2 * own.sum(dim=1), best)  # the optimal assignment's total distance
    ctx = type("Ctx", (), {"env_reward": torch.zeros(4, 3), "state": world, "progress": 0.0})()
    assert set(hooks.hybrid_reward(ctx)[1]) == {"env"}  # potentials shape through potential() only


def _permutations(n: int) -> list[tuple[int, ...]]:
    import itertools

    return list(itertools.permutations(range(n)))


def test_a_potential_keeps_a_constant_schedule_through_mutation_and_the_genome_line(sparse) -> None:
    assert Term("nearest_potential", 1.0, "ramp_down").schedule == "constant"  # Phi is fixed over training
    genome = every_potential("greedy")
    assert genome_of(render(genome, sparse)) == genome
    assert genome.needs_assignment()  # assigned_potential needs each agent's landmark


def test_the_schema_accepts_the_potential_forms(sparse) -> None:
    schema = design_schema(sparse)
    assert set(POTENTIAL_OF) <= set(schema.schema["properties"]["shaping"]["properties"])
    design = {"goal": {"kind": "env", "weight": 1.0, "schedule": "constant"},
              "shaping": {"team_coverage_potential": {"weight": 2.0, "schedule": "constant"}},
              "features": {"speed": True}, "assignment": "greedy"}
    assert schema_errors(design, schema.schema) == []
    code = schema.render(design)
    assert "def potential(state, obs):" in code and schema.object_of(code) == design


def test_a_sparse_spread_starts_from_its_reward_and_the_coverage_potential(sparse) -> None:
    assert [(t.kind, t.weight) for t in prior_genome(sparse=True).terms] == [("env", 1.0),
                                                                            ("team_coverage_potential", 1.0)]
    first = OfflineDesigner(seed=0).design(sparse, 2, [], "")[0].code or ""
    assert "def potential(state, obs):" in first and "# term: team_coverage_potential" in first
    dense = problem(RunSpec(env="simple_spread"))
    assert "def potential" not in (OfflineDesigner(seed=0).design(dense, 2, [], "")[0].code or "")  # unchanged


def test_the_sparse_prior_validates_and_trains_as_policy_invariant_shaping(sparse) -> None:
    code = OfflineDesigner(seed=0).design(sparse, 1, [], "")[0].code
    limits = Limits(wall_s=120, mem_mb=2048, cpus=1, pids=64, output_bytes=8192, disk_mb=64)
    sandbox = get_sandbox("process")
    try:
        checked = sandbox.run_job(Job(kind="validate", code=code, env=ENV, limits=limits))
        assert checked.status == "ok", checked.error
        trained = sandbox.run_job(Job(kind="train", code=code, env=ENV, algo="mappo", steps=2000, seed=0,
                                      limits=limits, hparams={"n_envs": 50, "rollout_len": 20}))
    finally:
        sandbox.close()
    assert trained.status == "ok", trained.error
    stats = trained.reflection_stats
    assert stats["potential_shaping"]["max"] != 0.0 and stats["hrf_change"]["max"] == 0.0  # invariant


def test_the_structured_prompt_lists_the_potentials_and_says_what_they_do(sparse) -> None:
    from lero.agents.structured import grammar_text
    from lero.agents.templates import render as prompt

    listed = grammar_text(design_schema(sparse))
    assert "- team_coverage_potential: potential Phi: team: minus the summed distance" in listed
    assert "- assigned_potential: potential Phi: minus the distance to the landmark assigned" in listed
    assert "`*_potential` is a potential Phi of the state, not a reward" in prompt("designer_structured_system")
