"""A study's resolved settings (`Plan`): what `study.json` records under `config`, and where
each cell's result lives. Shared by the study's executor and its report."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lero.app.study.spec import StudySpec
from lero.graph.configuration import RunSpec, wall_for_steps
from lero.graph.rundir import RunDir
from lero.graph.safefs import Confined
from lero.sandbox.types import JOB_WALL_S, Limits
from lero.training.defaults import EVAL_SEED


@dataclass(frozen=True)
class Plan:
    """A study's resolved settings: what `study.json` records under `config`."""

    spec: StudySpec
    study_dir: Path
    cache_dir: Path
    code: str
    source: dict[str, Any]  # where the candidate came from
    env: dict[str, Any]  # {"name", **kwargs}, as a sandbox job takes it
    algos: tuple[str, ...]
    steps: int
    sandbox: str
    hparams: dict[str, dict[str, Any]]
    generations: dict[str, Any] | None  # what the run's generations added over generation 0
    executor: dict[str, Any]  # {"executor", "ray_address"}: where jobs run, not what they give
    arm_steps: dict[str, int]  # equal-compute arms (native@<K>x, native@loop) -> their env steps

    def steps_of(self, arm: str) -> int:
        """Env steps one training of ARM takes."""
        return self.arm_steps.get(arm, self.steps)

    def job_limits(self, steps: int) -> Limits:
        """A job training STEPS env steps: the default limits, its wall clock in proportion to
        STEPS beyond the study's own budget (`graph.configuration.wall_for_steps`, the rule a
        run's native@loop has), so native@loop or a 10x arm is not held to a 300k job's hour."""
        return Limits(wall_s=wall_for_steps(JOB_WALL_S, steps, self.steps))

    def checkpoint_every(self, arm: str) -> int | None:
        """Env steps between ARM's interval checkpoints (None: the study keeps none)."""
        return max(1, self.steps_of(arm) // self.spec.checkpoints) if self.spec.checkpoints else None

    def sandbox_spec(self) -> RunSpec:
        """The settings `open_sandbox` reads, as a run with this env would have them."""
        return RunSpec(env=self.env["name"], env_kwargs={}, sandbox=self.sandbox,
                       max_parallel=self.spec.max_parallel, **self.executor)

    def config(self) -> dict[str, Any]:
        """Everything a cell's value depends on: a resumed study must match it."""
        return {
            "source": self.source,
            "env": self.env,
            "algos": list(self.algos),
            "variants": list(self.spec.variants),
            "steps": self.steps,
            "train_seeds": self.spec.train_seeds,
            "eval_seeds": self.spec.eval_seeds,
            "selection_eval_seed": EVAL_SEED,
            "eval_episodes": self.spec.eval_episodes,
            "hparams": self.hparams,
            # keys only when used: a study without them resumes as before
            **({"arm_steps": self.arm_steps} if self.arm_steps else {}),
            **({"checkpoints": self.spec.checkpoints, "validation_seeds": self.spec.validation_seeds}
               if self.spec.checkpoints else {}),
        }

    def folder(self, relative: str = "") -> Path:
        """A folder of the study (`""`: the study's own), made when absent. A run's study
        lives in the run (`runs/<id>/studies/<study_id>/`), which may be hostile: every
        part below the run is made without following a symlink (graph.safefs)."""
        path = self.study_dir / relative if relative else self.study_dir
        if "run_id" not in self.source:  # a file's study, under the person's runs dir
            path.mkdir(parents=True, exist_ok=True)
            return path
        run = self.study_dir.parents[1]
        return Confined(run).ensure_dir("/".join(path.relative_to(run).parts))

    def cell_path(self, algo: str, variant: str, seed: int) -> Path:
        return self.study_dir / "cells" / algo / variant / f"seed-{seed}.json"

    def read_cell(self, algo: str, variant: str, seed: int) -> dict[str, Any] | None:
        """The finished job's record, or None when it has not finished yet."""
        return self.read_json(self.cell_path(algo, variant, seed))

    def read_json(self, path: Path) -> dict[str, Any] | None:
        """A JSON file of the study (None when absent). A run's study is read through its
        RunDir, as every file of a run is (a regular file, no symlink, a size cap, numbers
        bounded; UnsafeFile otherwise); a file's study, under the person's runs dir, as it is."""
        if "run_id" not in self.source:
            return json.loads(path.read_text()) if path.is_file() else None
        run = self.study_dir.parents[1]
        return RunDir(run).read_json("/".join(path.relative_to(run).parts))
