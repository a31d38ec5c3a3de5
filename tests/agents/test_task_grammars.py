"""The task grammars of simple_reference and simple_speaker_listener (agents/offline/task_grammars.py):
their terms and features compute what they say on the real envs' states, every gene runs
together through lero's own hook checks, and the designer, schema and renderer use them.
(The property tests over many draws and schema objects are in test_structured.py.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from lero.agents import check_candidate
from lero.agents.checks import state_names
from lero.agents.offline import generic
from lero.agents.offline.designer import OfflineDesigner
from lero.agents.offline.generic import GenericGenome, Vocabulary
from lero.agents.offline.schema import design_schema
from lero.agents.offline.task_grammars import TASK_GRAMMARS
from lero.agents.records import Elite, Problem
from lero.graph.configuration import RunSpec
from lero.graph.context import problem
from lero.training.candidate import load_candidate
from lero.training.envs.registry import make_env
from lero.training.hooks import ObservationEnhancer, PotentialCheck, RewardShaper

B = 4


def task(env: str) -> Problem:
    return problem(RunSpec(env=env), None)


def every_gene(env: str) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every term (weight 1, constant) and every feature of the env's grammar, run through
    lero's hook checks on the env's own world: (components, rewards [B, N], enhanced obs
    [B, N, D+k], Phi [B, N] of the potential terms)."""
    spec = task(env)
    vocab = Vocabulary.of(spec)
    genome = GenericGenome.build({k: (1.0, "constant") for k in vocab.terms}, vocab.features)
    code = generic.render(genome, vocab)
    assert check_candidate(code, state_names(spec)) == []
    hooks = load_candidate(code)
    world_env = make_env(env, B)
    obs = world_env.reset(seed=0)  # [B, N, D]
    next_obs, env_reward, _, _ = world_env.step(world_env.random_actions(torch.Generator().manual_seed(0)))
    shaper = RewardShaper(hooks.hybrid_reward, spec.task_spec.metric_names)
    rewards, components = shaper(obs, next_obs, torch.zeros(B, spec.n_agents, dtype=torch.long), env_reward,
                                 world_env.world(), torch.ones(B, dtype=torch.long), 0.5)
    enhancer = ObservationEnhancer(hooks.enhance_observation, spec.obs_dim)
    return components, rewards, enhancer(next_obs), PotentialCheck(hooks.potential)(world_env.world(), next_obs)


@pytest.mark.parametrize("env", list(TASK_GRAMMARS))
def test_every_gene_of_a_task_grammar_runs_together_on_its_env(env: str) -> None:
    spec = task(env)
    vocab = Vocabulary.of(spec)
    assert spec.task_spec.grammar == env and vocab.grammar == env
    assert set(TASK_GRAMMARS[env].goals) <= set(vocab.goals) and "env" in vocab.terms
    components, rewards, enhanced, phi = every_gene(env)
    assert set(TASK_GRAMMARS[env].potentials) <= set(vocab.terms) and phi.shape == (B, spec.n_agents)
    assert set(components) == set(vocab.terms) - generic.ALL_POTENTIALS and rewards.shape == (B, spec.n_agents)
    widths = {"landmark_dist": 3, "partner_goal_symbol": 3, "goal_symbol": 3, "heard_landmark": 3, "speed": 1}
    assert enhanced.shape == (B, spec.n_agents, spec.obs_dim + sum(widths[f] for f in vocab.features))


