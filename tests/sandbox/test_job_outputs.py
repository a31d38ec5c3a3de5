"""A kept train job directory holds only what lero reads back.

A candidate that passed the static check once left 191 MB in `cache/jobs/<job>/` with status
`ok`; successful job directories were kept whole and never pruned. Now a train job's
directory keeps each seed's weights, learner state and checkpoint weights, and nothing else.
"""

from __future__ import annotations

from pathlib import Path

from tests.sandbox.test_jobs import HONEST_OEF, job

HPARAMS = {"n_envs": 16, "rollout_len": 25, "epochs": 1}
LITTERING = HONEST_OEF.replace("import torch\n", """import torch
import os

os.makedirs("scratch/deeper", exist_ok=True)
with open("junk.bin", "wb") as junk:
    junk.write(b"x" * (1 << 20))
with open("scratch/deeper/more.bin", "wb") as junk:
    junk.write(b"y" * (1 << 20))
os.symlink("/etc/passwd", "link-out")
""", 1)


def files_under(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if not p.is_dir() or p.is_symlink())


def test_a_train_job_leaves_only_its_policy(sandbox) -> None:
    result = sandbox.run_job(job("train", LITTERING, steps=800, hparams=HPARAMS, static_check=False,
                                 checkpoint_every=400))
    assert result.status == "ok", result.error
    job_dir = Path(result.policy_dir).parent
    left = files_under(job_dir)
    assert left and all(name.startswith("policy/") and name.endswith(".pt") for name in left), left
    assert "policy/policy.pt" in left and any(name.startswith("policy/step-") for name in left), left
