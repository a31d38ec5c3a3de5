"""The batched MPE core every MPE scenario shares (mpe2's ``core.py`` + ``simple_env.py``).

A scenario (``simple_spread.py``, ``simple_reference.py``, ``simple_speaker_listener.py``)
subclasses ``MPEEnv`` and writes only its task: the world fields it keeps, how episodes
start, what each agent observes, the rewards, the episode metrics and its ``TaskSpec``.
This file owns what all of them share, with mpe2's semantics:

- Actions (mpe2's discrete encoding): an agent that moves and speaks takes
  ``a = move + 5 * say`` (``move = a % 5``: no-op, -x, +x, -y, +y; ``say = a // 5`` one of
  ``dim_c`` symbols); an agent that only moves takes 5 actions, one that only speaks
  ``dim_c``. ``n_actions`` is the largest count; ``action_mask()`` [N, A] marks each
  agent's valid ones (an invalid action is a ``ValueError``, as mpe2 asserts).
- Physics, every step: ``p <- p + dt v``, ``v <- (1 - damping) v + dt (u + c)`` with
  ``u = 5 * direction(move)`` for movable agents and ``c`` mpe2's soft contact force
  between colliding agents (``collide_dist`` = the sum of their radii).
- Communication: a speaking agent's utterance after the step is the one-hot of ``say``
  (``comm`` [N, dim_c], zero for silent agents), as mpe2's ``update_agent_state``.
- Neighbour selection: pairwise agent geometry and agent-landmark offsets, computed once
  per state, and ``_nearest`` (mpe2's stable nearest-first argsort, zero-padded).
- Episodes: truncation after ``max_steps``; auto-reset of finished slots inside ``step``;
  ``info["episode_metrics"]`` (the step / auto-reset contract of ``base``).
- ``world()`` / ``set_world()`` / ``global_state()`` from the scenario's field table.

Internally every tensor is entity-major with the batch last (``agent_pos`` [N, 2, B]), so
per-entity and pairwise ops run over long contiguous rows of B values; the public API is
batch-first and transposes at the edge.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from lero.training.envs.batched_env import Arena, BatchedEnv

DT = 0.1
DAMPING = 0.25
CONTACT_FORCE = 100.0
CONTACT_MARGIN = 1e-3
START = 1.0  # entities start uniform in [-START, START]^2 (every MPE scenario, as mpe2)
SENSITIVITY = 5.0
# move index -> unit force direction: no-op, left, right, down, up
MOVE_DIRECTIONS = ((0.0, 0.0), (-1.0, 0.0), (1.0, 0.0), (0.0, -1.0), (0.0, 1.0))
MOVE_NAMES = ("no-op", "move left (-x)", "move right (+x)", "move down (-y)", "move up (+y)")
N_MOVES = len(MOVE_DIRECTIONS)


@dataclass(frozen=True)
class Field:
    """One world tensor: its shape after the batch dim, and for integer fields their range."""

    shape: tuple[int, ...]
    high: int | None = None  # integer field with values in [0, high); None = float
    optional: bool = False  # set_world may omit it (zeros)


@dataclass(frozen=True)
class AgentKinds:
    """Per-agent properties (mpe2's ``Agent``): role name, movable, silent."""

    roles: tuple[str, ...]
    movable: tuple[bool, ...]
    silent: tuple[bool, ...]

    def n_actions(self, dim_c: int) -> tuple[int, ...]:
        """mpe2's discrete action count per agent: moves x symbols."""
        return tuple(
            (N_MOVES if move else 1) * (1 if quiet else dim_c)
            for move, quiet in zip(self.movable, self.silent, strict=True)
        )


class MPEEnv(BatchedEnv):
    """B worlds of one MPE scenario stepped at once; subclasses fill in the task.

    A scenario's ``__init__`` validates its config and calls ``_setup``; then it
    implements ``_fields``, ``_draw``, ``_observe``, ``_outcome`` and ``describe``.
    """

    SUMMED_METRICS: tuple[str, ...] = ()  # episode metrics summed over steps; others: last step

    # ------------------------------------------------------------------ set-up
    def _setup(
        self,
        *,
        n_envs: int,
        device: torch.device,
        max_steps: int,
        kinds: AgentKinds,
        n_landmarks: int,
        dim_c: int,
        obs_dims: tuple[int, ...],
        state_dim: int,
        collide_dist: float | None = None,
    ) -> None:
        """Build the shared tables; ``collide_dist`` None = agents pass through each other."""
        self.n_envs = B = n_envs
        self.n_agents = N = len(kinds.roles)
        self.n_landmarks = n_landmarks
        self.max_steps = max_steps
        self.device = dev = device
        self.kinds = kinds
        self.dim_c = dim_c
        self._obs_dims = obs_dims
        self.obs_dim = max(obs_dims)
        self.state_dim = state_dim
        self.collide_dist = collide_dist
        per_agent = kinds.n_actions(dim_c)
        self.n_actions = A = max(per_agent)
        self._mask = torch.tensor([[a < n for a in range(A)] for n in per_agent], device=dev)
        self._all_valid = bool(self._mask.all())
        # flat (agent, action) index -> action force [2, N*A] and utterance [C, N*A]
        force = torch.zeros(2, N * A, device=dev)
        say = torch.zeros(dim_c, N * A, device=dev)
        for i in range(N):
            for a in range(per_agent[i]):
                rest = a
                if kinds.movable[i]:
                    force[:, i * A + a] = SENSITIVITY * torch.tensor(MOVE_DIRECTIONS[a % N_MOVES])
                    rest = a // N_MOVES
                if not kinds.silent[i]:
                    say[rest, i * A + a] = 1.0
        self._speaks = not all(kinds.silent)
        self._action_offset = (torch.arange(N, device=dev) * A)[:, None]  # [N, 1]
        if len(set(zip(kinds.movable, kinds.silent, strict=True))) == 1:
            force, say = force[:, :A], say[:, :A]  # agents alike: index by action alone
            self._action_offset = None
        self._action_force, self._action_say = force, say
        self._movable = torch.tensor(kinds.movable, device=dev, dtype=torch.float32)[:, None, None]
        self._all_movable = all(kinds.movable)
        self._setup_pairs()
        self._generator = torch.Generator(device=dev)
        self._generator.seed()
        self._sums: dict[str, torch.Tensor] = {
            name: torch.zeros(B, device=dev) for name in self.SUMMED_METRICS
        }
        self.reset()

    def _setup_pairs(self) -> None:
        """Index tables for pairwise agent geometry, contact forces and nearest-first ranks."""
        N, B, L, dev = self.n_agents, self.n_envs, self.n_landmarks, self.device
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
        self._entity_ids = torch.arange(max(N, L, 1), device=dev)[:, None]  # [E, 1]
        # entity count -> [2, P] indices (a, b) of every pair a < b, for nearest-first ranking
        self._entity_pairs = {
            E: torch.triu_indices(E, E, offset=1, device=dev) for E in {L, N - 1} if E > 0
        }
        self._zero_slot = torch.zeros(1, 1, 2, B, device=dev)

    # ------------------------------------------------------------------ scenario hooks
    @abstractmethod
    def _fields(self) -> dict[str, Field]:
        """The world fields, batch-first shapes without B (``agent_pos``: Field((N, 2)))."""

    @abstractmethod
    def _draw(self) -> dict[str, torch.Tensor]:
        """A fresh start state for every slot, batch-last (``agent_pos`` [N, 2, B])."""

    @abstractmethod
    def _observe(self) -> torch.Tensor:
        """Observations of the current state, entity-major [N, obs_dim, B], rows zero-padded."""

    @abstractmethod
    def _outcome(self) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """After a step: rewards [N, B] and the step's metric values {name: [B]}."""

    # ------------------------------------------------------------------ state
    def _load(self, state: dict[str, torch.Tensor]) -> None:
        """Install a state (batch-last tensors) and the geometry obs, rewards and forces share."""
        self._s = state
        self._world: dict[str, torch.Tensor] | None = None  # batch-first copy, made on demand
        pos = state["agent_pos"]  # [N, 2, B]
        self._pair_delta = pos[self._pair_a] - pos[self._pair_b]  # [P, 2, B]  p_a - p_b
        self._pair_dist = _norm(self._pair_delta)  # [P, B]
        landmarks = state["landmark_pos"]  # [L, 2, B]
        self._landmark_delta = landmarks[None, :] - pos[:, None]  # [N, L, 2, B]  q_l - p_i
        self._landmark_dist = _norm(self._landmark_delta)  # [N, L, B]

    def _uniform(self, *shape: int) -> torch.Tensor:
        """Uniform [-START, START] = [-1, 1] values of ``shape`` + [B] from the env's generator."""
        gen, dev = self._generator, self.device
        return torch.rand(*shape, self.n_envs, generator=gen, device=dev) * (2 * START) - START

    @property
    def arena(self) -> Arena:
        """Every MPE scenario starts its entities uniform in [-START, START]^2 (``_uniform``);
        nothing bounds them after."""
        return Arena(START, START, walls=False)

    def _integers(self, high: int, *shape: int) -> torch.Tensor:
        """Uniform integers in [0, high) of ``shape`` + [B] from the env's generator."""
        return torch.randint(high, (*shape, self.n_envs), generator=self._generator, device=self.device)

    @torch.no_grad()
    def reset(self, seed: int | None = None) -> torch.Tensor:
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise ValueError(f"{self.name}: seed must be an int or None, got {seed!r}")
            self._generator.manual_seed(seed)
        self._load(self._draw())
        self._sums = {name: torch.zeros_like(v) for name, v in self._sums.items()}
        return self._batch_obs()

    def world(self) -> dict[str, torch.Tensor]:
        """The world fields of the current state, batch-first (see ``task.state_fields``)."""
        if self._world is None:
            self._world = {k: v.movedim(-1, 0).contiguous() for k, v in self._s.items()}
        return self._world

    @torch.no_grad()
    def set_world(self, world: dict[str, torch.Tensor]) -> torch.Tensor:
        """Load ``world()``-style tensors (optional fields default to zeros); returns obs."""
        where = f"{self.name}.set_world"
        if not isinstance(world, Mapping):
            raise ValueError(f"{where}: expected a dict, got {type(world).__name__}")
        fields = self._fields()
        unknown = set(world) - set(fields)
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
        B = self.n_envs
        state = {}
        for key, spec in fields.items():
            shape = (B, *spec.shape)
            value = world.get(key)
            if value is None and spec.optional:
                dtype = torch.float32 if spec.high is None else torch.long
                value = torch.zeros(shape, dtype=dtype)
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
                got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise ValueError(f"{where}: {key} must be a tensor of shape {shape}, got {got}")
            if spec.high is None:
                if not torch.isfinite(value).all():
                    raise ValueError(f"{where}: {key} has non-finite values")
                value = value.to(self.device, torch.float32)
            else:
                if value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
                    raise ValueError(f"{where}: {key} must be an integer tensor of shape {shape}")
                if value.numel() and (bool((value < 0).any()) or bool((value >= spec.high).any())):
                    raise ValueError(f"{where}: {key} must lie in [0, {spec.high})")
                value = value.to(self.device, torch.long)
            state[key] = value.movedim(0, -1).contiguous()
        self._load(state)
        self._sums = {name: torch.zeros_like(v) for name, v in self._sums.items()}
        return self._batch_obs()

    def global_state(self) -> torch.Tensor:
        """[B, state_dim]: the float world fields flattened, in field order."""
        B = self.n_envs
        fields = self._fields()
        rows = [self._s[k].reshape(-1, B) for k, f in fields.items() if f.high is None]
        return torch.cat(rows).t().contiguous()

    def action_mask(self) -> torch.Tensor:
        """[N, A] bool: which actions each agent may take (static)."""
        return self._mask

    @property
    def obs_dims(self) -> tuple[int, ...]:
        return self._obs_dims

    @property
    def roles(self) -> tuple[str, ...]:
        return self.kinds.roles

    # ------------------------------------------------------------------ step
    def _contact_force(self) -> torch.Tensor:
        """Soft contact push on every agent from every other agent, summed: [N, 2, B]."""
        N, B = self.n_agents, self.n_envs
        overlap = (self.collide_dist - self._pair_dist) / CONTACT_MARGIN  # [P, B]
        penetration = F.softplus(overlap) * CONTACT_MARGIN  # [P, B], mpe2's logaddexp(0, .)
        scale = CONTACT_FORCE * penetration / self._pair_dist  # [P, B]
        push = scale[:, None] * self._pair_delta  # [P, 2, B] force on a; b gets -push
        return (self._incidence @ push.view(-1, 2 * B)).view(N, 2, B)

    @torch.no_grad()
    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        actions = self.check_actions(actions)  # [B, N]
        N, B = self.n_agents, self.n_envs
        flat = actions.t()  # [N, B]
        if self._action_offset is not None:
            flat = flat + self._action_offset  # flat (agent, action) index
        flat = flat.reshape(-1)  # [N * B]
        if not self._all_valid and not bool(self._mask.view(-1)[flat].all()):
            raise ValueError(f"{self.name}.step: an agent took an action outside its action_mask()")
        s = self._s
        force = self._action_force.index_select(1, flat).view(2, N, B).transpose(0, 1)  # [N, 2, B]
        if self.collide_dist is not None and N > 1:
            force = force + self._contact_force()
        vel = s["agent_vel"]
        pos = s["agent_pos"] + vel * DT
        vel = vel * (1 - DAMPING) + force * DT
        if not self._all_movable:
            pos = torch.where(self._movable > 0, pos, s["agent_pos"])
            vel = vel * self._movable
        step_index = s["step"]  # [B]
        state = {**s, "agent_pos": pos, "agent_vel": vel, "step": step_index + 1}
        if self._speaks:
            said = self._action_say.index_select(1, flat).view(self.dim_c, N, B)
            state["comm"] = said.transpose(0, 1).contiguous()  # [N, C, B]
        self._load(state)
        reward, metrics = self._outcome()  # [N, B], {name: [B]}

        episode = dict(metrics)
        for name in self.SUMMED_METRICS:
            self._sums[name] = self._sums[name] + metrics[name]
            episode[name] = self._sums[name]
        final_obs = self._batch_obs()
        done = state["step"] >= self.max_steps  # [B]
        info = {
            "final_obs": final_obs,
            "world": self.world(),
            "terminated": torch.zeros_like(done),  # MPE episodes only ever end at the time limit
            "step": step_index,
            "episode_metrics": episode,
            **metrics,
        }
        obs = final_obs
        if bool(done.any()):
            fresh = self._draw()
            self._load({k: torch.where(done, fresh[k], v) for k, v in self._s.items()})
            self._sums = {k: v.masked_fill(done, 0.0) for k, v in self._sums.items()}
            obs = self._batch_obs()
        return obs, reward.t().contiguous(), done, info

    # ------------------------------------------------------------------ observation helpers
    def _batch_obs(self) -> torch.Tensor:
        """The scenario's [N, D, B] observations as the public [B, N, D]."""
        N, B, D = self.n_agents, self.n_envs, self.obs_dim
        return self._observe().reshape(N * D, B).t().contiguous().view(B, N, D)

    def _others(self) -> torch.Tensor:
        """Every other agent in index order (agent i skips itself): p_j - p_i [N, N-1, 2, B]."""
        N, B = self.n_agents, self.n_envs
        signed = torch.cat([self._pair_delta, -self._pair_delta])  # [2P, 2, B]
        return signed.index_select(0, self._other_row).view(N, N - 1, 2, B)

    def _others_dist(self) -> torch.Tensor:
        """Distances |p_j - p_i| [N, N-1, B] in ``_others`` order."""
        N, B = self.n_agents, self.n_envs
        return self._pair_dist.index_select(0, self._other_pair).view(N, N - 1, B)

    def _nearest(self, rel: torch.Tensor, dist: torch.Tensor, slots: int) -> torch.Tensor:
        """Relative positions [N, E, 2, B] of the ``slots`` nearest entities, zero-padded: [N, slots, 2, B].

        A stable nearest-first sort, as mpe2's argsort: entity e goes to slot
        rank(e) = #{f : d_f < d_e, or d_f == d_e and f < e}. Each entity pair a < b adds
        one to the rank of b when d_a <= d_b, else to the rank of a. Counting over pairs
        keeps every op elementwise over B, far faster here than sort/argmin on short rows.
        """
        N, E, B = dist.shape
        k = min(slots, E)
        if E > 1:
            first, second = self._entity_pairs[E]  # [P] each: every pair a < b
            a_first = (dist.index_select(1, first) <= dist.index_select(1, second)).long()
            rank = torch.zeros(N, E, B, dtype=torch.long, device=self.device)
            rank.index_add_(1, second, a_first).index_add_(1, first, 1 - a_first)  # [N, E, B]
            # ranks are a permutation of 0..E-1: scattering entity ids by rank inverts it
            ids = self._entity_ids[:E].expand(N, E, B)
            entity = torch.empty_like(rank).scatter_(1, rank, ids)[:, :k]  # [N, k, B]
            rel = torch.gather(rel, 1, entity[:, :, None].expand(-1, -1, 2, -1))  # [N, k, 2, B]
        if k == slots:
            return rel
        return torch.cat([rel, self._zero_slot.expand(N, slots - k, 2, B)], dim=1)


def _norm(vectors: torch.Tensor) -> torch.Tensor:
    """Euclidean length over the coordinate dim of [..., 2, B] vectors: [..., B]."""
    x, y = vectors.unbind(dim=-2)
    return torch.sqrt(x * x + y * y)


def pad_rows(rows: list[torch.Tensor], width: int) -> torch.Tensor:
    """Per-agent observations [D_i, B] zero-padded to [N, width, B] (agents that differ)."""
    B = rows[0].shape[-1]
    padded = [torch.cat([r, r.new_zeros(width - r.shape[0], B)]) if r.shape[0] < width else r for r in rows]
    return torch.stack(padded)
