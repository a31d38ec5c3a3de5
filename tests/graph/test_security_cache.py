"""Attack suite, round 3: what lero reuses is data from outside until proven.

A run directory copied in from another installation names the process sandbox, or carries
forged results for native's confirmation seeds in its own cache; a runs dir's shared cache
is edited by hand. Nothing of it may decide where code runs or what a run reports: the
sandbox is refused in one line until the person types it again, and a cache entry this
installation did not seal is trained again, said in one line.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from lero.agents import LLMConfig
from tests.graph.test_resume import read_events
from tests.graph.test_security_round2 import run_cli
from tests.support.cli import lero, run_files


def copy_elsewhere(runs: Path, tmp_path: Path, monkeypatch) -> Path:
    """RUNS as another installation sees it: the same bytes under another folder and key."""
    copied = tmp_path / "elsewhere" / "runs"
    shutil.copytree(runs, copied, symlinks=True)
    monkeypatch.setenv("LERO_KEY_FILE", str(tmp_path / "other-installation.key"))
    monkeypatch.chdir(copied.parent)
    return copied


def test_a_copied_runs_process_sandbox_runs_only_when_the_person_types_it(tmp_path, monkeypatch, capsys) -> None:
    from starlette.testclient import TestClient

    from lero.app.ui.app import create_app

    monkeypatch.chdir(tmp_path)
    run_cli(tmp_path, "p", capsys)  # a completed run in the process sandbox, written here
    run_cli(tmp_path, "w", capsys, "--approve", "spec")  # one waiting for its first answer
    assert lero(["resume", "p"], capsys)[0] == 0  # its own installation resumes it as it is
    copied = copy_elsewhere(tmp_path / "runs", tmp_path, monkeypatch) / "p"
    before = run_files(copied)
    for argv, command in ((["resume", "p"], "lero resume"), (["eval", "p", "--episodes", "2"], "lero eval"),
                          (["study", "p", "--seeds", "1", "--variants", "native"], "lero study")):
        code, _, err = lero(argv, capsys)
        assert code == 2 and err.count("\n") == 1, err
        assert "the stored spec names sandbox 'process'" in err and f"{command} ... --sandbox process" in err, err
    assert run_files(copied) == before and not (copied / "studies").exists() and not (copied / "evals").exists()
    waiting = run_files(copied.parent / "w")
    app = create_app("runs", "ui-token", 8765, LLMConfig.from_spec("offline"), cwd=copied.parent.parent)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:  # the UI's Resume button
        home = client.get("/?token=ui-token")
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', home.text).group(1)
        assert client.post("/runs/w/resume", data={"csrf": csrf}, follow_redirects=False).status_code == 303
        worker = app.state.workers.get("w")
        assert worker.process.wait(timeout=300) == 2
        assert "--sandbox process" in worker.error()
    app.state.workers.close()
    assert run_files(copied.parent / "w") == waiting
    # typed again, it is the person's: resume reports how the run ended, eval measures in it
    code, out, err = lero(["resume", "p", "--sandbox", "process"], capsys)
    assert code == 0 and "completed" in out, out + err
    code, out, err = lero(["eval", "p", "--episodes", "2", "--sandbox", "process"], capsys)
    assert code == 0 and "saved:" in out, out + err


# ---------------------------------------------------------------- forged results for native's confirmation

HPARAMS = {"n_envs": 32, "rollout_len": 25, "epochs": 1}  # one iteration = 800 env steps
CONFIRMING = {"llm": "offline", "sandbox": "process", "generations": 1, "population": 1, "steps": 800, "seeds": 1,
              "eval_episodes": 4, "hparams": HPARAMS, "confirm_steps": 800}  # fmt: skip
FORGED = -1000.0


def forged_result(**fields: object) -> dict:
    """What a forger writes for a cache entry: a plain result, good numbers for the attack."""
    metrics = {"return": FORGED, "coverage": 0.0, "occupied": 0.0, "collisions": 0.0}
    return {"status": "ok", "fitness": FORGED, "metrics": metrics, "policy_dir": "/tmp", "cached": False, **fields}


def forge_natives_confirmation(run: Path) -> list[Path]:
    """Plain train and evaluate entries in RUN's own cache for every job of native's
    confirmation (the probe's copied run): once read, their combination would also be kept
    in the runs dir's shared cache."""
    from lero.graph.confirmation import confirm_seeds
    from lero.graph.protocol import _train_jobs
    from lero.graph.rundir import RunDir
    from lero.graph.trust import job_env
    from lero.sandbox import Job
    from lero.sandbox.cache import job_cache_key

    spec = RunDir(run).read_spec()
    seeds, eval_seeds = confirm_seeds(spec.confirm_seeds)
    fields = {"eval_episodes": spec.eval_episodes, "hparams": spec.hparams}
    written = []
    for train in _train_jobs(None, job_env(spec), spec.algo, spec.confirm_budget(), seeds, eval_seeds=eval_seeds,
                             **fields):  # fmt: skip
        evaluate = Job(kind="evaluate", code=None, env=train.env, algo=train.algo, steps=train.steps, seed=train.seed,
                       policy_dir="/tmp", eval_seed=train.eval_seed, **fields)  # fmt: skip
        for job in (train, evaluate):
            path = run / "cache" / f"{job_cache_key(job)}.json"
            path.write_text(json.dumps(forged_result()))
            written.append(path)
    return written


def confirmation_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if "confirmation native seed" in line]


