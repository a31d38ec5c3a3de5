"""Batched MPE ``simple_reference`` (two agents guide each other by talking) in torch.

Same semantics as mpe2's ``simple_reference_v3.parallel_env`` with discrete actions
(read off mpe2's ``simple_reference.py``; physics, the move x say action encoding and
communication are the shared MPE core, ``mpe.py``); parity with mpe2 is checked in
``tests/training/test_env_reference_parity.py``.

World: 2 agents (movable, speaking 10 symbols, not colliding) and 3 landmarks of fixed
colours. Each agent has a target landmark that only the *other* agent sees (as its
colour), so each must tell the other where to go. Action ``a`` in [0, 50):
move ``a % 5``, say ``a // 5``.

Reward of agent i after the step (local_ratio = r, j the other agent)::

    local_i  = -|p_j - q_target(j)|        (how close i's partner is to the goal i sees)
    global   = mean_i local_i
    reward_i = (1 - r) * global + r * local_i
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lero.training.envs import arg_checks
from lero.training.envs.mpe import MOVE_NAMES, AgentKinds, Field, MPEEnv
from lero.training.envs.task import RETURN, Metric, StateField, TaskSpec

N_AGENTS, N_LANDMARKS, DIM_C = 2, 3, 10
LANDMARK_COLORS = ((0.75, 0.25, 0.25), (0.25, 0.75, 0.25), (0.25, 0.25, 0.75))
REACH_DIST = 0.1  # agent radius 0.05 + landmark radius 0.05: touching the target
OBS_DIM = 2 + 2 * N_LANDMARKS + 3 + DIM_C


@dataclass(frozen=True)
class SimpleReferenceConfig:
    """mpe2's simple_reference arguments plus the batch size and torch device."""

    n_envs: int
    local_ratio: float = 0.5
    max_cycles: int = 25
    device: str | torch.device = "cpu"

    def __post_init__(self) -> None:
        owner = "simple_reference"
        arg_checks.positive_int(owner, "n_envs", self.n_envs, arg_checks.MAX_BATCH)
        object.__setattr__(
            self, "local_ratio", arg_checks.fraction(owner, "local_ratio", self.local_ratio)
        )
        arg_checks.positive_int(owner, "max_cycles", self.max_cycles, arg_checks.MAX_EPISODE_STEPS)
        object.__setattr__(self, "device", arg_checks.device(owner, self.device))


TASK = TaskSpec(
    name="simple_reference",
    text=(
        "Referential communication: two agents each must reach their own target landmark, but "
        "only the other agent sees which landmark that is (as its colour). Each agent moves and "
        "speaks one of 10 symbols every step, so they must learn to tell each other where to go."
    ),
    lero_kwargs={},
    state_fields=(
        StateField("agent_pos", "[B, 2, 2]", "agent positions"),
        StateField("agent_vel", "[B, 2, 2]", "agent velocities"),
        StateField("landmark_pos", "[B, 3, 2]", "landmark positions"),
        StateField("comm", "[B, 2, 10]", "each agent's utterance of the last step (one-hot)"),
        StateField("target", "[B, 2]", "index of the landmark agent i must reach (int64)"),
        StateField("step", "[B]", "step index within the episode (int64)"),
    ),
    metrics=(
        Metric(RETURN, True, "mean per-agent native episode return"),
        Metric("target_dist", False, "mean distance of the agents to their targets at episode end"),
        Metric("success", True, f"fraction of episodes ending with both agents within {REACH_DIST} of their targets"),
    ),
    reference="mpe2.simple_reference_v3",
    success_metric="success",
    grammar="simple_reference",
    notes={"reach_dist": REACH_DIST},
)


