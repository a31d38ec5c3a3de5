"""The offline designer's generic grammar: any task, genes derived from its state fields."""

from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from lero.agents import Elite, Problem, Review, check_candidate
from lero.agents.offline import generic
from lero.agents.offline.designer import OfflineDebugger, OfflineDesigner
from lero.agents.offline.generic import GenericGenome, Vocabulary
from lero.training.envs.task import Metric, StateField, TaskSpec

B, N, D = 4, 3, 7

def fields(*pairs: tuple[str, str]) -> tuple[StateField, ...]:
    return tuple(StateField(name, shape, "") for name, shape in pairs)


OPAQUE_TASK = TaskSpec(  # a PettingZoo env through the adapter: no position-like fields
    name="mypkg.envs:make", text="work together", lero_kwargs={},
    state_fields=fields(("state", "[B, 6]"), ("agent_obs", f"[B, {N}, {D}]"), ("active", f"[B, {N}]"),
                        ("step", "[B]")),
    metrics=(Metric("return", True, ""), Metric("episode_length", False, "")), success_metric="return",
)
OPAQUE = Problem(
    task_spec=OPAQUE_TASK, env_name="mypkg.envs:make", env_description="a custom env", task="work together",
    algo="mappo", n_agents=N, obs_dim=D,
)
SPATIAL = replace(  # an MPE-like task: agents and targets with positions, velocities
    OPAQUE,
    env_name="simple_reference",
    task_spec=replace(OPAQUE_TASK, name="simple_reference", state_fields=fields(
        ("agent_pos", "[B, N, 2]"), ("agent_vel", "[B, N, 2]"), ("landmark_pos", "[B, L, 2]"), ("step", "[B]"))),
)


def ctx_for(task: Problem) -> SimpleNamespace:
    gen = torch.Generator().manual_seed(0)
    state = {
        "state": torch.randn(B, 6, generator=gen),
        "agent_obs": torch.randn(B, N, D, generator=gen),
        "active": torch.ones(B, N),
        "agent_pos": torch.randn(B, N, 2, generator=gen),
        "agent_vel": torch.randn(B, N, 2, generator=gen),
        "landmark_pos": torch.randn(B, 2, 2, generator=gen),
        "step": torch.zeros(B, dtype=torch.long),
    }
    names = {f.name for f in task.task_spec.state_fields}
    return SimpleNamespace(
        obs=torch.randn(B, N, D, generator=gen),
        next_obs=torch.randn(B, N, D, generator=gen),
        actions=torch.zeros(B, N, dtype=torch.long),
        env_reward=torch.randn(B, N, generator=gen),
        state={k: v for k, v in state.items() if k in names},
        step=torch.zeros(B, dtype=torch.long),
        progress=0.3,
    )


def assert_runs(code: str, task: Problem) -> dict:
    assert check_candidate(code) == [], code
    namespace: dict = {}
    exec(compile(code, "candidate.py", "exec"), namespace)
    reward, components = namespace["hybrid_reward"](ctx_for(task))
    assert reward.shape == (B, N) and reward.dtype == torch.float32 and torch.isfinite(reward).all()
    for name, value in components.items():
        assert value.shape in ((B, N), (B,)) and torch.isfinite(value).all(), name
    obs = torch.randn(B * N, D)
    obs[0, 4:] = 0.0  # a padded agent
    enhanced = namespace["enhance_observation"](obs)
    assert enhanced.shape[0] == B * N and enhanced.shape[1] > D
    assert torch.equal(enhanced[:, :D], obs) and torch.isfinite(enhanced).all()
    return components


