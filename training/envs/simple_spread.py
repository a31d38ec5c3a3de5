"""Batched MPE ``simple_spread`` (cooperative navigation) in torch.

Same semantics as mpe2's ``simple_spread_v3.parallel_env`` with discrete actions
(read off mpe2's ``core.py``, ``simple_env.py``, ``partial_observability.py`` and
``simple_spread.py``); parity with mpe2 is checked in
``tests/training/test_env_parity.py``. The step / auto-reset contract is the one
of ``training.envs.base``; this env adds ``info["collisions"]`` [B] (agent pairs in
contact after the step) and ``info["occupied"]`` [B] (landmarks with an agent
closer than 0.1 after the step), both before the auto-reset.

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

Episodes last ``max_cycles`` steps (truncation, ``done`` on the last one); resets
draw agent and landmark positions uniformly in [-1, 1]^2 with zero velocity.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from lero.training.envs import checks
from lero.training.envs.base import BatchedEnv
from lero.training.envs.task import RETURN, Metric, StateField, TaskSpec

DT = 0.1
DAMPING = 0.25
CONTACT_FORCE = 100.0
CONTACT_MARGIN = 1e-3
SENSITIVITY = 5.0
AGENT_SIZE = 0.15
COLLISION_DIST = 2 * AGENT_SIZE
OCCUPY_DIST = 0.1
COMM_DIM = 2
# action index -> unit force direction: no-op, left, right, down, up
ACTION_DIRECTIONS = ((0.0, 0.0), (-1.0, 0.0), (1.0, 0.0), (0.0, -1.0), (0.0, 1.0))
ACTION_NAMES = ("no-op", "move left (-x)", "move right (+x)", "move down (-y)", "move up (+y)")


@dataclass(frozen=True)
class SimpleSpreadConfig:
    """mpe2's simple_spread arguments plus the batch size and torch device."""

    n_envs: int
    N: int = 3
    local_ratio: float = 0.5
    max_cycles: int = 25
    num_agent_neighbors: int | None = None
    num_landmark_neighbors: int | None = None
    device: str | torch.device = "cpu"

    def __post_init__(self) -> None:
        owner = "simple_spread"
        checks.positive_int(owner, "n_envs", self.n_envs)
        checks.positive_int(owner, "N", self.N)
        object.__setattr__(
            self, "local_ratio", checks.fraction(owner, "local_ratio", self.local_ratio)
        )
        checks.positive_int(owner, "max_cycles", self.max_cycles)
        checks.optional_positive_int(owner, "num_agent_neighbors", self.num_agent_neighbors)
        checks.optional_positive_int(owner, "num_landmark_neighbors", self.num_landmark_neighbors)
        object.__setattr__(self, "device", checks.device(owner, self.device))


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
    success_metric="coverage",
    grammar="simple_spread",
    notes={"occupy_dist": OCCUPY_DIST, "collision_dist": COLLISION_DIST},
)


