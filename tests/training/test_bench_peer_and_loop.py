"""benchmarks.vs_jaxmarl and benchmarks.loop_compute: their arguments, mappings and result
shapes on tiny budgets (behaviour only, never timings; JaxMARL itself is not installed here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import loop_compute, sandbox_overhead, vs_jaxmarl
from lero.sandbox import get_sandbox
from lero.training import TrainConfig

# JaxMARL's baselines/IPPO/config/ippo_ff_mpe.yaml, the keys the mapping reads
PEER_CONFIG = {
    "LR": 2.5e-4,
    "NUM_ENVS": 16,
    "NUM_STEPS": 128,
    "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 4,
    "GAMMA": 0.99,
    "GAE_LAMBDA": 0.95,
    "CLIP_EPS": 0.2,
    "ENT_COEF": 0.01,
    "VF_COEF": 0.5,
    "MAX_GRAD_NORM": 0.5,
    "ANNEAL_LR": True,
}


def test_peer_config_becomes_lero_ppo_hparams() -> None:
    hparams = TrainConfig(algo="ippo", hparams=vs_jaxmarl.peer_hparams(PEER_CONFIG)).algo_hparams()
    assert (hparams.n_envs, hparams.rollout_len, hparams.epochs, hparams.minibatches) == (16, 128, 4, 4)
    assert (hparams.lr, hparams.max_grad_norm, hparams.vf_coef, hparams.hidden) == (2.5e-4, 0.5, 0.5, 64)
    assert hparams.clip_eps == hparams.value_clip_eps == 0.2 and hparams.anneal_lr


def test_time_to_return_reads_the_smoothed_curve() -> None:
    times = [float(i) for i in range(40)]
    returns = [-30.0] * 20 + [-10.0] * 20  # window 2: the first -10 alone averages -20
    assert vs_jaxmarl.time_to_return(times, returns, target=-10.0) == 21.0
    assert vs_jaxmarl.time_to_return(times, returns, target=-5.0) is None


def test_a_lero_row_reports_speed_returns_and_its_curve(tmp_path: Path) -> None:
    row = vs_jaxmarl.run_lero("lero-ippo@jaxmarl", 4096, seed=0, threads=1, peer_config=PEER_CONFIG)
    assert row["row"] == "lero-ippo@jaxmarl" and row["steps"] == 4096  # 2 iterations of 16 x 128
    assert row["hparams"]["n_envs"] == 16 and row["steps_per_s"] > 0
    assert isinstance(row["eval_return"], float) and isinstance(row["final_return"], float)
    assert len(row["curve_times"]) == len(row["curve_returns"])


def test_vs_jaxmarl_rejects_a_missing_peer_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as stop:
        vs_jaxmarl.parse_args(
            ["--jaxmarl-baseline", str(tmp_path / "nope.py"), "--jaxmarl-python", "/bin/sh"]
        )
    assert stop.value.code == 2 and "no such file" in capsys.readouterr().err


def test_loop_compute_rejects_a_bad_budget(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as stop:
        loop_compute.parse_args(["--generations", "0"])
    assert stop.value.code == 2 and "generations" in capsys.readouterr().err


def test_slot_shares_split_the_slots_seconds() -> None:
    time_ = {
        "jobs": {
            "train": {"start_s": 4.0, "run_s": 60.0},
            "evaluate": {"start_s": 2.0, "run_s": 6.0},
        },
        "loop": {"design": 1.0},
    }
    shares = loop_compute.slot_shares(time_, wall_s=40.0, slots=2)  # 80 slot-seconds
    assert shares["train.run"] == pytest.approx(0.75) and shares["evaluate.start"] == pytest.approx(0.025)
    assert shares["idle"] == pytest.approx(8.0 / 80.0)


def test_busy_cpu_s_counts_every_field_but_idle_and_iowait(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 5 50 1000 20 3 2 7 0 0\ncpu0 50 2 25 500 10 1 1 3 0 0\n")
    ticks = sandbox_overhead.os.sysconf("SC_CLK_TCK")
    assert sandbox_overhead.busy_cpu_s(stat) == pytest.approx((100 + 5 + 50 + 3 + 2 + 7) / ticks)


def test_a_start_costs_cpu_and_the_engine_more_than_an_empty_script(tmp_path: Path) -> None:
    costs = sandbox_overhead.container_start_cpu_s(get_sandbox("process", work_dir=tmp_path), repeats=1)
    assert 0 <= costs["pass"] < costs["engine"]  # the engine's imports (torch) are CPU work, whatever the clock


def test_the_ceiling_shares_the_cores_between_training_and_starts() -> None:
    assert loop_compute.ceiling(train_cpu_s=100.0, sandboxes=20, start_cpu_s=2.5) == pytest.approx(100 / 150)
    assert loop_compute.ceiling(train_cpu_s=100.0, sandboxes=0, start_cpu_s=2.5) == 1.0


@pytest.mark.slow  # two spawned interpreters import torch and lero (~15 s)
def test_side_by_side_runs_one_process_per_job() -> None:
    spec = loop_compute.RunSpec(steps=2000)
    together = loop_compute.side_by_side(spec, threads=1, jobs=2)
    assert len(together["per_job"]) == 2 and all(rate > 0 for rate in together["per_job"])
    assert together["steps_per_s"] == pytest.approx(sum(together["per_job"]))


@pytest.mark.slow  # four tiny offline runs in the process sandbox, two candidates each (halving: 2, 1, 1)
def test_compare_schedules_pairs_full_and_halving_runs_by_designer_seed(tmp_path: Path) -> None:
    args = loop_compute.parse_args(["--steps", "3200", "--generations", "1", "--population", "2", "--seeds", "1",
                                    "--sandbox", "process", "--runs-dir", str(tmp_path), "--compare-schedules", "2"])  # fmt: skip
    spec = args.spec.model_copy(update={"hparams": {"n_envs": 32, "rollout_len": 25, "epochs": 1}})  # 800-step iterations
    result = loop_compute.compare_schedules(spec, 2)
    runs = result["runs"]
    assert [(r["schedule"], r["designer_seed"]) for r in runs] == [
        ("full", 0), ("halving", 0), ("halving", 1), ("full", 1)]  # alternating who goes first
    assert all(r["status"] == "completed" and r["best_fitness"] is not None for r in runs)
    designs = {r["designer_seed"]: (tmp_path / Path(r["run_dir"]).name / "candidates").iterdir() for r in runs}
    first = {seed: sorted(p.name for p in paths) for seed, paths in designs.items()}
    assert first[0] == first[1]  # the same candidate ids, with other code:
    code = {seed: (tmp_path / f"{spec.run_id}-full-{seed}" / "candidates" / "0-1" / "candidate.py").read_text()
            for seed in (0, 1)}  # fmt: skip
    assert code[0] != code[1]
    # halving: per seed 2 x 800 + 1 x 800 + 1 x 1600 (its rungs) + 3200 (the baseline); full: 3 x 3200
    assert result["summary"]["halving"]["env_steps"] == 2 * 800 + 1 * 800 + 1600 + 3200
    assert result["summary"]["full"]["env_steps"] == 3 * 3200
    assert result["steps_share"] == pytest.approx(7200 / 9600)
    assert result["summary"]["full"]["best_fitness"] == [r["best_fitness"] for r in runs if r["schedule"] == "full"]