def test_vocabulary_follows_the_state_fields() -> None:
    opaque, spatial = Vocabulary.of(OPAQUE), Vocabulary.of(SPATIAL)
    assert opaque.terms == ("env", "team_mean", "team_min", "others_mean")
    assert spatial.terms == (
        *opaque.terms,
        "target_nearest",
        "target_cover",
        "agent_spread",
        "speed",
        "target_nearest_potential",
        "target_cover_potential",
    )
    assert (spatial.agent_pos, spatial.agent_vel, spatial.target_pos) == (
        "agent_pos",
        "agent_vel",
        "landmark_pos",
    )
    concrete = replace(  # shapes written with numbers, as native envs do: N = 3, L = 3
        SPATIAL,
        task_spec=replace(SPATIAL.task_spec, state_fields=fields(
            ("landmark_pos", "[B, 3, 2]"), ("agent_pos", "[B, 3, 2]"), ("comm", "[B, 3, 10]"))),
    )
    found = Vocabulary.of(concrete)
    assert (found.agent_pos, found.agent_vel, found.target_pos) == (
        "agent_pos",
        None,
        "landmark_pos",
    )
    assert "speed" not in found.terms and "target_cover" in found.terms
    clash = replace(OPAQUE, task_spec=replace(OPAQUE_TASK, metrics=(Metric("return", True, ""),
                                                                     Metric("team_min", True, ""))))
    assert "team_min" not in Vocabulary.of(clash).terms  # a component may not shadow a metric


@pytest.mark.parametrize("task", [OPAQUE, SPATIAL], ids=["opaque", "spatial"])
def test_first_generation_passes_the_checks_and_runs(task: Problem) -> None:
    drafts = OfflineDesigner(seed=0).design(task, k=5, elites=[], reflection="")
    assert len({d.code for d in drafts}) == 5 and drafts[0].reply.endswith("prior design")
    for draft in drafts:
        assert draft.origin == "offline" and GenericGenome.of_code(draft.code, Vocabulary.of(task)) is not None
        assert_runs(draft.code, task)


def test_every_gene_together_runs() -> None:
    vocab = Vocabulary.of(SPATIAL)
    genome = GenericGenome.build(
        {
            kind: (0.5, schedule)
            for kind, schedule in zip(vocab.terms, generic.SCHEDULES * 3, strict=False)
        },
        vocab.features,
    )
    components = assert_runs(generic.render(genome, vocab), SPATIAL)
    assert set(components) == set(vocab.terms) - set(generic.POTENTIALS)  # potentials go to potential()
    assert components["team_mean"].shape == (B,) and components["env"].shape == (B, N)


def test_next_generation_breeds_from_elites_and_follows_the_reflection() -> None:
    designer = OfflineDesigner(seed=1)
    first = designer.design(OPAQUE, 3, [], "")
    stats = {
        "env": {"mean": 50.0, "min": 10.0, "max": 90.0},
        "team_mean": {"mean": 0.5, "min": 0.4, "max": 0.6},
    }
    elites = [Elite(f"0-{i}", d.code, float(i), {}, stats, "") for i, d in enumerate(first)]
    second = designer.design(OPAQUE, 3, elites, "", exploit=2)
    assert {d.code for d in second}.isdisjoint({d.code for d in first})
    assert second[0].reply.startswith("offline designer (generic grammar): refines 0-2")
    assert [(d.kind, d.parents[:1]) for d in second] == [("exploit", ("0-2",)), ("exploit", ("0-1",)), ("explore", ())]
    for draft in second:
        assert_runs(draft.code, OPAQUE)
    guided, notes = generic.guided(generic.prior(Vocabulary.of(OPAQUE)), stats)
    assert guided.term_map()["env"][0] == pytest.approx(0.5 * generic.DOMINANT_RESCALE)
    assert notes == ["env dominated the reward: rescaled x0.3"]


def test_deterministic_revise_and_repair() -> None:
    one = OfflineDesigner(seed=3).design(SPATIAL, 3, [], "")
    two = OfflineDesigner(seed=3).design(SPATIAL, 3, [], "")
    assert [d.code for d in one] == [d.code for d in two]
    designer = OfflineDesigner(seed=3)
    revised = designer.revise(SPATIAL, one[0].code, Review("revise", ["scale"], "scale"))
    assert revised.code != one[0].code and revised.origin == "offline:revise"
    assert_runs(revised.code, SPATIAL)
    code = one[0].code
    line = (
        next(i for i, text in enumerate(code.splitlines(), 1) if "# feature: pair_norms" in text)
        + 1
    )
    repaired = OfflineDebugger(designer).repair(
        SPATIAL, code, f'File "candidate.py", line {line}\nRuntimeError', []
    )
    assert "dropped feature pair_norms" in repaired.reply
    assert "pair_norms" not in GenericGenome.of_code(repaired.code, Vocabulary.of(SPATIAL)).features
