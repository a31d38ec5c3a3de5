"""VMAS scenarios as native batched envs: parity with VMAS itself, the TaskSpec against the
scenario's world, names and arguments, the CLI (including `vmas` missing)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import torch
from rich.console import Console

from lero.app.cli.main import main
from lero.training.envs import make_env
from lero.training.envs.pettingzoo_view import ParallelView
from lero.training.envs.registry import (
    check_env_name,
    check_kwargs,
    is_installed,
    is_native,
    task_spec,
)
from lero.training.envs.vmas_adapter import INSTALL_HINT, scenario_names

vmas = pytest.importorskip("vmas")  # the reference: installed by the dev and vmas extras

# scenario -> its arguments: the candidates for the LERO table, small
SCENARIOS = {
    "navigation": {"n_agents": 3},
    "balance": {"n_agents": 3},
    "transport": {"n_agents": 2},
    "discovery": {"n_agents": 3, "n_targets": 4},
}
B, SEED = 12, 5
# scenario -> episode length: two episode ends in 2 * length + 5 steps; with 40, random
# actions drop balance's package in some slots first (reset_at, not reset)
HORIZON = {"navigation": 8, "balance": 40, "transport": 8, "discovery": 8}

def reference_run(scenario: str, kwargs: dict, actions: torch.Tensor) -> dict[str, list]:
    """VMAS's own batch, stepped with ``actions`` [T, B, N] and reset as TorchRL resets it."""
    env = vmas.make_env(scenario, num_envs=B, continuous_actions=False, max_steps=HORIZON[scenario], **kwargs)
    out: dict[str, list] = {"start": [torch.stack(env.reset(seed=SEED), dim=1)], "obs": [], "reward": [],
                            "done": [], "next": []}
    for joint in actions:
        obs, rewards, done, _ = env.step(list(joint.unbind(dim=1)))
        out["obs"].append(torch.stack(obs, dim=1))
        out["reward"].append(torch.stack(rewards, dim=1))
        out["done"].append(done.clone())
        if done.all():
            after = env.reset()
        elif done.any():
            for index in done.nonzero().flatten().tolist():
                env.reset_at(index, return_observations=False)
            after = env.get_from_scenario(get_observations=True, get_rewards=False, get_infos=False,
                                          get_dones=False)[0]
        else:
            after = obs
        out["next"].append(torch.stack(after, dim=1))
    return out


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_same_seed_and_actions_give_vmas_observations_and_rewards(scenario: str) -> None:
    kwargs = SCENARIOS[scenario]
    env = make_env(f"vmas:{scenario}", B, max_steps=HORIZON[scenario], **kwargs)
    steps = 2 * HORIZON[scenario] + 5
    actions = torch.stack([env.random_actions(torch.Generator().manual_seed(t)) for t in range(steps)])
    ours: dict[str, list] = {"start": [env.reset(seed=SEED)], "obs": [], "reward": [], "done": [], "next": []}
    for joint in actions:  # the whole run first: both sides share VMAS's one random state
        obs, reward, done, info = env.step(joint)
        for key, value in (("obs", info["final_obs"]), ("reward", reward), ("done", done), ("next", obs)):
            ours[key].append(value)
    reference = reference_run(scenario, kwargs, actions)
    for key in ours:
        torch.testing.assert_close(torch.stack(ours[key]), torch.stack(reference[key]), rtol=0, atol=0,
                                   msg=lambda m, key=key: f"{scenario} {key}: {m}")
    dones = torch.stack(ours["done"])  # [T, B]
    assert dones.any(dim=1).sum() >= 2, "the run must cross episode ends"
    if scenario == "balance":  # the package falls in some slots only: reset_at, not reset
        assert (dones.any(dim=1) & ~dones.all(dim=1)).any()


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_task_spec_names_the_scenarios_world(scenario: str) -> None:
    env = make_env(f"vmas:{scenario}", 4, **SCENARIOS[scenario])
    env.reset(seed=1)
    vmas_world = env.env.world
    sizes = {"B": 4, "N": len(vmas_world.agents), "L": len(vmas_world.landmarks)}
    world = env.world()
    assert [f.name for f in env.task.state_fields] == list(world)
    for spec in env.task.state_fields:
        dims = [sizes.get(part.strip()) or int(part) for part in spec.shape.strip("[]").split(",")]
        assert list(world[spec.name].shape) == dims, spec.name
    for key in ("pos", "vel", "rot", "ang_vel"):
        for prefix, entities in (("agent", vmas_world.agents), ("landmark", vmas_world.landmarks)):
            expected = torch.stack([getattr(e.state, key) for e in entities], dim=1)
            assert torch.equal(world[f"{prefix}_{key}"], expected), f"{prefix}_{key}"
    assert env.task.notes["landmarks"] == tuple(e.name for e in vmas_world.landmarks)
    assert task_spec(f"vmas:{scenario}", **SCENARIOS[scenario]) == env.task
    # every metric but return comes from the env at episode end; the scenario's info() keys are among them
    _, _, _, info = env.step(env.random_actions())
    assert set(info["episode_metrics"]) == set(env.task.metric_names) - {"return"}
    infos = env.env.get_from_scenario(get_observations=False, get_rewards=False, get_infos=True,
                                      get_dones=False)[0]
    assert set(infos[0]) <= set(env.task.metric_names)
    # a scenario with its own done() is solved by reaching it before the time limit
    assert env.task.success_metric == "success" and env.task.grammar is None  # all four define done()