def reward_of(env: str, genes: dict[str, float], world: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The named components of a design with `genes` (kind -> weight) on the given world."""
    spec = task(env)
    vocab = Vocabulary.of(spec)
    hooks = load_candidate(generic.render(GenericGenome.build({k: (w, "constant") for k, w in genes.items()}, ["speed"]), vocab))
    n = spec.n_agents
    ctx = SimpleNamespace(env_reward=torch.zeros(1, n), state=world, progress=0.0)
    return hooks.hybrid_reward(ctx)[1]


def potential_of(env: str, genes: dict[str, float], world: dict[str, torch.Tensor]) -> torch.Tensor:
    """Phi [B, N] of a design whose potential terms are `genes` (kind -> weight), beside `env`."""
    vocab = Vocabulary.of(task(env))
    terms = {"env": (1.0, "constant"), **{k: (w, "constant") for k, w in genes.items()}}
    hooks = load_candidate(generic.render(GenericGenome.build(terms, ["speed"]), vocab))
    return hooks.potential(world, torch.zeros(1, task(env).n_agents, task(env).obs_dim))


def test_the_task_grammars_distance_goals_have_potential_forms() -> None:
    reference = {  # agent 0 targets landmark 2 at distance 2, agent 1 landmark 0 at distance 1
        "agent_pos": torch.tensor([[[0.0, 0.0], [1.0, 0.0]]]), "agent_vel": torch.zeros(1, 2, 2),
        "landmark_pos": torch.tensor([[[1.0, 1.0], [-1.0, 0.0], [0.0, 2.0]]]),
        "comm": torch.zeros(1, 2, 10), "target": torch.tensor([[2, 0]]),
    }
    assert potential_of("simple_reference", {"own_goal_potential": 1.0}, reference).tolist() == [[-2.0, -1.0]]
    assert potential_of("simple_reference", {"own_goal_potential": 0.5, "partner_goal_potential": 1.0},
                        reference).tolist() == [[-2.0, -2.5]]  # 0.5 x own + the partner's distance
    listener = {"agent_pos": torch.tensor([[[5.0, 5.0], [0.0, 0.0]]]), "agent_vel": torch.zeros(1, 2, 2),
                "landmark_pos": torch.tensor([[[0.0, 1.0], [2.0, 0.0], [0.0, -1.0]]]),
                "comm": torch.zeros(1, 2, 3), "target": torch.tensor([1])}
    assert potential_of("simple_speaker_listener", {"listener_goal_potential": 1.0}, listener).tolist() == [[-2.0, -2.0]]
    genome = GenericGenome.build({"own_goal": (1.0, "constant"), "own_goal_potential": (1.0, "ramp_down")}, ["speed"])
    assert genome.term_map()["own_goal_potential"] == (1.0, "constant")  # Phi may not change over training
    code = generic.render(genome, Vocabulary.of(task("simple_reference")))
    assert '# term: own_goal_potential' in code.split("def potential")[1] and 'components["own_goal_potential"]' not in code


def test_simple_reference_terms_measure_each_agents_target_and_message() -> None:
    world = {  # agent 0 targets landmark 2, agent 1 landmark 0; agent 0 said 0 (its partner's target), agent 1 said 7
        "agent_pos": torch.tensor([[[0.0, 0.0], [1.0, 0.0]]]),
        "agent_vel": torch.tensor([[[0.0, 0.5], [-0.5, 0.0]]]),
        "landmark_pos": torch.tensor([[[1.0, 1.0], [-1.0, 0.0], [0.0, 2.0]]]),
        "comm": torch.nn.functional.one_hot(torch.tensor([[0, 7]]), 10).float(),
        "target": torch.tensor([[2, 0]]),
    }
    terms = reward_of("simple_reference", {"own_goal": 1, "partner_goal": 1, "names_partner_goal": 1,
                                           "follows_message": 1, "goal_approach": 1, "reached": 1}, world)
    assert terms["own_goal"].tolist() == [[-2.0, -1.0]]  # agent 0 is 2 from (0, 2); agent 1 is 1 from (1, 1)
    assert terms["partner_goal"].tolist() == [[-1.0, -2.0]]
    assert terms["names_partner_goal"].tolist() == [[1.0, 0.0]]  # agent 0 said 0 = agent 1's target
    # agent 1 heard symbol 0: landmark 0 is straight above it and it moves sideways, so its speed
    # towards it is 0; agent 0 heard 7, which names no landmark
    assert terms["follows_message"].tolist() == [[0.0, 0.0]]
    assert terms["goal_approach"][0, 0].item() == pytest.approx(0.5)  # agent 0 moves up, towards (0, 2)
    assert terms["reached"].tolist() == [0.0]
    world["agent_vel"] = torch.tensor([[[0.0, 0.0], [0.0, 0.3]]])
    assert reward_of("simple_reference", {"env": 1, "follows_message": 1}, world)["follows_message"][0, 1].item() == pytest.approx(0.3)


def test_simple_speaker_listener_terms_credit_each_role_for_its_part() -> None:
    world = {  # the target is landmark 1; the speaker said 1; the listener moves towards it
        "agent_pos": torch.tensor([[[5.0, 5.0], [0.0, 0.0]]]),
        "agent_vel": torch.tensor([[[0.0, 0.0], [0.4, 0.0]]]),
        "landmark_pos": torch.tensor([[[0.0, 1.0], [2.0, 0.0], [0.0, -1.0]]]),
        "comm": torch.tensor([[[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]]),
        "target": torch.tensor([1]),
    }
    terms = reward_of("simple_speaker_listener", {"listener_goal": 1, "names_goal": 1, "follows_message": 1,
                                                  "goal_approach": 1, "reached": 1}, world)
    assert terms["listener_goal"].tolist() == [-2.0] and terms["reached"].tolist() == [0.0]
    assert terms["names_goal"].tolist() == [[1.0, 0.0]]  # the speaker's credit only
    assert terms["follows_message"][0].tolist() == pytest.approx([0.0, 0.4])  # the listener's only
    assert terms["goal_approach"].tolist() == pytest.approx([0.4])
    world["comm"] = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]])  # the speaker names landmark 0 instead
    assert reward_of("simple_speaker_listener", {"env": 1, "names_goal": 1}, world)["names_goal"].tolist() == [[0.0, 0.0]]


def test_simple_speaker_listener_features_are_each_roles_own() -> None:
    spec = task("simple_speaker_listener")
    vocab = Vocabulary.of(spec)
    hooks = load_candidate(generic.render(GenericGenome.build({"env": (1.0, "constant")}, vocab.features), vocab))
    speaker = torch.tensor([0.15, 0.65, 0.15, *[0.0] * 8])  # sees landmark 1's colour
    listener = torch.tensor([0.0, 0.3, 1.0, 0.0, 0.0, 2.0, 3.0, 4.0, 0.0, 0.0, 1.0])  # heard symbol 2
    enhanced = hooks.enhance_observation(torch.stack([speaker, listener]))[:, spec.obs_dim:]
    order = [f for f in generic.FEATURE_ORDER if f in vocab.features]  # the module appends them in this order
    values = dict(zip(order, torch.split(enhanced, [1 if f == "speed" else 3 for f in order], dim=1), strict=True))
    assert values["goal_symbol"].tolist() == [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    assert values["landmark_dist"][0].tolist() == [0.0] * 3 and values["landmark_dist"][1].tolist() == [1.0, 2.0, 5.0]
    assert values["heard_landmark"].tolist() == [[0.0] * 3, [3.0, 4.0, 5.0]]  # landmark 2 at (3, 4)
    assert values["speed"][:, 0].tolist() == pytest.approx([0.0, 0.3])


@pytest.mark.parametrize("env", list(TASK_GRAMMARS))
def test_the_designer_and_schema_speak_the_task_grammar(env: str) -> None:
    spec = task(env)
    schema = design_schema(spec)
    assert schema.grammar == env
    assert set(TASK_GRAMMARS[env].goals) <= set(schema.schema["properties"]["goal"]["properties"]["kind"]["enum"])
    assert set(TASK_GRAMMARS[env].features) == set(schema.schema["properties"]["features"]["properties"])
    first = OfflineDesigner(seed=0).design(spec, 3, [], "")
    assert f"({env} grammar)" in first[0].code and first[0].reply.endswith("prior design")
    assert set(schema.object_of(first[0].code)["shaping"]) == set(TASK_GRAMMARS[env].prior_terms) - {"env"}
    shaping = schema.schema["properties"]["shaping"]["properties"]
    assert set(TASK_GRAMMARS[env].potentials) <= set(shaping)  # the schema accepts the potential forms
    potential = TASK_GRAMMARS[env].potentials[0]
    design = {**schema.object_of(first[0].code), "shaping": {potential: {"weight": 2.0, "schedule": "constant"}}}
    assert "def potential(state, obs):" in schema.render(design) and schema.object_of(schema.render(design)) == design


def test_an_elite_with_genes_of_another_grammar_is_kept_to_this_tasks_genes() -> None:
    reference, listener = task("simple_reference"), task("simple_speaker_listener")
    foreign = OfflineDesigner(seed=0).design(reference, 1, [], "")[0].code or ""  # names_partner_goal, partner_goal_symbol
    kept = GenericGenome.of_code(foreign, Vocabulary.of(listener))
    assert kept is not None and "names_partner_goal" not in kept.term_map() and kept.features == ("heard_landmark",)
    children = OfflineDesigner(seed=1).design(listener, 2, [Elite("0-0", foreign, 1.0)], "", exploit=1)
    for child in children:
        assert check_candidate(child.code or "", state_names(listener)) == []
        assert "names_partner_goal" not in (child.code or "")
