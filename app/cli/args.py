"""The command line's grammar, shared by every front-end: the parser, the flags -> RunSpec /
StudySpec translation and the one-line error.

`lero` (app.cli.main) parses with it; the web UI's start form and the chat reuse the same
translation, so a setting means the same wherever it is typed. Importing this module
imports no torch (help strings take defaults from `training.defaults`).
"""

from __future__ import annotations

import argparse
import re
import tomllib
from collections import ChainMap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from lero.agents.llm_config import DESIGNS
from lero.graph.configuration import (
    APPROVE_MODES,
    DEFAULT_RUNS_DIR,
    FITNESS_KINDS,
    LLM_SETTINGS,
    LOGGERS,
    MIN_CONTEXT_TOKENS,
    RunSpec,
    absolute_runs_dir,
    field_help,
    load_json,
)
from lero.graph.schedule import SCHEDULES
from lero.sandbox.backends import KINDS as SANDBOX_KINDS
from lero.training.defaults import DEFAULT_ALGO, DEFAULT_ENV, EVAL_EPISODES, EVAL_EVERY

# RunSpec fields a flag gives that spec_fields merges itself (over a config file's), not as given
MERGED_FIELDS = ("tags", "hparams", "env_kwargs", "bounds")


BUDGET_FLAGS = ("max_llm_requests", "max_llm_tokens", "wall_clock_s")
LLM_SETTING_FLAGS = tuple(LLM_SETTINGS)  # the model's timeout, window and design mode (run, resume, chat, ui)


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """Exact flag names only: `--popul 3` is an error, never a silent `--population 3`."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def parse_value(text: str) -> object:
    """`--env-arg` values: int, float, bool, None, else the string itself."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def env_arg(text: str) -> tuple[str, object]:
    """`--env-arg KEY=VALUE` as (key, value); argparse's type for every command that takes it."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip().isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), parse_value(value)


def _bounded(kind: type, minimum: float, inclusive: bool, expected: str):
    """An argparse type converter: `kind(text)` that must be >= (or >) `minimum`."""

    def convert(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not (value >= minimum if inclusive else value > minimum):
            raise argparse.ArgumentTypeError(f"must be {'>=' if inclusive else '>'} {minimum}, got {text}")
        return value

    return convert


_positive_int = _bounded(int, 0, inclusive=False, expected="a positive integer")


_non_negative_int = _bounded(int, 0, inclusive=True, expected="an integer >= 0")


_positive_float = _bounded(float, 0, inclusive=False, expected="a positive number")


_context_tokens = _bounded(int, MIN_CONTEXT_TOKENS, inclusive=True, expected="an integer")


def one_line(exc: BaseException) -> str:
    """A single line for any validation error (pydantic's are multi-line)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
        except (TypeError, IndexError, AttributeError):
            first = None
        if isinstance(first, dict) and "msg" in first:
            where = ".".join(str(part) for part in first.get("loc", ()))
            message = str(first["msg"]).removeprefix("Value error, ")
            return f"{where}: {message}" if where else message
    return " ".join(str(exc).split()) or type(exc).__name__


def _runs_dir(text: str) -> Path:
    """`--runs-dir`, resolved once here against the working directory."""
    return Path(absolute_runs_dir(text))


def _add_runs_dir(p: argparse.ArgumentParser, default: str | None = DEFAULT_RUNS_DIR) -> None:
    p.add_argument(
        "--runs-dir",
        type=_runs_dir,
        default=None if default is None else _runs_dir(default),
        help=field_help("runs_dir"),
    )


def _add_llm_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--llm", help=field_help("llm"))
    p.add_argument("--model", help="model name for openai (else LERO_MODEL, else the server's first)")
    p.add_argument("--base-url", help=field_help("base_url"))
    p.add_argument("--llm-timeout", dest="llm_timeout_s", type=_positive_float, metavar="SECONDS",
                   help=field_help("llm_timeout_s"))
    p.add_argument("--context-tokens", type=_context_tokens, metavar="N", help=field_help("context_tokens"))
    p.add_argument("--design", choices=DESIGNS, help=field_help("design"))


def _add_budget_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-llm-requests", type=_positive_int, help=field_help("max_llm_requests"))
    p.add_argument("--max-llm-tokens", type=_positive_int, help=field_help("max_llm_tokens"))
    p.add_argument("--wall-clock-s", type=_positive_float, help=field_help("wall_clock_s"))


def _add_hparams(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hparam", dest="hparams", action="append", type=env_arg, default=[], metavar="KEY=VALUE",
                   help="algorithm hyper-parameter, repeatable (e.g. lr=0.001 epochs=5); checked against the "
                        "algorithm's typed hyper-parameters")  # fmt: skip


def _add_logger(p: argparse.ArgumentParser) -> None:
    p.add_argument("--logger", choices=LOGGERS, help=field_help("logger"))


def checked_hparams(algos: tuple[str, ...], base: dict[str, Any], given: list[tuple[str, object]]) -> dict[str, Any]:
    """BASE (a config file's) with `--hparam` GIVEN over it, checked against every one of ALGOS'
    typed hyper-parameters (`TrainConfig.algo_hparams`: known names, types, signs); a refused
    one is a UsageError naming the flag. An unknown algorithm is left to the spec's own check."""
    from lero.training import ALGOS, TrainConfig

    hparams = {**base, **dict(given)}
    for algo in (a for a in algos if a in ALGOS):
        try:
            TrainConfig(algo=algo, hparams=hparams)
        except ValueError as error:
            raise UsageError(f"--hparam: {error}") from None
    return hparams


def _bound(text: str) -> tuple[str, int]:
    """`--bound NAME=N`: a stage bound's name and a count (the spec checks it is declared)."""
    name, value = env_arg(text)
    if type(value) is not int or value < 0:
        raise argparse.ArgumentTypeError(f"expected NAME=N with N an integer >= 0, got {text!r}")
    return name, value


def _add_env_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--env-arg",
        dest="env_args",
        action="append",
        type=env_arg,
        default=[],
        metavar="KEY=VALUE",
        help="environment argument, repeatable (e.g. N=5, num_agent_neighbors=1)",
    )


