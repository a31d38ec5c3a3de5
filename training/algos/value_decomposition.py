"""VDN (Sunehag et al. 2018) and QMIX (Rashid et al. 2018), trained PQN-style (Gallici et al. 2024).

One feed-forward Q-network shared by all agents gives utilities Q_i(o_i, a_i)
(local enhanced obs + agent one-hot). A mixer combines them into Q_tot:
  VDN    Q_tot = sum_i Q_i
  QMIX   Q_tot = f(Q_1..Q_N; s, tau), monotonic in every Q_i: the hypernetwork
         weights generated from the global state are made non-negative; tau,
         the elapsed episode fraction, lets the mixer model the time limit.
Monotonicity makes the greedy per-agent argmax also maximise Q_tot, so
execution is decentralised.

Learning is parallel Q-learning without a replay buffer or target network:
many envs step T times with epsilon-greedy actions, then Q(lambda) targets on
the team reward r = sum_i r_i are computed backwards through the rollout
with the network that collected it,
  V_t = Q_tot(o_t, argmax_a Q_i(o_t, a); s_t)
  G_{T-1} = r_{T-1} + gamma (1 - d_{T-1}) V_T
  G_t     = r_t + gamma (1 - d_t) ((1 - lambda) V_{t+1} + lambda G_{t+1}),
and Q_tot(o_t, a_t; s_t) regresses onto G_t for a few epochs of shuffled
minibatches. The targets stay fixed during those epochs, which is what a
target network would provide.

Episode ends are time limits, not terminal states, and the agents do not see
the time: treating them as terminal (PyMARL, JaxMARL) gives the last steps of
an episode targets the Q-network cannot tell apart from the others. Here the
step that hits the limit has no TD target: it is left out of the loss and
the return before it bootstraps from the collecting network's own
Q_tot(o_t, a_t; s_t) there (d_t marks these steps below).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from lero.training.hooked_env import HookedEnv
from lero.training.networks import StackedParameters
from lero.training.optim import FlatAdam
from lero.training.policy import Policy, PolicyMeta
from lero.training.seeds import SeedRun
from lero.training.validation import check_hparam_fields, require


@dataclass(frozen=True)
class ValueDecompositionHparams:
    """VDN / QMIX hyper-parameters: PQN-style parallel Q(lambda), no replay."""

    n_envs: int = 256
    rollout_len: int = 16  # steps per env between updates
    lr: float = 1e-3
    gamma: float = 0.9
    td_lambda: float = 0.3  # Q(lambda) targets: 0 = one-step TD, 1 = Monte Carlo within a rollout
    epochs: int = 2  # passes over each rollout
    minibatches: int = 16
    eps_start: float = 1.0
    eps_end: float = 0.05
    eps_anneal_frac: float = 0.1  # share of the budget over which epsilon decays linearly
    max_grad_norm: float = 1.0
    hidden: int = 128
    mixer_embed: int = 32

    def __post_init__(self) -> None:
        check_hparam_fields(self, may_be_zero=frozenset({"eps_end", "eps_anneal_frac", "td_lambda"}))
        require(0.0 < self.gamma <= 1.0, f"hparam gamma must be in (0, 1], got {self.gamma}")
        for name in ("eps_start", "eps_end", "eps_anneal_frac", "td_lambda"):
            value = getattr(self, name)
            require(0.0 <= value <= 1.0, f"hparam {name} must be in [0, 1], got {value}")


class VDNMixer(nn.Module):
    def forward(self, agent_q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """agent_q [M, N], state [M, S] (unused) -> Q_tot [M]."""
        return agent_q.sum(dim=-1)


class QMixer(nn.Module):
    """Two-layer mixing network whose weights are produced from the global state."""

    def __init__(self, n_agents: int, state_dim: int, embed: int, hyper_hidden: int) -> None:
        super().__init__()
        self.n_agents, self.embed = n_agents, embed
        self.hyper_w1 = nn.Sequential(
            nn.Linear(state_dim, hyper_hidden), nn.ReLU(), nn.Linear(hyper_hidden, n_agents * embed)
        )
        self.hyper_b1 = nn.Linear(state_dim, embed)
        self.hyper_w2 = nn.Sequential(
            nn.Linear(state_dim, hyper_hidden), nn.ReLU(), nn.Linear(hyper_hidden, embed)
        )
        self.hyper_b2 = nn.Sequential(nn.Linear(state_dim, embed), nn.ReLU(), nn.Linear(embed, 1))

    def forward(self, agent_q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """agent_q [M, N], state [M, S] -> Q_tot [M]."""
        w1 = torch.abs(self.hyper_w1(state)).view(-1, self.n_agents, self.embed)  # [M, N, E] >= 0
        mixed = torch.bmm(agent_q.unsqueeze(1), w1).squeeze(1)  # [M, E]
        hidden = F.elu(mixed + self.hyper_b1(state))  # [M, E]
        w2 = torch.abs(self.hyper_w2(state))  # [M, E] >= 0
        return (hidden * w2).sum(dim=-1) + self.hyper_b2(state).squeeze(-1)


def lambda_returns(
    reward: torch.Tensor,
    truncated: torch.Tensor,
    next_value: torch.Tensor,
    own_value: torch.Tensor,
    gamma: float,
    lam: float,
) -> torch.Tensor:
    """Q(lambda) targets G [T, B].

    reward [T, B]; truncated [T, B] (1 where the step hit the time limit: its next obs
    belongs to a new episode); next_value [T, B] = V(s_{t+1}); own_value [T, B] =
    Q_tot(o_t, a_t; s_t) of the collecting network, the target of truncated steps.
    """
    targets = torch.empty_like(reward)
    running = next_value[-1]  # [B] the bootstrap after the last step
    for t in reversed(range(reward.shape[0])):
        blended = (1.0 - lam) * next_value[t] + lam * running if t < reward.shape[0] - 1 else running
        running = torch.where(truncated[t] > 0, own_value[t], reward[t] + gamma * blended)
        targets[t] = running
    return targets


def train_value_decomposition(
    meta: PolicyMeta, hp: ValueDecompositionHparams, runs: list[SeedRun], centralised: bool
) -> list[tuple[Policy, dict[str, Any]]]:
    """Train QMIX (CENTRALISED: a mixer on the global state) or VDN (a sum) for each seed of
    RUNS, one after another, each on its own random stream; returns per seed the shared
    Q-network as the policy and the learner state to continue from."""
    trained = []
    for run in runs:
        with run.rng:
            trained.append(train_one_seed(meta, hp, run.env, run.resume, centralised))
    return trained


def train_one_seed(
    meta: PolicyMeta, hp: ValueDecompositionHparams, env: HookedEnv, resume: dict[str, Any] | None, centralised: bool
) -> tuple[Policy, dict[str, Any]]:
    """One seed's VDN or QMIX on `env` until `env.finished`, from the learner state RESUME when given."""
    n_envs, n_agents = env.n_envs, env.n_agents
    obs_dim, state_dim, horizon = env.obs_dim, env.state_dim, hp.rollout_len

    q_net = Policy(meta)
    mixer = QMixer(n_agents, state_dim + 1, hp.mixer_embed, hp.hidden) if centralised else VDNMixer()
    params = [*q_net.parameters(), *mixer.parameters()]
    optimizer = FlatAdam(StackedParameters([params]).flat, lr=hp.lr, rectified=True)  # RAdam
    if resume is not None:
        q_net.load_state_dict(resume["q_net"])
        mixer.load_state_dict(resume["mixer"])
        optimizer.load_state_dict(resume["optimizer"])
    anneal_steps = hp.eps_anneal_frac * env.total_steps

    def epsilon(done_steps: int) -> float:
        if anneal_steps == 0:
            return hp.eps_end
        fraction = min(1.0, done_steps / anneal_steps)
        return hp.eps_start + (hp.eps_end - hp.eps_start) * fraction

    def mixer_state() -> torch.Tensor:
        """[B, S + 1]: global state and elapsed episode fraction (the time limit) for the mixer."""
        return torch.cat([env.global_state(), env.elapsed().unsqueeze(-1)], dim=-1)

    obs_buf = torch.zeros(horizon, n_envs, n_agents, obs_dim)  # [T, B, N, D']
    state_buf = torch.zeros(horizon + 1, n_envs, state_dim + 1)  # [T + 1, B, S + 1]
    greedy_q_buf = torch.zeros(horizon + 1, n_envs, n_agents)  # [T + 1, B, N] max_a Q_i
    chosen_q_buf = torch.zeros(horizon, n_envs, n_agents)  # [T, B, N] Q_i(o_t, a_t)
    actions_buf = torch.zeros(horizon, n_envs, n_agents, dtype=torch.long)  # [T, B, N]
    reward_buf = torch.zeros(horizon, n_envs)  # [T, B] team reward
    done_buf = torch.zeros(horizon, n_envs)  # [T, B] 1 = the step hit the time limit
    n_samples = horizon * n_envs
    minibatch_size = math.ceil(n_samples / hp.minibatches)

    obs, state = env.observe(), mixer_state()  # [B, N, D'], [B, S + 1]
    while not env.finished:
        with torch.inference_mode():
            eps = epsilon(env.done_steps)
            for t in range(horizon):
                q_values = q_net(obs)  # [B, N, A]
                greedy_q, greedy = q_values.max(dim=-1)  # [B, N]
                explore = torch.rand(n_envs, n_agents) < eps
                actions = torch.where(explore, env.random_actions(), greedy)
                obs_buf[t], state_buf[t], greedy_q_buf[t], actions_buf[t] = obs, state, greedy_q, actions
                chosen_q_buf[t] = q_values.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
                obs, reward, done = env.step(actions)
                state = mixer_state()
                reward_buf[t], done_buf[t] = reward.sum(dim=-1), done.float()
            state_buf[horizon], greedy_q_buf[horizon] = state, q_net(obs).max(dim=-1).values
            values = mixer(greedy_q_buf.flatten(0, 1), state_buf.flatten(0, 1)).view(horizon + 1, n_envs)
            own = mixer(chosen_q_buf.flatten(0, 1), state_buf[:-1].flatten(0, 1)).view(horizon, n_envs)
            targets = lambda_returns(reward_buf, done_buf, values[1:], own, hp.gamma, hp.td_lambda)

        flat_obs, flat_actions = obs_buf.flatten(0, 1), actions_buf.flatten(0, 1)  # [T*B, N, D'], [T*B, N]
        flat_state, flat_targets = state_buf[:-1].flatten(0, 1), targets.flatten()  # [T*B, S + 1], [T*B]
        learnable = torch.nonzero(done_buf.flatten() == 0).squeeze(-1)  # [K] steps with a TD target
        samples = (flat_obs, flat_actions, flat_state, flat_targets)
        for _ in range(hp.epochs):
            # one gather per tensor and epoch, then contiguous slices (the same minibatches)
            order = learnable[torch.randperm(learnable.numel())]  # [K]
            shuffled = [tensor[order].split(minibatch_size) for tensor in samples]
            for obs_m, actions_m, state_m, targets_m in zip(*shuffled, strict=True):
                chosen_q = q_net(obs_m).gather(-1, actions_m.unsqueeze(-1)).squeeze(-1)  # [M, N]
                loss = F.mse_loss(mixer(chosen_q, state_m), targets_m)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, hp.max_grad_norm)
                optimizer.step()
        env.end_iteration(q_net)
    return q_net, {"q_net": q_net.state_dict(), "mixer": mixer.state_dict(), "optimizer": optimizer.state_dict()}
