"""benchmarks.vs_benchmarl: BenchMARL's side trains at lero's settings.

BenchMARL's `on_policy_n_minibatch_iters` counts passes over the batch, each of all its
minibatches; setting it to epochs x minibatches made BenchMARL take 15x lero's gradient
steps per batch, which was the whole learning gap at 60k steps on navigation.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from benchmarks import vs_benchmarl
from lero.training.networks import mlp

DRIVER = Path(vs_benchmarl.__file__).with_name("benchmarl_driver.py")


@pytest.mark.parametrize("epochs, minibatches", [(45, 15), (3, 15), (4, 7)])
def test_benchmarl_takes_lero_s_minibatch_steps_per_batch(epochs: int, minibatches: int) -> None:
    settings = {**vs_benchmarl.SHARED, "epochs": epochs, "minibatches": minibatches}
    experiment = vs_benchmarl.benchmarl_settings(settings)["experiment"]
    assert vs_benchmarl.benchmarl_steps_per_batch(experiment) == epochs * minibatches


def test_benchmarl_s_networks_are_lero_s() -> None:
    model = vs_benchmarl.benchmarl_settings(vs_benchmarl.SHARED)["model"]
    assert model["activation"] == type(mlp(4, 8, 2)[1]).__name__ == "ReLU"
    assert model["num_cells"] == [vs_benchmarl.SHARED["hidden"]] * 2


def test_a_run_with_other_steps_per_batch_stops() -> None:
    vs_benchmarl.check_steps_per_batch([675, 675], vs_benchmarl.SHARED)
    with pytest.raises(SystemExit, match=r"BenchMARL took \[45\] minibatch steps per batch, lero takes 675"):
        vs_benchmarl.check_steps_per_batch([45], vs_benchmarl.SHARED)


def test_a_reference_that_ended_no_episode_gives_no_time_to_its_return() -> None:
    """A budget under one episode logs no return: the summary says None, it does not raise."""
    row = {"steps": 20, "steps_per_s": 10.0, "eval_return": None, "train_s": 2.0, "load_before": 0.0,
           "load_after": 0.0, "curve_times": [], "curve_returns": []}  # fmt: skip
    peer = {**row, "row": vs_benchmarl.PEER, "final_return": vs_benchmarl.final_return([])}
    lero = {**row, "row": "lero-mappo", "steps_per_s": 30.0, "curve_times": [1.0], "curve_returns": [0.5],
            "final_return": vs_benchmarl.final_return([0.5])}  # fmt: skip
    lines = vs_benchmarl.summarize([[peer, lero]])
    assert [(x["row"], x["train_return"], x["s_to_benchmarl_return"], x["x_benchmarl"]) for x in lines] == [
        (vs_benchmarl.PEER, None, None, 1.0), ("lero-mappo", 0.5, None, 3.0)]


@pytest.mark.skipif(not os.environ.get("LERO_BENCHMARL_PYTHON"),
                    reason="LERO_BENCHMARL_PYTHON names no interpreter with BenchMARL and vmas")
def test_the_driver_reports_the_steps_benchmarl_took() -> None:
    """BenchMARL itself, one tiny batch: 3 epochs x 2 minibatches are 6 steps."""
    settings = {**vs_benchmarl.SHARED, "n_envs": 2, "rollout_len": 10, "minibatches": 2, "epochs": 3, "hidden": 8}
    kwargs = {"max_steps": 10, "n_agents": 2}
    config = {"task": "navigation", "task_kwargs": kwargs, "steps": 20, "seed": 0, "threads": 1,
              **vs_benchmarl.benchmarl_settings(settings)}  # fmt: skip
    done = subprocess.run([os.environ["LERO_BENCHMARL_PYTHON"], str(DRIVER), "--config", json.dumps(config)],
                          capture_output=True, text=True, check=True, timeout=300)  # fmt: skip
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["steps_per_batch"] == [6]
    vs_benchmarl.check_steps_per_batch(out["steps_per_batch"], settings)