def _add_executor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", choices=("local", "ray"), help=field_help("executor"))
    p.add_argument("--ray-address", help=field_help("ray_address"))


def _add_confirm_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--confirm-steps", type=_non_negative_int, metavar="N", help=field_help("confirm_steps"))
    p.add_argument("--confirm-top", type=_positive_int, metavar="K", help=field_help("confirm_top"))
    p.add_argument("--fitness", choices=FITNESS_KINDS, help=field_help("fitness"))


def _run_flags(run: argparse.ArgumentParser) -> None:
    run.add_argument("--config", type=Path, help="TOML or JSON file with RunSpec fields")
    run.add_argument("--env", help=field_help("env"))
    _add_env_args(run)
    _add_hparams(run)
    _add_logger(run)
    run.add_argument("--bound", dest="bounds", action="append", type=_bound, default=[], metavar="NAME=N",
                     help="a declared candidate stage's bound on its rounds, repeatable (graph.stages.Bound)")
    run.add_argument("--name", help=field_help("name"))
    run.add_argument("--tag", dest="tags", action="append", default=[], metavar="TAG",
                     help="a tag for the run, repeatable (letters, digits, _ . + -)")
    run.add_argument("--task", help=field_help("task"))
    run.add_argument("--algo", help=field_help("algo"))
    run.add_argument("--generations", type=_positive_int, help=field_help("generations"))
    run.add_argument("--population", type=_positive_int, help=field_help("population"))
    run.add_argument("--steps", type=_positive_int, help=field_help("steps"))
    run.add_argument("--seeds", type=_positive_int, help=field_help("seeds"))
    _add_llm_args(run)
    _add_budget_args(run)
    run.add_argument("--sandbox", choices=SANDBOX_KINDS, help=field_help("sandbox"))
    run.add_argument("--max-parallel", type=_positive_int, help=field_help("max_parallel"))
    run.add_argument("--job-timeout", dest="job_timeout_s", type=_positive_float, metavar="SECONDS",
                     help=field_help("job_timeout_s"))
    run.add_argument("--disk-budget-mb", dest="disk_budget_mb", type=_positive_float, metavar="MIB",
                     help=field_help("disk_budget_mb"))
    run.add_argument("--schedule", choices=SCHEDULES, help=field_help("schedule"))
    run.add_argument("--designer-seed", type=_non_negative_int, metavar="N", help=field_help("designer_seed"))
    _add_confirm_args(run)
    run.add_argument("--approve", choices=APPROVE_MODES, help=field_help("approve"))
    run.add_argument("--exploit-fraction", type=float, help=field_help("exploit_fraction"))
    run.add_argument("--run-id", help=field_help("run_id"))
    _add_runs_dir(run, default=None)  # None: the config file's, else RunSpec's default
    run.add_argument("--no-prior", dest="offline_prior", action="store_const", const=False,
                     help=field_help("offline_prior"))
    _add_executor_args(run)


