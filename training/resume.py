"""A learner's state between two jobs of one training plan (successive halving's rungs).

`save_learner` writes what a learner needs to go on (its networks, optimiser moments,
value normaliser) with the plan it belongs to; `load_learner` reads it back with
`weights_only=True` (no pickled code runs) and refuses a state of another plan. The file
comes out of a sandboxed train job, so only other sandboxed jobs load it; the host only
copies its bytes.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import torch

from lero.training.config import TrainConfig
from lero.training.files import LEARNER_FILE


def save_learner(cfg: TrainConfig, done_steps: int, learner: dict[str, Any], path: str | Path) -> Path:
    """Write LEARNER (the learner's own state) after DONE_STEPS of CFG's plan; a directory gets `learner.pt`."""
    path = Path(path)
    if path.is_dir():
        path = path / LEARNER_FILE
    torch.save({"algo": cfg.algo, "env": cfg.env, "steps": cfg.steps, "seed": cfg.seed,
                "done_steps": done_steps, "learner": learner}, path)  # fmt: skip
    return path


def load_learner(cfg: TrainConfig) -> tuple[int, dict[str, Any]]:
    """(env steps done, learner state) of the file `cfg.resume`; ValueError unless it is a
    state of CFG's plan (algorithm, env, steps, seed). A state already at or past
    `cfg.stop_at` trains nothing more (a rung shorter than one iteration)."""
    path = Path(str(cfg.resume))
    if path.is_dir():
        path = path / LEARNER_FILE
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError) as error:
        raise ValueError(f"cannot read the learner state {path}: {error}") from error
    plan = {"algo": cfg.algo, "env": cfg.env, "steps": cfg.steps, "seed": cfg.seed}
    if not isinstance(saved, dict) or {k: saved.get(k) for k in plan} != plan:
        raise ValueError(f"the learner state {path} belongs to another plan than {plan}")
    done = saved.get("done_steps")
    if not isinstance(done, int) or done <= 0:
        raise ValueError(f"the learner state {path} is at {done!r} env steps, not a trained piece of the plan")
    return done, saved["learner"]
