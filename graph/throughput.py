"""A spec's training throughput, measured before any run (the chat's cost estimate).

It trains one real iteration where a run of the spec would train: here for a native env,
in a train job of the sandbox the run would get for a custom env (`context.env_sandbox`),
so the app never runs jobs itself.
"""

from __future__ import annotations

from lero.graph.configuration import RunError, RunSpec
from lero.graph.context import env_sandbox, failure_line
from lero.sandbox import TRAIN, Job
from lero.training import TrainConfig, train
from lero.training.envs.registry import ConfirmedEnv


def measure_throughput(spec: RunSpec, confirmed: ConfirmedEnv | None = None) -> tuple[float, int]:
    """(steps/s, env steps per training iteration) from one training iteration of the spec's
    env and algorithm (budgets are rounded up to whole iterations). RunError (one line)."""
    with env_sandbox(spec, confirmed) as (env, sandbox):
        if sandbox is not None:
            job = Job(kind=TRAIN.name, code=None, env=env, algo=spec.algo, steps=1, eval_episodes=1, hparams=spec.hparams)
            result = sandbox.run_job(job)
            if result.status != "ok":
                raise RunError(f"cannot train on {spec.env}: {failure_line(result)}")
            return result.metrics["steps_per_s"], int(result.metrics["steps"])
        name = env.pop("name")
        result = train(TrainConfig(env=name, env_kwargs=env, algo=spec.algo, steps=1, eval_episodes=1,
                                   hparams=spec.hparams))
        return result.steps_per_s, result.steps