def _resume_flags(resume: argparse.ArgumentParser) -> None:
    resume.add_argument("run_id", help="the run to continue (`lero runs` lists them)")
    _add_runs_dir(resume)
    resume.add_argument("--answer", type=Path, help="JSON file answering the pending question")
    resume.add_argument("--env", help="confirm the run's package.module:factory env (it is imported and runs here)")
    _add_llm_args(resume)
    _add_budget_args(resume)
    _add_executor_args(resume)
    resume.add_argument("--sandbox", choices=SANDBOX_KINDS,
                        help="where LLM code runs from now on (default: the run's; a copied run's process "
                             "sandbox runs only when given again)")


def _chat_flags(chat: argparse.ArgumentParser) -> None:
    _add_llm_args(chat)
    _add_runs_dir(chat)


def _report_flags(report: argparse.ArgumentParser) -> None:
    report.add_argument("run_id", help="the run to report on (`lero runs` lists them)")
    _add_runs_dir(report)


def _train_flags(train: argparse.ArgumentParser) -> None:
    train.add_argument("--env", required=True, help="environment name or package.module:factory")
    _add_env_args(train)
    _add_hparams(train)
    _add_logger(train)
    train.add_argument("--algo", required=True, help="learning algorithm")
    train.add_argument("--steps", required=True, type=_positive_int, help="joint env steps")
    train.add_argument("--seed", required=True, type=_non_negative_int, nargs="+",
                       help="one seed, or several: trained in one process, each in DIR/seed-<k>/")
    train.add_argument("--out", required=True, type=Path, help="output directory")
    train.add_argument("--n-envs", type=_positive_int, help="parallel envs (default: algo's)")
    train.add_argument("--eval-episodes", type=_positive_int, default=EVAL_EPISODES,
                       help=f"greedy evaluation episodes after training (default {EVAL_EPISODES})")
    train.add_argument("--eval-every", type=_non_negative_int, default=EVAL_EVERY, metavar="N",
                       help=f"the greedy evaluation curve: the policy on the evaluation's episodes every N updates, "
                            f"in curve.csv as greedy/<metric> (default {EVAL_EVERY}; 0: none)")  # fmt: skip
    train.add_argument("--threads", type=_positive_int,
                       help="torch threads (default: every core on an idle machine, 1 on a busy one)")


def _bench_flags(bench: argparse.ArgumentParser) -> None:
    bench.add_argument("--env", default=DEFAULT_ENV, help="environment to measure")
    _add_env_args(bench)
    bench.add_argument("--n-envs", type=_positive_int, default=4096, help="batch size (envs)")
    bench.add_argument("--seconds", type=_positive_float, default=6.0, help="env measuring time")
    bench.add_argument("--threads", type=_positive_int, default=2, help="torch threads")
    bench.add_argument("--algo", default=DEFAULT_ALGO, help="algorithm for the training row")
    bench.add_argument("--train-steps", type=_positive_int, default=200_000, help="env steps of the training row")
    bench.add_argument("--skip-train", action="store_true", help="only the env throughput")


def _compare_flags(compare: argparse.ArgumentParser) -> None:
    compare.add_argument("run_ids", nargs="+", metavar="RUN_ID", help="the runs (`lero runs` lists them)")
    _add_runs_dir(compare)
    compare.add_argument("--out", type=Path, help="output folder (default RUNS_DIR/comparisons/<ids>)")


def _ui_flags(ui: argparse.ArgumentParser) -> None:
    _add_runs_dir(ui)
    ui.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    ui.add_argument("--port", type=_non_negative_int, default=8765, help="default 8765; 0 picks a free one")
    _add_llm_args(ui)  # the chat page's assistant


