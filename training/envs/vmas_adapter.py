"""Any VMAS scenario as a ``BatchedEnv``: ``--env vmas:<scenario>``, batched in this process.

VMAS (the ``vmas`` extra) simulates B worlds at once on torch tensors, so unlike the
PettingZoo adapter there is no worker pool: one ``vmas.make_env(num_envs=B)`` is the batch.

- **Names.** ``vmas:<scenario>`` for every scenario VMAS ships (``scenario_names``); the
  family wins over the ``package.module:factory`` syntax (``registry.check_env_name``).
- **Arguments.** ``max_steps`` (the horizon, default ``DEFAULT_MAX_STEPS``) and ``device``
  are the adapter's; every other keyword goes to the scenario (``n_agents=3``). A keyword
  the scenario does not use is a one-line ValueError (VMAS itself only warns).
- **Actions.** VMAS's flat ``Discrete`` actions: an agent with ``discrete_action_nvec``
  ``[n_1, .., n_k]`` takes ``a`` in ``[0, prod n_j)``, read in mixed radix, first component
  most significant (``[3, 3]``: ``a // 3`` moves along x, ``a % 3`` along y; 0 stay,
  1 decrease, 2 increase). Action counts that differ are padded (``action_mask()``).
- **Observations, reward, episodes.** The scenario's own ``observation()`` per agent
  (zero-padded to the longest) and its own ``reward()`` as the native reward. A slot is
  done when the scenario's ``done()`` says so or after ``max_steps`` (VMAS's own flag); it
  is reset inside ``step`` as TorchRL resets VMAS: all slots with one ``reset()`` when all
  are done, else ``reset_at`` each finished slot. ``reset(seed)`` is VMAS's ``reset(seed)``.
- **Random state.** VMAS keeps one random state (torch, numpy, random) apart from the
  process's, shared by all its envs in a process; each ``VmasEnv`` swaps in its own around
  every VMAS call (``_own_random_state``), so two envs stepped in turn (seeds trained in one
  process, a training and an evaluation env) draw exactly what each would draw alone.
- **Reward context.** ``world()`` holds every entity's physical state, agents and then the
  scenario's landmarks (goals, packages, obstacles: ``task.notes["landmarks"]`` names them
  in order): ``agent_pos`` / ``agent_vel`` [B, N, 2], ``agent_rot`` / ``agent_ang_vel``
  [B, N, 1], the same four for landmarks [B, L, .], and ``step`` [B].
  Where every agent has its own goal (``agent.goal``, a landmark: navigation, give_way),
  ``goal_pos`` [B, N, 2] holds agent i's goal in row i (the task's ``pairings``).
- **Task.** ``return``, ``episode_length``, ``success`` (1 for an episode the scenario's own
  ``done()`` ended before the time limit: ``info["terminated"]``) and, for every entry of
  the scenario's ``info()``, its sum over the episode averaged over agents (navigation:
  ``pos_rew``, ``final_rew``, ``agent_collisions``). A scenario that defines ``done()`` is
  solved by reaching it (success metric ``success``); the others by ``return``. The
  scenarios in ``SHAPING_ARGS`` mark their reward sparse (``task.sparse``) when every one of
  their shaping arguments is 0 (``--env-arg pos_shaping_factor=0``); ``SPARSE_REWARDS`` says
  what is left of the reward then.
"""

from __future__ import annotations

import functools
import importlib
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from lero.training.envs import arg_checks
from lero.training.envs.batched_env import Arena, BatchedEnv
from lero.training.envs.task import RETURN, Metric, Pairing, StateField, TaskSpec

FAMILY = "vmas"
PREFIX = f"{FAMILY}:"
EXTRA = "vmas"  # pyproject's optional extra that installs VMAS
INSTALL_HINT = f"VMAS tasks need the {EXTRA} extra: pip install 'lero[{EXTRA}]'"
DEFAULT_MAX_STEPS = 100  # VMAS scenarios are open-ended; BenchMARL's VMAS tasks run 100 steps
EPISODE_LENGTH = "episode_length"
SUCCESS = "success"
GOAL_POS = "goal_pos"  # world() key of each agent's own goal, where the scenario pairs them
# An unbounded world's start area: the scenario's attributes holding its half-widths (x, y)
START_AREA = {"navigation": ("world_spawning_x", "world_spawning_y")}
# The scenario arguments that shape its reward toward the goal: all 0 leaves a sparse reward
SHAPING_ARGS = {"navigation": ("pos_shaping_factor",), "give_way": ("pos_shaping_factor",),
                "joint_passage": ("pos_shaping_factor", "rot_shaping_factor")}
