"""`--logger wandb|mlflow`: a run's, a training's or a study's numbers also go to the
experiment tracker a researcher already reads, beside (never instead of) lero's own files.

One `Tracker` per lero run (or `lero train`, or study): the configuration once, metric
points each against its own x axis (a job's env steps, the loop's generation), and the
report files as artifacts. The packages are optional extras (`pip install 'lero[wandb]'`,
`'lero[mlflow]'`) and are imported only here, when a logger is asked for. Where the
records go is the tracker's own business: W&B follows its settings (`WANDB_MODE`,
`WANDB_PROJECT`, else project `lero`) and writes under the folder lero writes to; MLflow
uses `MLFLOW_TRACKING_URI`, else a file store `<folder>/mlruns` (mlflow-skinny carries no
database driver), experiment `MLFLOW_EXPERIMENT_NAME` or `lero`. A resumed run continues the
same tracker run (W&B by id, MLflow by the `lero.run_id` tag).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from lero.graph.configuration import LOGGERS
from lero.training.curves import GREEDY_PREFIX, split_greedy

PROJECT = "lero"  # W&B project and MLflow experiment when the tracker's own settings name none
RUN_ID_TAG = "lero.run_id"  # MLflow: the tag a resumed run is found by
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_\-./ ]")  # MLflow's metric-name alphabet (W&B takes it too)
_MLFLOW_BATCH = 1000  # MLflow takes at most this many metrics per request
_PARAM_CHARS = 500  # MLflow's shortest parameter-value limit


@dataclass(frozen=True)
class Identity:
    """Who the tracker run is: lero's id (what a resume finds it by), a label and tags."""

    run_id: str
    name: str | None = None
    tags: tuple[str, ...] = ()


class Tracker(Protocol):
    def config(self, values: Mapping[str, Any]) -> None: ...
    def metrics(self, values: Mapping[str, float], axis: str, step: int) -> None: ...
    def artifact(self, path: Path) -> None: ...
    def close(self) -> None: ...


def metric_key(*parts: str) -> str:
    """One metric name from PARTS joined by '/', with characters a tracker refuses as '_'."""
    return _KEY_UNSAFE.sub("_", "/".join(parts))


def finite(values: Mapping[str, Any]) -> dict[str, float]:
    """The finite numbers of VALUES (booleans and text left out)."""
    return {k: float(v) for k, v in values.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)}  # fmt: skip


