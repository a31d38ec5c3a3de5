"""`lero study` on a real tiny study: process sandbox, tiny budgets, 2 seeds (the CLI default
is 5), checked for the study.json structure, held-out evaluation seeds, statistics that
follow from the stored per-seed values, and a resume that trains nothing again."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from lero.app.study import VARIANTS, StudySpec, variant_code
from lero.app.study import stats as study_stats
from lero.app.study.spec import DEFAULT_SEEDS
from lero.graph.protocol import train_and_evaluate, train_and_evaluate_seeds
from lero.sandbox import get_sandbox
from lero.training import load_candidate, make_env
from lero.training.defaults import EVAL_SEED
from tests.support.cli import lero

CANDIDATE = '''import torch

# a hand-written candidate: team reward plus a proximity bonus, and one extra feature


def _nearest(obs):
    rel = obs[:, 4:8].reshape(-1, 2, 2)  # [M, 2, 2] two nearest landmarks
    return rel.norm(dim=-1).min(dim=-1).values  # [M]


def hybrid_reward(ctx):
    close = -_nearest(ctx.next_obs.reshape(-1, ctx.next_obs.shape[-1])).reshape(ctx.env_reward.shape)
    return ctx.env_reward + 0.1 * close, {"close": close}


def enhance_observation(obs):
    return torch.cat([obs, _nearest(obs)[:, None]], dim=1)
'''
TINY = ["--steps", "400", "--seeds", "2", "--eval-episodes", "8", "--sandbox", "process"]
TINY_HPARAMS = {"mappo": {"n_envs": 8, "rollout_len": 25}}


@pytest.fixture(autouse=True)
def _few_threads() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def studies_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One working directory for this module's studies of CANDIDATE at the TINY budget, each
    under its own study id: they share runs/studies/cache, so an arm one study trained (native
    at 400 steps, say) is served to the next from the result cache instead of trained again."""
    return tmp_path_factory.mktemp("studies")


def _study_argv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, candidate: str = CANDIDATE,
                hparams: dict | None = None) -> list[str]:
    """Work in TMP_PATH (default relative runs/, as the README gives it) with CANDIDATE and its
    hyper-parameters written there: the start of a study's argv."""
    monkeypatch.chdir(tmp_path)
    Path("cand.py").write_text(candidate)
    Path("hparams.json").write_text(json.dumps({"hparams": TINY_HPARAMS if hparams is None else hparams}))
    return ["study", "--candidate", "cand.py", "--config", "hparams.json"]


def _episode_returns(policy: object, env: dict, episodes: int, seed: int) -> list[float]:
    """Each episode's per-agent mean native return, rolled out here step by step (the envs of
    simple_spread all end at its horizon together)."""
    batch = make_env(env["name"], episodes, **{k: v for k, v in env.items() if k != "name"})
    obs = batch.reset(seed=seed)  # [E, N, D]
    total = torch.zeros(episodes)  # [E]
    with torch.inference_mode():
        for _ in range(batch.max_steps):
            obs, reward, done, _ = batch.step(policy.act(obs, greedy=True))  # reward [E, N]
            total += reward.mean(dim=1)
            if bool(done.all()):
                break
    return total.tolist()


def test_variants_keep_one_function_and_stay_valid_modules() -> None:
    env = make_env("simple_spread", 4, N=3, num_agent_neighbors=1, num_landmark_neighbors=2)
    obs = env.reset(seed=0).reshape(-1, env.obs_dim)  # [M, D]
    assert variant_code(CANDIDATE, "native") is None
    assert variant_code(CANDIDATE, "hrf+oef") == CANDIDATE
    hrf, oef = variant_code(CANDIDATE, "hrf"), variant_code(CANDIDATE, "oef")
    assert "# a hand-written candidate" in hrf  # source text kept, comments included
    assert load_candidate(hrf).enhance_observation(obs).shape == obs.shape  # raw obs
    assert load_candidate(oef).enhance_observation(obs).shape[1] == obs.shape[1] + 1
    for code in (hrf, oef):
        names = [n.name for n in ast.parse(code).body if isinstance(n, ast.FunctionDef)]
        assert sorted(names) == ["_nearest", "enhance_observation", "hybrid_reward"]
    with pytest.raises(ValueError, match="enhance_observation"):
        variant_code("def hybrid_reward(ctx):\n    return 1\n", "hrf")


def test_statistics_follow_from_values() -> None:
    treated, control = [-10.0, -11.0, -9.5, -10.5, -10.2], [-12.0, -12.5, -11.0, -13.0, -12.1]
    low, high = study_stats.bootstrap_ci(treated)
    assert low < np.mean(treated) < high and study_stats.bootstrap_ci(treated) == (low, high)
    result = study_stats.compare(treated, control)
    assert result["welch_p"] == pytest.approx(stats.ttest_ind(treated, control, equal_var=False).pvalue)
    assert result["welch_p"] < 0.05 and result["hedges_g"] > 1.0
    assert study_stats.steps_to_reach([10, 20, 30], [-15, -11, -9], -11) == 20.0
    assert study_stats.steps_to_reach([10, 20], [-15, -14], -11) is None


