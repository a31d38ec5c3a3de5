"""`lero train`: a real tiny training run writes result.json, curve.csv and the policy."""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from rich.console import Console

from lero.app.cli.main import main
from lero.training.openmp import openmp_wait

REPO = Path(__file__).resolve().parents[2]
TINY = ["--steps", "200", "--n-envs", "4", "--eval-episodes", "4", "--threads", "1"]


@pytest.fixture(autouse=True)
def _few_threads() -> None:
    torch.set_num_threads(1)


def test_train_writes_result_curve_and_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lero.training import load_policy

    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    argv = ["train", "--env", "simple_spread", "--env-arg", "N=2", "--algo", "mappo",
            "--seed", "3", "--out", str(out), *TINY]  # fmt: skip
    assert main(argv, console=Console(file=io.StringIO())) == 0
    result = json.loads((out / "result.json").read_text())
    assert (result["env"], result["algo"], result["seed"]) == ("simple_spread", "mappo", 3)
    assert result["env_kwargs"] == {"N": 2}
    assert result["steps"] >= 200 and result["wall_s"] > 0 and result["steps_per_s"] > 0
    assert result["threads"] == 1 and result["omp_wait"] == openmp_wait()  # what the speed was measured on
    assert set(result["eval"]) == {"return", "coverage", "occupied", "collisions"}
    assert all(math.isfinite(v) for v in result["eval"].values())
    assert "return" in result["curves"] and "return" in result["reflection_stats"]
    with (out / "curve.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(result["curves"]["steps"]) >= 1
    assert float(rows[-1]["return"]) == pytest.approx(result["curves"]["return"][-1])
    assert load_policy(out / result["policy_path"]).meta.n_agents == 2
    assert (out / "notes.txt").read_text() == "keep me"  # an existing DIR is not wiped
    assert not list(out.glob(".*.tmp"))


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--env", "nope", "--algo", "mappo"], "unknown env 'nope'"),
        (["--env", "simple_spread", "--algo", "ppo2"], "unknown algo 'ppo2'"),
        (["--env", "simple_spread", "--algo", "mappo", "--env-arg", "N=0"], "N must be >= 1"),
        (["--env", "simple_spread", "--algo", "mappo", "--env-arg", "colour=red"], "colour"),
    ],
)
def test_train_bad_input(
    extra: list[str], fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = main(
        ["train", *extra, "--seed", "0", "--out", str(out), *TINY],
        console=Console(file=io.StringIO()),
    )
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("lero: error: ") and fragment in err
    assert not out.exists()  # validated before anything is written


def test_train_bad_env_arg_in_a_subprocess(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lero.app.cli.main", "train", "--env", "simple_spread", "--algo", "mappo",
         "--env-arg", "N", "--steps", "10", "--seed", "0", "--out", str(tmp_path / "o")],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == "lero: error: argument --env-arg: expected KEY=VALUE, got 'N'\n"


def test_train_reports_progress_before_the_first_episode_ends(tmp_path: Path) -> None:
    """The first iteration always reports (the seam: HookedEnv's first report is not
    throttled); for qmix that is after one env step, before any episode has finished, so
    `return` is None. `lero train` with its output in a file must get through it."""
    from lero.training import TrainConfig, ValueDecompositionHparams, train

    reports: list[tuple[int, int, dict]] = []
    cfg = TrainConfig(env="simple_spread", env_kwargs={"N": 2}, algo="qmix", steps=200, seed=0,
                      n_envs=4, eval_episodes=4, threads=1)  # fmt: skip
    train(cfg, progress=lambda done, total, info: reports.append((done, total, info)))
    first_update = 4 * ValueDecompositionHparams().rollout_len  # 4 envs x steps per update
    assert first_update < 25 * 4  # before the first 25-step episode can end
    assert reports[0] == (first_update, 200, {"return": None})

    out = tmp_path / "out"
    with (tmp_path / "stdout.txt").open("w") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "lero.app.cli.main", "train", "--env", "simple_spread",
             "--env-arg", "N=2", "--algo", "qmix", "--seed", "0", "--out", str(out), *TINY],
            cwd=tmp_path, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=300,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "result.json").read_text())["algo"] == "qmix"
    assert "result.json" in (tmp_path / "stdout.txt").read_text()


def test_several_seeds_train_in_one_process_each_as_it_would_alone(tmp_path: Path) -> None:
    """`--seed 1 2` writes each seed's files in DIR/seed-<k>/, bitwise what `--seed k`
    writes alone, and DIR/seeds.json their evaluations' mean and spread."""
    from lero.training import load_policy

    def train_cli(out: Path, *seeds: str) -> None:
        argv = ["train", "--env", "simple_spread", "--env-arg", "N=2", "--algo", "ippo",
                "--seed", *seeds, "--out", str(out), *TINY]  # fmt: skip
        assert main(argv, console=Console(file=io.StringIO())) == 0

    train_cli(tmp_path / "both", "1", "2")
    for seed in ("1", "2"):
        train_cli(tmp_path / f"alone-{seed}", seed)
    summary = json.loads((tmp_path / "both" / "seeds.json").read_text())
    assert summary["seeds"] == [1, 2] and summary["results"] == ["seed-1/result.json", "seed-2/result.json"]
    for seed in ("1", "2"):
        together = json.loads((tmp_path / "both" / f"seed-{seed}" / "result.json").read_text())
        alone = json.loads((tmp_path / f"alone-{seed}" / "result.json").read_text())
        assert together["seed"] == int(seed) and together["config"] == alone["config"]
        for key in ("eval", "curves", "reflection_stats", "steps"):
            assert together[key] == alone[key], key
        mine = load_policy(tmp_path / "both" / f"seed-{seed}" / "policy.pt").state_dict()
        theirs = load_policy(tmp_path / f"alone-{seed}" / "policy.pt").state_dict()
        assert all(torch.equal(mine[k], theirs[k]) for k in theirs)
        assert (tmp_path / "both" / f"seed-{seed}" / "curve.csv").read_text() == (
            tmp_path / f"alone-{seed}" / "curve.csv"
        ).read_text()
    returns = [json.loads((tmp_path / f"alone-{s}" / "result.json").read_text())["eval"]["return"] for s in "12"]
    assert summary["eval"]["return"]["values"] == returns
    assert summary["eval"]["return"]["mean"] == pytest.approx(sum(returns) / 2)
    assert summary["eval"]["return"]["std"] == pytest.approx(abs(returns[0] - returns[1]) / 2**0.5)
    assert not (tmp_path / "both" / "result.json").exists()


def test_repeated_seeds_are_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["train", "--env", "simple_spread", "--algo", "mappo", "--seed", "0", "0", "--out", str(out), *TINY]
    assert main(argv, console=Console(file=io.StringIO())) == 2
    err = capsys.readouterr().err
    assert err == "lero: error: --seed values must differ, got 0 0\n"
    assert not out.exists()
