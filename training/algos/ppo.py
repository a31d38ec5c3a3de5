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

from lero.training.networks import (
    RunningMeanStd,
    StackedParameters,
    clip_grad_norm_per_seed,
    clones,
    mlp,
    mlp_layers,
    stacked_mlp,
    with_agent_id,
)
from lero.training.optim import FlatAdam, joined_state, seed_states
from lero.training.policy import Policy, PolicyMeta
from lero.training.seeds import SeedRun
from lero.training.validation import check_hparam_fields, require

ACTOR_OUT_GAIN = 0.01  # near-uniform initial logits (CleanRL): early rollouts explore
# Rows (envs x agents) per seed up to which stacking the seeds pays. benchmarks.seeds_in_one_process,
# 3 seeds, 1 thread: stacked against one after another 1.2-1.3x at 64 envs of 3 agents,
# 1.01-1.13x at 128, 0.88-1.02x at 256, 0.89-0.90x at 512.
STACK_ROWS = 384


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
    meta: PolicyMeta, hp: PPOHparams, runs: list[SeedRun], centralised: bool
) -> list[tuple[Policy, dict[str, Any]]]:
    """Train MAPPO (CENTRALISED: a critic on the global state) or IPPO (a critic on each
    agent's obs) for each seed of RUNS until its env is finished, from its learner state
    when given; returns per seed the actor and the learner state to continue from.

    Small batches are bound by per-op dispatch: there the seeds train in lockstep with their
    networks stacked, each op running once for all of them. Large ones are bound by
    arithmetic, where a stack's larger working set is slower than the seeds one after
    another. Either way each seed is bitwise the seed trained alone (test).
    """
    env = runs[0].env
    if len(runs) > 1 and env.n_envs * env.n_agents > STACK_ROWS:
        return [trained for run in runs for trained in train_stacked(meta, hp, [run], centralised)]
    return train_stacked(meta, hp, runs, centralised)


