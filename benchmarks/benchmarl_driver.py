"""Train BenchMARL's MAPPO on one VMAS task in BenchMARL's own interpreter; print one JSON line.

Run by benchmarks/vs_benchmarl.py with the interpreter BenchMARL is installed in (never
lero's: BenchMARL is no dependency of lero, and nothing of lero is imported here):

    BENCHMARL_PYTHON benchmarks/benchmarl_driver.py --config '{"task": "navigation", ...}'
    BENCHMARL_PYTHON benchmarks/benchmarl_driver.py --describe navigation   # the task's YAML

The config's ``experiment``, ``algorithm`` and ``model`` hold the fields set on BenchMARL's
ExperimentConfig, MappoConfig and MlpConfig (``vs_benchmarl.benchmarl_settings``; the
model's ``activation`` names a ``torch.nn`` class). The JSON line: frames (joint env steps),
setup_s (building the experiment), run_s (``Experiment.run``, collection and training;
``threads`` in the config sets torch's), the curve of (seconds since the run started, mean
per-agent return of the episodes that ended in that batch) per collected batch,
steps_per_batch (the minibatch steps BenchMARL took after each batch), the configuration in
effect and the versions.
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
    for key, value in config["experiment"].items():
        setattr(experiment, key, value)
    experiment.evaluation = False
    experiment.loggers = []
    experiment.create_json = False
    experiment.checkpoint_interval = 0
    experiment.checkpoint_at_end = False
    experiment.save_folder = save_folder
    task = getattr(VmasTask, config["task"].upper()).get_from_yaml()
    task.config.update(config["task_kwargs"])
    algorithm = MappoConfig.get_from_yaml()
    for key, value in config["algorithm"].items():
        setattr(algorithm, key, value)
    activation = getattr(torch.nn, config["model"]["activation"])
    width = config["model"]["num_cells"]
    model = MlpConfig(num_cells=width, activation_class=activation, layer_class=torch.nn.Linear)
    critic = MlpConfig(num_cells=width, activation_class=activation, layer_class=torch.nn.Linear)
    return Experiment(task=task, algorithm_config=algorithm, model_config=model, critic_model_config=critic,
                      seed=config["seed"], config=experiment, callbacks=callbacks)


class Returns(Callback):
    """Per collected batch: (seconds since ``start``, the mean per-agent return of the episodes
    that ended in it), and the minibatch steps trained on it. Defined at module level:
    BenchMARL pickles its callbacks."""

    def __init__(self) -> None:
        super().__init__()
        self.start, self.curve, self.steps_per_batch = 0.0, [], []

    def on_batch_collected(self, batch: Any) -> None:
        done = batch.get(("next", "done")).squeeze(-1)  # [E, T]
        returns = batch.get(("next", "agents", "episode_reward")).squeeze(-1)  # [E, T, N]
        if bool(done.any()):
            self.curve.append((time.perf_counter() - self.start, float(returns[done].mean())))

    def on_train_end(self, training_td: Any, group: str) -> None:
        self.steps_per_batch.append(int(training_td.batch_size[0]))  # one row per minibatch step


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
                      "curve": returns.curve, "steps_per_batch": returns.steps_per_batch, "config": config,
                      "versions": {"benchmarl": benchmarl.__version__, "torchrl": torchrl.__version__,
                                   "torch": torch.__version__}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
