"""Batched MPE ``simple_speaker_listener`` (a speaker guides a listener) in torch.

Same semantics as mpe2's ``simple_speaker_listener_v4.parallel_env`` with discrete
actions (read off mpe2's ``simple_speaker_listener.py``; physics, actions and
communication are the shared MPE core, ``mpe.py``); parity with mpe2 is checked in
``tests/training/test_env_speaker_listener.py``.

The agents differ: agent 0, the speaker, cannot move, sees only the colour of the target
landmark (3 values) and says one of 3 symbols (3 actions); agent 1, the listener,
cannot speak, sees its velocity, the landmarks and the speaker's last symbol (11 values)
and moves (5 actions). Rows are padded to 11 values and 5 actions (``action_mask()``).

Reward of both agents after the step: ``-|p_listener - q_target|^2``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lero.training.envs import arg_checks
from lero.training.envs.mpe import MOVE_NAMES, AgentKinds, Field, MPEEnv, pad_rows
from lero.training.envs.task import RETURN, Metric, StateField, TaskSpec

N_LANDMARKS, DIM_C = 3, 3
LANDMARK_COLORS = ((0.65, 0.15, 0.15), (0.15, 0.65, 0.15), (0.15, 0.15, 0.65))
REACH_DIST = 0.115  # listener radius 0.075 + landmark radius 0.04: touching the target
SPEAKER_DIM, LISTENER_DIM = 3, 2 + 2 * N_LANDMARKS + DIM_C


@dataclass(frozen=True)
class SimpleSpeakerListenerConfig:
    """mpe2's simple_speaker_listener arguments plus the batch size and torch device."""

    n_envs: int
    max_cycles: int = 25
    device: str | torch.device = "cpu"

    def __post_init__(self) -> None:
        owner = "simple_speaker_listener"
        arg_checks.positive_int(owner, "n_envs", self.n_envs, arg_checks.MAX_BATCH)
        arg_checks.positive_int(owner, "max_cycles", self.max_cycles, arg_checks.MAX_EPISODE_STEPS)
        object.__setattr__(self, "device", arg_checks.device(owner, self.device))


TASK = TaskSpec(
    name="simple_speaker_listener",
    text=(
        "Speaker-listener: a static speaker sees which of 3 landmarks is the target and says one "
        "of 3 symbols each step; a mute listener hears the symbol and must move onto the target. "
        "The two agents have different observations and actions."
    ),
    lero_kwargs={},
    state_fields=(
        StateField("agent_pos", "[B, 2, 2]", "positions (speaker row 0, static; listener row 1)"),
        StateField("agent_vel", "[B, 2, 2]", "velocities (the speaker's is always 0)"),
        StateField("landmark_pos", "[B, 3, 2]", "landmark positions"),
        StateField("comm", "[B, 2, 3]", "utterances of the last step (speaker one-hot; listener 0)"),
        StateField("target", "[B]", "index of the landmark the listener must reach (int64)"),
        StateField("step", "[B]", "step index within the episode (int64)"),
    ),
    metrics=(
        Metric(RETURN, True, "mean per-agent native episode return"),
        Metric("target_dist", False, "distance of the listener to the target at episode end"),
        Metric("success", True, f"fraction of episodes ending with the listener within {REACH_DIST} of the target"),
    ),
    reference="mpe2.simple_speaker_listener_v4",
    success_metric="success",
    grammar="simple_speaker_listener",
    notes={"reach_dist": REACH_DIST},
)


