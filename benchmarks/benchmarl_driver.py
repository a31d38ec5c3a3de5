"""Train BenchMARL's MAPPO on one VMAS task in BenchMARL's own interpreter; print one JSON line.

Run by benchmarks/vs_benchmarl.py with the interpreter BenchMARL is installed in (never
lero's: BenchMARL is no dependency of lero, and nothing of lero is imported here):

    BENCHMARL_PYTHON benchmarks/benchmarl_driver.py --config '{"task": "navigation", ...}'
    BENCHMARL_PYTHON benchmarks/benchmarl_driver.py --describe navigation   # the task's YAML

The JSON line: frames (joint env steps), setup_s (building the experiment), run_s
(``Experiment.run``, collection and training; ``threads`` in the config sets torch's), the curve of (seconds since the run started,
mean per-agent return of the episodes that ended in that batch) per collected batch, the
configuration in effect and the versions.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from typing import Any

from benchmarl.experiment.callback import Callback  # this file runs in BenchMARL's interpreter only


def build(config: dict, save_folder: str, callbacks: list) -> Any:
    """BenchMARL's MAPPO experiment on the VMAS task at ``config``'s settings (discrete actions,
    no evaluation, no loggers, no checkpoints)."""
    import torch
    from benchmarl.algorithms import MappoConfig
    from benchmarl.environments import VmasTask
    from benchmarl.experiment import Experiment, ExperimentConfig
    from benchmarl.models.mlp import MlpConfig

    experiment = ExperimentConfig.get_from_yaml()
    experiment.prefer_continuous_actions = False  # lero's policies are discrete
    experiment.max_n_frames = config["steps"]
    experiment.on_policy_collected_frames_per_batch = config["n_envs"] * config["rollout_len"]
    experiment.on_policy_n_envs_per_worker = config["n_envs"]
    experiment.on_policy_minibatch_size = config["n_envs"] * config["rollout_len"] // config["minibatches"]
    experiment.on_policy_n_minibatch_iters = config["epochs"] * config["minibatches"]
    experiment.lr = config["lr"]
    experiment.gamma = config["gamma"]
    experiment.clip_grad_val = config["max_grad_norm"]
    experiment.evaluation = False
    experiment.loggers = []
    experiment.create_json = False
    experiment.checkpoint_interval = 0
    experiment.checkpoint_at_end = False
    experiment.save_folder = save_folder
    task = getattr(VmasTask, config["task"].upper()).get_from_yaml()
    task.config.update(config["task_kwargs"])
    algorithm = MappoConfig.get_from_yaml()
    algorithm.entropy_coef = config["ent_coef"]
    algorithm.clip_epsilon = config["clip_eps"]
    algorithm.lmbda = config["gae_lambda"]
    algorithm.critic_coef = config["vf_coef"]
    width = [config["hidden"], config["hidden"]]
    model = MlpConfig(num_cells=width, activation_class=torch.nn.Tanh, layer_class=torch.nn.Linear)
    critic = MlpConfig(num_cells=width, activation_class=torch.nn.Tanh, layer_class=torch.nn.Linear)
    return Experiment(task=task, algorithm_config=algorithm, model_config=model, critic_model_config=critic,
                      seed=config["seed"], config=experiment, callbacks=callbacks)


class Returns(Callback):
    """Per collected batch: (seconds since ``start``, the mean per-agent return of the episodes
    that ended in it). Defined at module level: BenchMARL pickles its callbacks."""

    def __init__(self) -> None:
        super().__init__()
        self.start, self.curve = 0.0, []

    def on_batch_collected(self, batch: Any) -> None:
        done = batch.get(("next", "done")).squeeze(-1)  # [E, T]
        returns = batch.get(("next", "agents", "episode_reward")).squeeze(-1)  # [E, T, N]
        if bool(done.any()):
            self.curve.append((time.perf_counter() - self.start, float(returns[done].mean())))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", help="JSON: task, task_kwargs, steps, seed and the PPO settings")
    parser.add_argument("--describe", metavar="TASK", help="print the VMAS task's BenchMARL YAML and exit")
    args = parser.parse_args()
    if args.describe:
        from benchmarl.environments import VmasTask

        print(json.dumps(dict(getattr(VmasTask, args.describe.upper()).get_from_yaml().config)))
        return 0
    config = json.loads(args.config)
    returns = Returns()
    import benchmarl
    import torch
    import torchrl

    if config.get("threads"):
        torch.set_num_threads(config["threads"])

    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        experiment = build(config, folder, [returns])
        setup_s = time.perf_counter() - started
        returns.start = time.perf_counter()
        experiment.run()
        run_s = time.perf_counter() - returns.start
    print(json.dumps({"frames": int(experiment.total_frames), "setup_s": setup_s, "run_s": run_s,
                      "curve": returns.curve, "config": config,
                      "versions": {"benchmarl": benchmarl.__version__, "torchrl": torchrl.__version__,
                                   "torch": torch.__version__}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
