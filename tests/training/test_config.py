"""TrainConfig validation: every bad value is a one-line ValueError, caught at construction."""

import inspect
import subprocess
import sys

import pytest

from lero.training import ALGOS, ENV_NAMES, TrainConfig, evaluate
from lero.training.algos.ppo import PPOHparams
from lero.training.algos.value_decomposition import ValueDecompositionHparams
from lero.training.defaults import DEFAULT_ALGO, DEFAULT_ENV, EVAL_EPISODES


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"env": "nope"}, "unknown env"),
        ({"algo": "dqn"}, "unknown algo"),
        ({"steps": 0}, "steps"),
        ({"steps": 1.5}, "steps"),
        ({"steps": True}, "steps"),
        ({"seed": -1}, "seed"),
        ({"n_envs": 0}, "n_envs"),
        ({"eval_episodes": 0}, "eval_episodes"),
        ({"threads": 0}, "threads"),
        ({"env_kwargs": [1]}, "env_kwargs"),
        ({"hparams": {"nope": 1}}, "unknown hparams for mappo: nope"),
        ({"algo": "qmix", "hparams": {"clip_eps": 0.1}}, "unknown hparams for qmix: clip_eps"),
        ({"hparams": {"lr": -1.0}}, "lr must be > 0"),
        ({"hparams": {"epochs": 2.5}}, "epochs must be an int"),
        ({"hparams": {"anneal_lr": 1}}, "anneal_lr must be a bool"),
        ({"hparams": {"gamma": 1.5}}, "gamma"),
        ({"algo": "vdn", "hparams": {"eps_end": 2.0}}, "eps_end"),
        ({"algo": "vdn", "hparams": {"td_lambda": 1.5}}, "td_lambda"),
    ],
)
def test_bad_values_raise_one_line_value_error(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as error:
        TrainConfig(**kwargs)
    assert "\n" not in str(error.value)


def test_algo_hparams_apply_overrides_and_n_envs() -> None:
    ppo = TrainConfig(algo="ippo", n_envs=7, hparams={"epochs": 3}).algo_hparams()
    assert isinstance(ppo, PPOHparams)
    assert (ppo.n_envs, ppo.epochs) == (7, 3)
    vd = TrainConfig(algo="qmix", hparams={"td_lambda": 0.0}).algo_hparams()
    assert isinstance(vd, ValueDecompositionHparams)
    assert vd.td_lambda == 0.0


def test_dict_round_trip_and_unknown_field() -> None:
    cfg = TrainConfig(algo="vdn", steps=123, env_kwargs={"N": 2}, hparams={"lr": 1e-3}, seed=4)
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown TrainConfig fields: bogus"):
        TrainConfig.from_dict({**cfg.to_dict(), "bogus": 1})


def test_defaults_have_one_home_and_name_real_choices() -> None:
    cfg = TrainConfig()
    assert (cfg.env, cfg.algo, cfg.eval_episodes) == (DEFAULT_ENV, DEFAULT_ALGO, EVAL_EPISODES)
    assert DEFAULT_ENV in ENV_NAMES and DEFAULT_ALGO in ALGOS
    assert inspect.signature(evaluate).parameters["episodes"].default == EVAL_EPISODES


LAZY_PROBE = """
import importlib, sys
packages = [importlib.import_module(name) for name in ("lero.training", "lero.training.envs", "lero.agents")]
importlib.import_module("lero.training.envs.task")  # a task's data, read by the agents and the reports
assert "torch" not in sys.modules and "langchain_core" not in sys.modules
for module in packages:
    package = module.__name__
    assert set(module.__all__) <= set(dir(module)), package
    for home, names in module._HOMES.items():
        for name in names:
            assert getattr(module, name) is getattr(importlib.import_module(home), name), (package, name)
    try:
        module.no_such_name
    except AttributeError as error:
        assert "no_such_name" in str(error)
    else:
        raise AssertionError(package)
print("ok")
"""


def test_packages_load_their_public_names_on_first_access() -> None:
    """`lero.training`, `lero.training.envs` and `lero.agents` import no torch until a name
    is used; every public name resolves."""
    out = subprocess.run([sys.executable, "-c", LAZY_PROBE], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


def test_defaults_module_imports_no_torch() -> None:
    """CLI help strings read the defaults; that must not cost a torch import."""
    probe = "import sys, lero.training.defaults; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
