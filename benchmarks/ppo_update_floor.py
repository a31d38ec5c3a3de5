"""How fast can any MAPPO update at BenchMARL's settings go on this CPU? The bare floor.

    python -m benchmarks.ppo_update_floor --benchmarl-python /tmp/venv-benchmarl/bin/python \
        --task navigation --threads 1 --json floor.json

At BenchMARL's on-policy defaults (`benchmarks.vs_benchmarl.SHARED`: 45 passes of 15
minibatches over a 6000-frame batch) a MAPPO spends nearly all of its time in the
minibatch steps, which are the same matrix products whoever writes them. This times only
those products, with nothing around them: per minibatch step, the shared actor (an
agent's observation + its one-hot id -> action logits) forward and backward on every
agent's rows, the centralised critic (the joint state + tau -> one value per agent) on
every env step's row, one clipped-gradient Adam step, on random data of the task's real
sizes (its `TaskSpec` through `make_env`). A trainer's joint steps/s at these settings
cannot exceed `frames per batch / (seconds per minibatch step x steps per batch)`, the
`floor_steps_per_s` printed here; how close lero and BenchMARL come to it says how much
either can still gain.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

from benchmarks.vs_benchmarl import SHARED, task_kwargs
from lero.training.envs.registry import make_env
from lero.training.networks import mlp


def minibatch_seconds(obs_dim: int, state_dim: int, n_agents: int, n_actions: int, rows: int, hidden: int,
                      repeats: int) -> float:  # fmt: skip
    """Seconds of one MAPPO minibatch step (ROWS env steps), the median of REPEATS batches of 20."""
    actor = mlp(obs_dim + n_agents, hidden, n_actions)
    critic = mlp(state_dim + 1, hidden, n_agents)
    params = [*actor.parameters(), *critic.parameters()]
    optimiser = torch.optim.Adam(params, lr=SHARED["lr"])
    obs = torch.randn(rows * n_agents, obs_dim + n_agents)  # [M*N, obs + id]
    state = torch.randn(rows, state_dim + 1)  # [M, state + tau]
    actions = torch.randint(n_actions, (rows * n_agents,))  # [M*N]
    targets = torch.randn(rows, n_agents)  # [M, N]
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(20):
            logp = torch.log_softmax(actor(obs), -1).gather(1, actions[:, None]).squeeze(1)  # [M*N]
            loss = -logp.mean() + ((critic(state) - targets) ** 2).mean()
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, SHARED["max_grad_norm"])
            optimiser.step()
        times.append((time.perf_counter() - started) / 20)
    return sorted(times)[len(times) // 2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmarl-python", type=Path, required=True,
                        help="the interpreter with BenchMARL, which gives the task's YAML")
    parser.add_argument("--task", default="navigation", help="a VMAS scenario (BenchMARL's task YAML)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    env = make_env(f"vmas:{args.task}", 1, **task_kwargs(args))
    frames = SHARED["n_envs"] * SHARED["rollout_len"]
    rows = frames // SHARED["minibatches"]
    steps_per_batch = SHARED["epochs"] * SHARED["minibatches"]
    seconds = minibatch_seconds(env.obs_dim, env.state_dim, env.n_agents, env.n_actions, rows, SHARED["hidden"],
                                args.repeats)  # fmt: skip
    result = {
        "task": args.task, "threads": args.threads, "obs_dim": env.obs_dim, "state_dim": env.state_dim,
        "n_agents": env.n_agents, "n_actions": env.n_actions, "minibatch_rows": rows,
        "steps_per_batch": steps_per_batch, "minibatch_s": seconds,
        "update_s_per_batch": seconds * steps_per_batch,
        "floor_steps_per_s": frames / (seconds * steps_per_batch), "load": os.getloadavg()[0],
        "torch": torch.__version__,
    }  # fmt: skip
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