class SimpleReference(MPEEnv):
    """B simple_reference worlds stepped at once (see the module docstring)."""

    name = "simple_reference"
    task = TASK

    def __init__(self, cfg: SimpleReferenceConfig) -> None:
        self.cfg = cfg
        self.local_ratio = cfg.local_ratio
        self._colors = torch.tensor(LANDMARK_COLORS, device=cfg.device).t().contiguous()  # [3, L]
        self._partner = torch.tensor([1, 0], device=cfg.device)
        self._setup(
            n_envs=cfg.n_envs,
            device=cfg.device,
            max_steps=cfg.max_cycles,
            kinds=AgentKinds(("agent",) * N_AGENTS, (True,) * N_AGENTS, (False,) * N_AGENTS),
            n_landmarks=N_LANDMARKS,
            dim_c=DIM_C,
            obs_dims=(OBS_DIM,) * N_AGENTS,
            state_dim=4 * N_AGENTS + 2 * N_LANDMARKS + DIM_C * N_AGENTS + N_AGENTS * N_LANDMARKS,
        )

    def _fields(self) -> dict[str, Field]:
        return {
            "agent_pos": Field((N_AGENTS, 2)),
            "agent_vel": Field((N_AGENTS, 2)),
            "landmark_pos": Field((N_LANDMARKS, 2)),
            "comm": Field((N_AGENTS, DIM_C), optional=True),
            "target": Field((N_AGENTS,), high=N_LANDMARKS),
            "step": Field((), high=self.max_steps, optional=True),
        }

    def _draw(self) -> dict[str, torch.Tensor]:
        """A random target per agent; agents and landmarks uniform in [-1, 1]^2, at rest, silent."""
        B, dev = self.n_envs, self.device
        target = self._integers(N_LANDMARKS, N_AGENTS)
        pos = self._uniform(N_AGENTS, 2)
        return {
            "agent_pos": pos,
            "agent_vel": torch.zeros_like(pos),
            "landmark_pos": self._uniform(N_LANDMARKS, 2),
            "comm": torch.zeros(N_AGENTS, DIM_C, B, device=dev),
            "target": target,
            "step": torch.zeros(B, dtype=torch.long, device=dev),
        }

    def _target_dist(self) -> torch.Tensor:
        """[N, B] distance of each agent to its own target landmark."""
        target = self._s["target"][:, None]  # [N, 1, B]
        return self._landmark_dist.gather(1, target).squeeze(1)

    def _outcome(self) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        dist = self._target_dist()  # [N, B]
        local = -dist.index_select(0, self._partner)  # [N, B]: the partner's distance
        r = self.local_ratio
        reward = (1 - r) * local.mean(dim=0) + r * local
        metrics = {
            "target_dist": dist.mean(dim=0),
            "success": (dist < REACH_DIST).all(dim=0).to(torch.float32),
        }
        return reward, metrics

    def _observe(self) -> torch.Tensor:
        """[N, 21, B]: velocity, landmark offsets, the partner's target colour, the partner's words."""
        N, B = N_AGENTS, self.n_envs
        s = self._s
        seen = s["target"].index_select(0, self._partner)  # [N, B] the partner's target
        color = self._colors.index_select(1, seen.reshape(-1)).view(3, N, B).transpose(0, 1)
        heard = s["comm"].index_select(0, self._partner)  # [N, C, B]
        landmarks = self._landmark_delta.reshape(N, -1, B)  # [N, 2L, B]
        return torch.cat([s["agent_vel"], landmarks, color, heard], dim=1)

    def obs_layout(self) -> dict[str, tuple[int, int]]:
        """``self_vel``, ``landmark_rel``, ``goal_color`` (the partner's target), ``heard`` columns."""
        landmarks_end = 2 + 2 * N_LANDMARKS
        return {"self_vel": (0, 2), "landmark_rel": (2, landmarks_end), "goal_color": (landmarks_end, landmarks_end + 3),
                "heard": (landmarks_end + 3, OBS_DIM)}

    def global_state(self) -> torch.Tensor:
        """[B, 40]: positions, velocities, landmarks, utterances, then each agent's target one-hot."""
        targets = torch.nn.functional.one_hot(self._s["target"].t(), N_LANDMARKS)  # [B, N, L]
        return torch.cat([super().global_state(), targets.reshape(self.n_envs, -1).float()], dim=1)

    def describe(self) -> str:
        r = self.local_ratio
        colors = "; ".join(f"landmark {i}: {c}" for i, c in enumerate(LANDMARK_COLORS))
        lines = [
            "Environment: simple_reference (MPE referential communication), 2 agents, 3 landmarks.",
            "Each agent must reach its own target landmark, which only the OTHER agent sees (as a "
            "colour); both agents move and speak, so each must tell the other where to go.",
            "",
            f"Observation of one agent: float32 vector of D={OBS_DIM} (tensor obs[..., D]):",
            "  [0:2]   self velocity (vx, vy)",
            "  [2:8]   relative positions (landmark - self) of the 3 landmarks in fixed order: "
            "landmark l has x at 2+2l, y at 3+2l",
            f"  [8:11]  colour (r, g, b) of the landmark the OTHER agent must reach ({colors})",
            "  [11:21] the other agent's utterance of the last step (one-hot over 10 symbols; zero "
            "at the episode start)",
            "",
            f"Actions (discrete, {self.n_actions}): a = move + 5 * say; move = a % 5 ("
            + ", ".join(f"{i} = {n}" for i, n in enumerate(MOVE_NAMES))
            + "), say = a // 5 (symbol 0-9, heard by the other agent next step).",
            "Physics: dt = 0.1, velocity damping 0.25 per step, action force 5; agents do not "
            "collide; positions are unbounded.",
            "",
            f"Reward of agent i after each step (local_ratio r = {r}, j the other agent):",
            "  local_i = -(distance of agent j to agent j's target)   (the target agent i sees)",
            "  global = mean over agents of local_i",
            f"  reward_i = (1 - r) * global + r * local_i = {1 - r:g} * global + {r:g} * local_i",
            "",
            "World state (ctx.state, training only, B parallel envs):",
            "  agent_pos [B, 2, 2], agent_vel [B, 2, 2], landmark_pos [B, 3, 2], comm [B, 2, 10], "
            "target [B, 2] (int64: landmark index agent i must reach), step [B] (int64).",
            f"  An agent reaches its target when within {REACH_DIST}.",
            "",
            f"Episode: {self.max_steps} steps, then truncated; starts with agents and landmarks "
            "uniform in [-1, 1]^2, zero velocity, silence and random targets.",
        ]
        return "\n".join(lines)
