"""Run settings: the one typed place where an experiment is described and validated.

`RunSpec` is built at the edge (the CLI, `langgraph dev`'s `configurable`, or a test) and
validated once; everything downstream trusts it. Bad values raise `RunError`, a
`ValueError` whose message is the single line the CLI prints before exiting with code 2.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from typing import Any, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from lero.agents.llm_config import DEFAULT_DESIGN, DEFAULT_TIMEOUT_S, Design, designs_help
from lero.graph.schedule import Schedule, loop_env_steps, planned
from lero.sandbox.types import JOB_WALL_S
from lero.training.defaults import DEFAULT_ALGO, DEFAULT_ENV, EVAL_EPISODES, MAX_EVAL_EPISODES

ApproveMode = Literal["none", "spec", "candidates", "generations", "all"]
APPROVE_MODES: tuple[str, ...] = get_args(ApproveMode)
DEFAULT_RUNS_DIR = "runs"  # relative to the working directory
# Budget bounds: a mistyped value is a one-line error, not a machine that runs for weeks;
# each leaves room for real studies (the defaults: 300k steps, 512 episodes, 2 seeds).
MAX_STEPS = 100_000_000  # env steps per candidate and seed
MAX_SEEDS = 32
# what a run's job directories (cache/jobs) may hold before it stops after the generation:
# kept policies and checkpoints take a few MB per job, a candidate's leftovers up to its job's
# disk cap (sandbox.types.Limits.disk_mb) until the sandbox prunes them
DISK_BUDGET_MB = 10_240.0
MIN_CONTEXT_TOKENS = 256  # a context window smaller than this cannot hold a role's contract prompt
CONFIRM_FACTOR = 3  # the confirmation trains at this many times --steps unless --confirm-steps says
MIN_CONFIRM_SEEDS = 3  # fewer seeds give no verdict (app.study.stats.MIN_VERDICT_SEEDS)
CONFIRM_STEPS_ENV = "LERO_CONFIRM_STEPS"  # the --confirm-steps default where the flag is not given
# final: held-out return; auc: graph.nodes.curve_fitness; success: the task's success metric on
# the held-out episodes, return breaking ties (the default where the task's reward is sparse)
Fitness = Literal["final", "auc", "success"]
FITNESS_KINDS: tuple[str, ...] = get_args(Fitness)
# `--logger`: the experiment tracker a run's, a training's or a study's metrics also go to (app.reports.tracking)
Logger = Literal["wandb", "mlflow"]
LOGGERS: tuple[str, ...] = get_args(Logger)
# RunSpec fields that are LLMConfig settings (`--llm-timeout`, `--context-tokens`, `--design`)
LLM_SETTINGS = {"llm_timeout_s": "timeout_s", "context_tokens": "context_tokens", "design": "design"}
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # also a safe path part
# `<generation>-<index>`, or native (`baseline`, and `baseline-loop`: the confirmation's
# native@loop arm); a safe path part
CANDIDATE_ID = re.compile(r"^(\d+-\d+|baseline|baseline-loop)$")
_LLM = re.compile(r"^(offline|openai:\S.*)$")
MAX_NAME, MAX_TAGS = 80, 8  # a run's --name length and --tag count
TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,31}")


def machine_cores() -> int:
    """The cores this process may use (its CPU affinity, which containers and taskset narrow)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def parallel_jobs(max_parallel: int | None, job_threads: float, cores: int | None = None) -> int:
    """Concurrent sandbox jobs: `max_parallel` when the user set it, else enough jobs of
    `job_threads` torch threads each to fill the machine's `cores` (one core left idle
    is a training job's worth of throughput lost; more jobs than cores only time-slice)."""
    if max_parallel is not None:
        return max_parallel
    cores = machine_cores() if cores is None else cores
    return max(1, int(cores // job_threads))


def wall_for_steps(limit_s: float, steps: int, usual_steps: int) -> float:
    """The wall-clock limit of a job training STEPS env steps where LIMIT_S holds for jobs of up
    to USUAL_STEPS: a longer one (native@loop, a 10x arm) gets it in proportion, i.e. the same
    slowest speed every usual job is allowed."""
    return limit_s * max(1.0, steps / usual_steps)


def check_run_id(value: str) -> str:
    """`value` when it is a valid run id (letters, digits, `_-.`; no path parts), else RunError."""
    if not isinstance(value, str) or not RUN_ID.match(value):
        raise RunError(f"run id {value!r} must be 1-64 characters of letters, digits, '_', '-', '.'")
    return value


def absolute_runs_dir(path: str | os.PathLike) -> str:
    """`runs_dir` resolved once, at the edge, against the working directory: sandboxes
    bind-mount job directories under it, and mounts must be absolute."""
    return os.path.abspath(os.path.expanduser(path))


def _registry() -> Any:
    """`training.envs.registry`, imported on first use (importing this module stays light)."""
    from lero.training.envs import registry

    return registry


class RunError(ValueError):
    """A run cannot start or continue; the message is one line meant for the user."""


Model = TypeVar("Model", bound=BaseModel)


def load_json(text: str, what: str) -> Any:
    """JSON a person or a file handed in (answers, specs, configs), or RunError in one line:
    malformed or nested too deep for Python's parser (a 200k-deep list)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise RunError(f"{what} is not JSON: {error.msg} (line {error.lineno})") from None
    except RecursionError:
        raise RunError(f"{what} is nested too deeply") from None


def validated(model: type[Model], values: dict[str, Any], what: str) -> Model:
    """`model` from raw values, or RunError naming the first bad setting in one line."""
    try:
        return model.model_validate(values)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or what
        message = first["msg"].removeprefix("Value error, ")
        raise RunError(f"invalid {what} setting {where}: {message}") from None


def field_help(name: str) -> str:
    """RunSpec field NAME's description (its flag's help), with its default where the text
    names none and the field has one."""
    info = RunSpec.model_fields[name]
    default = None if info.default_factory is not None else info.default
    shown = f"{default:g}" if isinstance(default, float) else default
    return info.description + ("" if default is None or "default" in info.description else f" (default {shown})")


def llm_settings(fields: dict[str, Any]) -> dict[str, Any]:
    """The LLM_SETTINGS among RunSpec-named `fields`, renamed for LLMConfig (None = not given)."""
    return {setting: fields[name] for name, setting in LLM_SETTINGS.items() if fields.get(name) is not None}


class RunSpec(BaseModel):
    """Everything that defines one lero experiment (stored as `runs/<id>/spec.json`)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # a field's `description` is its flag's help (`lero run --help`, app.args), with its default
    env: str = Field(default=DEFAULT_ENV, description="environment: a name (lero.envs entry points included) or a "
                                                      "PettingZoo package.module:factory")
    env_kwargs: dict[str, Any] | None = None  # None = the env's LERO default (its TaskSpec)
    algo: str = Field(default=DEFAULT_ALGO, description="learning algorithm (an unknown name lists the others)")
    generations: int = Field(default=3, ge=1, le=100, description="generations of the evolutionary loop")
    population: int = Field(default=4, ge=1, le=64, description="candidates the designer writes per generation")
    steps: int = Field(default=300_000, ge=1, le=MAX_STEPS, description="env steps per candidate and seed")  # joint
    # fitness = mean over seeds (one is noise)
    seeds: int = Field(default=2, ge=1, le=MAX_SEEDS, description="seeds per candidate and baseline")
    llm: str = Field(default="offline", description="offline | openai | openai:MODEL (default: by environment)")
    base_url: str | None = Field(default=None, description="OpenAI-compatible server URL (else OPENAI_BASE_URL)")
    sandbox: Literal["auto", "docker", "process"] = Field(
        default="auto", description="where LLM code runs: docker, process (trusted code only) or auto")
    approve: ApproveMode = Field(default="none", description="what waits for your answer")
    run_id: str | None = Field(default=None, description="the run's directory name under --runs-dir (default: from "
                                                         "the time)")
    runs_dir: str = Field(default=DEFAULT_RUNS_DIR, validate_default=True,  # relative to the cwd; stored absolute
                          description=f"where runs live (default {DEFAULT_RUNS_DIR}/ in the working directory)")
    task: str | None = Field(default=None, description="the task for the LLM in words (default: the env's own text)")
    max_llm_requests: int | None = Field(default=None, ge=1, description="LLM request budget of the run")
    max_llm_tokens: int | None = Field(default=None, ge=1, description="LLM token budget of the run")
    llm_timeout_s: float | None = Field(  # None = LLMConfig's default
        default=None, gt=0,
        description=f"seconds one LLM request may take (default {DEFAULT_TIMEOUT_S:.0f}; a CPU-served model is slow)")
    context_tokens: int | None = Field(default=None, ge=MIN_CONTEXT_TOKENS,
                                       description="the model's context window when the server does not say "
                                                   "(docs/llm.md)")  # fmt: skip
    design: Design = Field(default=DEFAULT_DESIGN, description=designs_help())  # agents.llm_config.DESIGN_MODES
    wall_clock_s: float | None = Field(default=None, gt=0, description="wall-clock budget in seconds")
    bounds: dict[str, int] = Field(default_factory=dict)  # a declared stage's own bound (graph.stages.Bound)
    critic_rounds: int = Field(default=1, ge=0, le=10)
    debug_attempts: int = Field(default=2, ge=0, le=10)
    max_parallel: int | None = Field(default=None, ge=1, le=64,  # None: parallel_jobs fills the cores
                                     description="sandbox jobs at a time (default: one per core, each job one "
                                                 "torch thread)")  # fmt: skip
    job_timeout_s: float = Field(default=JOB_WALL_S, gt=0, le=86_400,
                                 description="a sandbox job's wall-clock limit: a candidate that hangs or leaves a "
                                             "fork bomb holds a job slot this long")  # fmt: skip
    disk_budget_mb: float = Field(default=DISK_BUDGET_MB, gt=0,  # the run's job directories, in MiB
                                  description="the run stops after a generation once its job directories take more")
    eval_episodes: int = Field(default=EVAL_EPISODES, ge=1, le=MAX_EVAL_EPISODES)
    schedule: Schedule = Field(  # how a generation spends its steps (graph.schedule)
        default="full",
        description="full: every candidate trains the whole --steps; halving: all train 1/4, the best half by "
                    "evaluation go on to 1/2, the best half of those to the whole budget (about half the env steps)")
    hparams: dict[str, Any] = Field(default_factory=dict)
    n_elites: int = Field(default=2, ge=1, le=16)
    exploit_fraction: float = Field(default=0.75, ge=0.0, le=1.0,
                                    description="share of each generation refining an elite (0..1)")
    offline_prior: bool = Field(default=True, description="offline designer: generation 0 starts from its "
                                                          "hand-written prior (--no-prior: sampled designs only)")
    designer_seed: int = Field(default=0, ge=0,
                               description="the designer's random draws: the offline designer's, and the seed each "
                                           "LLM request samples with; another seed, another run of the loop")
    executor: Literal["local", "ray"] = Field(default="local",
                                              description="where train/evaluate jobs run (ray: docs/ray.md)")
    ray_address: str | None = Field(default=None, description="Ray cluster: auto | HOST:PORT (default: a new local "
                                                              "instance); implies --executor ray")
    # after the last generation the best candidate(s) and native train again at this budget
    # on fresh seeds (graph.nodes.confirm); None = CONFIRM_FACTOR x steps, 0 = no confirmation
    confirm_steps: int | None = Field(default_factory=lambda: os.environ.get(CONFIRM_STEPS_ENV) or None,
                                      validate_default=True, ge=0, le=MAX_STEPS,
                                      description=f"after the last generation, train the best candidate and native "
                                                  f"again with N env steps on {MIN_CONFIRM_SEEDS}+ fresh seeds, "
                                                  f"measured on held-out episodes (default {CONFIRM_FACTOR} x "
                                                  f"--steps; 0: no confirmation)")  # fmt: skip
    confirm_top: int = Field(default=1, ge=1, le=16, description="confirm the K best candidates")
    fitness: Fitness | None = Field(  # None: `success` where the task marks its reward sparse, else `final`
        default=None,
        description="final: held-out return of the trained policy (default for a dense reward); auc: held-out "
                    "return averaged over the learning curve's checkpoints (learning speed); success: the task's "
                    "success metric on the held-out episodes, return breaking ties (default where the task's "
                    "native reward is sparse)")
    # a person's label for the run (lists, compare, legends): the id stays what identifies it
    name: str | None = Field(default=None, min_length=1, max_length=MAX_NAME,
                             description="a label for the run, shown by runs, compare, legends and the web UI")
    tags: tuple[str, ...] = Field(default=(), max_length=MAX_TAGS)
    logger: Logger | None = Field(  # None: the run dir only
        default=None, description="also log the metrics, the configuration and the report to W&B or MLflow (the "
                                  "optional extra of that name: pip install 'lero[wandb]'; app.reports.tracking)")

    @field_validator("name")
    @classmethod
    def _name_printable(cls, value: str | None) -> str | None:
        if value is not None and (not value.isprintable() or value != value.strip()):
            raise ValueError(f"name {value!r}: printable characters, no leading or trailing space")
        return value

    @field_validator("tags")
    @classmethod
    def _tags_words(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [tag for tag in value if not TAG.fullmatch(tag)]
        if bad:
            raise ValueError(f"tag {bad[0]!r}: letters, digits and _ . + - (up to 32, a letter or digit first)")
        return tuple(dict.fromkeys(value))

    @field_validator("bounds")
    @classmethod
    def _bounds_declared(cls, value: dict[str, int]) -> dict[str, int]:
        from lero.graph.stages import bounds

        declared = bounds()
        for name, rounds in value.items():
            if name not in declared:
                raise ValueError(f"no stage declares a bound {name!r} (declared: {', '.join(declared) or 'none'})")
            if not 0 <= rounds <= declared[name].maximum:
                raise ValueError(f"bound {name} must be 0..{declared[name].maximum}, got {rounds}")
        return value

    def bound(self, name: str) -> int:
        """The run's value of a declared stage bound NAME (its default where the run sets none)."""
        from lero.graph.stages import bounds

        return self.bounds.get(name, bounds()[name].default)

    @field_validator("env")
    @classmethod
    def _env_known(cls, value: str) -> str:
        _registry().check_env_name(value)  # nothing is imported
        return value

    @field_validator("llm")
    @classmethod
    def _llm_known(cls, value: str) -> str:
        if not _LLM.match(value):
            raise ValueError(f"unknown llm {value!r}: expected 'offline' or 'openai:MODEL'")
        return value

    @field_validator("run_id")
    @classmethod
    def _run_id_safe(cls, value: str | None) -> str | None:
        return value if value is None else check_run_id(value)

    @field_validator("runs_dir")
    @classmethod
    def _runs_dir_absolute(cls, value: str) -> str:
        return absolute_runs_dir(value)

    @model_validator(mode="after")
    def _ray_address_needs_ray(self) -> RunSpec:
        if self.ray_address is not None and self.executor != "ray":
            raise ValueError("ray_address is only used with executor 'ray'")
        return self

    @model_validator(mode="after")
    def _auc_needs_whole_curves(self) -> RunSpec:
        if self.fitness == "auc" and self.schedule != "full":
            raise ValueError("fitness 'auc' needs schedule 'full' (a halving rung trains part of the curve)")
        return self

    @model_validator(mode="after")
    def _fill_env_kwargs(self) -> RunSpec:
        if self.env_kwargs is None:
            self.env_kwargs = self.default_env_kwargs(self.env)
        _registry().check_kwargs(self.env, self.env_kwargs)  # names, types, bounds; nothing built
        return self

    @model_validator(mode="after")
    def _default_fitness(self) -> RunSpec:
        """Select on the task, never on the shaping: a sparse task's default is `success`.
        Only a native env is read (a custom env's module is not imported to parse a spec)."""
        if self.fitness is None:
            self.fitness = "success" if self.sparse_task() else "final"
        return self

    def sparse_task(self) -> bool:
        """Whether the task marks its native reward sparse (its TaskSpec; only a native env is
        read: a custom env's module is not imported to plan a run): its confirmation adds
        native@loop."""
        return _registry().declares_sparse(self.env, self.env_kwargs or {})

    @staticmethod
    def default_env_kwargs(env: str | None = None) -> dict[str, Any]:
        """The setting LERO runs `env` (default: the default env) with: its TaskSpec's
        `lero_kwargs` (simple_spread: 3 agents, each seeing 1 agent and 2 landmarks)."""
        registry = _registry()
        return registry.default_kwargs(env or DEFAULT_ENV)

    def budget(self) -> tuple[int, int]:
        """(train jobs, env steps) the whole run plans: every generation's candidates at
        this schedule, and the baseline once, for every seed; then the confirmation, and on a
        sparse task its native@loop (every step before it, on each confirmation seed)."""
        jobs = planned(self.steps, self.schedule, self.population)[0]
        arms = (self.confirm_top + 1) * self.confirm_seeds if self.confirm_budget() else 0
        spent = self.selection_steps() + arms * self.confirm_budget()
        if (loop := self.loop_arm_steps()) is not None:
            return (self.generations * jobs + 1) * self.seeds + arms + self.confirm_seeds, spent + self.confirm_seeds * loop
        return (self.generations * jobs + 1) * self.seeds + arms, spent

    def selection_steps(self) -> int:
        """Env steps the loop plans before its confirmation: every generation's candidates at
        this schedule and the baseline once, for every seed."""
        return (self.generations * planned(self.steps, self.schedule, self.population)[1] + self.steps) * self.seeds

    def usual_job_steps(self) -> int:
        """The longest training job the loop plans: a confirmation's, else a candidate's."""
        return max(self.confirm_budget(), self.steps)

    def loop_arm_steps(self) -> int | None:
        """native@loop's planned env steps per seed: every step the loop plans (the baseline
        included) and the confirmation's other arms; None where the run has no such arm (a
        dense task, or a run that confirms nothing)."""
        if not self.confirm_budget() or not self.sparse_task():
            return None
        return min(loop_env_steps(self.selection_steps(), self.confirm_budget(), self.confirm_seeds,
                                  self.confirm_top + 1), MAX_STEPS)  # fmt: skip

    def job_wall_s(self, steps: int) -> float:
        """The wall-clock limit of a job training STEPS env steps (`wall_for_steps`): `job_timeout_s`
        holds for the run's usual jobs (up to the confirmation's budget, the longest the loop
        plans); a longer one, native@loop (native code only, no candidate to hold a slot), gets
        it in proportion."""
        return wall_for_steps(self.job_timeout_s, steps, self.usual_job_steps())

    def confirm_budget(self) -> int:
        """Env steps of one confirmation training (0: the run confirms nothing)."""
        if self.confirm_steps is None:
            return min(CONFIRM_FACTOR * self.steps, MAX_STEPS)
        return self.confirm_steps

    @property
    def confirm_seeds(self) -> int:
        """Fresh seeds per confirmed arm: the run's seed count, at least MIN_CONFIRM_SEEDS."""
        return max(self.seeds, MIN_CONFIRM_SEEDS)

    def exploit_slots(self, has_elites: bool) -> int:
        """How many of a generation's drafts refine an elite (none before there are elites)."""
        return round(self.population * self.exploit_fraction) if has_elites else 0

    @property
    def approvals(self) -> set[str]:
        """Which approval steps ask a human (`all` expands to every step)."""
        if self.approve == "all":
            return {"spec", "candidates", "generations"}
        return set() if self.approve == "none" else {self.approve}

    @classmethod
    def parse(cls, values: dict[str, Any]) -> RunSpec:
        """Validate raw values (CLI, JSON, `configurable`) into a spec, or raise RunError."""
        return validated(cls, values, "run")

    @classmethod
    def from_configurable(cls, configurable: dict[str, Any]) -> RunSpec:
        """Pick RunSpec fields out of a LangGraph `configurable` dict (other keys ignored).

        The run id is the thread id: a LangGraph server puts its own per-request `run_id`
        into `configurable`, which must not name the run.
        """
        values = {key: configurable[key] for key in cls.model_fields if key in configurable}
        values.pop("run_id", None)
        if configurable.get("thread_id"):
            values["run_id"] = str(configurable["thread_id"])
        return cls.parse(values)

    def with_run_id(self) -> RunSpec:
        """This spec with a run id, generating a sortable one when none was given."""
        if self.run_id is not None:
            return self
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        return self.model_copy(update={"run_id": f"{stamp}-{secrets.token_hex(3)}"})