class SimpleSpeakerListener(MPEEnv):
    """B simple_speaker_listener worlds stepped at once (see the module docstring)."""

    name = "simple_speaker_listener"
    task = TASK

    def __init__(self, cfg: SimpleSpeakerListenerConfig) -> None:
        self.cfg = cfg
        self._colors = torch.tensor(LANDMARK_COLORS, device=cfg.device).t().contiguous()  # [3, L]
        self._setup(
            n_envs=cfg.n_envs,
            device=cfg.device,
            max_steps=cfg.max_cycles,
            kinds=AgentKinds(("speaker", "listener"), movable=(False, True), silent=(False, True)),
            n_landmarks=N_LANDMARKS,
            dim_c=DIM_C,
            obs_dims=(SPEAKER_DIM, LISTENER_DIM),
            state_dim=8 + 2 * N_LANDMARKS + 2 * DIM_C + N_LANDMARKS,
        )

    def _fields(self) -> dict[str, Field]:
        return {
            "agent_pos": Field((2, 2)),
            "agent_vel": Field((2, 2)),
            "landmark_pos": Field((N_LANDMARKS, 2)),
            "comm": Field((2, DIM_C), optional=True),
            "target": Field((), high=N_LANDMARKS),
            "step": Field((), high=self.max_steps, optional=True),
        }

    def _draw(self) -> dict[str, torch.Tensor]:
        """A random target; agents and landmarks uniform in [-1, 1]^2, at rest, silent."""
        B, dev = self.n_envs, self.device
        target = self._integers(N_LANDMARKS)
        pos = self._uniform(2, 2)
        return {
            "agent_pos": pos,
            "agent_vel": torch.zeros_like(pos),
            "landmark_pos": self._uniform(N_LANDMARKS, 2),
            "comm": torch.zeros(2, DIM_C, B, device=dev),
            "target": target,
            "step": torch.zeros(B, dtype=torch.long, device=dev),
        }

    def _listener_dist(self) -> torch.Tensor:
        """[B] distance of the listener to the target landmark."""
        return self._landmark_dist[1].gather(0, self._s["target"][None]).squeeze(0)

    def _outcome(self) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        dist = self._listener_dist()  # [B]
        reward = (-dist * dist).expand(2, -1)  # [N, B]: both agents share it
        metrics = {"target_dist": dist, "success": (dist < REACH_DIST).to(torch.float32)}
        return reward, metrics

    def _observe(self) -> torch.Tensor:
        """[2, 11, B]: speaker [target colour, 0...], listener [velocity, landmark offsets, heard symbol]."""
        s, B = self._s, self.n_envs
        color = self._colors.index_select(1, s["target"])  # [3, B]
        landmarks = self._landmark_delta[1].reshape(-1, B)  # [2L, B] relative to the listener
        listener = torch.cat([s["agent_vel"][1], landmarks, s["comm"][0]])  # [11, B]
        return pad_rows([color, listener], self.obs_dim)

    def obs_layout(self) -> dict[str, tuple[int, int]]:
        """Columns of each role's row: the speaker's ``goal_color`` (the target's colour); the
        listener's ``self_vel``, ``landmark_rel`` and ``heard`` (the speaker's symbol)."""
        landmarks_end = 2 + 2 * N_LANDMARKS
        return {"goal_color": (0, SPEAKER_DIM), "self_vel": (0, 2), "landmark_rel": (2, landmarks_end),
                "heard": (landmarks_end, LISTENER_DIM)}

    def global_state(self) -> torch.Tensor:
        """[B, 23]: positions, velocities, landmarks, utterances, then the target one-hot."""
        target = torch.nn.functional.one_hot(self._s["target"], N_LANDMARKS).float()  # [B, L]
        return torch.cat([super().global_state(), target], dim=1)

    def describe(self) -> str:
        colors = "; ".join(f"landmark {i}: {c}" for i, c in enumerate(LANDMARK_COLORS))
        lines = [
            "Environment: simple_speaker_listener (MPE), 2 agents that differ, 3 landmarks.",
            "Agent 0 (role speaker) cannot move; it sees the target's colour and speaks. Agent 1 "
            "(role listener) cannot speak; it hears the speaker and must move onto the target.",
            "",
            f"Observations: float32 rows of D={self.obs_dim} (tensor obs[..., D]); agent 0's row "
            f"holds {SPEAKER_DIM} values then zeros, agent 1's all {LISTENER_DIM}:",
            f"  speaker  [0:3]  colour (r, g, b) of the target landmark ({colors}); [3:11] zeros",
            "  listener [0:2]  self velocity (vx, vy)",
            "  listener [2:8]  relative positions (landmark - self) of the 3 landmarks in fixed "
            "order: landmark l has x at 2+2l, y at 3+2l",
            "  listener [8:11] the speaker's symbol of the last step (one-hot; zero at the start)",
            "",
            f"Actions (discrete, padded to {self.n_actions}; action_mask() marks the valid ones):",
            "  speaker: 0, 1, 2 = say symbol 0, 1, 2 (3 and 4 are invalid)",
            "  listener: " + ", ".join(f"{i} = {n}" for i, n in enumerate(MOVE_NAMES)),
            "Physics: dt = 0.1, velocity damping 0.25 per step, action force 5; no collisions.",
            "",
            "Reward of both agents after each step: -(squared distance listener - target).",
            "",
            "World state (ctx.state, training only, B parallel envs):",
            "  agent_pos [B, 2, 2], agent_vel [B, 2, 2] (row 0 speaker, row 1 listener), "
            "landmark_pos [B, 3, 2], comm [B, 2, 3], target [B] (int64 landmark index), step [B].",
            f"  The listener reaches the target when within {REACH_DIST}.",
            "",
            f"Episode: {self.max_steps} steps, then truncated; starts with agents and landmarks "
            "uniform in [-1, 1]^2, zero velocity, silence and a random target.",
        ]
        return "\n".join(lines)
