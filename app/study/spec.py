"""What a study measures: `StudySpec`, validated once at the edge (CLI, library, benchmark).

A study retrains one candidate's four variants (graph/study/variants.py) for a list of
algorithms x fresh training seeds, and evaluates every policy on held-out episodes:
evaluation seeds disjoint from the one the loop selected with (`training.defaults.EVAL_SEED`).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from lero.app.study.variants import LOOP_ARM, VARIANTS, check_arm
from lero.graph.configuration import DEFAULT_RUNS_DIR, MAX_EVAL_EPISODES, MAX_STEPS, validated
from lero.training.defaults import EVAL_EPISODES, EVAL_SEED

FIRST_TRAIN_SEED = 1000  # the loop trains with seeds 0..seeds-1: studies use fresh ones
FIRST_EVAL_SEED = 100_000  # held-out episodes: seed FIRST_EVAL_SEED + i for training seed i
FIRST_VALIDATION_SEED = 200_000  # checkpoint selection episodes: seed FIRST_VALIDATION_SEED + i
DEFAULT_SEEDS = 5
PAPER_ALGOS = ("mappo", "ippo", "vdn", "qmix")
PAPER_SEEDS = 10  # Gorsane et al. (2022): 10 independent runs
PAPER_ARMS = (*VARIANTS, "native@10x", "hrf+oef@10x")  # does the edge last at 10x the steps?
_STUDY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,95}$")


class StudySpec(BaseModel):
    """One study: where the candidate comes from, what is retrained, how it is measured."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str | None = None  # a run's best candidate (or `candidate_id`) ...
    candidate: str | None = None  # ... or a candidate module file
    candidate_id: str | None = None  # a run's candidate other than the best
    runs_dir: str = DEFAULT_RUNS_DIR
    study_id: str | None = None  # None = derived from the settings (same settings resume)
    env: str | None = None  # None = the run's (or simple_spread)
    env_kwargs: dict[str, Any] | None = None  # None = the run's (or the LERO default)
    algos: tuple[str, ...] = ()  # () = the run's algorithm (or mappo)
    variants: tuple[str, ...] = VARIANTS  # and <variant>@<K>x, native@loop
    seeds: int = Field(default=DEFAULT_SEEDS, ge=1, le=64)
    steps: int | None = Field(default=None, ge=1, le=MAX_STEPS)  # None = the run's budget
    eval_episodes: int = Field(default=EVAL_EPISODES, ge=1, le=MAX_EVAL_EPISODES)
    target_return: float | None = None  # None = native's mean held-out return
    hparams: dict[str, dict[str, Any]] = Field(default_factory=dict)  # algo -> overrides
    hparams_every: dict[str, Any] = Field(default_factory=dict)  # --hparam: overrides of every studied algorithm
    sandbox: Literal["auto", "docker", "process"] | None = None  # None = the run's
    executor: Literal["local", "ray"] | None = None  # None = the run's (or local)
    ray_address: str | None = None  # None = the run's (a new local Ray instance without one)
    max_parallel: int | None = Field(default=None, ge=1, le=64)  # None: one job per core (graph.configuration.parallel_jobs)
    checkpoints: int = Field(default=0, ge=0, le=100)  # interval checkpoints per training (0 = none)
    recheck: bool = False  # also retrain the candidate once at 10x the steps (app/study/recheck.py)

    @model_validator(mode="after")
    def _check(self) -> StudySpec:
        if (self.run_id is None) == (self.candidate is None):
            raise ValueError("give a run id or a candidate file (one of them)")
        if self.candidate_id is not None and self.run_id is None:
            raise ValueError("candidate_id needs a run id")
        if not self.variants:
            raise ValueError(f"variants must be among {', '.join(VARIANTS)}, got none")
        for arm in self.variants:
            check_arm(arm)
        if len(set(self.variants)) != len(self.variants):
            raise ValueError(f"variants must not repeat, got {list(self.variants)}")
        if LOOP_ARM in self.variants and self.run_id is None:
            raise ValueError(f"{LOOP_ARM} needs a run id (the run's env steps are its budget)")
        if "native" not in self.variants:
            raise ValueError("variants must include native (every test is against it)")
        if self.study_id is not None and not _STUDY_ID.match(self.study_id):
            raise ValueError(f"study id {self.study_id!r} must be letters, digits, '_', '.', '+', '-'")
        return self

    @classmethod
    def parse(cls, values: dict[str, Any]) -> StudySpec:
        """Validate raw values into a spec, or raise RunError (one line)."""
        return validated(cls, values, "study")

    @property
    def train_seeds(self) -> list[int]:
        return [FIRST_TRAIN_SEED + i for i in range(self.seeds)]

    @property
    def eval_seeds(self) -> list[int]:
        """Held-out episodes per training seed; never the selection seed."""
        seeds = [FIRST_EVAL_SEED + i for i in range(self.seeds)]
        assert EVAL_SEED not in seeds
        return seeds

    @property
    def validation_seeds(self) -> list[int]:
        """Episodes the best checkpoint is picked on: neither held out nor the selection seed."""
        seeds = [FIRST_VALIDATION_SEED + i for i in range(self.seeds)]
        assert not set(seeds) & {EVAL_SEED, *self.eval_seeds}
        return seeds
