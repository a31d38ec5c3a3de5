"""A warm runner imports, while it waits, everything a job imports after it arrives: the
engine and torch's compiler front end (torch.optim loads `torch._dynamo` on a job's first
optimizer), so none of that lands in a job's slot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.sandbox.test_contract import VALID

REPO = Path(__file__).resolve().parents[2]
PROBE = """
import json, sys
from lero.sandbox import runner
from lero.training import TrainConfig, evaluate_episodes, load_candidate, train

runner.preload()
before = set(sys.modules)
hooks = load_candidate(sys.argv[1])
result = train(TrainConfig(steps=800, hparams={"n_envs": 16, "rollout_len": 25}, threads=1), hooks, evaluation=False)
evaluate_episodes(result.policy, "simple_spread", {}, hooks.enhance_observation, episodes=4, seed=1)
print(json.dumps(sorted(set(sys.modules) - before)))
"""
HEAVY = ("lero", "torch._dynamo", "torch._inductor", "torch.fx", "sympy")


def test_a_train_and_an_evaluation_import_nothing_heavy_after_the_preload() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, VALID], capture_output=True, text=True, cwd=REPO,
                          timeout=300, check=True)  # fmt: skip
    imported_late = json.loads(done.stdout.splitlines()[-1])
    assert [m for m in imported_late if m.startswith(HEAVY)] == [], imported_late
