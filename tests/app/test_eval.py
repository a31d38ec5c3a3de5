"""`lero eval RUN [CANDIDATE]` on a real tiny run, the way the README gives it (a working
directory, the default relative runs/): held-out measurement through the sandbox's
evaluate job, the GIF of recorded episodes, and refusals of whatever a run directory
could plant."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from lero.app.reports.eval_render import HEADER, PANEL, START_COLOR, episode_arrays
from lero.app.reports.held_out import check_drawable, evaluate_target, open_target
from lero.app.study.spec import FIRST_EVAL_SEED
from lero.graph.configuration import RunError, RunSpec
from lero.sandbox import Job, get_sandbox
from lero.sandbox.results import _check_schema
from lero.training import evaluate, load_policy, make_env
from tests.support.cli import lero


@pytest.fixture
def moved(tiny_runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the run `alpha` (2 seeds) in a fresh working directory: its recorded policy
    paths still name the original's, and `lero eval` finds them below the copy's own cache/jobs."""
    shutil.copytree(tiny_runs / "runs" / "alpha", tmp_path / "runs" / "alpha", symlinks=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "runs" / "alpha"


def _best(run: Path) -> str:
    return json.loads((run / "report.json").read_text())["best"]["candidate_id"]


def test_eval_measures_the_baseline_on_held_out_episodes(moved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = lero(["eval", "alpha", "baseline", "--episodes", "24"], capsys)
    assert code == 0, err
    saved = json.loads((moved / "evals" / "baseline.json").read_text())
    assert saved["status"] == "completed" and saved["episodes"] == 24
    spec = json.loads((moved / "spec.json").read_text())
    for seed, row in saved["per_seed"].items():
        # the same number a host-side evaluation of those weights on episode seed 100000 + seed gives
        policy = load_policy(json.loads((moved / "baseline" / f"seed-{seed}.json").read_text())["policy_dir"])
        expected = evaluate(policy, spec["env"], spec["env_kwargs"], episodes=24, seed=FIRST_EVAL_SEED + int(seed))
        assert row["eval_seed"] == FIRST_EVAL_SEED + int(seed)
        for name, value in expected.items():
            assert row["metrics"][name]["mean"] == pytest.approx(value, abs=1e-5)
            assert row["metrics"][name]["ci_low"] <= value <= row["metrics"][name]["ci_high"]
    means = [row["metrics"]["return"]["mean"] for row in saved["per_seed"].values()]
    assert saved["over_seeds"]["return"]["mean"] == pytest.approx(sum(means) / len(means))
    assert saved["over_seeds"]["return"]["ci_low"] is None  # 2 seeds: no CI, and the terminal says why
    assert "over seeds: no CI: 2 seeds" in out and "return: " in out and "saved: " in out


def test_eval_runs_the_best_candidates_oef_in_the_sandbox_and_draws_a_gif(
    moved: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    best = _best(moved)
    record = json.loads((moved / "candidates" / best / "seed-0.json").read_text())
    env = make_env("simple_spread", 1, **json.loads((moved / "spec.json").read_text())["env_kwargs"])
    assert load_policy(record["policy_dir"]).meta.obs_dim > env.obs_dim  # it needs the candidate's OEF
    code, out, err = lero(["eval", "alpha", "--episodes", "8", "--render", "episodes.gif", "--render-episodes", "2"], capsys)
    assert code == 0, err
    assert f"{best} of run alpha" in out and "rendered: " in out
    saved = json.loads((moved / "evals" / f"{best}.json").read_text())
    assert saved["candidate"] == best and set(saved["per_seed"]) == {"0", "1"}
    gif = Image.open(Path("episodes.gif"))
    assert gif.format == "GIF" and gif.size[0] == 2 * PANEL
    assert gif.n_frames == env.max_steps + 1  # the reset, then every step
    drawing = np.asarray(gif.convert("RGB"))[HEADER : HEADER + PANEL]  # [PANEL, W, 3] below the panels' text
    assert (drawing == np.array(START_COLOR)).all(axis=-1).any()  # simple_spread's start area, dashed


def test_recorded_episodes_are_the_evaluated_ones(moved: Path) -> None:
    target = open_target(Path("runs"), "alpha", "baseline")
    document = evaluate_target(target, episodes=4, record_episodes=3)
    trajectories = document["trajectories"][0]
    env = make_env(target.spec.env, 4, **target.spec.env_kwargs)
    env.reset(seed=FIRST_EVAL_SEED)
    first = env.world()
    assert torch.tensor(trajectories["agent_pos"])[:, 0].allclose(first["agent_pos"][:3])
    assert torch.tensor(trajectories["landmark_pos"])[:, 0].allclose(first["landmark_pos"][:3])
    assert trajectories["length"] == [env.max_steps] * 3
    assert trajectories["arena"] == [1.0, 1.0, 0.0]  # the env's declared start area [-1, 1]^2, no walls
    returns = torch.tensor(trajectories["return"])[:, -1]  # the return so far at the last step
    policy = load_policy(target.policies[0])
    expected = evaluate(policy, target.spec.env, target.spec.env_kwargs, episodes=4, seed=FIRST_EVAL_SEED)
    assert document["per_seed"]["0"]["metrics"]["return"]["mean"] == pytest.approx(expected["return"], abs=1e-5)
    assert len(returns) == 3 and bool(torch.isfinite(returns).all())


def test_an_env_without_agent_positions_cannot_be_drawn() -> None:
    with pytest.raises(RunError, match="no agent_pos to draw"):
        episode_arrays({"return": [[0.0, -1.0]], "length": [1], "state_pos": [[[[0.0, 0.0]], [[1.0, 1.0]]]]})
    with pytest.raises(RunError, match="shapes disagree"):
        episode_arrays({"return": [[0.0, -1.0]], "length": [1], "agent_pos": [[[[0.0, 0.0]]]]})
    spec = RunSpec(env="simple_spread")
    check_drawable(spec)  # agents have positions: nothing raised


def test_a_trajectory_that_is_not_numbers_is_refused() -> None:
    good = {"status": "ok", "trajectories": {"agent_pos": [[[[0.0, 1.0]]]], "length": [0]}}
    assert _check_schema(good, "evaluate").trajectories == good["trajectories"]
    for bad in ({"agent_pos": [[["x", 1.0]]]}, {"agent_pos": 3.0}, {"agent_pos": [[[[[[1.0]]]]]]}):
        with pytest.raises(ValueError, match="trajectories"):
            _check_schema({"status": "ok", "trajectories": bad}, "evaluate")
    with pytest.raises(ValueError, match="record_episodes"):
        Job(kind="train", code=None, steps=10, record_episodes=2)


def test_eval_refuses_bad_input_in_one_line(moved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv, message in (
        (["eval", "nope"], "unknown run id 'nope'"),
        (["eval", "../alpha"], "not a run id"),
        (["eval", "alpha", "9-9"], "has no candidate '9-9'"),
        (["eval", "alpha", "--render", "out.mp4"], "only an animated .gif"),
        (["eval", "alpha", "--render", "x.gif", "--render-episodes", "99"], "--render-episodes must be <="),
        (["eval", "alpha", "--episodes", "0"], "--episodes"),
    ):
        code, _, err = lero(argv, capsys)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert not (moved / "evals").exists()


def test_eval_uses_no_path_a_run_directory_plants(moved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed_file = moved / "baseline" / "result.json"
    result = json.loads(seed_file.read_text())
    outside = tmp_path / "outside"
    shutil.copytree(Path(result["per_seed"][0]["policy_dir"]), outside)  # real weights, outside the run
    for planted in (str(outside), "/etc", f"{moved}/cache/jobs/../../baseline"):
        result["per_seed"][0]["policy_dir"] = planted
        seed_file.write_text(json.dumps(result))
        code, _, err = lero(["eval", "alpha", "baseline"], capsys)
        assert code == 2 and "seed 0's policy" in err and len(err.strip().splitlines()) == 1, (planted, err)
    # a link inside the job folders, to weights outside them
    jobs = moved / "cache" / "jobs"
    (jobs / "planted").symlink_to(outside)
    result["per_seed"][0]["policy_dir"] = str(jobs / "planted")
    seed_file.write_text(json.dumps(result))
    code, _, err = lero(["eval", "alpha", "baseline"], capsys)
    assert code == 2 and "symlink" in err and len(err.strip().splitlines()) == 1
    assert not (moved / "evals").exists()


def test_eval_sends_recorded_code_through_the_sandbox_gate(moved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    best = _best(moved)
    path = moved / "candidates" / best / "result.json"
    result = json.loads(path.read_text())
    result["code"] = "import os\n" + result["code"]  # the static check refuses it before anything runs
    path.write_text(json.dumps(result))
    code, out, err = lero(["eval", "alpha", best, "--episodes", "4"], capsys)
    assert code == 1, err
    assert "rejected" in out
    saved = json.loads((moved / "evals" / f"{best}.json").read_text())
    assert saved["status"] == "incomplete" and {row["status"] for row in saved["per_seed"].values()} == {"rejected"}


def test_eval_job_records_positions_only_when_asked(moved: Path) -> None:
    target = open_target(Path("runs"), "alpha", "baseline")
    sandbox = get_sandbox("process", cache_dir=target.rundir.cache_dir)
    try:
        env = {"name": target.spec.env, **target.spec.env_kwargs}
        plain = sandbox.run_job(Job(kind="evaluate", code=None, env=env, seed=0,
                                    policy_dir=str(target.policies[0]), eval_episodes=2))  # fmt: skip
    finally:
        sandbox.close()
    assert plain.status == "ok" and plain.trajectories == {}