# What the native reward still pays once the shaping is off (read off each scenario's reward())
SPARSE_REWARDS = {
    "navigation": "final_reward (0.01) to every agent at a step where every agent is within the goal's "
                  "radius, plus agent_collision_penalty (-1) per collision; no distance shaping",
    "give_way": "final_reward (0.01) at a step where both agents are on their goals, plus the "
                "collision and energy penalties (0 by default); no distance shaping (success needs "
                "done_on_completion=True, else the episode never ends early)",
    "joint_passage": "the final reward once the package is at the goal, plus collision and energy "
                     "penalties; no position or rotation shaping",
}
VMAS_OPTIONS = ("max_steps", "device")  # make_env keywords the adapter takes itself
# What a scenario's own keywords may be, checked before VMAS builds anything (a stored spec's
# n_agents=2000 took minutes of CPU, 10**7 std::bad_alloc): a count (a name starting with one
# of COUNT_PREFIXES) is an int up to arg_checks.MAX_AGENTS; any other value is None, a bool, a
# number of magnitude up to MAX_SCENARIO_NUMBER or a string up to MAX_SCENARIO_TEXT characters.
COUNT_PREFIXES = ("n_", "num_")
MAX_SCENARIO_NUMBER = 1e6
MAX_SCENARIO_TEXT = 256
# The physical state every VMAS entity keeps (``EntityState``): world() key suffix -> width
ENTITY_STATE = {"pos": 2, "vel": 2, "rot": 1, "ang_vel": 1}
STATE_DOCS = {"pos": "positions", "vel": "velocities", "rot": "rotations (rad)",
              "ang_vel": "angular velocities"}
# What the LLM is told of these VMAS scenarios (VMAS's classes carry no docstrings)
TASK_TEXTS = {
    "navigation": "Navigation: each agent must reach its own goal (a landmark) without colliding "
                  "with the others; agents sense each other only through a short-range lidar.",
    "balance": "Balance: the agents carry a line with a package on it from below and must bring "
               "the package to the goal without letting the line or the package touch the floor.",
    "transport": "Transport: the agents must push a heavy package, too heavy for one of them, onto "
                 "the goal together.",
    "discovery": "Discovery: the agents must find and cover the targets scattered in the world; a "
                 "target counts as covered when enough agents stand close to it at once.",
}


class VmasMissing(ValueError):
    """``vmas`` is not installed: the one line says which extra installs it."""


def is_vmas_name(name: object) -> bool:
    """``vmas:<anything>``: the family's prefix, whatever follows (checked by ``check_name``)."""
    return isinstance(name, str) and name.startswith(PREFIX)


def _vmas() -> Any:
    try:
        return importlib.import_module("vmas")
    except ImportError:
        raise VmasMissing(INSTALL_HINT) from None


def scenario_names() -> tuple[str, ...]:
    """Every scenario VMAS ships (its own lists: main, MPE, debug), in VMAS's order."""
    vmas = _vmas()
    return (*vmas.scenarios, *vmas.mpe_scenarios, *vmas.debug_scenarios)


def check_name(name: str) -> str:
    """The scenario of ``vmas:<scenario>``; one-line ValueError naming VMAS's scenarios otherwise."""
    scenario = name[len(PREFIX):]
    available = scenario_names()
    if scenario not in available:
        raise ValueError(f"VMAS has no scenario {scenario!r}; it has: {', '.join(available)}")
    return scenario


