"""The trained decentralised policy: one network shared by all agents, plus what rebuilds it."""

from __future__ import annotations

import pickle
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from lero.training.algos.networks import mlp, with_agent_id
from torch import nn

POLICY_FILE = "policy.pt"


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


class Policy(nn.Module):
    """Per-agent action scores from local (enhanced) obs + agent id.

    For PPO algorithms the scores are actor logits, for VDN / QMIX they are
    utilities Q_i; either way the greedy action is the argmax.
    """

    def __init__(self, meta: PolicyMeta) -> None:
        super().__init__()
        self.meta = meta
        out_gain = 0.01 if meta.algo in ("mappo", "ippo") else 1.0
        self.net = mlp(meta.obs_dim + meta.n_agents, meta.hidden, meta.n_actions, out_gain=out_gain)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """obs [..., N, D'] -> scores [..., N, A]."""
        return self.net(with_agent_id(obs))

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
    torch.save({"meta": asdict(policy.meta), "state_dict": policy.state_dict()}, path)
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
    except (KeyError, TypeError, RuntimeError, EOFError, pickle.UnpicklingError) as error:
        raise ValueError(f"{path} is not a lero policy file: {error}".splitlines()[0]) from error
    return policy.eval()