def test_forged_results_in_a_copied_run_or_the_shared_cache_decide_nothing(tmp_path, monkeypatch, capsys) -> None:
    """The probe's chain: a run carrying forged train and evaluate results for native's
    confirmation seeds is resumed (they would print -1000 and go into the shared cache,
    whence every later run's verdict), then the shared cache is edited by hand before a
    second run. Every forged entry is trained again instead, said in one line."""
    from lero.sandbox.seal import SEAL_FIELD

    monkeypatch.chdir(tmp_path)
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIRMING))
    code, out, err = lero(["run", "--config", str(config), "--run-id", "copied", "--approve", "spec"], capsys)
    assert code == 3, out + err  # waiting for the spec's approval: nothing trained yet
    run = tmp_path / "runs" / "copied"
    forge_natives_confirmation(run)
    answer = tmp_path / "approve.json"
    answer.write_text(json.dumps({"action": "approve"}))
    code, out, err = lero(["resume", "copied", "--answer", str(answer)], capsys)
    assert code == 0, out + err
    seeds = confirmation_lines(out)
    assert len(seeds) == 3 and not any("cached" in line for line in seeds), out  # native trained again
    assert "-1000" not in out and "-1000" not in (run / "report.md").read_text()
    assert "ignored entries this installation did not seal" in out
    assert any(e["event"] == "cache_untrusted" for e in read_events(run))
    shared = sorted((tmp_path / "runs" / ".shared-cache").glob("*.json"))
    assert len(shared) == 3  # native's genuine results, sealed here
    for path in shared:
        entry = json.loads(path.read_text())
        assert SEAL_FIELD in entry and entry["result"]["fitness"] != FORGED
        path.write_text(json.dumps(forged_result()))  # ... now edited by hand
    code, out, err = lero(["run", "--config", str(config), "--run-id", "later", "--designer-seed", "1"], capsys)
    assert code == 0, out + err
    later = tmp_path / "runs" / "later"
    seeds = confirmation_lines(out)
    assert len(seeds) == 3 and not any("cached" in line for line in seeds), out
    assert "-1000" not in out and "-1000" not in (later / "report.md").read_text()
    assert "-1000" not in (later / "report.json").read_text()
    assert any(e["event"] == "cache_untrusted" and ".shared-cache" in e["directory"] for e in read_events(later))