@dataclass(frozen=True)
class VmasConfig:
    """One VMAS batch: the scenario, its own keyword arguments, the horizon and the device."""

    n_envs: int
    scenario: str
    max_steps: int = DEFAULT_MAX_STEPS
    device: str | torch.device = "cpu"
    scenario_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        owner = f"{PREFIX}{self.scenario}"
        arg_checks.positive_int(owner, "n_envs", self.n_envs, arg_checks.MAX_BATCH)
        arg_checks.positive_int(owner, "max_steps", self.max_steps, arg_checks.MAX_EPISODE_STEPS)
        object.__setattr__(self, "device", arg_checks.device(owner, self.device))
        for name, value in self.scenario_kwargs.items():
            check_scenario_argument(owner, name, value)

    @classmethod
    def of(cls, name: str, n_envs: int, kwargs: dict[str, Any]) -> VmasConfig:
        """``make_env``'s keywords split into the adapter's options and the scenario's own."""
        scenario = check_name(name)
        options = {key: kwargs[key] for key in VMAS_OPTIONS if key in kwargs}
        rest = {key: value for key, value in kwargs.items() if key not in VMAS_OPTIONS}
        return cls(n_envs=n_envs, scenario=scenario, scenario_kwargs=rest, **options)


def check_scenario_argument(owner: str, name: str, value: object) -> None:
    """One-line ValueError for a scenario keyword outside the bounds above; nothing is built."""
    if name.startswith(COUNT_PREFIXES):
        arg_checks.count(owner, name, value, arg_checks.MAX_AGENTS)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if not -MAX_SCENARIO_NUMBER <= value <= MAX_SCENARIO_NUMBER:  # NaN too; no float conversion
            raise ValueError(f"{owner}: {name} must be a number within +-{MAX_SCENARIO_NUMBER:g}")
    elif isinstance(value, str):
        if len(value) > MAX_SCENARIO_TEXT:
            raise ValueError(f"{owner}: {name} is longer than {MAX_SCENARIO_TEXT} characters")
    elif value is not None and not isinstance(value, bool):
        raise ValueError(f"{owner}: {name} must be a number, a string, a bool or None, got {type(value).__name__}")


def build_vmas(cfg: VmasConfig) -> Any:
    """VMAS's own batched environment for ``cfg`` (discrete actions); one-line ValueError for
    scenario arguments VMAS refuses or leaves unused."""
    owner = f"{PREFIX}{cfg.scenario}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            env = _vmas().make_env(cfg.scenario, num_envs=cfg.n_envs, device=cfg.device,
                                   continuous_actions=False, max_steps=cfg.max_steps,
                                   terminated_truncated=True,
                                   **cfg.scenario_kwargs)
        except Exception as error:  # VMAS checks arguments with asserts, TypeErrors, ...: one line each
            message = " ".join(str(error).split()) or type(error).__name__
            raise ValueError(f"{owner}: the scenario refused its arguments: {message}") from None
    unused = [str(w.message) for w in caught if "not used by the scenario" in str(w.message)]
    if unused:  # VMAS's words: "Scenario kwargs: {...} passed but not used by the scenario."
        named = unused[0].removeprefix("Scenario kwargs: ").split(" passed")[0]
        raise ValueError(f"{owner}: unknown argument(s) {named}: the scenario does not use them "
                         f"(the adapter's own: {', '.join(VMAS_OPTIONS)})")
    return env


