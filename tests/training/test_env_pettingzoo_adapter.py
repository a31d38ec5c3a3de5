"""The generic PettingZoo adapter: padding, masks, auto-reset, parity with the wrapped env, workers, registry."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces
from pettingzoo import ParallelEnv

from lero.training.envs import make_env
from lero.training.envs.registry import (
    check_env_name,
    confirm_env,
    is_installed,
    registered_envs,
    task_spec,
)

SPEC = "tests.training.test_env_pettingzoo_adapter:make_relay"


class Relay(ParallelEnv):
    """Relay: a speaker, a listener and a scout pass a signal along; all share one team reward.

    Agents differ: the speaker sees 3 numbers and has 3 actions, the listener sees 5 and has 5,
    the scout sees a Discrete(4) cell and has 2 actions (Discrete(2, start=1)) and leaves after
    ``scout_steps`` steps. ``end_at`` ends the episode early for everyone.
    """

    def __init__(
        self, max_cycles: int = 6, scout_steps: int = 3, end_at: int | None = None
    ) -> None:
        self.metadata = {"name": "relay_v0", "render_modes": []}
        self.max_cycles, self.scout_steps, self.end_at = max_cycles, scout_steps, end_at
        self.possible_agents = ["speaker_0", "listener_0", "scout_0"]
        self.agents: list[str] = []
        self._obs_spaces = {
            "speaker_0": spaces.Box(-10, 10, (3,), np.float32),
            "listener_0": spaces.Box(-10, 10, (5,), np.float32),
            "scout_0": spaces.Discrete(4),
        }
        self._act_spaces = {
            "speaker_0": spaces.Discrete(3),
            "listener_0": spaces.Discrete(5),
            "scout_0": spaces.Discrete(2, start=1),
        }
        self.np_random = np.random.default_rng()

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self._act_spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        self.agents = self.possible_agents[:]
        self.t = 0
        self.signal = self.np_random.uniform(-1, 1, size=3).astype(np.float32)
        self.guess = np.zeros(2, dtype=np.float32)
        self.cell = int(self.np_random.integers(4))
        return self._observe(), {agent: {} for agent in self.agents}

    def _observe(self) -> dict:
        obs = {
            "speaker_0": self.signal.copy(),
            "listener_0": np.concatenate([self.guess, self.signal * 0.5]).astype(np.float32),
            "scout_0": self.cell,
        }
        return {agent: obs[agent] for agent in self.agents}

    def state(self) -> np.ndarray:
        return np.concatenate([self.signal, self.guess, [self.cell / 3.0]]).astype(np.float32)

    def step(self, actions: dict):
        self.t += 1
        speaker = actions.get("speaker_0", 0)
        listener = actions.get("listener_0", 0)
        self.guess = self.guess + np.array([listener - 2, speaker - 1], dtype=np.float32) * 0.1
        if "scout_0" in actions:
            self.cell = (self.cell + actions["scout_0"]) % 4
        self.signal = (self.signal + self.np_random.normal(0, 0.1, size=3)).astype(np.float32)
        team = float(-np.abs(self.guess[0] - self.signal[0]) - 0.1 * self.cell)
        acting = list(self.agents)
        obs = {agent: value for agent, value in self._observe().items() if agent in acting}
        ended = self.end_at is not None and self.t >= self.end_at
        terminations = {
            agent: ended or (agent == "scout_0" and self.t >= self.scout_steps) for agent in acting
        }
        truncations = {agent: self.t >= self.max_cycles for agent in acting}
        rewards = {agent: team + (0.5 if agent == "scout_0" else 0.0) for agent in acting}
        self.agents = [a for a in acting if not (terminations[a] or truncations[a])]
        return obs, rewards, terminations, truncations, {agent: {} for agent in acting}


def make_relay(**kwargs) -> Relay:
    """Relay a noisy signal from speaker to listener while a scout walks a ring of cells."""
    return Relay(**kwargs)


def padded(observations: dict, env: Relay) -> np.ndarray:
    """The adapter's encoding of one copy's obs dict: [3, 5], zero-padded, Discrete one-hot."""
    rows = np.zeros((3, 5), dtype=np.float32)
    for i, agent in enumerate(env.possible_agents):
        if agent not in observations:
            continue
        if agent == "scout_0":
            rows[i, observations[agent]] = 1.0
        else:
            value = observations[agent]
            rows[i, : len(value)] = value
    return rows


def random_actions(generator: torch.Generator, shape: tuple[int, int]) -> torch.Tensor:
    """Valid actions for every agent: uniform over each one's own count (3, 5, 2)."""
    counts = torch.tensor([3, 5, 2])
    return (torch.rand(shape, generator=generator) * counts).long()


