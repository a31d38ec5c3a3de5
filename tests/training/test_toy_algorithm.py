"""The algorithm recipe's rehearsal: a toy algorithm declared from this module alone.

`mappo_lite` is MAPPO's learner under a new name with its own typed hyper-parameters
(smaller defaults) and its declaration (`centralised=True`: the critic reads the global
state), registered with `training.register_algorithm` until the test's monkeypatch undoes it.
`lero train --algo mappo_lite` must train it a few hundred steps through this module's
learner, with its hyper-parameters and its declaration, and write a policy that loads.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from rich.console import Console

from lero.app.cli.main import main
from lero.training import algos
from lero.training.algos import Algorithm, register_algorithm
from lero.training.algos.ppo import PPOHparams, train_ppo
from lero.training.policy import Policy, PolicyMeta
from lero.training.seeds import SeedRun

TOY = "mappo_lite"


@dataclass(frozen=True)
class LiteHparams(PPOHparams):
    """MAPPO's hyper-parameters with defaults for a few hundred steps."""

    n_envs: int = 4
    rollout_len: int = 10
    hidden: int = 16
    epochs: int = 1


LEARNED: list[dict[str, Any]] = []  # what the learner was given and returned, per call


def train_lite(
    meta: PolicyMeta, hp: LiteHparams, runs: list[SeedRun], centralised: bool
) -> list[tuple[Policy, dict[str, Any]]]:
    """MAPPO's learner, noting what it was handed (proof that `train` reached this module)."""
    trained = train_ppo(meta, hp, runs, centralised)
    LEARNED.append({"algo": meta.algo, "hparams": hp, "centralised": centralised, "state_dim": runs[0].env.state_dim,
                    "critic": trained[0][1]["critic"]})  # fmt: skip
    return trained


def declare_lite(monkeypatch: pytest.MonkeyPatch) -> Algorithm:
    """The toy, registered until MONKEYPATCH undoes it (a fresh map in front of the table
    takes the registration; tests/test_recipes.py performs this too)."""
    monkeypatch.setattr(algos.ALGORITHMS, "maps", [{}, *algos.ALGORITHMS.maps])
    return register_algorithm(TOY, Algorithm(train_lite, LiteHparams, centralised=True))


def test_lero_train_trains_a_registered_algorithm(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lero.training import ALGOS, TrainConfig, load_policy

    torch.set_num_threads(1)
    declare_lite(monkeypatch)
    assert TOY in ALGOS and TrainConfig(algo=TOY).algo_hparams() == LiteHparams()
    LEARNED.clear()
    out = tmp_path / "out"
    argv = ["train", "--env", "simple_spread", "--env-arg", "N=2", "--algo", TOY, "--steps", "300", "--seed", "1",
            "--eval-episodes", "2", "--threads", "1", "--hparam", "lr=0.001", "--out", str(out)]  # fmt: skip
    assert main(argv, console=Console(file=io.StringIO())) == 0, capsys.readouterr().err
    result = json.loads((out / "result.json").read_text())
    assert (result["algo"], result["steps"]) == (TOY, 320)  # 8 rollouts of 4 envs x 10 steps
    assert result["config"]["hparams"] == {"lr": 0.001}
    [learned] = LEARNED
    assert learned["algo"] == TOY and learned["hparams"] == LiteHparams(lr=0.001)
    assert learned["centralised"] is True  # the declaration, not the name, reached the learner
    first = next(v for k, v in learned["critic"].items() if k.endswith("weight"))  # [hidden, state_dim + 1]
    assert first.shape == (16, learned["state_dim"] + 1)
    policy = load_policy(out / result["policy_path"])
    assert policy.meta.algo == TOY and policy.meta.hidden == 16


def test_a_registration_is_checked_and_undone(monkeypatch: pytest.MonkeyPatch) -> None:
    from lero.training import ALGOS, TrainConfig

    with monkeypatch.context() as patch:
        declare_lite(patch)
        with pytest.raises(ValueError, match="registered already"):
            register_algorithm("mappo", Algorithm(train_lite, LiteHparams, centralised=False))
        with pytest.raises(ValueError, match="must match"):
            register_algorithm("Lite MAPPO", Algorithm(train_lite, LiteHparams, centralised=True))
        assert list(ALGOS) == ["mappo", "ippo", "vdn", "qmix", TOY]
    assert list(ALGOS) == ["mappo", "ippo", "vdn", "qmix"]  # gone with the monkeypatch
    with pytest.raises(ValueError, match=f"unknown algo '{TOY}'"):
        TrainConfig(algo=TOY)