def _sandbox_flags(sandbox: argparse.ArgumentParser) -> None:
    sandbox_commands = sandbox.add_subparsers(dest="action", required=True, metavar="ACTION")
    build = sandbox_commands.add_parser("build", help="build the sandbox image locally")
    build.add_argument("--mode", choices=("auto", "dockerfile", "offline"), default="auto",
                       help="dockerfile: pip in the build; offline: from local wheels; auto: either")
    check = sandbox_commands.add_parser("check", help="daemon, image and a contained smoke run")
    check.add_argument("--env", help="also say whether this env (a lero.envs name or "
                       "package.module:factory in the working directory) runs in Docker, and why")


def load_config_file(path: Path) -> dict:
    """RunSpec fields from a TOML or JSON file (by suffix; TOML otherwise)."""
    if not path.is_file():
        raise UsageError(f"config file not found: {path}")
    text = path.read_text()
    try:
        data = load_json(text, f"config {path}") if path.suffix == ".json" else tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise UsageError(f"cannot parse config {path}: {one_line(exc)}") from None
    if not isinstance(data, dict):
        raise UsageError(f"config {path} must hold a table/object of RunSpec fields")
    return data


def spec_fields(args: argparse.Namespace) -> dict:
    """RunSpec fields: config file, then CLI flags; --env-arg entries update env_kwargs."""
    fields = load_config_file(args.config) if args.config else {}
    given = {k: v for k, v in vars(args).items() if k in RunSpec.model_fields and k not in MERGED_FIELDS}
    fields.update({k: v for k, v in given.items() if v is not None})
    if fields.get("runs_dir") is not None:
        fields["runs_dir"] = str(fields["runs_dir"])
    fields.update(executor_fields(args))
    if args.tags:
        fields["tags"] = [*(fields.get("tags") or []), *args.tags]
    if args.bounds:
        fields["bounds"] = {**(fields.get("bounds") or {}), **dict(args.bounds)}
    if args.hparams:
        fields["hparams"] = checked_hparams((fields.get("algo") or DEFAULT_ALGO,), fields.get("hparams") or {},
                                            args.hparams)  # fmt: skip
    if args.env_args:
        base = fields.get("env_kwargs")
        if base is None:
            base = RunSpec.default_env_kwargs(fields.get("env"))
        fields["env_kwargs"] = {**base, **dict(args.env_args)}
    return fields


def llm_setting_fields(args: argparse.Namespace) -> dict[str, float | int | str]:
    """`--llm-timeout` / `--context-tokens` / `--design` as RunSpec fields, only those given."""
    return {k: getattr(args, k) for k in LLM_SETTING_FLAGS if getattr(args, k) is not None}


def llm_fields(llm: str | None, model: str | None, base_url: str | None) -> dict[str, str | None]:
    """RunSpec's `llm` and `base_url` by the one rule of `agents.llm_config.choose_llm`."""
    from lero.agents.llm_config import choose_llm

    choice = choose_llm(llm, model, base_url)
    return {"llm": choice.llm, "base_url": choice.base_url}


def executor_fields(args: argparse.Namespace) -> dict:
    """`--executor` / `--ray-address` as RunSpec fields (an address implies the ray executor)."""
    fields = {k: getattr(args, k) for k in ("executor", "ray_address") if getattr(args, k)}
    if args.ray_address is not None and args.executor is None:
        fields["executor"] = "ray"
    if args.executor == "local" and args.ray_address is None:
        fields["ray_address"] = None  # also over a stored or configured address
    return fields


def resume_overrides(args: argparse.Namespace) -> dict[str, object]:
    """Spec fields `lero resume` changes: budgets, the LLM's timeout and window, the executor,
    the sandbox and the LLM when one is named."""
    overrides = {k: getattr(args, k) for k in BUDGET_FLAGS if getattr(args, k) is not None}
    overrides.update(llm_setting_fields(args))
    if args.llm is not None or args.model is not None or args.base_url is not None:
        overrides.update(llm_fields(args.llm, args.model, args.base_url))
    if args.sandbox is not None:
        overrides["sandbox"] = args.sandbox
    return {**overrides, **executor_fields(args)}


