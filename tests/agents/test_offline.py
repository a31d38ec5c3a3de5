"""The offline designer: real modules that pass the checks and run, bred from elites."""

import itertools
import random
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from lero.agents import Elite, Review, check_candidate
from lero.agents.offline.designer import OfflineDebugger, OfflineDesigner, fit_to_layout
from lero.agents.offline.evolve import crossover, guided, mutate, prior_genome, random_genome
from lero.agents.offline.genome import FEATURE_KINDS, TERM_KINDS, Genome, Term, genome_of
from lero.agents.offline.render import render
from tests.agents.conftest import SPREAD


def make_ctx(batch: int, n_agents: int, n_landmarks: int, obs_dim: int) -> SimpleNamespace:
    gen = torch.Generator().manual_seed(0)
    return SimpleNamespace(
        obs=torch.randn(batch, n_agents, obs_dim, generator=gen),
        next_obs=torch.randn(batch, n_agents, obs_dim, generator=gen),
        actions=torch.randint(0, 5, (batch, n_agents), generator=gen),
        env_reward=torch.randn(batch, n_agents, generator=gen),
        state={
            "agent_pos": torch.rand(batch, n_agents, 2, generator=gen) * 2 - 1,
            "agent_vel": torch.randn(batch, n_agents, 2, generator=gen) * 0.1,
            "landmark_pos": torch.rand(batch, n_landmarks, 2, generator=gen) * 2 - 1,
        },
        step=torch.zeros(batch, dtype=torch.int64),
        progress=0.4,
    )


def run_module(code: str, n_agents: int = 3, n_landmarks: int = 3, obs_dim: int = 12) -> tuple:
    namespace: dict = {}
    exec(compile(code, "candidate.py", "exec"), namespace)
    ctx = make_ctx(batch=6, n_agents=n_agents, n_landmarks=n_landmarks, obs_dim=obs_dim)
    reward, components = namespace["hybrid_reward"](ctx)
    obs = torch.randn(6 * n_agents, obs_dim)  # [M, D]
    obs[0, 6:8] = 0.0  # a zero-padded landmark slot (partial observability)
    enhanced = namespace["enhance_observation"](obs)
    return reward, components, obs, enhanced


def assert_contract(code: str, n_agents: int = 3, n_landmarks: int = 3) -> None:
    assert check_candidate(code) == [], code
    reward, components, obs, enhanced = run_module(code, n_agents, n_landmarks)
    assert reward.shape == (6, n_agents) and reward.dtype == torch.float32
    assert torch.isfinite(reward).all()
    for name, value in components.items():
        assert value.shape in ((6, n_agents), (6,)), name
        assert torch.isfinite(value).all(), name
    assert enhanced.shape[0] == obs.shape[0] and enhanced.shape[1] > obs.shape[1]
    assert torch.equal(enhanced[:, : obs.shape[1]], obs)
    assert torch.isfinite(enhanced).all()


def elites_from(drafts, fitnesses, metrics=None, stats=None) -> list[Elite]:
    return [
        Elite(f"0-{i}", d.code, fitness, metrics or {}, stats or {}, "")
        for i, (d, fitness) in enumerate(zip(drafts, fitnesses, strict=True))
    ]


def test_first_generation_modules_pass_checks_and_run(task):
    drafts = OfflineDesigner(seed=0).design(task, k=5, elites=[], reflection="")
    assert len(drafts) == 5 and len({d.code for d in drafts}) == 5
    assert drafts[0].reply.endswith("prior design")
    for draft in drafts:
        assert draft.error is None and draft.origin == "offline"
        assert_contract(draft.code)


def test_every_term_and_feature_runs_together():
    terms = [
        Term(kind, 0.5, schedule)
        for kind, schedule in zip(
            TERM_KINDS, ["constant", "ramp_up", "ramp_down"] * 4, strict=False
        )
    ]
    for assignment in ("greedy", "optimal"):
        assert_contract(render(Genome.build(terms, FEATURE_KINDS, assignment), SPREAD))


@pytest.mark.parametrize(("n_agents", "n_landmarks"), [(3, 3), (5, 5), (4, 3), (2, 4)])
def test_random_genomes_run_for_other_team_sizes(n_agents, n_landmarks):
    rng = random.Random(n_agents * 10 + n_landmarks)
    for _ in range(8):
        assert_contract(render(random_genome(rng), SPREAD), n_agents, n_landmarks)


