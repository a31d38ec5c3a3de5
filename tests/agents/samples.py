"""Candidate modules and replies shared by the agents tests."""

GOOD_MODULE = """import torch


def hybrid_reward(ctx):
    agent_pos = ctx.state["agent_pos"]  # [B, N, 2]
    landmark_pos = ctx.state["landmark_pos"]  # [B, L, 2]
    dist = torch.linalg.norm(agent_pos[:, :, None] - landmark_pos[:, None], dim=-1)  # [B, N, L]
    team = -dist.min(dim=1).values.sum(dim=-1)  # [B]
    own = -dist.min(dim=-1).values  # [B, N]
    reward = 0.5 * team[:, None] + 0.5 * own
    return reward, {"team": team, "own": own}


def enhance_observation(obs):
    landmarks = obs[:, 4:8].reshape(obs.shape[0], -1, 2)  # [M, Ls, 2]
    nearest = torch.linalg.norm(landmarks, dim=-1).min(dim=-1, keepdim=True).values  # [M, 1]
    return torch.cat([obs, nearest], dim=-1)
"""


def markdown_reply(code: str = GOOD_MODULE) -> str:
    return f"Here is my design. It mixes team and individual credit.\n\n```python\n{code}```\n\nThe OEF adds the nearest landmark distance."