def _study_flags(study: argparse.ArgumentParser) -> None:
    study.add_argument("run_id", nargs="?", help="study this run's best candidate")
    study.add_argument("--candidate", type=Path, help="study a candidate module file instead")
    study.add_argument("--candidate-id", help="a candidate of the run other than the best")
    study.add_argument("--config", type=Path, help="TOML or JSON file with StudySpec fields")
    _add_runs_dir(study)
    study.add_argument("--preset", choices=("paper",), help="paper: mappo,ippo,vdn,qmix x 10 seeds, the four "
                       "variants with native@10x and hrf+oef@10x")
    study.add_argument("--algos", help="comma-separated, e.g. mappo,vdn (default: the run's)")
    study.add_argument("--variants", help="comma-separated arms (default native,hrf,oef,hrf+oef); any of them "
                       "at K x the steps as <variant>@<K>x (hrf+oef@10x beside native@10x), native@loop (the run's "
                       "env steps)")
    study.add_argument("--seeds", type=_positive_int, help="fresh training seeds (default 5)")
    study.add_argument("--steps", type=_positive_int, help="env steps per training (default: the run's)")
    study.add_argument("--env", help=f"environment (default: the run's, or {DEFAULT_ENV}); names a "
                       "package.module:factory env to confirm importing it")
    _add_env_args(study)
    _add_hparams(study)
    _add_logger(study)
    study.add_argument("--eval-episodes", type=_positive_int, help="held-out episodes per evaluation seed")
    study.add_argument("--target-return", type=float, help="return for steps-to-reach (default: native's)")
    study.add_argument("--study-id", help="directory name (default: from the settings)")
    study.add_argument("--sandbox", choices=SANDBOX_KINDS, help="where the candidate's code runs")
    study.add_argument("--max-parallel", type=_positive_int, help="sandbox jobs at a time (default: one per core)")
    _add_executor_args(study)
    study.add_argument("--checkpoints", type=_positive_int, help="interval checkpoints per training: the "
                       "best on validation episodes, re-evaluated on 10x the held-out episodes (absolute metric)")
    study.add_argument("--recheck", action="store_true", default=None,
                       help="reward-hacking check: retrain the candidate once at 10x the steps")
    study.add_argument("--export", nargs=2, metavar=("FORMAT", "FILE"),
                       help="also write the study (or the combined studies) as FORMAT: marl-eval")
    study.add_argument("--combine", nargs="+", type=Path, metavar="STUDY_DIR",
                       help="aggregate finished studies (IQM, probability of improvement, profiles) "
                       "instead of running one")
    study.add_argument("--out", type=Path, help="--combine's output folder (default RUNS_DIR/studies/combined)")


def _eval_flags(ev: argparse.ArgumentParser) -> None:
    from lero.sandbox.types import MAX_RECORD_EPISODES

    ev.add_argument("run_id", help="the run (`lero runs` lists them)")
    ev.add_argument("candidate", nargs="?", help="a candidate of the run (e.g. 1-0) or baseline (default: the run's best)")
    _add_runs_dir(ev)
    ev.add_argument("--episodes", type=_positive_int, help="held-out episodes per seed (default: the run's --eval-episodes)")
    ev.add_argument("--render", type=Path, metavar="FILE.gif",
                    help="also draw the first held-out episodes of the first seed (agents, landmarks, trails) as a GIF")
    ev.add_argument("--render-episodes", type=_bounded(int, 1, True, "an integer >= 1"), default=1, metavar="K",
                    help=f"episodes side by side in --render (default 1, at most {MAX_RECORD_EPISODES})")
    ev.add_argument("--sandbox", choices=SANDBOX_KINDS,
                    help="where the candidate's OEF runs (default: the run's sandbox)")
    ev.add_argument("--env", help="confirm the run's package.module:factory env (it is imported and runs here)")


@dataclass(frozen=True)
class Command:
    """One `lero` subcommand, declared once: `build_parser` adds it, `main` runs it."""

    name: str  # `lero NAME` (`COMMAND_NAME`)
    help: str  # its line in `lero --help`
    flags: Callable[[argparse.ArgumentParser], None]  # adds its arguments to its sub-parser
    # "module:function": its `cmd_<name>(args, console) -> int`, imported by `main` when it
    # runs (this module, the grammar every front-end shares, imports no command's code)
    run: str


COMMAND_NAME = re.compile(r"[a-z][a-z0-9-]{0,39}")
MAIN = "lero.app.cli.main"  # where lero's own `cmd_<name>` functions live