def train_stacked(
    meta: PolicyMeta, hp: PPOHparams, runs: list[SeedRun], centralised: bool
) -> list[tuple[Policy, dict[str, Any]]]:
    """The seeds of RUNS in lockstep with their networks stacked (`networks.stacked_mlp`):
    every reduction stays within a seed."""
    envs = [run.env for run in runs]
    env = envs[0]  # the seeds' envs are alike (sizes, plan); each has its own episodes
    n_seeds = len(runs)  # S
    n_envs, n_agents, n_actions, obs_dim = env.n_envs, env.n_agents, env.n_actions, env.obs_dim

    policies, critic_nets = [], []
    for run in runs:
        with run.rng:  # each seed initialises its networks from its own stream
            policies.append(Policy(meta, out_gain=ACTOR_OUT_GAIN))
            if centralised:
                critic_nets.append(mlp(env.state_dim + 1, hp.hidden, n_agents, out_gain=1.0))
            else:
                critic_nets.append(mlp(obs_dim + 1 + n_agents, hp.hidden, 1, out_gain=1.0))
        if run.resume is not None:
            policies[-1].load_state_dict(run.resume["policy"])
            critic_nets[-1].load_state_dict(run.resume["critic"])
    stack = StackedParameters([[*p.parameters(), *c.parameters()] for p, c in zip(policies, critic_nets, strict=True)])
    n_actor = len(list(policies[0].parameters()))
    actor_layers, critic_layers = mlp_layers(stack.tensors[:n_actor]), mlp_layers(stack.tensors[n_actor:])
    optimizer = FlatAdam(stack.flat, lr=hp.lr, eps=1e-5)
    value_norm = RunningMeanStd(n_seeds)
    resumes = [run.resume for run in runs]
    if any(resume is not None for resume in resumes):
        if any(resume is None for resume in resumes):
            raise ValueError("either every seed of a job resumes a learner state or none does")
        optimizer.load_state_dict(joined_state([resume["optimizer"] for resume in resumes], stack))
        for seed, resume in enumerate(resumes):
            value_norm.load_state_dict(seed, resume["value_norm"])

    def actor(obs: torch.Tensor) -> torch.Tensor:
        """obs [S, ..., N, D'] -> scores [S, ..., N, A]: each seed's actor on its rows."""
        return policies[0].masked(stacked_mlp(actor_layers, policies[0].inputs(obs)))

    def critic(obs: torch.Tensor, state: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        """Normalised values [S, ..., N] from tau [S, ...] and obs [S, ..., N, D'] (IPPO) or state [S, ..., S'] (MAPPO)."""
        if centralised:
            return stacked_mlp(critic_layers, torch.cat([state, tau.unsqueeze(-1)], dim=-1))
        tau_per_agent = tau[..., None, None].expand(*obs.shape[:-1], 1)  # [S, ..., N, 1]
        return stacked_mlp(critic_layers, with_agent_id(torch.cat([obs, tau_per_agent], dim=-1))).squeeze(-1)

    horizon = hp.rollout_len  # T
    n_iterations = math.ceil(env.total_steps / (n_envs * horizon))  # of the whole plan
    obs_buf = torch.zeros(n_seeds, horizon + 1, n_envs, n_agents, obs_dim)  # [S, T+1, B, N, D']
    state_buf = torch.zeros(n_seeds, horizon + 1, n_envs, env.state_dim)  # [S, T+1, B, S'] (MAPPO only)
    tau_buf = torch.zeros(n_seeds, horizon + 1, n_envs)  # [S, T+1, B] elapsed episode fraction
    action_buf = torch.zeros(n_seeds, horizon, n_envs, n_agents, dtype=torch.long)  # [S, T, B, N]
    logp_buf = torch.zeros(n_seeds, horizon, n_envs, n_agents)  # [S, T, B, N]
    reward_buf = torch.zeros(n_seeds, horizon, n_envs, n_agents)  # [S, T, B, N]
    done_buf = torch.zeros(n_seeds, horizon, n_envs)  # [S, T, B]

    def record_inputs(t: int) -> None:
        """The critic's inputs of timestep t (obs are written by the rollout)."""
        tau_buf[:, t] = torch.stack([e.elapsed() for e in envs])
        if centralised:
            state_buf[:, t] = torch.stack([e.global_state() for e in envs])

    obs = torch.stack([e.observe() for e in envs])  # [S, B, N, D']
    while not env.finished:
        iteration = env.done_steps // (n_envs * horizon)  # a continuation starts mid-plan
        if hp.anneal_lr:
            optimizer.lr = hp.lr * (1.0 - iteration / n_iterations)

        # ---- rollout: one policy call for all seeds, then each seed samples and steps its env ----
        with torch.inference_mode():
            for t in range(horizon):
                obs_buf[:, t] = obs
                record_inputs(t)
                log_probs = torch.log_softmax(actor(obs), dim=-1)  # [S, B, N, A]
                probs = log_probs.exp()
                stepped = []
                for seed, run in enumerate(runs):
                    with run.rng:
                        flat_probs = probs[seed].reshape(n_envs * n_agents, n_actions)
                        action = torch.multinomial(flat_probs, 1).reshape(n_envs, n_agents)  # [B, N]
                        stepped.append((action, *run.env.step(action)))
                action, obs, reward, done = (torch.stack(column) for column in zip(*stepped, strict=True))
                logp_buf[:, t] = log_probs.gather(-1, action.unsqueeze(-1)).squeeze(-1)
                action_buf[:, t] = action
                reward_buf[:, t] = reward
                done_buf[:, t] = done.float()
            obs_buf[:, horizon] = obs
            record_inputs(horizon)

            # ---- GAE(gamma, lambda) on denormalised values ----
            old_values_norm = critic(obs_buf, state_buf, tau_buf)  # [S, T+1, B, N]
            values = value_norm.denormalize(old_values_norm)
            advantages = torch.zeros_like(reward_buf)  # [S, T, B, N]
            running = torch.zeros(n_seeds, n_envs, n_agents)
            for t in reversed(range(horizon)):
                not_done = (1.0 - done_buf[:, t]).unsqueeze(-1)  # [S, B, 1]
                delta = reward_buf[:, t] + hp.gamma * values[:, t + 1] * not_done - values[:, t]
                running = delta + hp.gamma * hp.gae_lambda * not_done * running
                advantages[:, t] = running
            returns = advantages + values[:, :-1]  # [S, T, B, N]
            value_norm.update(returns)
            targets_norm = value_norm.normalize(returns)

        # ---- clipped PPO updates over minibatches of env-steps (all agents of a step together) ----
        n_samples = horizon * n_envs
        b_obs = obs_buf[:, :-1].reshape(n_seeds, n_samples, n_agents, obs_dim)
        b_state = state_buf[:, :-1].reshape(n_seeds, n_samples, env.state_dim)
        b_tau = tau_buf[:, :-1].reshape(n_seeds, n_samples)
        b_actions = action_buf.reshape(n_seeds, n_samples, n_agents)
        b_logp = logp_buf.reshape(n_seeds, n_samples, n_agents)
        b_adv = advantages.reshape(n_seeds, n_samples, n_agents)
        b_adv = (b_adv - b_adv.mean(dim=(1, 2), keepdim=True)) / (b_adv.std(dim=(1, 2), keepdim=True) + 1e-8)
        b_old_values = old_values_norm[:, :-1].reshape(n_seeds, n_samples, n_agents)
        b_targets = targets_norm.reshape(n_seeds, n_samples, n_agents)
        minibatch_size = math.ceil(n_samples / hp.minibatches)
        samples = (b_obs, b_state, b_tau, b_actions, b_logp, b_adv, b_old_values, b_targets)
        seed_rows = torch.arange(n_seeds).unsqueeze(1)  # [S, 1]
        for _ in range(hp.epochs):
            # one shuffle per seed, tensor and epoch, then contiguous slices: the same
            # minibatches as indexing each tensor per minibatch, with far fewer gathers
            perms = []
            for run in runs:
                with run.rng:
                    perms.append(torch.randperm(n_samples))
            perm = torch.stack(perms)  # [S, n]
            shuffled = [tensor[seed_rows, perm].split(minibatch_size, dim=1) for tensor in samples]
            for obs_m, state_m, tau_m, actions_m, logp_m, adv, old_values, target in zip(
                *shuffled, strict=True
            ):
                log_probs = torch.log_softmax(actor(obs_m), dim=-1)  # [S, M, N, A]
                new_logp = log_probs.gather(-1, actions_m.unsqueeze(-1)).squeeze(-1)  # [S, M, N]
                entropy = -(log_probs.exp() * log_probs).sum(-1).mean(dim=(1, 2))  # [S]
                ratio = torch.exp(new_logp - logp_m)
                policy_loss = -torch.min(
                    ratio * adv, torch.clamp(ratio, 1.0 - hp.clip_eps, 1.0 + hp.clip_eps) * adv
                ).mean(dim=(1, 2))  # [S]

                new_values = critic(obs_m, state_m, tau_m)  # [S, M, N]
                clipped_values = old_values + torch.clamp(
                    new_values - old_values, -hp.value_clip_eps, hp.value_clip_eps
                )
                value_error = torch.max((new_values - target) ** 2, (clipped_values - target) ** 2)
                value_loss = 0.5 * value_error.mean(dim=(1, 2))  # [S]

                loss = policy_loss - hp.ent_coef * entropy + hp.vf_coef * value_loss  # [S]
                optimizer.zero_grad()
                loss.sum().backward()  # a seed's loss reaches only its own parameters
                clip_grad_norm_per_seed(stack.tensors, hp.max_grad_norm)
                optimizer.step()
        for run, policy in zip(runs, policies, strict=True):
            run.env.end_iteration(policy)
    optimizer_states = seed_states(optimizer.state_dict(), stack)
    return [
        (policy, {"policy": clones(policy.state_dict()), "critic": clones(critic_net.state_dict()),
                  "optimizer": optimizer_states[seed], "value_norm": value_norm.state_dict(seed)})
        for seed, (policy, critic_net) in enumerate(zip(policies, critic_nets, strict=True))
    ]  # fmt: skip