def test_pettingzoo_api_through_lero_s_view() -> None:
    """VMAS ships no PettingZoo wrapper (gym, gymnasium and RLlib only); lero's ParallelView
    of one slot passes PettingZoo's own API test."""
    from pettingzoo.test import parallel_api_test

    parallel_api_test(ParallelView(make_env("vmas:balance", 1, n_agents=2, max_steps=30)), num_cycles=70)


def test_episode_metrics_sum_the_scenarios_info_over_the_episode() -> None:
    env = make_env("vmas:navigation", 6, max_steps=4, n_agents=2)
    env.reset(seed=0)
    totals = torch.zeros(6)
    for t in range(4):
        _, _, done, info = env.step(env.random_actions(torch.Generator().manual_seed(t)))
        step_info = env.env.get_from_scenario(get_observations=False, get_rewards=False, get_infos=True,
                                              get_dones=False)[0]
        totals += torch.stack([i["agent_collisions"] for i in step_info]).mean(dim=0)
    assert bool(done.all())
    assert torch.equal(info["episode_metrics"]["episode_length"], torch.full((6,), 4.0))
    torch.testing.assert_close(info["episode_metrics"]["agent_collisions"], totals)


def test_family_name_wins_over_the_module_factory_syntax() -> None:
    assert is_native("vmas:navigation") and is_installed("vmas:navigation")
    check_env_name("vmas:navigation")  # nothing to confirm, no `vmas.navigation` attribute looked up
    with pytest.raises(ValueError, match=r"^VMAS has no scenario 'navigaton'; it has: .*navigation") as error:
        check_env_name("vmas:navigaton")
    assert "\n" not in str(error.value) and set(scenario_names()) >= {"balance", "transport", "discovery"}


