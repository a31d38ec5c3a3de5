"""Selection on the task, never on the shaping: `--fitness success` is a sparse task's default,
scores a seed by the task's success metric and breaks ties by the native return."""

from __future__ import annotations

import pytest

from lero.graph.configuration import RunError, RunSpec
from lero.graph.nodes.train import rank_key, success_fitness
from lero.training.envs import task_spec

pytest.importorskip("vmas")


@pytest.mark.parametrize(("env", "kwargs", "default"), [
    ("vmas:navigation", {"n_agents": 3, "pos_shaping_factor": 0}, "success"),
    ("vmas:navigation", {"n_agents": 3}, "final"),
    ("simple_spread", {"N": 3, "reward": "sparse"}, "success"),
    ("simple_spread", {"N": 3}, "final"),
])
def test_fitness_defaults_to_success_where_the_task_is_sparse(env: str, kwargs: dict, default: str) -> None:
    assert RunSpec.parse({"env": env, "env_kwargs": kwargs}).fitness == default
    assert RunSpec.parse({"env": env, "env_kwargs": kwargs, "fitness": "final"}).fitness == "final"
    assert RunSpec.parse({"env": env, "env_kwargs": kwargs, "fitness": "success"}).fitness == "success"


def test_unknown_fitness_is_one_line() -> None:
    with pytest.raises(RunError, match="fitness"):
        RunSpec.parse({"fitness": "shaped"})


def test_success_fitness_reads_the_success_metric_and_return_breaks_ties() -> None:
    task = task_spec("vmas:navigation", n_agents=2, pos_shaping_factor=0)
    assert success_fitness(task, {"return": -0.2, "success": 0.75}, -0.2) == 0.75
    assert success_fitness(task, {"return": -0.2, "success": 0.75}, None) is None  # no score: none
    records = [{"candidate_id": "a", "fitness": 0.5, "eval": {"return": -0.3, "success": 0.5}},
               {"candidate_id": "b", "fitness": 0.5, "eval": {"return": -0.1, "success": 0.5}},
               {"candidate_id": "c", "fitness": 0.0, "eval": {"return": 0.0, "success": 0.0}}]
    ranked = sorted(records, key=rank_key(task, "success"), reverse=True)
    assert [r["candidate_id"] for r in ranked] == ["b", "a", "c"]  # native return only breaks ties


def test_the_command_line_picks_the_default_and_takes_the_flag() -> None:
    from lero.app.cli.args import build_parser, spec_fields

    def spec(*argv: str) -> RunSpec:
        return RunSpec.parse(spec_fields(build_parser().parse_args(["run", *argv])))

    sparse = ("--env", "vmas:navigation", "--env-arg", "n_agents=3", "--env-arg", "pos_shaping_factor=0")
    assert spec(*sparse).fitness == "success"
    assert spec(*sparse, "--fitness", "final").fitness == "final"
    assert spec("--env-arg", "reward=sparse").fitness == "success"  # simple_spread, the default env
    assert spec().fitness == "final"


def test_a_sparse_runs_budget_counts_native_at_loop() -> None:
    fields = {"generations": 1, "population": 2, "steps": 1000, "seeds": 1, "confirm_steps": 3000}
    dense = RunSpec.parse({**fields, "env": "vmas:navigation", "env_kwargs": {"n_agents": 2}})
    sparse = RunSpec.parse({**fields, "env": "vmas:navigation", "env_kwargs": {"n_agents": 2, "pos_shaping_factor": 0}})
    selection, confirmation = (2 + 1) * 1000, 2 * 3 * 3000  # candidates and baseline; 2 arms x 3 seeds
    assert dense.budget() == (3 + 6, selection + confirmation)
    assert sparse.budget() == (3 + 6 + 3, selection + confirmation + 3 * (selection + confirmation))