def test_optimal_assignment_beats_or_matches_greedy():
    genome = Genome.build([Term("assigned", 1.0)], ["speed"], "optimal")
    greedy = replace(genome, assignment="greedy")
    ctx = make_ctx(batch=200, n_agents=4, n_landmarks=4, obs_dim=12)
    totals = []
    for candidate in (genome, greedy):
        namespace: dict = {}
        exec(render(candidate, SPREAD), namespace)
        reward, _ = namespace["hybrid_reward"](ctx)
        totals.append(reward.sum(dim=1))  # [B] minus the summed assigned distance
    assert (totals[0] >= totals[1] - 1e-5).all() and (totals[0] > totals[1] + 1e-4).any()
    namespace = {}
    exec(render(genome, SPREAD), namespace)
    for row in range(5):  # each agent gets its own landmark
        target = namespace["optimal_assignment"](torch.rand(1, 4, 4))
        assert sorted(target[0].tolist()) == [0, 1, 2, 3], row


def test_oef_infers_occupancy_and_the_free_landmark():
    genome = Genome.build([Term("env", 1.0)], ["occupancy", "free_landmark"], "greedy")
    namespace: dict = {}
    exec(render(genome, SPREAD), namespace)
    obs = torch.zeros(1, 12)
    obs[0, 4:6] = torch.tensor([0.3, 0.0])  # nearest landmark, but another agent sits on it
    obs[0, 6:8] = torch.tensor([0.0, 0.8])  # farther landmark, free
    obs[0, 8:10] = torch.tensor([0.32, 0.0])  # the other agent
    extra = namespace["enhance_observation"](obs)[0, 12:]
    occupancy, free = extra[:2], extra[2:]
    assert occupancy.tolist() == [1.0, 0.0]
    assert torch.allclose(free, torch.tensor([0.0, 0.8, 0.8]))


def test_deterministic_given_the_seed(task):
    first = [d.code for d in OfflineDesigner(seed=3).design(task, 4, [], "")]
    again = [d.code for d in OfflineDesigner(seed=3).design(task, 4, [], "")]
    other = [d.code for d in OfflineDesigner(seed=4).design(task, 4, [], "")]
    assert first == again and first != other


def test_next_generation_breeds_new_modules_from_elites(task):
    designer = OfflineDesigner(seed=0)
    parents = designer.design(task, 4, [], "")
    elites = elites_from(parents, [-60.0, -45.0, -50.0, -70.0])
    children = designer.design(task, 4, elites, "reflection text", exploit=3)
    parent_codes = {d.code for d in parents}
    assert len(children) == 4 and not parent_codes & {d.code for d in children}
    for child in children:
        assert_contract(child.code)
        assert genome_of(child.code) is not None
    assert [d.kind for d in children] == ["exploit", "exploit", "exploit", "explore"]
    assert children[0].parents[0] == "0-1" and "refines 0-1" in children[0].reply  # best elite first
    assert children[1].parents[0] == "0-2" and children[2].parents[0] == "0-0"  # round robin
    assert children[3].parents == ()
    fresh = OfflineDesigner(seed=0)
    fresh.design(task, 4, [], "")
    assert [d.code for d in fresh.design(task, 4, elites, "reflection text", exploit=3)] == [
        d.code for d in children
    ]
    again = designer.design(task, 4, elites, "reflection text", exploit=3)
    assert len(again) == 4 and not {d.code for d in again} & {d.code for d in children}


def test_repeated_calls_keep_proposing_new_designs(task):
    designer = OfflineDesigner(seed=0)
    assert len(designer.design(task, 2, [], "")) == 2
    assert len(designer.design(task, 2, [], "")) == 2  # the prior is not proposed twice
    parents = designer.design(task, 3, [], "")
    stats = {"assigned": {"mean": -1.0, "min": -1.0, "max": -1.0, "snapshots": []}}
    elites = elites_from(
        parents, [-20.0, -15.0, -18.0], {"coverage": 0.05, "collisions": 9.0}, stats
    )
    seen: set[str] = set()
    for _ in range(3):  # guided edits are deterministic; the exploit child must not repeat
        codes = {d.code for d in designer.design(task, 3, elites, "", exploit=2)}
        assert len(codes) == 3 and not codes & seen
        seen |= codes