class VmasEnv(BatchedEnv):
    """B worlds of one VMAS scenario behind the batched API (module docstring)."""

    def __init__(self, cfg: VmasConfig) -> None:
        self.cfg = cfg
        self.name = f"{PREFIX}{cfg.scenario}"
        self.env = env = build_vmas(cfg)
        # VMAS's shared [torch, numpy, random] state, which its calls swap in (module docstring)
        self._shared_state = type(env).vmas_random_state
        self._random_state = list(self._shared_state)
        self.n_envs, self.max_steps, self.device = cfg.n_envs, cfg.max_steps, cfg.device
        self._agents = list(env.agents)  # the policy agents, VMAS's order
        self._landmarks = list(env.world.landmarks)
        self.n_agents = len(self._agents)
        goals = [getattr(agent, "goal", None) for agent in self._agents]
        self._goals = goals if all(any(g is lm for lm in self._landmarks) for g in goals) else []
        self._has_done = type(env.scenario).done is not _vmas().simulator.scenario.BaseScenario.done
        with self._own_random_state():
            first_obs = env.get_from_scenario(get_observations=True, get_rewards=False, get_infos=True,
                                              get_dones=False, dict_agent_names=False)
        obs_rows, infos = first_obs
        if not all(isinstance(row, torch.Tensor) for row in obs_rows):
            raise ValueError(f"{self.name}: the scenario's observations are dicts; lero takes flat tensors")
        self._obs_dims = tuple(int(row[0].numel()) for row in obs_rows)
        self.obs_dim = max(self._obs_dims)
        self.state_dim = self.n_agents * self.obs_dim
        self._action_counts = torch.tensor([env.get_agent_action_space(a).n for a in self._agents])
        self.n_actions = int(self._action_counts.max())
        self._info_keys = tuple(key for key, value in infos[0].items()
                                if isinstance(value, torch.Tensor) and value.shape[:1] == (self.n_envs,))
        self.task = self._task_spec()
        self._sums = {key: torch.zeros(self.n_envs, device=self.device) for key in self._info_keys}
        self._steps = torch.zeros(self.n_envs, dtype=torch.long, device=self.device)
        self._obs = self._pad(obs_rows)

    @contextmanager
    def _own_random_state(self) -> Iterator[None]:
        """This env's random state in VMAS's shared slot for the duration of one VMAS call."""
        shared, outside = self._shared_state, list(self._shared_state)
        shared[:] = self._random_state
        try:
            yield
        finally:
            self._random_state = list(shared)
            shared[:] = outside

    # ------------------------------------------------------------------ tensors
    def _pad(self, rows: list[torch.Tensor]) -> torch.Tensor:
        """Per-agent observations [B, d_i] -> obs [B, N, D], zero-padded."""
        rows = [row.reshape(self.n_envs, -1).to(torch.float32) for row in rows]
        if len(set(self._obs_dims)) == 1:
            return torch.stack(rows, dim=1)
        obs = torch.zeros(self.n_envs, self.n_agents, self.obs_dim, device=self.device)
        for i, row in enumerate(rows):
            obs[:, i, : row.shape[1]] = row
        return obs

    def _entity_state(self, entities: list[Any], key: str) -> torch.Tensor:
        """[B, E, k] of one EntityState attribute over ``entities`` (zeros for an empty list)."""
        if not entities:
            return torch.zeros(self.n_envs, 0, ENTITY_STATE[key], device=self.device)
        return torch.stack([getattr(entity.state, key) for entity in entities], dim=1)

    # ------------------------------------------------------------------ API
    def reset(self, seed: int | None = None) -> torch.Tensor:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"{self.name}: seed must be an int or None, got {seed!r}")
        with self._own_random_state():
            self._obs = self._pad(self.env.reset(seed=seed))
        self._steps.zero_()
        for total in self._sums.values():
            total.zero_()
        return self._obs

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        actions = self.check_actions(actions)  # [B, N]
        if not bool((actions < self._action_counts.to(actions.device)).all()):
            raise ValueError(f"{self.name}.step: an agent took an action outside its action_mask()")
        with self._own_random_state():
            obs_rows, rewards, terminated, truncated, infos = self.env.step(list(actions.unbind(dim=1)))
        final_obs = self._pad(obs_rows)  # [B, N, D]
        reward = torch.stack(rewards, dim=1).to(torch.float32)  # [B, N]
        terminated = terminated.to(self.device, torch.bool)  # [B] the scenario's own done()
        done = terminated | truncated.to(self.device, torch.bool)  # [B]
        step = self._steps.clone()  # [B] index of the step just taken
        self._steps = self._steps + 1
        for key, total in self._sums.items():
            per_agent = [info[key].reshape(self.n_envs, -1).sum(dim=1) for info in infos]  # N x [B]
            total += torch.stack(per_agent).to(torch.float32).mean(dim=0)
        metrics = {EPISODE_LENGTH: self._steps.to(torch.float32), SUCCESS: terminated.to(torch.float32),
                   **{key: total.clone() for key, total in self._sums.items()}}
        info = {"final_obs": final_obs, "world": self.world(), "terminated": terminated, "step": step,
                "episode_metrics": metrics}
        self._obs = final_obs
        if bool(done.any()):
            with self._own_random_state():
                self._obs = self._auto_reset(done)
            self._steps = torch.where(done, 0, self._steps)
            for total in self._sums.values():
                total[done] = 0.0
        return self._obs, reward, done, info

    def _auto_reset(self, done: torch.Tensor) -> torch.Tensor:
        """Reset the finished slots as TorchRL resets VMAS; obs [B, N, D] afterwards."""
        if bool(done.all()):
            return self._pad(self.env.reset())
        for index in done.nonzero().flatten().tolist():
            self.env.reset_at(index, return_observations=False)
        return self._pad(self.env.get_from_scenario(get_observations=True, get_rewards=False,
                                                    get_infos=False, get_dones=False,
                                                    dict_agent_names=False)[0])

    def global_state(self) -> torch.Tensor:
        """[B, N * D]: every agent's padded observation (what a MAPPO critic sees in BenchMARL)."""
        return self._obs.reshape(self.n_envs, -1)

    def world(self) -> dict[str, torch.Tensor]:
        """Agents' and landmarks' physical state and the step (module docstring)."""
        state = {}
        for prefix, entities in (("agent", self._agents), ("landmark", self._landmarks)):
            for key in ENTITY_STATE:
                state[f"{prefix}_{key}"] = self._entity_state(entities, key)
        if self._goals:
            state[GOAL_POS] = self._entity_state(self._goals, "pos")
        return {**state, "step": self._steps.clone()}

    def set_world(self, world: dict[str, torch.Tensor]) -> torch.Tensor:
        raise ValueError(f"{self.name}: a VMAS scenario keeps state beyond its entities; it cannot "
                         "load a world state")

    @property
    def obs_dims(self) -> tuple[int, ...]:
        return self._obs_dims

    @property
    def agent_names(self) -> tuple[str, ...]:
        """VMAS's own agent names."""
        return tuple(agent.name for agent in self._agents)

    @property
    def arena(self) -> Arena | None:
        """The world's semidims, walls the physics enforces, where it has any; else the start
        area of a scenario in START_AREA; None for an unbounded world starting elsewhere."""
        world = self.env.world
        if world.x_semidim is not None or world.y_semidim is not None:
            return Arena(world.x_semidim, world.y_semidim, walls=True)
        names = START_AREA.get(self.cfg.scenario)
        return Arena(*(float(getattr(self.env.scenario, n)) for n in names), walls=False) if names else None

    def action_mask(self) -> torch.Tensor:
        """[N, A] bool: which of the padded actions each agent really has."""
        return (torch.arange(self.n_actions)[None, :] < self._action_counts[:, None]).to(self.device)

    # ------------------------------------------------------------------ text
    def _task_spec(self) -> TaskSpec:
        N, L = self.n_agents, len(self._landmarks)
        landmarks = tuple(entity.name for entity in self._landmarks)
        who = {"agent": ("N", f"agents' (N = {N})"),
               "landmark": ("L", f"landmarks' (L = {L}: {', '.join(landmarks) or 'none'}, in this order)")}
        fields = [StateField(f"{prefix}_{key}", f"[B, {count}, {width}]", f"{whose} {STATE_DOCS[key]}")
                  for prefix, (count, whose) in who.items() for key, width in ENTITY_STATE.items()]
        pairings = ()
        if self._goals:
            fields.append(StateField(GOAL_POS, "[B, N, 2]", "each agent's own goal position, row i = agent i's"))
            pairings = (Pairing(GOAL_POS, "agent i's own goal, the landmark it must reach"),)
        fields.append(StateField("step", "[B]", "step index within the episode (int64)"))
        info_metrics = tuple(
            Metric(key, True, f"the scenario's info()[{key!r}] summed over the episode, mean over agents")
            for key in self._info_keys if key not in (RETURN, EPISODE_LENGTH, SUCCESS))
        sparse = self.sparse
        text = TASK_TEXTS.get(self.cfg.scenario, f"VMAS scenario {self.cfg.scenario}: the {N} agents "
                                                 "cooperate to maximise the team's return.")
        if sparse:
            text += f" The native reward is sparse: {SPARSE_REWARDS[self.cfg.scenario]}."
        return TaskSpec(
            name=self.name,
            text=text,
            lero_kwargs={},
            state_fields=tuple(fields),
            metrics=(*outcome_metrics(self.max_steps), *info_metrics),
            success_metric=SUCCESS if self._has_done else RETURN,
            sparse=sparse,
            grammar=None,
            notes={"agents": self.agent_names, "landmarks": landmarks, "obs_dims": self._obs_dims},
            pairings=pairings,
        )

    @property
    def sparse(self) -> bool:
        """Whether the scenario's reward shaping is off: every one of its SHAPING_ARGS is 0."""
        names = SHAPING_ARGS.get(self.cfg.scenario, ())
        return bool(names) and all(getattr(self.env.scenario, name) == 0 for name in names)


    def describe(self) -> str:
        nvec = [list(agent.discrete_action_nvec) for agent in self._agents]
        lines = [
            f"Environment: {self.name} (VMAS vectorized scenario {self.cfg.scenario!r}), N={self.n_agents} "
            f"agents, {len(self._landmarks)} landmarks, 2D physics.",
            f"Task: {self.task.text}",
            "",
            f"Observation of one agent: float32 vector of D={self.obs_dim} (tensor obs[..., D]), the "
            "scenario's own observation (positions, velocities, relative positions, lidar readings as "
            "the scenario defines them); shorter ones are zero-padded at the end:",
            *(f"  {name}: [0:{dim}]" for name, dim in zip(self.agent_names, self._obs_dims, strict=True)),
            "",
            f"Actions (discrete, up to {self.n_actions}): a flat index over each agent's action "
            f"components {nvec[0] if len({str(n) for n in nvec}) == 1 else nvec}, first component most "
            "significant; each component: 0 = stay, 1 = decrease, 2 = increase (for [3, 3]: a // 3 "
            "moves along x, a % 3 along y).",
            *self.task.world_lines("the scenario's own per-agent reward.", self.max_steps,
                                   "the scenario's done() says so"),
        ]
        return "\n".join(lines)


