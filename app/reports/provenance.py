"""What a run was made with, for report.md's "Provenance" section: the algorithm's
hyper-parameters as trained, lero's version and commit, the Python / torch / numpy versions,
the sandbox (image tag, whose digest names its inputs) and what each task metric means.

The software part is recorded once, by the first report of a run (`provenance.json`, at the
run's end in the process that drove it), and read back afterwards, so a later `lero report`
under another installation does not rewrite history; a run reported before this existed
gets it recorded at that report, and says so. Hyper-parameters come from the algorithm's
own dataclass (`TrainConfig.algo_hparams`) and metric meanings from the env's `TaskSpec`,
never restated here.
"""

from __future__ import annotations

import dataclasses
import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lero.graph.configuration import RunSpec
from lero.graph.rundir import PROVENANCE_FILE, RunDir
from lero.graph.summary import native_task

if TYPE_CHECKING:
    from lero.training.envs.task import Metric

SOURCE_DIR = Path(__file__).resolve().parents[1]  # the checkout lero runs from (a git work tree or not)
UNKNOWN = "unknown"


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(SOURCE_DIR), *args], capture_output=True, text=True, timeout=10,
                              check=False)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def lero_commit() -> str:
    """The source's git commit (`+dirty` with uncommitted changes), or "unknown" for an
    installed wheel or a machine without git."""
    commit = _git("rev-parse", "HEAD")
    if not commit:
        return UNKNOWN
    return commit + ("+dirty" if _git("status", "--porcelain", "--untracked-files=no") else "")


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return UNKNOWN


def software(sandbox: str) -> dict[str, Any]:
    """This installation: lero, its commit, Python, torch, numpy and the sandbox image."""
    import numpy
    import torch

    image = None
    if sandbox == "docker":
        from lero.sandbox.image import image_tag

        image = image_tag()
    return {
        "lero": _version("lero"), "commit": lero_commit(), "python": platform.python_version(),
        "torch": torch.__version__, "numpy": numpy.__version__, "sandbox": sandbox, "sandbox_image": image,
        "platform": platform.platform(), "recorded_ts": time.time(),
    }  # fmt: skip


def recorded_software(rundir: RunDir, sandbox: str) -> tuple[dict[str, Any], bool]:
    """The run's recorded software (provenance.json), written now when absent; and whether
    it was already there (False: recorded by this report, not necessarily the run's own)."""
    stored = rundir.read_json(PROVENANCE_FILE)
    if stored is not None:
        return stored, True
    fresh = software(sandbox)
    rundir.write_json(PROVENANCE_FILE, fresh)
    return fresh, False


def hyperparameters(spec: RunSpec) -> dict[str, Any]:
    """The algorithm's hyper-parameters the run trained with (defaults and its overrides)."""
    from lero.training import TrainConfig

    config = TrainConfig(env=spec.env, algo=spec.algo, steps=spec.steps, hparams=dict(spec.hparams))
    return dataclasses.asdict(config.algo_hparams())


def native_metrics(env: object, env_kwargs: object = None) -> tuple[Metric, ...] | None:
    """ENV's own task metrics (`native_task`; its default arguments where none are given)."""
    task = native_task(env, {} if env_kwargs is None else env_kwargs)
    return None if task is None else tuple(task.metrics)


def metric_meanings(spec: RunSpec) -> dict[str, str] | None:
    """Each task metric's meaning and direction (`native_metrics`); None where not shown."""
    metrics = native_metrics(spec.env, spec.env_kwargs)
    if metrics is None:
        return None
    return {m.name: f"{m.doc} ({m.better} is better)" for m in metrics}


def provenance_markdown(rundir: RunDir, spec: RunSpec) -> list[str]:
    """report.md's "Provenance" section."""
    recorded, kept = recorded_software(rundir, spec.sandbox)
    when = "recorded at the run's first report" if kept else "recorded by this report: the run had no record"
    image = recorded.get("sandbox_image") or ("none (process backend: trusted code only)"
                                              if recorded.get("sandbox") == "process" else UNKNOWN)  # fmt: skip
    lines = ["", "## Provenance", "",
             f"- lero {recorded.get('lero', UNKNOWN)}, commit `{recorded.get('commit', UNKNOWN)}` ({when})",
             f"- Python {recorded.get('python', UNKNOWN)}, torch {recorded.get('torch', UNKNOWN)}, "
             f"numpy {recorded.get('numpy', UNKNOWN)} on {recorded.get('platform', UNKNOWN)}",
             f"- sandbox: {recorded.get('sandbox', spec.sandbox)}; image `{image}`",
             f"- evaluation: {spec.eval_episodes} greedy episodes per seed (fitness); `lero eval` measures "
             "saved policies again on held-out episodes"]  # fmt: skip
    params = hyperparameters(spec)
    lines += ["", f"Hyper-parameters of `{spec.algo}` (defaults with the run's overrides, marked *set*: "
              "`--hparam KEY=VALUE` or the config file's `hparams`):", "",
              "| hyper-parameter | value |", "|---|---|"]  # fmt: skip
    lines += [f"| `{name}` | {value}{' *set*' if name in spec.hparams else ''} |" for name, value in params.items()]
    meanings = metric_meanings(spec)
    lines += ["", "Task metrics (from the env's own description):", ""]
    if meanings is None:
        lines.append(f"- not shown: `{spec.env}` is not lero's own code: the report does not build it")
    else:
        lines += [f"- `{name}`: {text}" for name, text in meanings.items()]
    return lines