def test_study_of_a_candidate_file_then_resume(
    studies_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*_study_argv(studies_dir, monkeypatch), *TINY, "--study-id", "tiny"]
    assert DEFAULT_SEEDS >= 5 and StudySpec(candidate="x").seeds == DEFAULT_SEEDS  # test: 2
    code, out, err = lero(argv, capsys)
    assert code == 0, err + out
    folder = Path("runs/studies/tiny")
    study = json.loads((folder / "study.json").read_text())
    assert study["status"] == "completed"
    assert study["variants"] == list(VARIANTS) and study["algos"] == ["mappo"]
    assert study["metrics"] == list(make_env("simple_spread", 1).task.metric_names)
    assert len(study["train_seeds"]) == 2 and len(study["eval_seeds"]) == 2
    assert EVAL_SEED not in study["eval_seeds"]
    assert not set(study["eval_seeds"]) & set(study["train_seeds"])
    assert len(study["cells"]) == 4
    native = next(c for c in study["cells"] if c["variant"] == "native")
    for cell in study["cells"]:
        assert cell["status"] == "complete" and cell["eval_seeds"] == study["eval_seeds"]
        for metric in study["metrics"]:
            values = cell["per_seed"][metric]
            assert len(values) == 2
            summary = cell["summary"][metric]
            assert summary["mean"] == pytest.approx(np.mean(values))
            # 2 seeds: no interval (it would be their range), the reason instead
            assert summary["ci_low"] is None and summary["iqm_ci_low"] is None and "no CI" in summary["no_ci"]
        if cell["variant"] == "native":
            assert cell["vs_native"] == {}
            continue
        test = cell["vs_native"]["return"]
        assert test["diff"] == pytest.approx(np.mean(cell["per_seed"]["return"]) - np.mean(native["per_seed"]["return"]))
        # 2 + 2 seeds: no p-value, no effect size, no P(improvement) interval, and why
        assert test["welch_p"] is None and test["mannwhitney_p"] is None and test["hedges_g"] is None
        assert test["poi"]["ci_low"] is None and "no p-value" in test["no_test"]
        assert len(cell["steps_to_target"]["per_seed"]) == 2
        # 2 seeds: no band (a t-interval on 1 degree of freedom), each seed's curve instead
        assert cell["curve"]["steps"] and cell["curve"]["low"] == [] and len(cell["curve"]["per_seed"]) == 2
    # the variants really differ: OEF variants train on wider obs than native / hrf
    records = {p.parent.name: json.loads(p.read_text()) for p in folder.glob("cells/mappo/*/seed-1000.json")}
    assert set(records) == set(VARIANTS)
    assert "close" in records["hrf"]["curves"] and "close" not in records["oef"]["curves"]
    md = (folder / "study.md").read_text()
    assert md.startswith("# Study tiny (completed)")
    # one kind of return per comparison: the training curves are timed to a training-curve return
    native_finals = [json.loads(p.read_text())["curves"]["return"][-1] for p in folder.glob("cells/mappo/native/seed-*.json")]
    assert study["target_return"] == pytest.approx(np.mean(native_finals)) and "(training curves)" in study["target_source"]
    assert "Two kinds of return, never compared with each other" in md
    assert '{"' not in md and "`{" not in md  # no raw JSON in the prose
    assert "Candidate: the file `" in md and "Environment: `simple_spread` (N 3, num_agent_neighbors 1" in md
    # warned once at the top and once in the terminal; per-seed values instead of intervals
    assert md.index("> **warning: 2 seeds per arm") < md.index("## mappo") and md.count("warning:") == 1
    assert out.count("warning: 2 seeds per arm") == 1 and "p=" not in out
    assert "(range of 2 seeds [" in md and "(range of 2 seeds [" in out
    assert study["better"]["collisions"] == "lower" and "| collisions (lower is better) |" in md
    assert f"report: {Path.cwd() / folder / 'study.md'}" in out
    assert {p.name for p in (folder / "plots").iterdir()} >= {"curves-mappo.png", "return.png"}
    pngs = sorted(p.name for p in (folder / "plots").glob("*.png"))  # each shown in study.md with its caption
    assert all(f"![{png}](plots/{png})\n\n**Figure.** " in md for png in pngs)
    assert "mappo: learning curves of every arm" in md and "return on the held-out episodes per algorithm" in md

    # resume: the cell files say everything is done, nothing trains again
    (folder / "study.json").unlink()
    before = {p: p.stat().st_mtime_ns for p in folder.glob("cells/**/*.json")}
    code, out, err = lero(argv, capsys)
    assert code == 0, err
    assert "8 of 8 cells done, 0 to train" in out
    assert {p: p.stat().st_mtime_ns for p in folder.glob("cells/**/*.json")} == before
    assert json.loads((folder / "study.json").read_text())["cells"] == study["cells"]

    # a lost cell file is trained again, served from the result cache
    lost = folder / "cells/mappo/hrf/seed-1001.json"
    lost.unlink()
    code, out, err = lero(argv, capsys)
    assert code == 0, err
    assert "7 of 8 cells done, 1 to train" in out and "(cached)" in out
    assert json.loads(lost.read_text())["cached"] is True