def flat_params(values: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested configuration as `a.b` -> text (what MLflow's parameters hold)."""
    out: dict[str, str] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out |= flat_params(value, f"{name}.")
        else:
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            out[metric_key(name)] = text[:_PARAM_CHARS]
    return out


@dataclass
class WandbTracker:
    """A W&B run (offline or online as W&B's own settings say; no console capture)."""

    run: Any
    axes: dict[str, str] = field(default_factory=dict)  # metric -> its x axis, as declared to W&B

    @classmethod
    def open(cls, where: Path, who: Identity) -> WandbTracker:
        import wandb

        where.mkdir(parents=True, exist_ok=True)
        run = wandb.init(project=os.environ.get("WANDB_PROJECT") or PROJECT, dir=str(where), id=metric_key(who.run_id),
                         name=who.name or who.run_id, tags=list(who.tags), resume="allow", reinit="create_new",
                         settings=wandb.Settings(silent=True, console="off"))  # fmt: skip
        return cls(run)

    def config(self, values: Mapping[str, Any]) -> None:
        self.run.config.update(dict(values), allow_val_change=True)

    def metrics(self, values: Mapping[str, float], axis: str, step: int) -> None:
        for key in values:
            if self.axes.get(key) != axis:
                self.run.define_metric(key, step_metric=axis)
                self.axes[key] = axis
        self.run.log({**values, axis: step})

    def artifact(self, path: Path) -> None:
        self.run.save(str(path), base_path=str(path.parent), policy="now")

    def close(self) -> None:
        self.run.finish()


@dataclass
class MlflowTracker:
    """An MLflow run through the client API (no global active run: several may be open)."""

    client: Any
    run_id: str

    @classmethod
    def open(cls, where: Path, who: Identity) -> MlflowTracker:
        from mlflow.tracking import MlflowClient

        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks before a file store
            uri = (where / "mlruns").resolve().as_uri()
        client = MlflowClient(tracking_uri=uri)
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or PROJECT
        found = client.get_experiment_by_name(name)
        experiment = found.experiment_id if found is not None else client.create_experiment(name)
        earlier = client.search_runs([experiment], filter_string=f"tags.`{RUN_ID_TAG}` = '{metric_key(who.run_id)}'",
                                     max_results=1)  # fmt: skip
        if earlier:
            client.update_run(earlier[0].info.run_id, status="RUNNING")
            return cls(client, earlier[0].info.run_id)
        tags = {RUN_ID_TAG: metric_key(who.run_id), **{f"lero.tag.{metric_key(t)}": "" for t in who.tags}}
        return cls(client, client.create_run(experiment, run_name=who.name or who.run_id, tags=tags).info.run_id)

    def config(self, values: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        logged = self.client.get_run(self.run_id).data.params  # parameters are write-once in MLflow
        params = [Param(k, v) for k, v in flat_params(values).items() if k not in logged]
        for start in range(0, len(params), 100):
            self.client.log_batch(self.run_id, params=params[start:start + 100])

    def metrics(self, values: Mapping[str, float], axis: str, step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        points = [Metric(key, value, now, int(step)) for key, value in values.items()]
        for start in range(0, len(points), _MLFLOW_BATCH):
            self.client.log_batch(self.run_id, metrics=points[start:start + _MLFLOW_BATCH])

    def artifact(self, path: Path) -> None:
        self.client.log_artifact(self.run_id, str(path))

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


@dataclass(frozen=True)
class Backend:
    """A logger as `--logger` names it: its package (imported only when used) and the extra."""

    module: str
    extra: str
    tracker: type


BACKENDS: dict[str, Backend] = {
    "wandb": Backend("wandb", "wandb", WandbTracker),
    "mlflow": Backend("mlflow", "mlflow", MlflowTracker),
}
assert set(BACKENDS) == set(LOGGERS), "every --logger choice has a backend"


class LoggerUnavailable(ValueError):
    """The logger's package is not installed: one line naming the extra that brings it."""


def require(kind: str) -> Backend:
    """KIND's backend, or LoggerUnavailable before anything runs."""
    backend = BACKENDS[kind]
    if importlib.util.find_spec(backend.module) is None:
        raise LoggerUnavailable(f"--logger {kind} needs the {backend.module} package: "
                                f"pip install 'lero[{backend.extra}]'")  # fmt: skip
    return backend


def open_tracker(kind: str, where: Path, who: Identity) -> Tracker:
    """A tracker of KIND for WHO, its local records under WHERE."""
    return require(kind).tracker.open(where, who)


def log_curves(tracker: Tracker, prefix: str, curves: Mapping[str, Iterable[float]]) -> None:
    """Curves {"steps": [S], name: [S], ...} as metric points PREFIX/name against
    PREFIX/env_steps; the greedy evaluation curve among them (`greedy/steps`, `greedy/<metric>`)
    as PREFIX/greedy/<metric> against its own steps, on the same axis."""
    axis = metric_key(prefix, "env_steps")
    training, greedy = split_greedy({name: list(values) for name, values in curves.items()})
    for series, part in ((training, ""), (greedy, GREEDY_PREFIX)):
        columns = {name: values for name, values in series.items() if name != "steps"}
        for i, step in enumerate(series.get("steps") or []):
            point = finite({metric_key(prefix, part + name): values[i]
                            for name, values in columns.items() if i < len(values)})  # fmt: skip
            if point:
                tracker.metrics(point, axis, int(step))
