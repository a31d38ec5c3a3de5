"""Batched MPE ``simple_spread`` (cooperative navigation) in torch.

Same semantics as mpe2's ``simple_spread_v3.parallel_env`` with discrete actions
(read off mpe2's ``simple_spread.py`` and ``partial_observability.py``; the physics,
actions and neighbour selection are the shared MPE core, ``mpe.py``); parity with mpe2
is checked in ``tests/training/test_env_parity.py``. Besides ``info["episode_metrics"]``
(``coverage``, ``occupied`` at episode end, ``collisions`` summed over the episode) this
env adds the step's values: ``info["collisions"]`` [B] (agent pairs in contact after the
step), ``info["occupied"]`` [B] (landmarks with an agent closer than 0.1 after the step)
and ``info["coverage"]`` [B] (every landmark occupied), all before the auto-reset.

World: N agents (radius 0.15, mass 1, colliding, silent) and L = N landmarks
(fixed, non-colliding). One step, for every agent i::

    u_i      = 5 * direction(action_i)                    # action force
    c_i      = sum_j 100 * (p_i - p_j) / |p_i - p_j| * 1e-3 * softplus((0.3 - |p_i - p_j|) / 1e-3)
    p_i     <- p_i + 0.1 * v_i                            # old velocity
    v_i     <- 0.75 * v_i + 0.1 * (u_i + c_i)

Reward of agent i after the step (local_ratio = r)::

    global   = - sum_l min_i |p_i - q_l|
    local_i  = - #{j != i : |p_i - p_j| < 0.3}
    reward_i = (1 - r) * global + r * local_i

With ``reward="sparse"`` (``--env-arg reward=sparse``, lero's own variant: mpe2 has none)
the distance term goes and the team is paid only for what the task's metrics count::

    global   = #{l : min_i |p_i - q_l| < 0.1}               # landmarks occupied after the step

local_i, the mix and the dynamics stay mpe2's (``TaskSpec.sparse``; success = ``coverage``).

Episodes last ``max_cycles`` steps (truncation, ``done`` on the last one); resets
draw agent and landmark positions uniformly in [-1, 1]^2 with zero velocity.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from lero.training.envs import arg_checks
from lero.training.envs.mpe import MOVE_NAMES, AgentKinds, Field, MPEEnv
from lero.training.envs.task import RETURN, Metric, StateField, TaskSpec

AGENT_SIZE = 0.15
COLLISION_DIST = 2 * AGENT_SIZE
OCCUPY_DIST = 0.1
COMM_DIM = 2  # mpe2's dim_c: silent agents still fill these obs columns with zeros
REWARDS = ("dense", "sparse")  # `reward`: mpe2's distance reward, or occupied landmarks only


@dataclass(frozen=True)
class SimpleSpreadConfig:
    """mpe2's simple_spread arguments plus the batch size and torch device."""

    n_envs: int
    N: int = 3
    local_ratio: float = 0.5
    max_cycles: int = 25
    num_agent_neighbors: int | None = None
    num_landmark_neighbors: int | None = None
    reward: str = "dense"
    device: str | torch.device = "cpu"

    def __post_init__(self) -> None:
        owner = "simple_spread"
        if self.reward not in REWARDS:
            raise ValueError(f"{owner}: reward must be one of {', '.join(REWARDS)}, got {self.reward!r}")
        arg_checks.positive_int(owner, "n_envs", self.n_envs, arg_checks.MAX_BATCH)
        arg_checks.positive_int(owner, "N", self.N, arg_checks.MAX_AGENTS)
        object.__setattr__(
            self, "local_ratio", arg_checks.fraction(owner, "local_ratio", self.local_ratio)
        )
        arg_checks.positive_int(owner, "max_cycles", self.max_cycles, arg_checks.MAX_EPISODE_STEPS)
        arg_checks.optional_positive_int(owner, "num_agent_neighbors", self.num_agent_neighbors, arg_checks.MAX_AGENTS)
        arg_checks.optional_positive_int(owner, "num_landmark_neighbors", self.num_landmark_neighbors, arg_checks.MAX_AGENTS)
        object.__setattr__(self, "device", arg_checks.device(owner, self.device))


