"""The offline loop on a sparse VMAS task in Docker, cut down: navigation without its distance
shaping selects on success, the prior shapes through each agent's own goal potential, and
the confirmation trains native@loop with every env step the run spent; report.md says
whether the winner pays for the loop and which candidates are policy-invariant, as does the
run page.

A loop of 1 generation x 2 candidates x 1 seed at 1600 env steps (20-step episodes), a
confirmation at 1600 steps x 3 seeds (about 2 minutes on 2 cores)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lero.agents import LLMConfig
from lero.app.cli.run_hooks import app_front
from lero.app.ui.app import create_app
from lero.graph.configuration import RunSpec
from lero.graph.confirmation import LOOP_ID, loop_arm_plan
from lero.graph.runner import start_run
from lero.graph.schedule import loop_env_steps
from tests.graph.test_resume import QuietUI, read_events

pytest.importorskip("vmas")
pytestmark = [pytest.mark.slow, pytest.mark.docker]

ENV_KWARGS = {"n_agents": 2, "pos_shaping_factor": 0, "max_steps": 20}
SPEC = {"env": "vmas:navigation", "env_kwargs": ENV_KWARGS, "generations": 1, "population": 2, "steps": 1600,
        "seeds": 1, "eval_episodes": 8, "hparams": {"n_envs": 32, "rollout_len": 25, "epochs": 1},
        "sandbox": "docker", "llm": "offline", "confirm_steps": 1600}  # fmt: skip


class HeardUI(QuietUI):
    """Keeps what the run says on the terminal (its start line is in no file)."""

    def __init__(self) -> None:
        self.heard: list[dict] = []

    def on_event(self, event: dict) -> None:
        self.heard.append(event)


def test_a_sparse_run_selects_on_success_and_confirms_against_native_at_the_loops_compute(sandbox_image, tmp_path):
    spec = RunSpec.parse({**SPEC, "run_id": "sparse", "runs_dir": str(tmp_path / "runs")})
    assert spec.fitness == "success"  # the sparse task's default
    ui = HeardUI()
    outcome = start_run(spec, ui, front=app_front())
    assert outcome.status == "completed", outcome
    run_dir = Path(outcome.run_dir)
    report = json.loads((run_dir / "report.json").read_text())

    prior = json.loads((run_dir / "candidates" / "0-0" / "result.json").read_text())
    assert "def potential(state, obs):" in (run_dir / "candidates" / "0-0" / "candidate.py").read_text()
    for seed in prior["per_seed"]:  # the fitness is the held-out success rate, not the return
        assert seed["fitness"] == seed["metrics"]["success"]

    block = report["confirmation"]
    assert block["status"] == "completed"
    arms = {a["candidate_id"]: a for a in block["arms"]}
    assert set(arms) == {"baseline", report["best"]["candidate_id"], LOOP_ID}
    loop = arms[LOOP_ID]
    assert loop["arm"] == "native@loop"
    spent = loop_env_steps(report["env_steps"], 1600, 3, 2)  # the loop's jobs and the other two arms
    assert loop["steps"] == spent and report["env_steps"] >= 3 * 1600  # two candidates and native
    assert all("success" in values and len(values["success"]) == 3 for values in
               (a["per_seed"] for a in arms.values()))
    records = [json.loads(p.read_text()) for p in (run_dir / "confirm" / LOOP_ID).glob("seed-*.json")]
    assert len(records) == 3 and all(r["curves"]["steps"][-1] >= spent for r in records)
    start_line = next(e["message"] for e in ui.heard if e.get("event") == "run_starting")
    assert start_line.endswith(f"; {loop_arm_plan(spec)}") and "native@loop trains 14,400 env steps per seed" in start_line
    started = next(e for e in read_events(run_dir) if e["event"] == "confirm_started")
    limit = spec.job_timeout_s * spent / 1600  # --job-timeout scaled with its steps (RunSpec.job_wall_s)
    assert f"native@loop ({spent:,} steps, job limit {limit:,.0f} s)" in started["message"]

    markdown = (run_dir / "report.md").read_text()
    assert "fitness: success (the task's success on the held-out episodes" in markdown
    assert "Does the loop pay for itself?" in markdown and "against native@loop's" in markdown
    assert f"native@loop trained native at {spent:,} env steps, every step the run spent" in markdown
    assert "`0-0`: policy-invariant (shapes only through its potential)" in markdown
    verdict = markdown[markdown.index("## Does the winner"):markdown.index("- status:")]
    assert "![confirmation_success](plots/confirmation_success.png)\n\n**Figure 1.** The metric the verdict " \
        "compares, `success`, on held-out episodes" in verdict  # fmt: skip
    assert "![confirmation](plots/confirmation.png)\n\n**Figure 2.**" in verdict
    held_out = {(r["arm"], r["statistic"]): float(r["value"])
                for r in csv.DictReader((run_dir / "plots" / "confirmation_success.csv").open())}  # fmt: skip
    assert [held_out[("native", f"seed {s}")] for s in range(3)] == pytest.approx(arms["baseline"]["per_seed"]["success"])

    app = create_app(str(run_dir.parent), "t0ken", 8765, LLMConfig.from_spec("offline"))
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        page = client.get("/runs/sparse?token=t0ken").text
    app.state.workers.close()
    assert '<span class="shaping">policy-invariant</span>' in page  # the run page says it too