def test_mutation_and_crossover_change_the_design():
    rng = random.Random(0)
    prior = prior_genome()
    mutated = {mutate(prior, rng)[0] for _ in range(20)}
    assert prior not in mutated and len(mutated) > 5
    assert len({render(g, SPREAD) for g in mutated}) == len(mutated)
    first = Genome.build([Term("team_coverage", 1.0), Term("collision", 0.5)], ["speed"], "greedy")
    second = Genome.build([Term("nearest", 2.0), Term("spread", 0.3)], ["occupancy"], "greedy")
    children = {crossover(first, second, random.Random(seed)) for seed in range(30)}
    kinds = {t.kind for child in children for t in child.terms}
    assert {"team_coverage", "nearest"} <= kinds and len(children) > 3
    assert any({"collision", "spread"} <= {t.kind for t in c.terms} for c in children)


def test_guided_mutation_follows_the_reflection():
    genome = Genome.build(
        [Term("team_coverage", 1.0), Term("assigned", 1.0), Term("settle", 0.3)],
        ["speed"],
        "greedy",
    )
    stats = {
        "team_coverage": {"mean": -200.0, "min": -260.0, "max": -150.0, "snapshots": []},
        "assigned": {"mean": -10.0, "min": -14.0, "max": -6.0, "snapshots": []},
        "settle": {"mean": -2.0, "min": -2.0, "max": -2.0, "snapshots": []},
    }
    child, notes = guided(genome, stats, {"coverage": 0.05, "collisions": 8.0})
    assert child.term("team_coverage").weight == pytest.approx(0.3)  # dominated: rescaled
    assert child.term("settle") is None  # near constant: dropped
    assert child.term("team_occupancy") is not None  # low coverage: occupancy bonus
    assert {"occupancy", "free_landmark"} <= set(child.features)
    assert child.term("collision") is not None  # many collisions: penalty
    assert len(notes) == 4
    unchanged, no_notes = guided(genome, {}, {"coverage": 0.9, "collisions": 0.5})
    assert unchanged == genome and no_notes == []


def test_feedback_strengthens_the_named_term(task):
    plain = OfflineDesigner(seed=1).design(task, 1, [], "")[0]
    steered = OfflineDesigner(seed=1).design(task, 1, [], "", feedback="Too many collisions!")[0]
    assert (
        genome_of(steered.code).term("collision").weight
        > genome_of(plain.code).term("collision").weight
    )


def test_a_comment_maps_to_a_deterministic_edit_shown_in_the_reply(task):
    designer = OfflineDesigner(seed=0)
    draft = designer.design(task, 1, [], "")[0]  # the prior: team_coverage, assigned, collision
    comment = "Weaker collision penalty, and add the spread term; ramp up assigned."
    review = Review("revise", [comment], comment)
    revised = designer.revise(task, draft.code, review)
    assert revised.code == OfflineDesigner(seed=7).revise(task, draft.code, review).code  # no randomness
    before, after = genome_of(draft.code), genome_of(revised.code)
    assert after.term("collision").weight == pytest.approx(before.term("collision").weight * 2 / 3, abs=1e-3)
    assert after.term("spread") is not None and after.term("assigned").schedule == "ramp_up"
    assert "weaker collision: weight 0.5 -> 0.333" in revised.reply and "ramp_up" in revised.reply
    assert revised.origin == "offline:revise"
    assert_contract(revised.code)
    unmatched = designer.revise(task, draft.code, Review("revise", ["hmm"], "I am not sure about this"))
    assert unmatched.code == draft.code and "unchanged" in unmatched.reply


def test_generation_feedback_is_applied_once_never_compounded(task):
    designer = OfflineDesigner(seed=2)
    feedback = "Too many collisions!"
    elite = designer.design(task, 1, [], "")[0]  # the prior, feedback not yet given
    start = genome_of(elite.code).term("collision").weight
    weights = []
    for generation in range(3):  # the same feedback, each generation refining the last child
        child = designer.design(task, 1, [Elite(f"{generation}-0", elite.code, -10.0)], "", feedback, exploit=1)[0]
        weights.append(genome_of(child.code).term("collision").weight)
        assert ("feedback: stronger collision" in child.reply) == (generation == 0)
        elite = child
    assert weights[0] == pytest.approx(start * 1.5, abs=1e-3)
    assert max(weights) < start * 1.5 ** 2  # compounding would reach 1.5^3