def outcome_metrics(max_steps: int) -> tuple[Metric, ...]:
    """The metrics every VMAS task reports, whatever its scenario's info() holds."""
    return (Metric(RETURN, True, "mean per-agent native episode return"),
            Metric(EPISODE_LENGTH, False, "mean steps per episode (the scenario's done() ends "
                                          f"one before the {max_steps}-step limit)"),
            Metric(SUCCESS, True, "fraction of episodes the scenario's done() ended before the "
                                  f"{max_steps}-step limit (the task reached)"))  # fmt: skip


def declared_task(name: str, kwargs: dict[str, Any]) -> TaskSpec:
    """What a VMAS task says before its world is built, for reports and pages (a copied spec's
    arguments build nothing on the host): the outcome metrics, the success metric (the
    scenario class's own done(), read off the class), sparse from the arguments; no state
    fields (known once built). ValueError for arguments outside their bounds."""
    cfg = VmasConfig.of(name, 1, dict(kwargs))
    has_done = _defines_done(cfg.scenario)
    return TaskSpec(name=name, text=TASK_TEXTS.get(cfg.scenario, f"VMAS scenario {cfg.scenario}"),
                    lero_kwargs={}, state_fields=(), metrics=outcome_metrics(cfg.max_steps),
                    success_metric=SUCCESS if has_done else RETURN,
                    sparse=shaping_off(cfg.scenario, cfg.scenario_kwargs))  # fmt: skip


@functools.cache
def _defines_done(scenario: str) -> bool:
    """Whether the scenario class defines its own done(); read once per scenario (VMAS's
    `load` executes the scenario's file anew on each call, and every `lero runs` row asks)."""
    scenario_class = importlib.import_module("vmas.scenarios").load(f"{scenario}.py").Scenario
    return scenario_class.done is not _vmas().simulator.scenario.BaseScenario.done


def shaping_off(scenario: str, kwargs: dict[str, Any]) -> bool:
    """`VmasEnv.sparse` read from the arguments alone, nothing built (a spec is parsed, a run
    planned): every SHAPING_ARGS default is nonzero, so only arguments that set each to 0 turn
    the shaping off."""
    names = SHAPING_ARGS.get(scenario, ())
    return bool(names) and all(kwargs.get(name) == 0 for name in names)