def test_layout_padding_masks_and_roles() -> None:
    env = make_env(SPEC, 2, workers=0)
    assert (env.n_agents, env.obs_dim, env.obs_dims, env.n_actions) == (3, 5, (3, 5, 4), 5)
    assert env.roles == ("speaker", "listener", "scout")
    assert env.action_mask().tolist() == [
        [True, True, True, False, False],
        [True, True, True, True, True],
        [True, True, False, False, False],
    ]
    obs = env.reset(seed=3)
    assert obs.shape == (2, 3, 5) and obs.dtype == torch.float32
    assert torch.all(obs[:, 0, 3:] == 0)  # the speaker's 3 numbers padded to 5
    assert torch.all(obs[:, 2].sum(dim=1) == 1)  # the scout's cell one-hot
    assert env.state_dim == 6 and env.global_state().shape == (2, 6)
    assert set(env.world()) == {"state", "agent_obs", "active", "step"}
    assert env.max_steps == 6  # read off the env's max_cycles


@pytest.mark.parametrize("workers", [0, 2])
def test_parity_with_the_wrapped_env_across_auto_resets(workers: int) -> None:
    """Same seeds and actions through the adapter and directly: same obs, rewards, done, state."""
    B, seed = 3, 11
    env = make_env(SPEC, B, workers=workers)
    direct = [make_relay() for _ in range(B)]
    obs = env.reset(seed=seed)
    direct_obs = [copy.reset(seed=seed + slot)[0] for slot, copy in enumerate(direct)]
    for slot, copy in enumerate(direct):
        assert np.array_equal(obs[slot].numpy(), padded(direct_obs[slot], copy))
    generator = torch.Generator().manual_seed(0)
    dones = 0
    for _ in range(15):  # 6-step episodes: two auto-resets per slot
        actions = random_actions(generator, (B, 3))
        obs, reward, done, info = env.step(actions)
        for slot, copy in enumerate(direct):
            names = [a for a in copy.possible_agents if a in copy.agents]
            sent = {
                a: copy.action_space(a).start + int(actions[slot, i])
                for i, a in enumerate(copy.possible_agents)
                if a in names
            }
            step_obs, rewards, _, _, _ = copy.step(sent)
            assert np.array_equal(info["final_obs"][slot].numpy(), padded(step_obs, copy))
            expected = [rewards.get(a, 0.0) for a in copy.possible_agents]
            assert np.allclose(reward[slot].numpy(), expected, atol=1e-6)
            assert np.allclose(info["world"]["state"][slot].numpy(), copy.state())
            assert bool(done[slot]) == (not copy.agents)
            if not copy.agents:
                dones += 1
                first, _ = copy.reset()
                assert np.array_equal(obs[slot].numpy(), padded(first, copy))
            else:
                assert np.array_equal(obs[slot].numpy(), padded(step_obs, copy))
        assert torch.equal(env.global_state(), env.world()["state"])
    assert dones == 2 * B
    env.close()