def test_study_bad_input_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = lero(["study", "nosuchrun"], capsys)
    assert code == 2 and err.startswith("lero: error: unknown run id 'nosuchrun'")
    code, _, err = lero(["study", "../elsewhere"], capsys)  # named like `lero eval` names it
    assert code == 2 and err.strip() == "lero: error: not a run id: '../elsewhere' (see `lero runs`)"
    code, _, err = lero(["study"], capsys)
    assert code == 2 and "run id or a candidate file" in err
    Path("cand.py").write_text(CANDIDATE)
    code, _, err = lero(["study", "--candidate", "cand.py", "--algos", "dqn"], capsys)
    assert code == 2 and "unknown algorithm 'dqn'" in err
    assert not Path("runs").exists()


@pytest.mark.slow
def test_study_of_a_run_without_the_prior_reports_generation_gains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("run.json").write_text(json.dumps({"hparams": TINY_HPARAMS["mappo"], "eval_episodes": 8}))
    code, _, err = lero(
        ["run", "--config", "run.json", "--generations", "2", "--population", "1", "--steps", "400",
         "--seeds", "1", "--llm", "offline", "--sandbox", "process", "--run-id", "r", "--no-prior"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(Path("runs/r/spec.json").read_text())["offline_prior"] is False
    report = json.loads(Path("runs/r/report.json").read_text())
    Path("study.json").write_text(json.dumps({"variants": ["native", "hrf+oef", "native@loop"]}))
    code, out, err = lero(["study", "r", *TINY, "--config", "study.json"], capsys)
    assert code == 0, err + out
    (folder,) = Path("runs/r/studies").iterdir()
    study = json.loads((folder / "study.json").read_text())
    assert study["config"]["source"]["candidate_id"] == report["best"]["candidate_id"]
    assert study["config"]["hparams"] == {"mappo": TINY_HPARAMS["mappo"]}  # the run's settings
    assert [c["variant"] for c in study["cells"]] == ["native", "hrf+oef", "native@loop"]
    # native@loop trains with every env step the run spent: baseline, candidates, seeds
    assert report["env_steps"] == 400 * 3 and study["arm_steps"]["native@loop"] == report["env_steps"]
    assert study["equal_compute"][0]["versus_steps"] == report["env_steps"]
    gens = study["generations"]
    best = {str(g["generation"]): g["best_fitness"] for g in report["generations"]}
    assert gens["best_per_generation"] == best and gens["offline_prior"] is False
    assert gens["gain_over_generation0"] == pytest.approx(max(best.values()) - best["0"])
    assert "What the generations added" in (folder / "study.md").read_text()
    # other settings under the same study id are refused, the study is kept
    code, _, err = lero(["study", "r", *TINY, "--config", "study.json", "--study-id", folder.name,
                         "--eval-episodes", "16"], capsys)  # fmt: skip
    assert code == 2 and "exists with other settings" in err
    assert json.loads((folder / "study.json").read_text()) == study


def test_evaluate_job_measures_the_held_out_episodes_it_is_given(tmp_path: Path) -> None:
    """`Job.eval_seed` reaches the trusted evaluation; None keeps the selection episodes."""
    from lero.sandbox import Job
    from lero.training import evaluate, load_policy

    env = {"name": "simple_spread", "N": 2}
    sandbox = get_sandbox("process", cache_dir=tmp_path / "cache")
    common = {"code": None, "env": env, "algo": "mappo", "steps": 400, "seed": 0,
              "hparams": TINY_HPARAMS["mappo"], "eval_episodes": 16}  # fmt: skip
    trained = sandbox.run_job(Job(kind="train", **common))
    assert trained.status == "ok"
    policy = load_policy(trained.policy_dir)
    for eval_seed, episodes_seed in ((None, EVAL_SEED), (100_000, 100_000)):
        job = Job(kind="evaluate", policy_dir=trained.policy_dir, eval_seed=eval_seed, **common)
        assert ("eval_seed" in job.config()) == (eval_seed is not None)
        result = sandbox.run_job(job)
        expected = evaluate(policy, "simple_spread", {"N": 2}, episodes=16, seed=episodes_seed)
        assert result.metrics == pytest.approx(expected)
        # every episode's own values come back too: the returns rolled out here, each
        # metric's list averaging to its mean
        assert result.episodes["return"] == pytest.approx(_episode_returns(policy, env, 16, episodes_seed))
        assert set(result.episodes) == set(expected) and all(len(v) == 16 for v in result.episodes.values())
        assert {m: np.mean(v) for m, v in result.episodes.items()} == pytest.approx(expected)
    assert "eval_seed" not in Job(kind="train", eval_seed=5, **common).config()


def test_seeds_measured_together_each_get_their_own_held_out_episodes(tmp_path: Path) -> None:
    """A study's seeds train in one sandbox and are measured in one more, each policy on its
    own eval seed's episodes: every seed's result is what it gets alone."""
    from lero.training import evaluate, load_policy

    env = {"name": "simple_spread", "N": 2}
    common = {"hparams": TINY_HPARAMS["mappo"], "eval_episodes": 16, "candidate_id": "study:mappo:oef"}
    code = variant_code(CANDIDATE, "oef")
    together = train_and_evaluate_seeds(
        get_sandbox("process", work_dir=tmp_path / "together"), code, env, "mappo", 400, [3, 4], eval_seeds=[100_003, 100_004], **common)
    alone = [train_and_evaluate(
        get_sandbox("process", work_dir=tmp_path / f"alone-{seed}"), code, env, "mappo", 400, seed, eval_seed=100_000 + seed, **common) for seed in (3, 4)]  # fmt: skip
    oef = load_candidate(code).enhance_observation
    for grouped, single, eval_seed in zip(together, alone, (100_003, 100_004), strict=True):
        assert grouped.status == single.status == "ok"
        assert grouped.metrics == single.metrics and grouped.episodes == single.episodes
        assert grouped.curves == single.curves
        expected = evaluate(load_policy(grouped.policy_dir), "simple_spread", {"N": 2}, episodes=16,
                            seed=eval_seed, enhance_observation=oef)  # fmt: skip
        assert grouped.metrics == pytest.approx(expected)
    assert together[0].metrics != together[1].metrics


def test_a_study_groups_the_seeds_it_still_lacks_per_arm(tmp_path: Path) -> None:
    """On 2 slots the 4 arms' 2 seeds go as 4 sandbox jobs of 2 seeds (not 8 of 1); a
    resumed study trains only the seeds whose cells are missing."""
    from lero.app.study.execute import _seed_jobs, plan_study

    module = tmp_path / "cand.py"
    module.write_text(CANDIDATE)
    plan = plan_study(StudySpec.parse({"candidate": str(module), "runs_dir": str(tmp_path / "runs"),
                                       "seeds": 2, "variants": list(VARIANTS)}))  # fmt: skip
    def slots(n: int) -> object:
        return get_sandbox("process", cache_dir=plan.cache_dir, max_parallel=n)

    assert _seed_jobs(plan, slots(2)) == [("mappo", variant, [0, 1]) for variant in VARIANTS]
    assert _seed_jobs(plan, slots(8)) == [("mappo", variant, [i]) for variant in VARIANTS for i in (0, 1)]
    for variant in VARIANTS:
        for seed in plan.spec.train_seeds:
            if (variant, seed) != ("hrf", plan.spec.train_seeds[1]):
                path = plan.cell_path("mappo", variant, seed)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps({"status": "ok"}))
    assert _seed_jobs(plan, slots(2)) == [("mappo", "hrf", [1])]


def test_a_study_plans_its_slots_for_the_seeds_no_cache_answers(tmp_path: Path) -> None:
    """Native's seeds in the result cache (a lero_table run's, shared from an earlier run) take
    no slot: the other arm's 3 seeds spread over both slots instead of one job of 3 beside them."""
    from lero.app.study.execute import _job_fields, _seed_jobs, plan_study

    module = tmp_path / "cand.py"
    module.write_text(CANDIDATE)
    plan = plan_study(StudySpec.parse({"candidate": str(module), "runs_dir": str(tmp_path / "runs"), "seeds": 3,
                                       "steps": 400, "eval_episodes": 4, "variants": ["native", "hrf"],
                                       "hparams": TINY_HPARAMS, "sandbox": "process"}))  # fmt: skip
    sandbox = get_sandbox("process", cache_dir=plan.cache_dir, max_parallel=2)
    assert _seed_jobs(plan, sandbox) == [("mappo", "native", [0, 1, 2]), ("mappo", "hrf", [0, 1, 2])]
    train_and_evaluate_seeds(sandbox, **_job_fields(plan, "mappo", "native", [0, 1, 2]))
    assert _seed_jobs(plan, sandbox) == [("mappo", "native", [0, 1, 2]), ("mappo", "hrf", [0, 1]), ("mappo", "hrf", [2])]


def test_a_longer_arm_gets_its_wall_clock_limit_in_proportion_to_its_steps(tmp_path: Path) -> None:
    """An arm at 10x the study's steps (native@10x, and the recheck's 10x run) is allowed 10x
    the default wall clock, as a run allows its native@loop job (`RunSpec.job_wall_s`); the
    arms at the study's budget keep the default. With one hour for all, 2 seeds of an 8M-step
    native@loop trained together timed out on 2 busy cores."""
    from lero.app.study.execute import _job_fields, plan_study
    from lero.app.study.recheck import RECHECK_FACTOR
    from lero.sandbox.types import JOB_WALL_S, Limits

    module = tmp_path / "cand.py"
    module.write_text(CANDIDATE)
    plan = plan_study(StudySpec.parse({"candidate": str(module), "runs_dir": str(tmp_path / "runs"), "steps": 400,
                                       "variants": ["native", "hrf", "native@10x", "hrf+oef@3x"]}))  # fmt: skip
    limits = {arm: _job_fields(plan, "mappo", arm, [0])["limits"] for arm in plan.spec.variants}
    assert limits["native"] == limits["hrf"] == Limits()
    assert limits["native@10x"] == Limits(wall_s=10 * JOB_WALL_S)
    assert limits["hrf+oef@3x"].wall_s == pytest.approx(3 * JOB_WALL_S)
    assert plan.job_limits(RECHECK_FACTOR * plan.steps).wall_s == pytest.approx(RECHECK_FACTOR * JOB_WALL_S)


def test_study_executor_flags_reach_the_sandbox_settings(tmp_path: Path) -> None:
    """`lero study --executor/--ray-address` (like run and resume): the plan opens its
    sandbox with them; a file's study defaults to the local executor."""
    from lero.app.cli.args import build_parser, study_fields
    from lero.app.study.execute import plan_study

    module = tmp_path / "cand.py"
    module.write_text(CANDIDATE)
    args = build_parser().parse_args(["study", "--candidate", str(module), "--ray-address", "auto",
                                      "--runs-dir", str(tmp_path / "runs")])
    plan = plan_study(StudySpec.parse(study_fields(args)))
    sandbox = plan.sandbox_spec()
    assert (sandbox.executor, sandbox.ray_address) == ("ray", "auto")
    assert sandbox.env == plan.env["name"] and sandbox.max_parallel == plan.spec.max_parallel
    local = plan_study(StudySpec.parse({"candidate": str(module), "runs_dir": str(tmp_path / "runs")}))
    assert (local.sandbox_spec().executor, local.sandbox_spec().ray_address) == ("local", None)


def _check_marl_eval_layout(document: dict) -> list[tuple[str, str, str, str]]:
    """marl-eval's JSON layout, checked from its description; returns every (env, task, algo, seed)."""
    found = []
    for env_name, tasks in document.items():
        assert isinstance(env_name, str) and isinstance(tasks, dict) and tasks
        for task_name, algos in tasks.items():
            assert isinstance(task_name, str) and isinstance(algos, dict) and algos
            for algo_name, seeds in algos.items():
                assert isinstance(algo_name, str) and seeds
                for seed_key, entry in seeds.items():
                    assert re.fullmatch(r"seed_\d+", seed_key)
                    steps = [k for k in entry if k != "absolute_metrics"]
                    assert steps and all(re.fullmatch(r"step_\d+", k) for k in steps)
                    for key in steps:
                        assert isinstance(entry[key].pop("step_count"), int)
                        assert all(isinstance(v, list) and all(isinstance(x, float) for x in v)
                                   for v in entry[key].values())  # fmt: skip
                    absolute = entry["absolute_metrics"]
                    assert absolute and all(isinstance(v, list) and v for v in absolute.values())
                    found.append((env_name, task_name, algo_name, seed_key))
    return found


def test_equal_compute_arm_export_and_combine(
    studies_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    common = [*_study_argv(studies_dir, monkeypatch), *TINY]
    argv = [*common, "--variants", "native,hrf+oef,native@2x", "--study-id", "arms",
            "--export", "marl-eval", "arms-marl.json"]  # fmt: skip
    code, out, err = lero(argv, capsys)
    assert code == 0, err + out
    study = json.loads(Path("runs/studies/arms/study.json").read_text())
    cells = {c["variant"]: c for c in study["cells"]}
    assert {v: c["steps"] for v, c in cells.items()} == {"native": 400, "hrf+oef": 400, "native@2x": 800}
    records = [json.loads(p.read_text()) for p in Path("runs/studies/arms/cells/mappo/native@2x").glob("*.json")]
    assert len(records) == 2 and all(r["curves"]["steps"][-1] > 400 for r in records)  # trained longer
    assert all(r["curves"]["steps"][-1] <= 400 for r in cells_of(Path("runs/studies/arms"), "native"))
    (row,) = study["equal_compute"]
    assert (row["arm"], row["versus"], row["versus_steps"]) == ("hrf+oef", "native@2x", 800)
    x, y = cells["hrf+oef"]["per_seed"]["return"], cells["native@2x"]["per_seed"]["return"]
    pairs = [1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y]
    assert row["held_out"]["poi"]["value"] == pytest.approx(np.mean(pairs))
    assert row["held_out_verdict"] == "too few seeds"  # 2 seeds: no verdict
    step = row["equal_steps"]["steps"]  # where the variant's curves end; native@2x's read there
    assert step == min(r["curves"]["steps"][-1] for r in cells_of(Path("runs/studies/arms"), "hrf+oef")) >= 400
    expected = [np.interp(step, r["curves"]["steps"], r["curves"]["return"]) for r in records]
    assert sorted(row["equal_steps"]["versus_curve"]) == pytest.approx(sorted(expected))
    for cell in study["cells"]:
        assert cell["summary"]["return"]["iqm"] == pytest.approx(stats.trim_mean(cell["per_seed"]["return"], 0.25))
    assert set(study["profiles"]["mappo"]) == {"native", "hrf+oef", "native@2x"}
    md = Path("runs/studies/arms/study.md").read_text()
    assert "## Equal compute" in md and "native@2x (800)" in md
    assert study["hparams_all"]["mappo"]["rollout_len"] == 25 and "lr" in study["hparams_all"]["mappo"]
    assert "## Hyper-parameters" in md
    assert "mappo: hrf+oef at 400 steps" in out and "native@2x at 800 steps" in out
    assert (Path("runs/studies/arms/plots") / "profile-mappo.png").is_file()

    exported = json.loads(Path("arms-marl.json").read_text())
    found = _check_marl_eval_layout(json.loads(Path("arms-marl.json").read_text()))
    assert len(found) == 3 * 2 and {f[0] for f in found} == {"mpe2"}
    seed = exported["mpe2"][found[0][1]]["mappo:native@2x"]["seed_1000"]
    assert seed["step_0"]["step_count"] == 800
    episodes = seed["absolute_metrics"]["return"]  # the 8 held-out episodes' own returns
    assert len(episodes) == 8 and np.mean(episodes) == pytest.approx(cells["native@2x"]["per_seed"]["return"][0])
    assert seed["step_0"]["return"] == episodes == cells["native@2x"]["per_episode"]["return"][0]

    # a second task (N=2), then both studies as one result
    code, out, err = lero([*common, "--variants", "native,hrf+oef", "--study-id", "n2", "--env-arg", "N=2"], capsys)
    assert code == 0, err + out
    other = json.loads(Path("runs/studies/n2/study.json").read_text())
    code, out, err = lero(["study", "--combine", "runs/studies/arms", "runs/studies/n2", "--out", "both",
                           "--export", "marl-eval", "both.json"], capsys)  # fmt: skip
    assert code == 0, err + out
    combined = json.loads(Path("both/combined.json").read_text())
    assert len(combined["tasks"]) == 2
    strata = []
    for doc in (study, other):
        runs = {c["variant"]: np.asarray(c["per_seed"]["return"]) for c in doc["cells"]}
        low, high = min(v.min() for v in runs.values()), max(v.max() for v in runs.values())
        strata.append({arm: (v - low) / (high - low) for arm, v in runs.items()})
    pooled = np.concatenate([s["hrf+oef"] for s in strata])
    assert combined["arms"]["mappo:hrf+oef"]["iqm"] == pytest.approx(stats.trim_mean(pooled, 0.25))
    assert combined["arms"]["mappo:hrf+oef"]["tasks"] == 2 and combined["arms"]["mappo:native@2x"]["tasks"] == 1
    wins = [np.mean([1.0 if a > b else 0.5 if a == b else 0.0 for a in s["hrf+oef"] for b in s["native"]])
            for s in strata]  # fmt: skip
    assert combined["improvement"]["mappo:hrf+oef"]["value"] == pytest.approx(np.mean(wins))
    assert len(_check_marl_eval_layout(json.loads(Path("both.json").read_text()))) == 3 * 2 + 2 * 2
    assert (Path("both/plots") / "profile-mappo.png").is_file() and Path("both/combined.md").is_file()
    assert combined["score"] == "final"  # no study kept checkpoints


def test_any_variant_at_k_times_the_steps_trains_longer_and_is_tested_against_native_there(
    studies_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*_study_argv(studies_dir, monkeypatch), *TINY, "--variants", "native,hrf,native@2x,hrf+oef@2x,oef@2x",
            "--study-id", "longer"]  # fmt: skip
    code, out, err = lero(argv, capsys)
    assert code == 0, err + out
    folder = Path("runs/studies/longer")
    study = json.loads((folder / "study.json").read_text())
    cells = {c["variant"]: c for c in study["cells"]}
    assert {v: c["steps"] for v, c in cells.items()} == {"native": 400, "hrf": 400, "native@2x": 800,
                                                         "hrf+oef@2x": 800, "oef@2x": 800}  # fmt: skip
    for arm in ("native@2x", "hrf+oef@2x", "oef@2x"):
        assert all(r["curves"]["steps"][-1] > 400 for r in cells_of(folder, arm))  # trained longer
    assert all("close" in r["curves"] for r in cells_of(folder, "hrf+oef@2x"))  # the candidate's HRF trained
    assert not any("close" in r["curves"] for r in cells_of(folder, "oef@2x"))  # only its OEF
    assert (cells["hrf"]["vs_native_arm"], cells["hrf+oef@2x"]["vs_native_arm"]) == ("native", "native@2x")
    assert cells["native@2x"]["vs_native_arm"] is None and cells["native@2x"]["vs_native"] == {}
    x, y = cells["hrf+oef@2x"]["per_seed"]["return"], cells["native@2x"]["per_seed"]["return"]
    pairs = [1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y]
    assert cells["hrf+oef@2x"]["vs_native"]["return"]["poi"]["value"] == pytest.approx(np.mean(pairs))
    assert set(study["profiles"]["mappo"]) == set(cells)
    assert "| hrf+oef@2x | 800 |" in (folder / "study.md").read_text()
    assert (folder / "plots" / "curves-mappo.png").is_file()
    code, out, err = lero(["study", "--combine", str(folder), "--out", "combined"], capsys)
    assert code == 0, err + out
    assert json.loads(Path("combined/combined.json").read_text())["improvement"]["mappo:hrf+oef@2x"]["versus"] \
        == "mappo:native@2x"


def test_arms_name_their_variant_and_the_native_at_their_budget() -> None:
    from lero.app.study.variants import (
        base_variant,
        is_equal_compute,
        same_budget_native,
        variant_code,
    )

    assert variant_code(CANDIDATE, "hrf+oef@10x") == CANDIDATE and variant_code(CANDIDATE, "native@10x") is None
    assert variant_code(CANDIDATE, "hrf@3x") == variant_code(CANDIDATE, "hrf")
    assert [base_variant(a) for a in ("oef@2x", "native@loop", "hrf")] == ["oef", "native", "hrf"]
    assert [same_budget_native(a) for a in ("hrf+oef@10x", "hrf", "native@10x", "native@loop")] == \
        ["native@10x", "native", None, None]
    assert is_equal_compute("native@10x") and is_equal_compute("native@loop") and not is_equal_compute("hrf@10x")


def cells_of(folder: Path, arm: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in folder.glob(f"cells/mappo/{arm}/*.json")]


def test_study_arm_and_export_input_errors_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("cand.py").write_text(CANDIDATE)
    for extra, message in (
        (["--variants", "native,native@0x"], "unknown arm 'native@0x'"),
        (["--variants", "native,hrf@x"], "unknown arm 'hrf@x'"),
        (["--variants", "native,reward@2x"], "unknown arm 'reward@2x'"),
        (["--variants", "native,native@loop"], "native@loop needs a run id"),
        (["--variants", "hrf"], "must include native"),
        (["--export", "csv", "x.json"], "unknown format 'csv'"),
        (["--out", "x"], "--out goes with --combine"),
        (["--steps", "60000000", "--variants", "native,native@2x"], "over the limit"),
    ):
        code, _, err = lero(["study", "--candidate", "cand.py", *extra], capsys)
        assert code == 2 and message in err and err.count("\n") == 1, (extra, err)
    code, _, err = lero(["study", "--combine", "nowhere"], capsys)
    assert code == 2 and err.startswith("lero: error: no readable study.json in nowhere")
    code, _, err = lero(["study", "--candidate", "cand.py", "--combine", "x"], capsys)
    assert code == 2 and "--combine takes finished study folders" in err
    assert not Path("runs").exists() and not Path("x.json").exists()


def test_paper_preset_is_ten_seeds_of_four_algorithms() -> None:
    from lero.app.cli.args import build_parser, study_fields

    fields = study_fields(build_parser().parse_args(["study", "--candidate", "c.py", "--preset", "paper"]))
    assert fields["seeds"] == 10 and fields["algos"] == ("mappo", "ippo", "vdn", "qmix")
    assert fields["variants"] == ("native", "hrf", "oef", "hrf+oef", "native@10x", "hrf+oef@10x")
    fields = study_fields(build_parser().parse_args(["study", "--candidate", "c.py", "--preset", "paper", "--seeds", "3"]))
    assert fields["seeds"] == 3  # a flag over the preset


PLANTED = '''def hybrid_reward(ctx):
    """Planted reward hacking: pays for the opposite of the task."""
    return -ctx.env_reward, {}


def enhance_observation(obs):
    return obs
'''


def test_recheck_flags_a_reward_that_rises_while_the_native_return_falls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fast = {"mappo": {"n_envs": 16, "rollout_len": 25, "lr": 0.005}}
    argv = [*_study_argv(tmp_path, monkeypatch, PLANTED, fast), "--steps", "800", "--seeds", "2",
            "--eval-episodes", "8", "--sandbox", "process", "--variants", "native,hrf+oef", "--study-id", "p"]
    code, out, err = lero([*argv, "--recheck"], capsys)
    assert code == 0, err + out
    assert "reward-hacking check: FLAGGED" in out
    record = json.loads(Path("runs/studies/p/recheck.json").read_text())
    assert record["steps"] == 10 * 800 and record["curves"]["steps"][-1] >= 8000
    check = json.loads(Path("runs/studies/p/study.json").read_text())["recheck"]
    assert check["reward_hacking"] and not check["native_keeps_rising"]
    steps, native, shaped = (np.asarray(record["curves"][k]) for k in ("steps", "return", "train_reward"))
    past = steps > 800
    for values, sign in ((native, -1), (shaped, 1)):  # recomputed: Theil-Sen CI on one side of 0
        fit = stats.theilslopes(values[past], steps[past], alpha=0.95)
        assert sign * fit.low_slope > 0 and sign * fit.high_slope > 0
    assert "FLAGGED" in Path("runs/studies/p/study.md").read_text()
    assert Path("runs/studies/p/plots/recheck.png").is_file()
    # the check is kept: a second call trains nothing
    before = Path("runs/studies/p/recheck.json").stat().st_mtime_ns
    code, out, err = lero([*argv, "--recheck"], capsys)
    assert code == 0 and "0 to train" in out and "reward-hacking check: mappo" not in out
    assert Path("runs/studies/p/recheck.json").stat().st_mtime_ns == before


def test_checkpoints_are_scored_on_validation_episodes_and_the_best_on_ten_times_the_held_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lero.training import evaluate, load_policy

    argv = [*_study_argv(tmp_path, monkeypatch), "--steps", "800", "--seeds", "2", "--eval-episodes", "8",
            "--sandbox", "process", "--variants", "native", "--checkpoints", "4",
            "--study-id", "ck", "--export", "marl-eval", "ck.json"]  # fmt: skip
    code, out, err = lero(argv, capsys)
    assert code == 0, err + out
    study = json.loads(Path("runs/studies/ck/study.json").read_text())
    exported = json.loads(Path("ck.json").read_text())
    (task,) = exported["mpe2"].values()
    assert study["config"]["validation_seeds"] == [200_000, 200_001]
    assert not set(study["config"]["validation_seeds"]) & {*study["eval_seeds"], EVAL_SEED}
    env = study["config"]["env"]
    kwargs = {k: v for k, v in env.items() if k != "name"}
    for index, seed in enumerate(study["train_seeds"]):
        record = json.loads(Path(f"runs/studies/ck/cells/mappo/native/seed-{seed}.json").read_text())
        scored = record["checkpoints"]
        assert scored["every"] == 200 and set(scored["validation"]) == {"200", "400", "600", "800"}
        # the weights the train job left, policy/step-<n>/ beside the final policy/: the folder
        # whose final weights give this cell's held-out metrics
        finals = [p.parent.parent for p in Path("runs/studies/cache").rglob("step-200/policy.pt")]
        assert len(finals) == 2
        (final,) = [f for f in finals if evaluate(load_policy(f), env["name"], kwargs, episodes=8,
                                                  seed=100_000 + index) == pytest.approx(record["metrics"])]
        policies = {step: final / f"step-{step}" for step in (200, 400, 600)} | {800: final}
        for step, folder in policies.items():  # validation: seed 200000 + i, the study's episodes
            expected = evaluate(load_policy(folder), env["name"], kwargs, episodes=8, seed=200_000 + index)
            assert scored["validation"][str(step)] == pytest.approx(expected)
        best = max((200, 400, 600, 800), key=lambda s: (scored["validation"][str(s)]["return"], -s))
        assert scored["best_step"] == best and scored["absolute_episodes"] == 80
        expected = evaluate(load_policy(policies[best]), env["name"], kwargs, episodes=80, seed=100_000 + index)
        assert scored["absolute"] == pytest.approx(expected)
        # the export's lists: each checkpoint's 8 validation episodes, the best's 80 held-out ones
        entry = task["mappo:native"][f"seed_{seed}"]
        for i, (step, folder) in enumerate(sorted(policies.items())):
            rolled = _episode_returns(load_policy(folder), env, 8, 200_000 + index)
            assert entry[f"step_{i}"]["step_count"] == step and entry[f"step_{i}"]["return"] == pytest.approx(rolled)
        rolled = _episode_returns(load_policy(policies[best]), env, 80, 100_000 + index)
        assert entry["absolute_metrics"]["return"] == pytest.approx(rolled)
    (cell,) = study["cells"]
    assert cell["absolute"]["per_seed"]["return"] == [
        json.loads(Path(f"runs/studies/ck/cells/mappo/native/seed-{s}.json").read_text())["checkpoints"]["absolute"]["return"]
        for s in study["train_seeds"]
    ]
    assert "## Absolute metric" in Path("runs/studies/ck/study.md").read_text()
    assert len(_check_marl_eval_layout(json.loads(Path("ck.json").read_text()))) == 2
    seed_entry = task["mappo:native"]["seed_1000"]
    assert [seed_entry[f"step_{i}"]["step_count"] for i in range(4)] == [200, 400, 600, 800]
    assert np.mean(seed_entry["absolute_metrics"]["return"]) == pytest.approx(cell["absolute"]["per_seed"]["return"][0])
    # combined, the study is scored by its absolute metric
    code, out, err = lero(["study", "--combine", "runs/studies/ck", "--out", "c"], capsys)
    assert code == 0, err + out
    combined = json.loads(Path("c/combined.json").read_text())
    assert combined["score"] == "absolute" and combined["arms"]["mappo:native"]["runs"] == 2
    values = np.asarray(cell["absolute"]["per_seed"]["return"])
    normalised = (values - values.min()) / (values.max() - values.min())
    assert combined["arms"]["mappo:native"]["mean"] == pytest.approx(normalised.mean())


def test_ctrl_c_mid_study_kills_its_running_job_keeps_the_finished_cell_and_the_same_study_continues(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One job at a time, three arms: Ctrl-C as the first cell is reported. The next arm's
    training, already started, is killed (no cell) and the third never trains; before, the
    study waited for both to finish and wrote their cells. The same study then trains the two."""
    from lero.app.study import run_study

    monkeypatch.chdir(tmp_path)
    Path("cand.py").write_text(CANDIDATE)
    spec = StudySpec(candidate="cand.py", variants=("native", "hrf", "oef"), seeds=1, steps=400, eval_episodes=8,
                     hparams=TINY_HPARAMS, sandbox="process", max_parallel=1)  # fmt: skip

    def ctrl_c_at_the_first_cell(line: str) -> None:
        if line.startswith("[1/3]"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_study(spec, progress=ctrl_c_at_the_first_cell)
    assert len(list(Path("runs").glob("**/cells/mappo/*/seed-*.json"))) == 1
    lines: list[str] = []
    study = run_study(spec, progress=lines.append)
    assert "1 of 3 cells done, 2 to train" in lines[0] and study["status"] == "completed"


def test_lero_study_interrupted_says_the_finished_cells_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from lero.app import study as study_package

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(study_package, "run_study", interrupted)
    code, _, err = lero(_study_argv(tmp_path, monkeypatch) + TINY, capsys)
    assert code == 130 and "interrupted; its finished cells are kept: the same command continues the study" in err