def test_debugger_drops_the_gene_the_traceback_points_at(task):
    designer = OfflineDesigner(seed=0)
    code = designer.design(task, 1, [], "")[0].code
    line = next(
        i for i, text in enumerate(code.splitlines(), 1) if 'components["collision"]' in text
    )
    error = f'Traceback (most recent call last):\n  File "candidate.py", line {line}, in hybrid_reward\nRuntimeError: boom'
    repaired = OfflineDebugger(designer).repair(task, code, error, history=[])
    assert genome_of(repaired.code).term("collision") is None
    assert "dropped term collision" in repaired.reply
    assert_contract(repaired.code)


def test_debugger_resets_features_after_an_oef_failure(task):
    designer = OfflineDesigner(seed=0)
    code = designer.design(task, 1, [], "")[0].code
    error = "HookError: enhance_observation returned shape [9, 11], expected [9, 12 + k]"
    repaired = OfflineDebugger(designer).repair(task, code, error, history=[])
    assert genome_of(repaired.code).features == ("nearest_landmark",)


def test_debugger_never_repeats_a_tried_module(task):
    designer = OfflineDesigner(seed=0)
    code = designer.design(task, 1, [], "")[0].code
    debugger = OfflineDebugger(designer)
    history: list[tuple[str, str]] = []
    for _ in range(4):
        draft = debugger.repair(task, code, "MemoryError", history)
        assert draft.code not in {code, *(c for c, _ in history)}
        assert_contract(draft.code)
        history.append((draft.code, "MemoryError"))


def test_bad_input_gets_one_line_errors(task):
    designer = OfflineDesigner()
    with pytest.raises(ValueError, match="no grammar 'simple_tag'"):
        designer.design(replace(task, task_spec=replace(task.task_spec, grammar="simple_tag")), 2, [], "")
    with pytest.raises(ValueError, match="obs_layout"):
        designer.design(replace(task, obs_layout={}), 2, [], "")
    with pytest.raises(ValueError, match="k must be"):
        designer.design(task, 0, [], "")
    with pytest.raises(ValueError, match="unknown reward term"):
        Term("teleport", 1.0)


def test_features_follow_the_layout(task):
    full_view = replace(
        task,
        obs_layout={"self_vel": (0, 2), "self_pos": (2, 4), "landmark_rel": (4, 10)},
        obs_dim=10,
    )
    for draft in OfflineDesigner(seed=2).design(full_view, 4, [], ""):
        features = genome_of(draft.code).features
        assert features and not {"occupancy", "free_landmark", "nearest_agent"} & set(features)
        assert check_candidate(draft.code) == []


@pytest.mark.parametrize(("n_agents", "n_landmarks"), [(1, 1), (3, 3), (5, 5), (6, 6), (7, 7), (3, 5), (5, 6)])
def test_optimal_assignment_is_optimal_and_one_to_one(n_agents, n_landmarks):
    """Both of its paths: enumeration while L^N <= 4096 (up to 5 x 5, 3 x 5), Hungarian beyond."""
    namespace: dict = {}
    exec(render(Genome.build([Term("assigned", 1.0)], ["speed"], "optimal"), SPREAD), namespace)
    dist = torch.rand(64, n_agents, n_landmarks, generator=torch.Generator().manual_seed(n_agents))
    target = namespace["optimal_assignment"](dist)  # [B, N]
    assert all(len(set(row.tolist())) == n_agents for row in target)
    best = torch.full((64,), float("inf"))
    for order in itertools.permutations(range(n_landmarks), n_agents):  # brute force
        best = torch.minimum(best, dist[:, torch.arange(n_agents), torch.tensor(order)].sum(dim=-1))
    assert torch.allclose(dist.gather(2, target[..., None]).sum(dim=(1, 2)), best, atol=1e-5)


def test_without_the_prior_generation_zero_is_sampled(task):
    """`offline_prior=False` (`lero run --no-prior`): no hand-written head start."""
    with_prior = OfflineDesigner(seed=0).design(task, k=3, elites=[], reflection="")
    without = OfflineDesigner(seed=0, prior=False).design(task, k=3, elites=[], reflection="")
    prior = fit_to_layout(prior_genome(), task)
    assert genome_of(with_prior[0].code) == prior
    assert all(genome_of(d.code) != prior for d in without)
    assert not any("prior" in d.reply for d in without)