def test_auto_reset_step_index_active_flags_and_episode_metrics() -> None:
    env = make_env(SPEC, 2, workers=0, end_at=4, max_cycles=6)
    env.reset(seed=0)
    zeros = torch.zeros(2, 3, dtype=torch.long)
    for t in range(4):
        obs, reward, done, info = env.step(zeros)
        assert info["step"].tolist() == [t, t]
        assert info["world"]["step"].tolist() == [t + 1, t + 1]
        if t == 2:  # the scout left after its 3rd step: zero obs and reward from then on
            assert info["world"]["active"][:, 2].tolist() == [0.0, 0.0]
        if t == 3:
            assert torch.all(info["final_obs"][:, 2] == 0) and torch.all(reward[:, 2] == 0)
    assert done.tolist() == [True, True]  # ended early, at step 4 of 6
    assert info["episode_metrics"]["episode_length"].tolist() == [4.0, 4.0]
    assert (
        env.world()["step"].tolist() == [0, 0] and env.world()["active"].tolist() == [[1.0] * 3] * 2
    )
    assert not torch.equal(obs, info["final_obs"])  # obs is the new episode's first


def test_max_steps_truncates_and_masked_actions_are_refused() -> None:
    env = make_env(SPEC, 1, workers=0, max_steps=2, max_cycles=50)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="outside its action_mask"):
        env.step(torch.tensor([[2, 4, 2]]))  # the scout has 2 actions
    _, _, done, _ = env.step(torch.tensor([[2, 4, 1]]))
    assert not bool(done[0])
    _, _, done, info = env.step(torch.zeros(1, 3, dtype=torch.long))
    assert bool(done[0]) and info["episode_metrics"]["episode_length"].tolist() == [2.0]
    with pytest.raises(ValueError, match=r"actions must lie in \[0, 5\)"):
        env.step(torch.full((1, 3), 5))


def test_workers_split_the_batch_and_match_in_process() -> None:
    generator = torch.Generator().manual_seed(1)
    actions = [random_actions(generator, (5, 3)) for _ in range(10)]
    runs = []
    for workers in (0, 3):
        env = make_env(SPEC, 5, workers=workers)
        assert len(env._pool.groups) == max(workers, 1)
        trace = [env.reset(seed=4)]
        for joint in actions:
            obs, reward, done, _ = env.step(joint)
            trace += [obs, reward, done.float()]
        runs.append(trace)
        processes = [group.process for group in env._pool.groups if hasattr(group, "process")]
        env.close()
        assert all(not process.is_alive() for process in processes)
    assert all(torch.equal(a, b) for a, b in zip(*runs, strict=True))