# lero's own, in `lero --help`'s order; a registered command is written to the first map (a
# test puts a fresh map in front, with monkeypatch, and its registrations go when it ends)
COMMANDS: ChainMap[str, Command] = ChainMap({command.name: command for command in (
    Command("run", "run the evolutionary LLM loop (unattended or with approvals)", _run_flags, f"{MAIN}:cmd_run"),
    Command("resume", "continue an interrupted or stopped run", _resume_flags, f"{MAIN}:cmd_resume"),
    Command("chat", "design an experiment in a conversation, then run it", _chat_flags, f"{MAIN}:cmd_chat"),
    Command("runs", "list runs", _add_runs_dir, f"{MAIN}:cmd_runs"),
    Command("report", "rebuild and summarise a run's report", _report_flags, f"{MAIN}:cmd_report"),
    Command("train", "train one policy on the native reward (no LLM)", _train_flags, f"{MAIN}:cmd_train"),
    Command("bench", "env throughput vs mpe2, and MAPPO training", _bench_flags, f"{MAIN}:cmd_bench"),
    Command("study", "ablations: native / hrf / oef / hrf+oef x algorithms x seeds, held out", _study_flags,
            f"{MAIN}:cmd_study"),
    Command("eval", "measure a run's saved policies again on held-out episodes; draw episodes", _eval_flags,
            f"{MAIN}:cmd_eval"),
    Command("compare", "several runs side by side: one table (markdown, CSV) and their curves", _compare_flags,
            f"{MAIN}:cmd_compare"),
    Command("ui", "web app: watch runs, answer approvals, design experiments", _ui_flags, f"{MAIN}:cmd_ui"),
    Command("sandbox", "build or check the Docker sandbox image", _sandbox_flags, f"{MAIN}:cmd_sandbox"),
)})


def register_command(command: Command) -> Command:
    """Add COMMAND (`lero <name>` from then on, in every parser built after); returns it.
    ValueError for a taken name or one that is not `[a-z][a-z0-9-]*` (at most 40)."""
    if COMMAND_NAME.fullmatch(command.name) is None:
        raise ValueError(f"command name {command.name!r} must match {COMMAND_NAME.pattern}")
    if command.name in COMMANDS:
        raise ValueError(f"command {command.name!r} is declared already")
    COMMANDS[command.name] = command
    return command


def build_parser() -> argparse.ArgumentParser:
    """`lero`'s parser: one sub-parser per declared command (`COMMANDS`)."""
    parser = _Parser(
        prog="lero",
        description="LLM-evolved hybrid rewards and observation enhancement for cooperative MARL.",
        epilog="exit status: 0 done, 1 run failed, 2 bad input, 3 run waiting for an answer",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    for command in COMMANDS.values():
        command.flags(sub.add_parser(command.name, help=command.help))
    return parser


def study_export(args: argparse.Namespace) -> tuple[str, Path] | None:
    """`--export FORMAT FILE`, checked before anything trains."""
    from lero.app.study.export import EXPORT_FORMATS

    if args.export is None:
        return None
    fmt, file = args.export
    if fmt not in EXPORT_FORMATS:
        raise UsageError(f"--export: unknown format {fmt!r}; choose from {', '.join(EXPORT_FORMATS)}")
    if Path(file).is_dir():
        raise UsageError(f"--export: {file} is a directory; give a file")
    return fmt, Path(file)


def study_fields(args: argparse.Namespace) -> dict:
    """StudySpec fields from the flags (a preset first, flags over it)."""
    from lero.app.study.spec import PAPER_ALGOS, PAPER_ARMS, PAPER_SEEDS

    fields = load_config_file(args.config) if args.config else {}
    if args.preset == "paper":
        fields |= {"algos": PAPER_ALGOS, "seeds": PAPER_SEEDS, "variants": PAPER_ARMS}
    for name in ("algos", "variants"):
        if getattr(args, name):
            fields[name] = tuple(a.strip() for a in getattr(args, name).split(",") if a.strip())
    if args.candidate is not None:
        fields["candidate"] = str(args.candidate)
    for name in ("run_id", "candidate_id", "runs_dir", "seeds", "steps", "env", "eval_episodes",
                 "target_return", "study_id", "sandbox", "max_parallel", "recheck", "checkpoints"):  # fmt: skip
        if getattr(args, name) is not None:
            fields[name] = str(value) if isinstance(value := getattr(args, name), Path) else value
    if args.env_args:
        base = RunSpec.default_env_kwargs(args.env)
        fields["env_kwargs"] = {**(base or {}), **dict(args.env_args)}
    if args.hparams:  # every studied algorithm's (which they are, the study knows: it checks them)
        fields["hparams_every"] = dict(args.hparams)
    return {**fields, **executor_fields(args)}
