"""A warm runner imports, while it waits, everything a job imports after it arrives (the
engine), and no job process ever imports torch's compiler stack: torch.optim loaded
`torch._dynamo` on a job's first optimizer, 1.3 s of CPU in every container."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.sandbox.test_contract import VALID

REPO = Path(__file__).resolve().parents[2]
PROBE = """
import json, sys
from lero.sandbox import harness
from lero.training import TrainConfig, evaluate_episodes, load_candidate, train

harness.preload()
preloaded = set(sys.modules)
hooks = load_candidate(sys.argv[1])
for algo in ("mappo", "qmix"):
    result = train(TrainConfig(algo=algo, steps=800, hparams={"n_envs": 16, "rollout_len": 25}, threads=1),
                   hooks, evaluation=False)
evaluate_episodes(result.policy, "simple_spread", {}, hooks.enhance_observation, episodes=4, seed=1)
print(json.dumps({"late": sorted(set(sys.modules) - preloaded), "all": sorted(sys.modules)}))
"""
HEAVY = ("torch._dynamo", "torch._inductor", "torch.fx", "sympy")
COMPILER = ("torch._dynamo", "torch._inductor", "sympy")  # `import torch` loads parts of torch.fx


def test_a_train_and_an_evaluation_import_nothing_heavy_after_the_preload_nor_at_all() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, VALID], capture_output=True, text=True, cwd=REPO,
                          timeout=300, check=True)  # fmt: skip
    modules = json.loads(done.stdout.splitlines()[-1])
    assert [m for m in modules["late"] if m.startswith(("lero", *HEAVY))] == [], modules["late"]
    assert [m for m in modules["all"] if m.startswith(COMPILER)] == [], "a job process imported torch's compiler"
