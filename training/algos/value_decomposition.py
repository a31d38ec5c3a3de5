"""VDN (Sunehag et al. 2018) and QMIX (Rashid et al. 2018); the mixer is the only difference.

One feed-forward Q-network shared by all agents gives utilities Q_i(o_i, a_i)
(local enhanced obs + agent one-hot). A mixer combines the chosen utilities
into Q_tot, trained by TD on the team reward r = sum_i r_i:
  VDN    Q_tot = sum_i Q_i
  QMIX   Q_tot = f(Q_1..Q_N; s, tau), monotonic in every Q_i: the hypernetwork
         weights generated from the global state are made non-negative; tau,
         the elapsed episode fraction, lets the mixer model the time limit.
Target: y = r + gamma (1 - done) Q_tot^target(o', argmax_a Q_i^online(o', a); s')
(double Q). Epsilon-greedy exploration, linear schedule; hard target updates.
Monotonicity makes the greedy per-agent argmax also maximise Q_tot, so
execution is decentralised. Time-limit ends count as terminal, as in PyMARL.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from lero.training.algos.hooked_env import HookedEnv
from lero.training.algos.replay import ReplayBuffer
from lero.training.config import TrainConfig, ValueDecompositionHparams
from lero.training.policy import Policy, policy_meta
from torch import nn


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


def train_value_decomposition(
    cfg: TrainConfig, hp: ValueDecompositionHparams, env: HookedEnv
) -> Policy:
    """Train VDN (`cfg.algo == "vdn"`) or QMIX on `env`; returns the shared Q-network as the policy."""
    n_envs, n_agents = env.n_envs, env.n_agents
    obs_dim, state_dim = env.obs_dim, env.state_dim

    q_net = Policy(policy_meta(cfg.algo, env, hp.hidden, cfg.env, cfg.env_kwargs))
    mixer = (
        VDNMixer()
        if cfg.algo == "vdn"
        else QMixer(n_agents, state_dim + 1, hp.mixer_embed, hp.hidden)
    )
    target_q_net, target_mixer = copy.deepcopy(q_net), copy.deepcopy(mixer)
    params = [*q_net.parameters(), *mixer.parameters()]
    optimizer = torch.optim.Adam(params, lr=hp.lr, foreach=True)
    buffer = ReplayBuffer(
        hp.buffer_size,
        shapes={
            "obs": (n_agents, obs_dim),
            "actions": (n_agents,),
            "reward": (),
            "next_obs": (n_agents, obs_dim),
            "state": (state_dim + 1,),
            "next_state": (state_dim + 1,),
            "done": (),
        },
        dtypes={"actions": torch.long},
    )
    anneal_steps = hp.eps_anneal_frac * cfg.steps

    def epsilon(done_steps: int) -> float:
        if anneal_steps == 0:
            return hp.eps_end
        return max(
            hp.eps_end, hp.eps_start - (hp.eps_start - hp.eps_end) * done_steps / anneal_steps
        )

    def td_update() -> None:
        batch = buffer.sample(hp.batch_size)
        q_values = q_net(batch["obs"])  # [M, N, A]
        chosen_q = q_values.gather(-1, batch["actions"].unsqueeze(-1)).squeeze(-1)  # [M, N]
        q_tot = mixer(chosen_q, batch["state"])  # [M]
        with torch.no_grad():
            next_q_target = target_q_net(batch["next_obs"])  # [M, N, A]
            selector = q_net(batch["next_obs"]) if hp.double_q else next_q_target
            next_actions = selector.argmax(dim=-1, keepdim=True)  # [M, N, 1]
            next_chosen = next_q_target.gather(-1, next_actions).squeeze(-1)  # [M, N]
            target = batch["reward"] + hp.gamma * (1.0 - batch["done"]) * target_mixer(
                next_chosen, batch["next_state"]
            )
        loss = F.mse_loss(q_tot, target)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(params, hp.max_grad_norm)
        optimizer.step()

    n_iterations = math.ceil(cfg.steps / n_envs)
    learning_starts = max(hp.learning_starts, hp.batch_size)
    n_updates = 0

    def mixer_state() -> torch.Tensor:
        """[B, S + 1]: global state and elapsed episode fraction (the time limit) for the mixer."""
        return torch.cat([env.global_state(), env.elapsed().unsqueeze(-1)], dim=-1)

    obs, state = env.observe(), mixer_state()  # [B, N, D'], [B, S + 1]
    for _ in range(n_iterations):
        with torch.inference_mode():
            greedy = q_net(obs).argmax(dim=-1)  # [B, N]
            explore = torch.rand(n_envs, n_agents) < epsilon(env.done_steps)
            actions = torch.where(explore, env.random_actions(), greedy)
            next_obs, reward, done = env.step(actions)
            next_state = mixer_state()
            # A done slot's next_obs is already the new episode's; it is masked by (1 - done).
            buffer.add(
                obs=obs,
                actions=actions,
                reward=reward.sum(dim=-1),
                next_obs=next_obs,
                state=state,
                next_state=next_state,
                done=done.float(),
            )
        obs, state = next_obs, next_state
        if buffer.size >= learning_starts:
            for _ in range(hp.updates_per_step):
                td_update()
                n_updates += 1
                if n_updates % hp.target_update_interval == 0:
                    target_q_net.load_state_dict(q_net.state_dict())
                    target_mixer.load_state_dict(mixer.state_dict())
        env.end_iteration()
    return q_net