def test_arguments_are_checked_once_with_one_line_errors() -> None:
    """`check_kwargs` (every spec read) checks the declared bounds and builds nothing; the
    scenario's own names and values are checked when it is built (a run's preflight)."""
    check_kwargs("vmas:navigation", {"n_agents": 2, "max_steps": 50})
    check_kwargs("vmas:navigation", {"n_agentz": 2})  # only VMAS knows its keywords: nothing built here
    for kwargs, words in (({"max_steps": 0}, "max_steps must be >= 1"),
                          ({"n_agents": "two"}, "n_agents must be an int"),
                          ({"n_agents": 2000}, "n_agents must be in [0, 64], got 2000"),
                          ({"num_good_agents": 10**7}, "num_good_agents must be in [0, 64]"),
                          ({"lidar_range": 1e300}, "lidar_range must be a number within +-1e+06"),
                          ({"lidar_range": float("nan")}, "lidar_range must be a number within"),
                          ({"map_file_path": "x" * 300}, "longer than 256 characters"),
                          ({"shape": [1, 2]}, "must be a number, a string, a bool or None")):
        with pytest.raises(ValueError, match=r"^vmas:navigation: ") as error:
            check_kwargs("vmas:navigation", kwargs)
        assert words in str(error.value) and "\n" not in str(error.value)
    for kwargs, words in (({"n_agentz": 2}, "unknown argument(s) {'n_agentz': 2}"),
                          ({"n_agents": 0}, "the scenario refused its arguments")):
        with pytest.raises(ValueError, match=r"^vmas:navigation: ") as error:
            make_env("vmas:navigation", 1, **kwargs)
        assert words in str(error.value) and "\n" not in str(error.value)
    env = make_env("vmas:navigation", 2, n_agents=2)
    with pytest.raises(ValueError, match="actions must lie in"):
        env.step(torch.full((2, 2), env.n_actions))
    with pytest.raises(ValueError, match="cannot load a world state"):
        env.set_world(env.world())


def test_lero_train_on_a_vmas_scenario(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["train", "--env", "vmas:navigation", "--env-arg", "n_agents=2", "--algo", "mappo", "--seed", "1",
            "--out", "runs/t", "--steps", "400", "--n-envs", "4", "--eval-episodes", "4", "--threads", "1"]
    assert main(argv, console=Console(file=io.StringIO())) == 0
    result = json.loads((tmp_path / "runs/t/result.json").read_text())
    assert {"return", "episode_length", "pos_rew", "agent_collisions"} <= set(result["eval"])


def run_lero(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """`lero ARGV` in this process: its exit code and its stderr lines."""
    code = main(argv, console=Console(file=io.StringIO()))
    return code, capsys.readouterr().err.strip().splitlines()


def test_cli_without_vmas_names_the_extra_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "vmas", None)  # `import vmas` raises ImportError
    for argv in (["train", "--env", "vmas:navigation", "--algo", "mappo", "--steps", "10", "--seed", "1",
                  "--out", "runs/x"],
                 ["run", "--env", "vmas:navigation", "--llm", "offline", "--generations", "1"]):
        code, lines = run_lero(argv, capsys)
        assert code == 2 and len(lines) == 1, lines
        assert lines[0].startswith("lero: error: ") and lines[0].endswith(INSTALL_HINT)
    assert not (tmp_path / "runs").exists()


def test_cli_unknown_scenario_is_one_line_listing_vmas_scenarios(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code, lines = run_lero(["train", "--env", "vmas:nope", "--algo", "mappo", "--steps", "10", "--seed", "1",
                            "--out", "runs/x"], capsys)
    assert code == 2
    assert lines == [f"lero: error: VMAS has no scenario 'nope'; it has: {', '.join(scenario_names())}"]


def test_envs_stepped_in_turn_draw_what_each_draws_alone() -> None:
    """VMAS shares one random state between its envs; each adapter keeps its own, so seeds
    trained side by side (one process, a study's group) are the seeds trained alone."""

    def play(env, actions: torch.Tensor) -> list[torch.Tensor]:
        return [env.step(joint)[0] for joint in actions]  # obs after each step, resets included

    def actions_for(env) -> torch.Tensor:
        return torch.stack([env.random_actions(torch.Generator().manual_seed(t)) for t in range(12)])

    kwargs = {"n_agents": 2, "max_steps": 3}  # four episode ends in 12 steps: four resets
    alone = make_env("vmas:navigation", 4, **kwargs)
    alone.reset(seed=1)
    expected = play(alone, actions_for(alone))
    first, second = make_env("vmas:navigation", 4, **kwargs), make_env("vmas:navigation", 4, **kwargs)
    first.reset(seed=1)
    second.reset(seed=2)
    moves = actions_for(first)
    for t, joint in enumerate(moves):
        second.step(joint)
        assert torch.equal(first.step(joint)[0], expected[t]), f"step {t}"
