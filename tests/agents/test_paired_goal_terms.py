"""The generic grammar on a task that pairs each agent with its own goal (VMAS navigation
without its shaping): `paired_goal` and the potential forms of the distance terms render,
compute what they say on the real env, fit the structured schema, pass validation and train."""

from __future__ import annotations

import pytest
import torch

from lero.agents import check_candidate
from lero.agents.checks import state_names
from lero.agents.offline import generic
from lero.agents.offline.designer import OfflineDesigner
from lero.agents.offline.generic import GenericGenome, Vocabulary
from lero.agents.offline.schema import design_schema, schema_errors
from lero.graph.configuration import RunSpec
from lero.graph.context import problem
from lero.sandbox import Job, get_sandbox
from lero.sandbox.types import Limits
from lero.training import make_env
from lero.training.contract import POTENTIAL_TEXT

pytest.importorskip("vmas")

ENV = {"name": "vmas:navigation", "n_agents": 3, "pos_shaping_factor": 0}
KWARGS = {k: v for k, v in ENV.items() if k != "name"}


@pytest.fixture(scope="module")
def task():
    return problem(RunSpec(env=ENV["name"], env_kwargs=KWARGS))


def every_gene(vocab: Vocabulary) -> GenericGenome:
    return GenericGenome.build({k: (0.5, "constant") for k in vocab.terms}, vocab.features)


def test_the_pairing_offers_own_goal_terms_and_a_sparse_task_starts_from_a_potential(task) -> None:
    vocab = Vocabulary.of(task)
    assert vocab.own_goal == "goal_pos" and vocab.sparse
    assert {"paired_goal", "paired_goal_potential", "target_nearest_potential"} <= set(vocab.terms)
    assert generic.prior(vocab).term_map() == {"env": (1.0, "constant"), "paired_goal_potential": (1.0, "constant")}
    dense = problem(RunSpec(env=ENV["name"], env_kwargs={"n_agents": 3}))
    assert "paired_goal" in Vocabulary.of(dense).terms and "paired_goal_potential" not in generic.prior(
        Vocabulary.of(dense)).term_map()  # a dense task keeps its prior
    assert GenericGenome.build({"env": (1.0, "constant"), "paired_goal_potential": (1.0, "ramp_up")},
                               ["norm"]).terms[1] == ("paired_goal_potential", 1.0, "constant")  # Phi is fixed


def test_own_goal_terms_compute_the_distance_to_each_agents_own_goal(task) -> None:
    vocab = Vocabulary.of(task)
    code = generic.render(every_gene(vocab), vocab)
    assert check_candidate(code, state_names(task)) == [], code
    namespace: dict = {}
    exec(compile(code, "candidate.py", "exec"), namespace)
    env = make_env(ENV["name"], 4, **KWARGS)
    obs = env.reset(seed=3)
    own = torch.stack([torch.linalg.vector_norm(a.state.pos - a.goal.state.pos, dim=-1) for a in env.env.agents], 1)
    landmarks = env.world()["landmark_pos"]  # [B, L, 2]
    dist = torch.cdist(env.world()["agent_pos"], landmarks)  # [B, N, L]
    phi = namespace["potential"](env.world(), obs)
    expected = 0.5 * (-own - dist.min(dim=-1).values - dist.min(dim=1).values.sum(dim=-1, keepdim=True))
    torch.testing.assert_close(phi, expected)
    ctx = type("Ctx", (), {"obs": obs, "next_obs": obs, "actions": torch.zeros(4, 3, dtype=torch.long),
                           "env_reward": torch.zeros(4, 3), "state": env.world(), "step": torch.zeros(4),
                           "progress": 0.0})()
    _, components = namespace["hybrid_reward"](ctx)
    torch.testing.assert_close(components["paired_goal"], -0.5 * own)
    assert not set(components) & set(generic.POTENTIALS)  # potentials shape through potential() only


def test_the_schema_accepts_own_goal_terms_and_renders_them_back(task) -> None:
    schema = design_schema(task)
    shaping = schema.schema["properties"]["shaping"]["properties"]
    assert {"paired_goal", "paired_goal_potential", "target_cover_potential"} <= set(shaping)
    design = {"goal": {"kind": "env", "weight": 1.0, "schedule": "constant"},
              "shaping": {"paired_goal_potential": {"weight": 2.0, "schedule": "constant"},
                          "paired_goal": {"weight": 0.3, "schedule": "ramp_down"}},
              "features": {"norm": True}}
    assert schema_errors(design, schema.schema) == []
    code = schema.render(design)
    assert "def potential(state, obs):" in code and schema.object_of(code) == design
    assert "def potential" in OfflineDesigner(seed=0).design(task, 1, [], "")[0].code  # the prior, drawn


def test_a_sparse_tasks_prompt_offers_the_potential(task) -> None:
    from lero.agents.designer import Designer

    prompt = Designer(model=None, temperature=0.0).design_prompt(task, [], "", None, None, 1)
    assert POTENTIAL_TEXT.splitlines()[0] in prompt.messages[0].content
    dense = problem(RunSpec(env="simple_spread"))
    assert POTENTIAL_TEXT.splitlines()[0] not in Designer(model=None, temperature=0.0).design_prompt(
        dense, [], "", None, None, 1).messages[0].content


def test_own_goal_module_validates_and_trains_on_navigation(task) -> None:
    vocab = Vocabulary.of(task)
    code = generic.render(every_gene(vocab), vocab)
    sandbox = get_sandbox("process")
    limits = Limits(wall_s=120, mem_mb=2048, cpus=1, pids=64, output_bytes=8192, disk_mb=64)
    try:
        checked = sandbox.run_job(Job(kind="validate", code=code, env=ENV, algo="mappo", seed=0, limits=limits))
        assert checked.status == "ok", checked.error
        short = {**ENV, "max_steps": 20}  # episodes end within the few steps trained
        trained = sandbox.run_job(Job(kind="train", code=code, env=short, algo="mappo", steps=1600, seed=0,
                                      limits=limits, hparams={"n_envs": 32, "rollout_len": 25}))
        assert trained.status == "ok", trained.error
        stats = trained.reflection_stats
        assert stats["potential_shaping"]["max"] != 0.0 and stats["hrf_change"]["max"] > 0.0  # not invariant
        assert "paired_goal" in stats and "success" in trained.curves  # the task metric, during training
    finally:
        sandbox.close()


def test_the_critic_can_name_own_goal_shaping_that_is_not_policy_invariant(task) -> None:
    from lero.agents.critic import review_targets
    from lero.agents.evidence import valid_points

    schema = design_schema(task)
    code = schema.render({"goal": {"kind": "env", "weight": 1.0, "schedule": "constant"},
                          "shaping": {"paired_goal": {"weight": 1.0, "schedule": "constant"},
                                      "paired_goal_potential": {"weight": 1.0, "schedule": "constant"}},
                          "features": {"norm": True}})
    targets = review_targets(task, code)
    assert {"paired_goal", "paired_goal_potential"} <= set(targets)
    point = {"target": "paired_goal", "rubric_item": "not-invariant", "why": "its potential form keeps the optimum"}
    assert [(p.target, p.rubric_item) for p in valid_points([point], targets, code)] == [("paired_goal", "not-invariant")]
