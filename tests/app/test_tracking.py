"""`--logger wandb|mlflow`: what `lero train`, `lero run` and `lero study` send, read back
through each tracker's own reader: W&B's offline run file (W&B's record schema) and a local
MLflow file store through MLflow's client API."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from lero.app.cli.main import main
from lero.app.reports import tracking
from tests.support.tiny_runs import make_runs
from tests.support.wandb_files import read_offline_runs

TRAIN = ["train", "--env", "simple_spread", "--algo", "mappo", "--steps", "800", "--hparam", "n_envs=8",
         "--hparam", "rollout_len=25", "--eval-episodes", "16", "--eval-every", "2"]  # fmt: skip


@pytest.fixture
def wandb_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_PROJECT", raising=False)


@pytest.fixture
def mlflow_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from mlflow.tracking import MlflowClient

    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    return MlflowClient(tracking_uri=uri)


def _quiet(argv: list[str]) -> int:
    return main(argv, console=Console(file=io.StringIO(), width=200))


def _mlflow_runs(client) -> list:
    experiment = client.get_experiment_by_name(tracking.PROJECT)
    return client.search_runs([experiment.experiment_id])


def test_train_logs_curves_eval_config_and_result_to_wandb_offline(tmp_path: Path, wandb_offline: None) -> None:
    out = tmp_path / "train"
    assert _quiet([*TRAIN, "--seed", "0", "--out", str(out), "--logger", "wandb"]) == 0
    result = json.loads((out / "result.json").read_text())
    (run,) = read_offline_runs(out)
    assert run.config["algo"] == "mappo" and run.config["hparams"] == {"n_envs": 8, "rollout_len": 25}
    logged = run.series("seed-0/return", "seed-0/env_steps")
    assert logged == list(zip(result["curves"]["steps"], result["curves"]["return"], strict=True)) and logged
    (final,) = run.series("seed-0/eval/return", "seed-0/env_steps")
    assert final == (result["curves"]["steps"][-1], result["eval"]["return"])
    greedy = run.series("seed-0/greedy/return", "seed-0/env_steps")  # every 2 of its 4 updates
    assert greedy == list(zip(result["curves"]["greedy/steps"], result["curves"]["greedy/return"], strict=True))
    assert [step for step, _ in greedy] == [400, 800]
    assert "result.json" in run.files and (run.run_dir / "files" / "result.json").read_text() == (
        out / "result.json").read_text()  # fmt: skip


def test_train_logs_to_mlflow_read_through_its_client(tmp_path: Path, mlflow_store) -> None:
    out = tmp_path / "train"
    assert _quiet([*TRAIN, "--seed", "0", "1", "--out", str(out), "--logger", "mlflow"]) == 0
    (run,) = _mlflow_runs(mlflow_store)
    assert run.data.params["algo"] == "mappo" and run.data.params["hparams.rollout_len"] == "25"
    for seed in (0, 1):
        result = json.loads((out / f"seed-{seed}" / "result.json").read_text())
        history = mlflow_store.get_metric_history(run.info.run_id, f"seed-{seed}/return")
        assert [(m.step, m.value) for m in history] == list(zip(result["curves"]["steps"], result["curves"]["return"],
                                                                strict=True))  # fmt: skip
        assert run.data.metrics[f"seed-{seed}/eval/return"] == pytest.approx(result["eval"]["return"])
    assert [a.path for a in mlflow_store.list_artifacts(run.info.run_id)] == ["seeds.json"]


def test_a_missing_package_is_one_line_naming_the_extra(tmp_path: Path, monkeypatch, capsys) -> None:
    absent = tracking.Backend("lero_no_such_tracker_package", "wandb", tracking.WandbTracker)
    monkeypatch.setitem(tracking.BACKENDS, "wandb", absent)
    out = tmp_path / "train"
    assert _quiet([*TRAIN, "--seed", "0", "--out", str(out), "--logger", "wandb"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("lero: error: --logger wandb needs the lero_no_such_tracker_package package: "
                   "pip install 'lero[wandb]'")  # fmt: skip
    assert not out.exists()  # refused before anything trained
    assert _quiet(["run", "--logger", "wandb", "--llm", "offline"]) == 2


def test_every_logger_choice_has_a_backend_and_an_extra() -> None:
    import tomllib

    extras = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for backend in tracking.BACKENDS.values():
        assert backend.extra in extras
        assert any(dep.startswith(extras[backend.extra][0].split(">")[0]) for dep in extras["dev"])


@pytest.mark.slow
def test_run_logs_to_mlflow_and_its_study_to_wandb(tmp_path: Path, mlflow_store, wandb_offline: None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A run: each job's curves, the loop's numbers per generation, the headline, the spec and
    report.md / report.json. Its study: each job's held-out metrics, the cells' means, the
    study's settings and study.md / study.json."""
    workdir = make_runs(tmp_path / "work", {"tracked": ["--logger", "mlflow", "--name", "tracked run", "--tag", "t1",
                                                        "--generations", "2"]})  # fmt: skip
    rundir = workdir / "runs" / "tracked"
    report = json.loads((rundir / "report.json").read_text())
    (run,) = _mlflow_runs(mlflow_store)
    assert run.info.run_name == "tracked run" and run.data.tags[tracking.RUN_ID_TAG] == "tracked"
    assert "lero.tag.t1" in run.data.tags and run.data.params["logger"] == "mlflow"
    loop = mlflow_store.get_metric_history(run.info.run_id, "loop/best_fitness")
    assert [(m.step, m.value) for m in loop] == [(g["generation"], pytest.approx(g["best_fitness"]))
                                                 for g in report["generations"]] and len(loop) == 2  # fmt: skip
    # live: generation 0's numbers went out before generation 1's first job finished
    first_of_gen1 = min(m.timestamp for m in mlflow_store.get_metric_history(run.info.run_id, "1-0/seed-0/return"))
    assert loop[0].timestamp <= first_of_gen1
    assert run.data.metrics["best/fitness"] == pytest.approx(report["best"]["fitness"])
    assert run.data.metrics["baseline/fitness"] == pytest.approx(report["baseline"]["fitness"])
    seed0 = json.loads((rundir / "baseline" / "result.json").read_text())["per_seed"][0]
    history = mlflow_store.get_metric_history(run.info.run_id, f"baseline/seed-{seed0['seed']}/return")
    assert [m.value for m in history] == pytest.approx(seed0["curves"]["return"]) and history
    assert sorted(a.path for a in mlflow_store.list_artifacts(run.info.run_id)) == ["report.json", "report.md"]
    assert run.info.status == "FINISHED"

    monkeypatch.chdir(workdir)
    argv = ["study", "tracked", "--seeds", "1", "--variants", "native,hrf", "--eval-episodes", "16",
            "--sandbox", "process", "--study-id", "s1", "--logger", "wandb"]  # fmt: skip
    assert _quiet(argv) == 0
    study = json.loads((rundir / "studies" / "s1" / "study.json").read_text())
    (logged_study,) = read_offline_runs(workdir / "runs")
    assert logged_study.name == "s1" and logged_study.config["variants"] == ["native", "hrf"]
    for cell in study["cells"]:
        logged = logged_study.series(f"mappo/{cell['variant']}/return", "seed")
        assert logged == list(zip(cell["seeds"], cell["per_seed"]["return"], strict=True)) and logged
        (mean,) = [v for _, v in logged_study.series(f"mappo/{cell['variant']}/mean/return", "seed")]
        assert mean == pytest.approx(cell["summary"]["return"]["mean"])
    assert {"study.md", "study.json"} <= set(logged_study.files)


def test_jobs_finishing_at_once_open_one_tracker_run(tmp_path: Path, mlflow_store) -> None:
    """The run's job threads report at once: one MLflow run, holding every job's metrics."""
    import threading

    from lero.app.reports.run_tracking import RunTrackers
    from lero.graph.configuration import RunSpec
    from lero.graph.rundir import RunDir
    from lero.sandbox import JobResult

    rundir = RunDir.create(RunSpec(runs_dir=str(tmp_path / "runs"), run_id="raced", logger="mlflow"))
    trackers, start = RunTrackers(), threading.Barrier(8)
    result = JobResult(status="ok", curves={"steps": [100, 200], "return": [-2.0, -1.0]}, metrics={"return": -1.0})

    def job(seed: int) -> None:
        start.wait()
        trackers.job_result(rundir, "0-0", seed, result)

    threads = [threading.Thread(target=job, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    trackers.run_end(rundir)
    (run,) = _mlflow_runs(mlflow_store)
    assert {f"0-0/seed-{seed}/return" for seed in range(8)} <= set(run.data.metrics)
    assert run.data.params["logger"] == "mlflow"
