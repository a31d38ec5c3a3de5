"""MAPPO and IPPO (Yu et al. 2022; de Witt et al. 2020), CleanRL style.

One actor shared by all agents (local obs + agent one-hot). The critic's
input is the only difference between the two:
  MAPPO  V(s, tau)_i    centralised: env.global_state() -> one value head per agent
                        (same function class as V(s, one-hot i), N times cheaper),
  IPPO   V(o_i, tau, i) decentralised: the agent's own (enhanced) obs + agent one-hot.
Both critics also see tau, the elapsed fraction of the episode: episodes end
by a time limit, and without tau the value of a state is ambiguous. The
critic is used only in training, so this does not leak into execution.

Per iteration: roll out T steps in B envs, compute GAE advantages on the
per-agent training reward, then `epochs` passes of clipped-PPO minibatch
updates. Values are learnt in normalised units (running mean/std of returns).
With tau in the critic, the time-limit end is a true terminal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from lero.training.algos.hooked_env import HookedEnv
from lero.training.networks import RunningMeanStd, flatten_parameters, mlp, with_agent_id
from lero.training.optim import FlatAdam
from lero.training.policy import Policy, PolicyMeta
from lero.training.validation import check_hparam_fields, require

ACTOR_OUT_GAIN = 0.01  # near-uniform initial logits (CleanRL): early rollouts explore


@dataclass(frozen=True)
class PPOHparams:
    """MAPPO / IPPO hyper-parameters (defaults tuned for simple_spread, 64-unit MLPs)."""

    n_envs: int = 512
    rollout_len: int = 25
    lr: float = 2e-3
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    value_clip_eps: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 1.0
    epochs: int = 3
    minibatches: int = 4
    max_grad_norm: float = 10.0
    hidden: int = 64

    def __post_init__(self) -> None:
        check_hparam_fields(self, may_be_zero=frozenset({"ent_coef", "gae_lambda"}))
        require(0.0 < self.gamma <= 1.0, f"hparam gamma must be in (0, 1], got {self.gamma}")
        require(
            0.0 <= self.gae_lambda <= 1.0,
            f"hparam gae_lambda must be in [0, 1], got {self.gae_lambda}",
        )


def train_ppo(
    meta: PolicyMeta, hp: PPOHparams, env: HookedEnv, resume: dict[str, Any] | None = None
) -> tuple[Policy, dict[str, Any]]:
    """Train MAPPO (`meta.algo == "mappo"`) or IPPO on `env` until `env.finished`, from the
    learner state RESUME when given; returns the actor and the learner state to continue from."""
    n_envs, n_agents, n_actions, obs_dim = env.n_envs, env.n_agents, env.n_actions, env.obs_dim
    centralised = meta.algo == "mappo"

    policy = Policy(meta, out_gain=ACTOR_OUT_GAIN)
    if centralised:
        critic_net = mlp(env.state_dim + 1, hp.hidden, n_agents, out_gain=1.0)
    else:
        critic_net = mlp(obs_dim + 1 + n_agents, hp.hidden, 1, out_gain=1.0)

    def critic(obs: torch.Tensor, state: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        """Normalised values [..., N] from tau [...] and obs [..., N, D'] (IPPO) or state [..., S] (MAPPO)."""
        if centralised:
            return critic_net(torch.cat([state, tau.unsqueeze(-1)], dim=-1))
        tau_per_agent = tau[..., None, None].expand(*obs.shape[:-1], 1)  # [..., N, 1]
        return critic_net(with_agent_id(torch.cat([obs, tau_per_agent], dim=-1))).squeeze(-1)

    params = [*policy.parameters(), *critic_net.parameters()]
    optimizer = FlatAdam(flatten_parameters(params), lr=hp.lr, eps=1e-5)
    value_norm = RunningMeanStd()
    if resume is not None:
        policy.load_state_dict(resume["policy"])
        critic_net.load_state_dict(resume["critic"])
        optimizer.load_state_dict(resume["optimizer"])
        value_norm.load_state_dict(resume["value_norm"])

    horizon = hp.rollout_len  # T
    n_iterations = math.ceil(env.total_steps / (n_envs * horizon))  # of the whole plan
    obs_buf = torch.zeros(horizon + 1, n_envs, n_agents, obs_dim)  # [T+1, B, N, D']
    state_buf = torch.zeros(horizon + 1, n_envs, env.state_dim)  # [T+1, B, S] (MAPPO only)
    tau_buf = torch.zeros(horizon + 1, n_envs)  # [T+1, B] elapsed episode fraction
    action_buf = torch.zeros(horizon, n_envs, n_agents, dtype=torch.long)  # [T, B, N]
    logp_buf = torch.zeros(horizon, n_envs, n_agents)  # [T, B, N]
    reward_buf = torch.zeros(horizon, n_envs, n_agents)  # [T, B, N]
    done_buf = torch.zeros(horizon, n_envs)  # [T, B]

    obs = env.observe()  # [B, N, D']
    while not env.finished:
        iteration = env.done_steps // (n_envs * horizon)  # a continuation starts mid-plan
        if hp.anneal_lr:
            optimizer.lr = hp.lr * (1.0 - iteration / n_iterations)

        # ---- rollout: one policy call and one env step per timestep ----
        with torch.inference_mode():
            for t in range(horizon):
                obs_buf[t] = obs
                tau_buf[t] = env.elapsed()
                if centralised:
                    state_buf[t] = env.global_state()
                log_probs = torch.log_softmax(policy(obs), dim=-1)  # [B, N, A]
                probs = log_probs.exp().reshape(n_envs * n_agents, n_actions)
                action = torch.multinomial(probs, 1).reshape(n_envs, n_agents)  # [B, N]
                logp_buf[t] = log_probs.gather(-1, action.unsqueeze(-1)).squeeze(-1)
                action_buf[t] = action
                obs, reward, done = env.step(action)
                reward_buf[t] = reward
                done_buf[t] = done.float()
            obs_buf[horizon] = obs
            tau_buf[horizon] = env.elapsed()
            if centralised:
                state_buf[horizon] = env.global_state()

            # ---- GAE(gamma, lambda) on denormalised values ----
            old_values_norm = critic(obs_buf, state_buf, tau_buf)  # [T+1, B, N]
            values = value_norm.denormalize(old_values_norm)
            advantages = torch.zeros_like(reward_buf)  # [T, B, N]
            running = torch.zeros(n_envs, n_agents)
            for t in reversed(range(horizon)):
                not_done = (1.0 - done_buf[t]).unsqueeze(-1)  # [B, 1]
                delta = reward_buf[t] + hp.gamma * values[t + 1] * not_done - values[t]
                running = delta + hp.gamma * hp.gae_lambda * not_done * running
                advantages[t] = running
            returns = advantages + values[:-1]  # [T, B, N]
            value_norm.update(returns)
            targets_norm = value_norm.normalize(returns)

        # ---- clipped PPO updates over minibatches of env-steps (all agents of a step together) ----
        n_samples = horizon * n_envs
        b_obs = obs_buf[:-1].reshape(n_samples, n_agents, obs_dim)
        b_state = state_buf[:-1].reshape(n_samples, env.state_dim)
        b_tau = tau_buf[:-1].reshape(n_samples)
        b_actions = action_buf.reshape(n_samples, n_agents)
        b_logp = logp_buf.reshape(n_samples, n_agents)
        b_adv = advantages.reshape(n_samples, n_agents)
        b_adv = (b_adv - b_adv.mean()) / (b_adv.std() + 1e-8)
        b_old_values = old_values_norm[:-1].reshape(n_samples, n_agents)
        b_targets = targets_norm.reshape(n_samples, n_agents)
        minibatch_size = math.ceil(n_samples / hp.minibatches)
        samples = (b_obs, b_state, b_tau, b_actions, b_logp, b_adv, b_old_values, b_targets)
        for _ in range(hp.epochs):
            # one shuffle per tensor and epoch, then contiguous slices: the same minibatches
            # as indexing each tensor per minibatch, with far fewer gathers
            perm = torch.randperm(n_samples)
            shuffled = [tensor[perm].split(minibatch_size) for tensor in samples]
            for obs_m, state_m, tau_m, actions_m, logp_m, adv, old_values, target in zip(
                *shuffled, strict=True
            ):
                log_probs = torch.log_softmax(policy(obs_m), dim=-1)  # [M, N, A]
                new_logp = log_probs.gather(-1, actions_m.unsqueeze(-1)).squeeze(-1)  # [M, N]
                entropy = -(log_probs.exp() * log_probs).sum(-1).mean()
                ratio = torch.exp(new_logp - logp_m)
                policy_loss = -torch.min(
                    ratio * adv, torch.clamp(ratio, 1.0 - hp.clip_eps, 1.0 + hp.clip_eps) * adv
                ).mean()

                new_values = critic(obs_m, state_m, tau_m)  # [M, N]
                clipped_values = old_values + torch.clamp(
                    new_values - old_values, -hp.value_clip_eps, hp.value_clip_eps
                )
                value_error = torch.max((new_values - target) ** 2, (clipped_values - target) ** 2)
                value_loss = 0.5 * value_error.mean()

                loss = policy_loss - hp.ent_coef * entropy + hp.vf_coef * value_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, hp.max_grad_norm)
                optimizer.step()
        env.end_iteration(policy)
    learner = {"policy": policy.state_dict(), "critic": critic_net.state_dict(),
               "optimizer": optimizer.state_dict(), "value_norm": value_norm.state_dict()}  # fmt: skip
    return policy, learner