TASK = TaskSpec(
    name="simple_spread",
    text=(
        "Cooperative navigation: the agents must together cover every landmark (one agent on "
        "each) as quickly as possible while avoiding collisions. Each agent sees only its local, "
        "partial observation at execution time."
    ),
    lero_kwargs={"N": 3, "num_agent_neighbors": 1, "num_landmark_neighbors": 2},
    state_fields=(
        StateField("agent_pos", "[B, N, 2]", "agent positions"),
        StateField("agent_vel", "[B, N, 2]", "agent velocities"),
        StateField("landmark_pos", "[B, L, 2]", "landmark positions (L landmarks, L = N)"),
        StateField("step", "[B]", "step index within the episode (int64)"),
    ),
    metrics=(
        Metric(RETURN, True, "mean per-agent native episode return"),
        Metric("coverage", True, f"fraction of episodes ending with every landmark occupied (< {OCCUPY_DIST})"),
        Metric("occupied", True, "mean landmarks occupied at episode end"),
        Metric("collisions", False, "mean agent collisions per episode"),
    ),
    reference="mpe2.simple_spread_v3",
    success_metric="coverage",
    grammar="simple_spread",
    notes={"occupy_dist": OCCUPY_DIST, "collision_dist": COLLISION_DIST},
)
SPARSE_TASK = dataclasses.replace(
    TASK,
    text=TASK.text + (" The native reward is sparse: the team earns one point per step for each landmark "
                      f"with an agent within {OCCUPY_DIST} of it, and nothing for getting closer; "
                      "collisions cost as in mpe2."),
    sparse=True,
)