class SimpleSpread(BatchedEnv):
    """B simple_spread worlds stepped at once (see the module docstring).

    Internally every tensor is entity-major with the batch last (``pos`` [N, 2, B]),
    so the pairwise and per-entity ops run over long contiguous rows of B values;
    the public API speaks batch-first ([B, N, ...]) and transposes at the edge.
    """

    name = "simple_spread"
    task = TASK
    n_actions = len(ACTION_DIRECTIONS)

    def __init__(self, cfg: SimpleSpreadConfig) -> None:
        self.cfg = cfg
        self.n_envs = B = cfg.n_envs
        self.n_agents = N = cfg.N
        self.n_landmarks = L = cfg.N
        self.max_steps = cfg.max_cycles
        self.device = torch.device(cfg.device)
        self.local_ratio = cfg.local_ratio
        # observation slots: all entities, or the nearest few (zero-padded) under partial obs
        lm_neighbors, agent_neighbors = cfg.num_landmark_neighbors, cfg.num_agent_neighbors
        self.landmark_slots = L if lm_neighbors is None else lm_neighbors
        self.agent_slots = N - 1 if agent_neighbors is None else agent_neighbors
        # self vel, self pos, landmark slots, agent slots, comm slots (dim_c 2 per agent slot)
        self.obs_dim = 4 + 2 * self.landmark_slots + (2 + COMM_DIM) * self.agent_slots
        self.state_dim = 4 * N + 2 * L

        dev = self.device
        directions = torch.tensor(ACTION_DIRECTIONS, device=dev)  # [A, 2]
        self._action_force = SENSITIVITY * directions.t().contiguous()  # [2, A]
        # agent pairs p = (a, b), a < b: geometry and contacts are computed once per pair
        pairs = [(a, b) for a in range(N) for b in range(a + 1, N)]
        pair_of = {pair: p for p, pair in enumerate(pairs)}
        P = len(pairs)
        self._pair_a = torch.tensor([a for a, _ in pairs], dtype=torch.long, device=dev)  # [P]
        self._pair_b = torch.tensor([b for _, b in pairs], dtype=torch.long, device=dev)  # [P]
        # incidence [N, P]: +1 for agent a, -1 for agent b of pair p (the force on b is -f_p)
        self._incidence = torch.zeros(N, P, device=dev)
        for p, (a, b) in enumerate(pairs):
            self._incidence[a, p], self._incidence[b, p] = 1.0, -1.0
        self._membership = self._incidence.abs()  # [N, P]: 1 where agent i is in pair p
        # for agent i, every other agent j in mpe2's (index) order: the pair (min, max), and
        # the row of p_j - p_i in [delta_p; -delta_p] where delta_p = p_a - p_b
        others = [(i, j) for i in range(N) for j in range(N) if j != i]
        other_pair = [pair_of[min(i, j), max(i, j)] for i, j in others]
        other_row = [p if j < i else P + p for (i, j), p in zip(others, other_pair, strict=True)]
        self._other_pair = torch.tensor(other_pair, dtype=torch.long, device=dev)  # [N(N-1)]
        self._other_row = torch.tensor(other_row, dtype=torch.long, device=dev)  # [N(N-1)]
        self._comm = torch.zeros(N, COMM_DIM * self.agent_slots, B, device=dev)  # silent agents
        pad = max(self.landmark_slots - L, self.agent_slots - (N - 1), 0)
        self._zero_slots = torch.zeros(N, pad, 2, B, device=dev)
        self._entity_ids = torch.arange(max(N, L), device=dev)[:, None]  # [E, 1]
        # entity count -> [2, P] indices (a, b) of every pair a < b, for nearest-first ranking
        self._entity_pairs = {E: torch.triu_indices(E, E, offset=1, device=dev) for E in {L, N - 1}}
        self._generator = torch.Generator(device=dev)
        self._generator.seed()
        self.reset()

    # ------------------------------------------------------------------ state
    def _load(
        self, pos: torch.Tensor, vel: torch.Tensor, landmark_pos: torch.Tensor, step: torch.Tensor
    ) -> None:
        """Install a state and the pairwise geometry that forces, rewards and obs share."""
        self._pos = pos  # [N, 2, B]
        self._vel = vel  # [N, 2, B]
        self._landmark_pos = landmark_pos  # [L, 2, B]
        self._step = step  # [B] int64, steps taken in the current episode
        self._world: dict[str, torch.Tensor] | None = None  # batch-first copy, made on demand
        self._pair_delta = pos[self._pair_a] - pos[self._pair_b]  # [P, 2, B]  p_a - p_b
        self._pair_dist = _norm(self._pair_delta)  # [P, B]
        self._landmark_delta = landmark_pos[None, :] - pos[:, None]  # [N, L, 2, B]  q_l - p_i
        self._landmark_dist = _norm(self._landmark_delta)  # [N, L, B]

    def _draw_positions(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Uniform [-1, 1] agent [N, 2, B] and landmark [L, 2, B] positions for every slot."""
        gen, dev, B = self._generator, self.device, self.n_envs
        agents = torch.rand(self.n_agents, 2, B, generator=gen, device=dev) * 2 - 1
        landmarks = torch.rand(self.n_landmarks, 2, B, generator=gen, device=dev) * 2 - 1
        return agents, landmarks

    @torch.no_grad()
    def reset(self, seed: int | None = None) -> torch.Tensor:
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise ValueError(f"simple_spread: seed must be an int or None, got {seed!r}")
            self._generator.manual_seed(seed)
        pos, landmark_pos = self._draw_positions()
        step = torch.zeros(self.n_envs, dtype=torch.long, device=self.device)
        self._load(pos, torch.zeros_like(pos), landmark_pos, step)
        return self._observe()

    def _reset_slots(self, done: torch.Tensor) -> None:
        """Start new episodes in the slots where ``done`` [B] is set."""
        pos, landmark_pos = self._draw_positions()
        self._load(
            torch.where(done, pos, self._pos),
            self._vel.masked_fill(done, 0.0),
            torch.where(done, landmark_pos, self._landmark_pos),
            self._step.masked_fill(done, 0),
        )

    def world(self) -> dict[str, torch.Tensor]:
        """``agent_pos`` [B,N,2], ``agent_vel`` [B,N,2], ``landmark_pos`` [B,L,2], ``step`` [B]."""
        if self._world is None:
            self._world = {
                "agent_pos": _batch_first(self._pos),
                "agent_vel": _batch_first(self._vel),
                "landmark_pos": _batch_first(self._landmark_pos),
                "step": self._step,
            }
        return self._world

    @torch.no_grad()
    def set_world(self, world: dict[str, torch.Tensor]) -> torch.Tensor:
        """Load ``world()``-style tensors (``step`` optional, default 0); returns obs."""
        B, N, L = self.n_envs, self.n_agents, self.n_landmarks
        if not isinstance(world, Mapping):
            raise ValueError(
                f"simple_spread.set_world: expected a dict, got {type(world).__name__}"
            )
        shapes = {"agent_pos": (B, N, 2), "agent_vel": (B, N, 2), "landmark_pos": (B, L, 2)}
        unknown = set(world) - {*shapes, "step"}
        if unknown:
            raise ValueError(f"simple_spread.set_world: unknown keys {sorted(unknown)}")
        loaded = {}
        for key, shape in shapes.items():
            value = world.get(key)
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
                got = (
                    tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                )
                raise ValueError(
                    f"simple_spread.set_world: {key} must be a tensor of shape {shape}, got {got}"
                )
            if not torch.isfinite(value).all():
                raise ValueError(f"simple_spread.set_world: {key} has non-finite values")
            entity_major = value.to(self.device, torch.float32).permute(1, 2, 0)  # [E, 2, B]
            loaded[key] = entity_major.contiguous()
        step = world.get("step", torch.zeros(B, dtype=torch.long))
        if (
            not isinstance(step, torch.Tensor)
            or tuple(step.shape) != (B,)
            or step.is_floating_point()
        ):
            raise ValueError(
                f"simple_spread.set_world: step must be an integer tensor of shape ({B},)"
            )
        if bool((step < 0).any()) or bool((step >= self.max_steps).any()):
            raise ValueError(f"simple_spread.set_world: step must lie in [0, {self.max_steps})")
        step = step.to(self.device, torch.long).clone()
        self._load(loaded["agent_pos"], loaded["agent_vel"], loaded["landmark_pos"], step)
        return self._observe()

    def global_state(self) -> torch.Tensor:
        """[B, 4N + 2L]: all agent positions, then all agent velocities, then landmark positions."""
        B = self.n_envs
        rows = torch.cat(
            [self._pos.view(-1, B), self._vel.view(-1, B), self._landmark_pos.view(-1, B)]
        )
        return rows.t().contiguous()

    # ------------------------------------------------------------------ step
    def _check_actions(self, actions: torch.Tensor) -> torch.Tensor:
        shape = (self.n_envs, self.n_agents)
        if not isinstance(actions, torch.Tensor):
            raise ValueError(
                f"simple_spread.step: actions must be a torch.Tensor of shape {shape}, got {type(actions).__name__}"
            )
        if tuple(actions.shape) != shape:
            raise ValueError(
                f"simple_spread.step: actions must have shape {shape}, got {tuple(actions.shape)}"
            )
        if actions.is_floating_point() or actions.is_complex() or actions.dtype == torch.bool:
            raise ValueError(f"simple_spread.step: actions must be integers, got {actions.dtype}")
        low, high = torch.aminmax(actions)
        if int(low) < 0 or int(high) >= self.n_actions:
            raise ValueError(
                f"simple_spread.step: actions must lie in [0, {self.n_actions}), got [{int(low)}, {int(high)}]"
            )
        return actions.to(self.device, torch.long)

    def _contact_force(self) -> torch.Tensor:
        """Soft contact push on every agent from every other agent, summed: [N, 2, B]."""
        N, B = self.n_agents, self.n_envs
        overlap = (COLLISION_DIST - self._pair_dist) / CONTACT_MARGIN  # [P, B]
        penetration = F.softplus(overlap) * CONTACT_MARGIN  # [P, B], mpe2's logaddexp(0, .)
        scale = CONTACT_FORCE * penetration / self._pair_dist  # [P, B]
        push = scale[:, None] * self._pair_delta  # [P, 2, B] force on a; b gets -push
        return (self._incidence @ push.view(-1, 2 * B)).view(N, 2, B)

    @torch.no_grad()
    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        actions = self._check_actions(actions)  # [B, N]
        N, B = self.n_agents, self.n_envs
        step_index = self._step  # [B]
        flat_actions = actions.t().reshape(-1)  # [N * B]
        action_force = self._action_force.index_select(1, flat_actions).view(2, N, B)
        action_force = action_force.transpose(0, 1)  # [N, 2, B]
        force = self._contact_force() + action_force  # [N, 2, B]
        pos = self._pos + self._vel * DT
        vel = self._vel * (1 - DAMPING) + force * DT
        self._load(pos, vel, self._landmark_pos, step_index + 1)

        nearest = self._landmark_dist.amin(dim=0)  # [L, B] closest agent to each landmark
        global_reward = -nearest.sum(dim=0)  # [B]
        touching = (self._pair_dist < COLLISION_DIST).to(torch.float32)  # [P, B]
        hits = self._membership @ touching  # [N, B] agents touching agent i
        r = self.local_ratio
        reward = (1 - r) * global_reward - r * hits  # [N, B]

        final_obs = self._observe()
        done = self._step >= self.max_steps  # [B]
        info = {
            "final_obs": final_obs,
            "world": self.world(),
            "step": step_index,
            "collisions": touching.sum(dim=0),
            "occupied": (nearest < OCCUPY_DIST).sum(dim=0, dtype=torch.float32),
        }
        obs = final_obs
        if bool(done.any()):
            self._reset_slots(done)
            obs = self._observe()
        return obs, reward.t().contiguous(), done, info

    # ------------------------------------------------------------------ observation
    def _nearest(self, rel: torch.Tensor, dist: torch.Tensor, slots: int) -> torch.Tensor:
        """Relative positions [N, E, 2, B] of the ``slots`` nearest entities, zero-padded: [N, slots, 2, B].

        A stable nearest-first sort, as mpe2's argsort: entity e goes to slot
        rank(e) = #{f : d_f < d_e, or d_f == d_e and f < e}. Each entity pair a < b adds
        one to the rank of b when d_a <= d_b, else to the rank of a. Counting over pairs
        keeps every op elementwise over B, far faster here than sort/argmin on short rows.
        """
        N, E, B = dist.shape
        first, second = self._entity_pairs[E]  # [P] each: every pair a < b
        a_first = (dist.index_select(1, first) <= dist.index_select(1, second)).long()  # [N, P, B]
        rank = torch.zeros(N, E, B, dtype=torch.long, device=self.device)
        rank.index_add_(1, second, a_first).index_add_(1, first, 1 - a_first)  # [N, E, B]
        # ranks are a permutation of 0..E-1: scattering entity ids by rank inverts it
        ids = self._entity_ids[:E].expand(N, E, B)
        entity = torch.empty_like(rank).scatter_(1, rank, ids)  # [N, E, B]: entity in slot s
        k = min(slots, E)
        entity = entity[:, :k]  # [N, k, B]
        picked = torch.gather(rel, 1, entity[:, :, None].expand(-1, -1, 2, -1))  # [N, k, 2, B]
        if k == slots:
            return picked
        return torch.cat([picked, self._zero_slots[:, : slots - k]], dim=1)

    def _observe(self) -> torch.Tensor:
        """Per-agent observations [B, N, obs_dim] of the current state (layout: describe())."""
        N, B = self.n_agents, self.n_envs
        landmarks = self._landmark_delta  # [N, L, 2, B]
        if self.cfg.num_landmark_neighbors is not None:
            landmarks = self._nearest(landmarks, self._landmark_dist, self.landmark_slots)
        signed = torch.cat([self._pair_delta, -self._pair_delta])  # [2P, 2, B]
        others = signed.index_select(0, self._other_row).view(N, N - 1, 2, B)  # p_j - p_i
        if self.cfg.num_agent_neighbors is not None:
            other_dist = self._pair_dist.index_select(0, self._other_pair)
            others = self._nearest(others, other_dist.view(N, N - 1, B), self.agent_slots)
        landmarks, others = landmarks.reshape(N, -1, B), others.reshape(N, -1, B)
        obs = torch.cat([self._vel, self._pos, landmarks, others, self._comm], dim=1)  # [N, D, B]
        return obs.view(N * self.obs_dim, B).t().contiguous().view(B, N, self.obs_dim)

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
            + ", ".join(f"{i} = {n}" for i, n in enumerate(ACTION_NAMES))
            + ".",
            "Physics: dt = 0.1, velocity damping 0.25 per step, action force 5, agent radius 0.15, "
            "soft contact forces push overlapping agents apart; positions are unbounded.",
            "",
            f"Reward of agent i after each step (local_ratio r = {r}):",
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


def _norm(vectors: torch.Tensor) -> torch.Tensor:
    """Euclidean length over the coordinate dim of [..., 2, B] vectors: [..., B]."""
    x, y = vectors.unbind(dim=-2)
    return torch.sqrt(x * x + y * y)


def _batch_first(values: torch.Tensor) -> torch.Tensor:
    """[E, 2, B] entity-major tensor as a contiguous [B, E, 2] one."""
    return values.permute(2, 0, 1).contiguous()