def test_generic_task_spec() -> None:
    task = task_spec(SPEC)
    assert task.name == SPEC and task.grammar is None
    assert task.metric_names == ("return", "episode_length") and task.success_metric == "return"
    assert [f.name for f in task.state_fields] == ["state", "agent_obs", "active", "step"]
    assert task.text.startswith("Relay a noisy signal")  # the factory's docstring
    assert "`agent_obs` [B, 3, 5]" in task.state_text()
    env = make_env(SPEC, 1, workers=0)
    text = env.describe()
    assert "scout_0 (role scout): [0:4] one-hot" in text and "at most 6 steps" in text


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        ("no such env", {}, "unknown env 'no such env'"),
        ("nosuch_pkg_xyz.mod:make", {}, "cannot import nosuch_pkg_xyz.mod"),
        ("tests.training.test_env_pettingzoo_adapter:missing", {}, "has no attribute 'missing'"),
        ("tests.training.test_env_pettingzoo_adapter:SPEC", {}, "str is not callable"),
        (SPEC, {"colour": 3}, "cannot build the env"),
        (SPEC, {"workers": -1}, "workers must be an int >= 0"),
    ],
)
def test_bad_specs_are_one_line_errors(name: str, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as error:
        make_env(name, 2, **kwargs)
    assert "\n" not in str(error.value)


def test_entry_point_registration(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A distribution declaring ``[lero.envs] relay = module:factory`` makes ``relay`` an env name."""
    dist = tmp_path / "relay_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: relay-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[lero.envs]\nrelay = {SPEC}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "relay" in registered_envs()
    check_env_name("relay")
    env = make_env("relay", 2, workers=0)
    assert env.name == "relay" and env.obs_dims == (3, 5, 4)
    assert is_installed("relay") and not is_installed(SPEC)  # installed: trusted, nothing to confirm
    with pytest.raises(ValueError, match="spec to confirm"):
        confirm_env("relay")


def importable_module(tmp_path, monkeypatch: pytest.MonkeyPatch, dotted: str, source: str) -> None:
    """Write module `dotted` (packages made as needed) under the cwd `tmp_path`, importable the
    way a spec's module is; monkeypatch restores sys.path and the cwd afterwards."""
    *packages, module = dotted.split(".")
    folder = tmp_path
    for package in packages:
        folder = folder / package
        folder.mkdir()
        (folder / "__init__.py").write_text("")
    (folder / f"{module}.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))


def test_import_root_and_the_cwd(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A confirmed spec imports from the working directory (like ``python -m``); its root, derived
    from that import, is where ``import_root`` points a fresh process."""
    importable_module(tmp_path, monkeypatch, "mytasks.relay_task",
                      f"from {SPEC.split(':')[0]} import Relay\n\n\ndef factory(**kwargs):\n"
                      "    return Relay(max_cycles=3, **kwargs)\n")
    confirmed = confirm_env("mytasks.relay_task:factory")
    assert confirmed.name == "mytasks.relay_task:factory" and confirmed.root == str(tmp_path.resolve())
    env = make_env("mytasks.relay_task:factory", 1, workers=0, import_root=confirmed.root)
    assert env.max_steps == 3


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("subprocess:run", "subprocess is a standard-library module"),
        ("os.path:join", "os is a standard-library module"),
        ("builtins:eval", "builtins is a standard-library module"),
        ("foreigntasks.foreign:factory", "factory is defined in functools, not in the package foreigntasks"),
        ("foreigntasks.foreign:Relay", "Relay is defined in tests.training.test_env_pettingzoo_adapter"),
    ],
)
def test_factories_outside_the_named_package_are_refused_uncalled(
    name: str, message: str, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defence in depth: no standard-library callable, no re-export; nothing is called to find out."""
    importable_module(tmp_path, monkeypatch, "foreigntasks.foreign",
                      f"import functools\nfrom {SPEC.split(':')[0]} import Relay\n"
                      "factory = functools.partial(Relay, max_cycles=3)\n")
    with pytest.raises(ValueError, match=message):
        make_env(name, 1, workers=0)
    with pytest.raises(ValueError, match=message):
        confirm_env(name)


def test_a_factory_must_return_a_parallel_env(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    importable_module(tmp_path, monkeypatch, "not_parallel", "def factory(**kwargs):\n    return {'agents': []}\n")
    with pytest.raises(ValueError, match="the factory returned dict, not a PettingZoo ParallelEnv"):
        make_env("not_parallel:factory", 1, workers=0)


@pytest.mark.parametrize(("kwargs", "message"), [({"workers": 10_000}, "workers must be <= 64"),
                                                 ({"max_steps": 10**9}, "max_steps must be <= 10000")])
def test_adapter_sizes_are_bounded(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_env(SPEC, 2, **kwargs)


@pytest.mark.parametrize("algo", ["mappo", "qmix"])
def test_agents_that_differ_train_through_the_adapter(algo: str) -> None:
    """Masks, padding, an agent leaving early and a Discrete obs: every learner runs on it."""
    from lero.training import TrainConfig, train

    hparams = {"n_envs": 8, "rollout_len": 6} if algo == "mappo" else {"n_envs": 8}
    result = train(TrainConfig(env=SPEC, algo=algo, steps=200, eval_episodes=4, hparams=hparams))
    assert set(result.eval) == {"return", "episode_length"}
    assert np.isfinite(result.eval["return"]) and result.eval["episode_length"] == 6.0
    assert result.curves["episode_length"] and result.policy.meta.n_actions == 5