class SimpleSpread(MPEEnv):
    """B simple_spread worlds stepped at once (see the module docstring)."""

    name = "simple_spread"
    task = TASK
    SUMMED_METRICS = ("collisions",)

    def __init__(self, cfg: SimpleSpreadConfig) -> None:
        self.cfg = cfg
        self.task = SPARSE_TASK if cfg.reward == "sparse" else TASK
        N = cfg.N
        self.local_ratio = cfg.local_ratio
        # observation slots: all entities, or the nearest few (zero-padded) under partial obs
        lm_neighbors, agent_neighbors = cfg.num_landmark_neighbors, cfg.num_agent_neighbors
        self.landmark_slots = N if lm_neighbors is None else lm_neighbors
        self.agent_slots = N - 1 if agent_neighbors is None else agent_neighbors
        # self vel, self pos, landmark slots, agent slots, comm slots (dim_c 2 per agent slot)
        obs_dim = 4 + 2 * self.landmark_slots + (2 + COMM_DIM) * self.agent_slots
        self._comm = torch.zeros(N, COMM_DIM * self.agent_slots, cfg.n_envs, device=cfg.device)
        self._setup(
            n_envs=cfg.n_envs,
            device=cfg.device,
            max_steps=cfg.max_cycles,
            kinds=AgentKinds(("agent",) * N, (True,) * N, (True,) * N),
            n_landmarks=N,
            dim_c=COMM_DIM,
            obs_dims=(obs_dim,) * N,
            state_dim=6 * N,
            collide_dist=COLLISION_DIST,
        )

    def _fields(self) -> dict[str, Field]:
        N, L = self.n_agents, self.n_landmarks
        return {
            "agent_pos": Field((N, 2)),
            "agent_vel": Field((N, 2)),
            "landmark_pos": Field((L, 2)),
            "step": Field((), high=self.max_steps, optional=True),
        }

    def _draw(self) -> dict[str, torch.Tensor]:
        """Agents and landmarks uniform in [-1, 1]^2, at rest."""
        pos = self._uniform(self.n_agents, 2)
        landmarks = self._uniform(self.n_landmarks, 2)
        step = torch.zeros(self.n_envs, dtype=torch.long, device=self.device)
        return {"agent_pos": pos, "agent_vel": torch.zeros_like(pos), "landmark_pos": landmarks, "step": step}

    def _outcome(self) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        nearest = self._landmark_dist.amin(dim=0)  # [L, B] closest agent to each landmark
        occupied = (nearest < OCCUPY_DIST).sum(dim=0, dtype=torch.float32)  # [B]
        global_reward = occupied if self.task.sparse else -nearest.sum(dim=0)  # [B]
        touching = (self._pair_dist < COLLISION_DIST).to(torch.float32)  # [P, B]
        hits = self._membership @ touching  # [N, B] agents touching agent i
        r = self.local_ratio
        reward = (1 - r) * global_reward - r * hits  # [N, B]
        metrics = {
            "collisions": touching.sum(dim=0),
            "occupied": occupied,
            "coverage": (occupied >= self.n_landmarks).to(torch.float32),
        }
        return reward, metrics

    def _observe(self) -> torch.Tensor:
        """Per-agent observations [N, obs_dim, B] of the current state (layout: describe())."""
        N, B = self.n_agents, self.n_envs
        landmarks = self._landmark_delta  # [N, L, 2, B]
        if self.cfg.num_landmark_neighbors is not None:
            landmarks = self._nearest(landmarks, self._landmark_dist, self.landmark_slots)
        others = self._others()  # p_j - p_i [N, N-1, 2, B]
        if self.cfg.num_agent_neighbors is not None:
            others = self._nearest(others, self._others_dist(), self.agent_slots)
        landmarks, others = landmarks.reshape(N, -1, B), others.reshape(N, -1, B)
        s = self._s
        return torch.cat([s["agent_vel"], s["agent_pos"], landmarks, others, self._comm], dim=1)

    def obs_layout(self) -> dict[str, tuple[int, int]]:
        """``self_vel``, ``self_pos``, ``landmark_rel``, ``other_rel``, ``comm`` column ranges."""
        landmarks_end = 4 + 2 * self.landmark_slots
        agents_end = landmarks_end + 2 * self.agent_slots
        layout = {"self_vel": (0, 2), "self_pos": (2, 4), "landmark_rel": (4, landmarks_end),
                  "other_rel": (landmarks_end, agents_end)}  # fmt: skip
        if self.obs_dim > agents_end:
            layout["comm"] = (agents_end, self.obs_dim)
        return layout

    # ------------------------------------------------------------------ text
    def describe(self) -> str:
        """Observation layout (index ranges), reward, world() fields, actions, episode length."""
        N, L = self.n_agents, self.n_landmarks
        cfg = self.cfg
        lm_end = 4 + 2 * self.landmark_slots
        ag_end = lm_end + 2 * self.agent_slots
        if cfg.num_landmark_neighbors is None:
            lm_text = (
                f"relative positions (landmark - self) of the {L} landmarks in fixed order: "
                "landmark l has x at 4+2l, y at 5+2l"
            )
        else:
            lm_text = (
                f"relative positions (landmark - self) of the {self.landmark_slots} nearest "
                "landmarks, nearest first: slot s has x at 4+2s, y at 5+2s; "
                f"slots beyond the {L} landmarks are zero"
            )
        if cfg.num_agent_neighbors is None:
            ag_text = (
                f"relative positions (other - self) of the {N - 1} other agents in index order "
                f"(agent i skips itself): slot s has x at {lm_end}+2s, y at {lm_end + 1}+2s"
            )
        else:
            ag_text = (
                f"relative positions (other - self) of the {self.agent_slots} nearest other "
                f"agents, nearest first: slot s has x at {lm_end}+2s, y at {lm_end + 1}+2s; "
                f"slots beyond the {N - 1} other agents are zero"
            )
        partial = cfg.num_agent_neighbors is not None or cfg.num_landmark_neighbors is not None
        r = cfg.local_ratio
        lines = [
            f"Environment: simple_spread (MPE cooperative navigation), N={N} agents, L={L} landmarks, "
            f"{'partial' if partial else 'full'} observability.",
            "Goal: cover every landmark with an agent while avoiding collisions between agents.",
            "",
            f"Observation of one agent: float32 vector of D={self.obs_dim} (tensor obs[..., D]):",
            "  [0:2]   self velocity (vx, vy)",
            "  [2:4]   self position (x, y)",
            f"  [4:{lm_end}]  {lm_text}",
            f"  [{lm_end}:{ag_end}]  {ag_text}",
            f"  [{ag_end}:{self.obs_dim}]  communication of those agents (always 0: agents are silent)",
            "",
            f"Actions (discrete, {self.n_actions}): "
            + ", ".join(f"{i} = {n}" for i, n in enumerate(MOVE_NAMES))
            + ".",
            "Physics: dt = 0.1, velocity damping 0.25 per step, action force 5, agent radius 0.15, "
            "soft contact forces push overlapping agents apart; positions are unbounded.",
            "",
            f"Reward of agent i after each step (local_ratio r = {r}):",
            f"  global = number of landmarks with an agent within {OCCUPY_DIST} (sparse: nothing for "
            "getting closer)" if self.task.sparse else
            "  global = -(sum over landmarks of the distance to the closest agent)",
            "  local_i = -(number of other agents within 0.3 of agent i, i.e. colliding)",
            f"  reward_i = (1 - r) * global + r * local_i = {1 - r:g} * global + {r:g} * local_i",
            "",
            "World state (ctx.state, training only, B parallel envs):",
            f"  agent_pos [B, {N}, 2], agent_vel [B, {N}, 2], landmark_pos [B, {L}, 2], step [B] (int64).",
            f"  A landmark is occupied when some agent is within {OCCUPY_DIST}.",
            "",
            f"Episode: {self.max_steps} steps, then truncated; starts with agents and landmarks uniform in [-1, 1]^2, "
            "zero velocity.",
        ]
        return "\n".join(lines)
