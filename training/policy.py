"""The trained decentralised policy: one network shared by all agents, plus what rebuilds it.

Agents that differ share the network through padding plus a role id: every agent's
(enhanced) obs row has the same width, the input also holds the agent's one-hot id and,
when the task has more than one role, the role's one-hot; invalid actions (the env's
``action_mask()``) get a score of ``MASKED`` so they are never sampled or chosen.
"""

from __future__ import annotations

import pickle
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn

from lero.training.files import POLICY_FILE
from lero.training.networks import clones, mlp, with_agent_id

MASKED = -1e9  # score of an action the agent may not take (exp() = 0, finite for the losses)


@dataclass(frozen=True)
class PolicyMeta:
    """JSON-able description that rebuilds the network; `obs_dim` is after the OEF."""

    algo: str
    obs_dim: int
    n_agents: int
    n_actions: int
    hidden: int
    env: str
    env_kwargs: dict = field(default_factory=dict)
    roles: list = field(default_factory=list)  # per-agent role names; [] = all alike
    action_mask: list = field(default_factory=list)  # [N][A] bools; [] = every action valid


def policy_meta(algo: str, env, hidden: int, env_name: str, env_kwargs: dict) -> PolicyMeta:
    """The metadata of a policy for ``env`` (a ``HookedEnv``: obs_dim after the OEF)."""
    mask = env.action_mask()
    return PolicyMeta(
        algo=algo,
        obs_dim=env.obs_dim,
        n_agents=env.n_agents,
        n_actions=env.n_actions,
        hidden=hidden,
        env=env_name,
        env_kwargs=dict(env_kwargs),
        roles=list(env.roles) if len(set(env.roles)) > 1 else [],
        action_mask=[] if bool(mask.all()) else mask.tolist(),
    )


class Policy(nn.Module):
    """Per-agent action scores from local (enhanced) obs + agent id.

    For PPO algorithms the scores are actor logits, for VDN / QMIX they are
    utilities Q_i; either way the greedy action is the argmax. ``out_gain`` scales the
    output layer's initial weights: the learner's choice (PPO starts its actor near
    uniform); a reloaded policy's saved weights replace them.
    """

    def __init__(self, meta: PolicyMeta, out_gain: float = 1.0) -> None:
        super().__init__()
        self.meta = meta
        role_ids = {role: k for k, role in enumerate(dict.fromkeys(meta.roles))}
        role_onehot = torch.eye(len(role_ids))[[role_ids[r] for r in meta.roles]]  # [N, R]
        self.register_buffer("role_onehot", role_onehot, persistent=False)
        mask = torch.tensor(meta.action_mask, dtype=torch.bool).view(-1, meta.n_actions)
        self.register_buffer("invalid", ~mask, persistent=False)  # [N, A] or [0, A]
        in_dim = meta.obs_dim + meta.n_agents + len(role_ids)
        self.net = mlp(in_dim, meta.hidden, meta.n_actions, out_gain=out_gain)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """obs [..., N, D'] -> scores [..., N, A] (invalid actions: MASKED)."""
        return self.masked(self.net(self.inputs(obs)))

    def inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """The network's input: obs [..., N, D'] -> [..., N, D' + N (+ R)] with agent (and role) ids."""
        x = with_agent_id(obs)  # [..., N, D' + N]
        if self.role_onehot.numel():
            x = torch.cat([x, self.role_onehot.expand(*obs.shape[:-1], -1)], dim=-1)
        return x

    def masked(self, scores: torch.Tensor) -> torch.Tensor:
        """scores [..., N, A] with the actions an agent may not take set to MASKED."""
        return scores.masked_fill(self.invalid, MASKED) if self.invalid.numel() else scores

    @torch.no_grad()
    def act(self, obs: torch.Tensor, greedy: bool = True) -> torch.Tensor:
        """obs [B, N, D'] -> actions [B, N] int64; non-greedy samples softmax(scores)."""
        expected = (self.meta.n_agents, self.meta.obs_dim)
        if obs.dim() != 3 or tuple(obs.shape[1:]) != expected:
            raise ValueError(
                f"Policy.act expects obs [B, {expected[0]}, {expected[1]}], got {list(obs.shape)}"
            )
        scores = self(obs.float())  # [B, N, A]
        if greedy:
            return scores.argmax(dim=-1)
        return torch.distributions.Categorical(logits=scores).sample()


def save_policy(policy: Policy, path: str | Path) -> Path:
    """Save weights + metadata (loadable with weights_only=True); a directory gets `policy.pt`."""
    path = Path(path)
    if path.is_dir():
        path = path / POLICY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"meta": asdict(policy.meta), "state_dict": clones(policy.state_dict())}, path)
    return path


def load_policy(path: str | Path) -> Policy:
    """Rebuild a policy saved by `save_policy` (file or directory holding `policy.pt`)."""
    path = Path(path)
    if path.is_dir():
        path = path / POLICY_FILE
    if not path.is_file():
        raise ValueError(f"no policy file at {path}")
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        policy = Policy(PolicyMeta(**saved["meta"]))
        policy.load_state_dict(saved["state_dict"])
    except (KeyError, TypeError, ValueError, RuntimeError, EOFError, pickle.UnpicklingError) as error:
        raise ValueError(f"{path} is not a lero policy file: {error}".splitlines()[0]) from error
    return policy.eval()
