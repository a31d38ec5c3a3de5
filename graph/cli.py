"""`lero`: the command line (argparse). Commands import their packages lazily so that
`lero train` / `lero bench` need only `training`, and a broken optional part (no Docker,
no LLM) never stops the others from starting.

Errors the user can fix (bad flags, bad config, unknown run, invalid spec) print one line
`lero: error: ...` on stderr and exit with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import sys
import threading
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from lero.graph.runner import RunOutcome

# OpenMP's default busy-wait makes 2-thread torch 5-10x slower on a shared machine;
# it must be set before torch is first imported (commands import it lazily).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_WAITING, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
DEFAULT_RUNS_DIR = "runs"
RUN_FLAGS = (
    "env", "algo", "generations", "population", "steps", "seeds", "llm", "base_url",
    "sandbox", "approve", "run_id", "runs_dir", "max_llm_requests", "max_llm_tokens",
    "wall_clock_s", "exploit_fraction", "task", "offline_prior", "executor", "ray_address",
)  # fmt: skip
BUDGET_FLAGS = ("max_llm_requests", "max_llm_tokens", "wall_clock_s")


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
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


def _env_arg(text: str) -> tuple[str, object]:
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


# ---------------------------------------------------------------- parser


def _runs_dir(text: str) -> Path:
    """`--runs-dir`, resolved once here against the working directory."""
    from lero.graph.configuration import absolute_runs_dir

    return Path(absolute_runs_dir(text))


def _add_runs_dir(p: argparse.ArgumentParser, default: str | None = DEFAULT_RUNS_DIR) -> None:
    p.add_argument(
        "--runs-dir",
        type=_runs_dir,
        default=None if default is None else _runs_dir(default),
        help=f"where runs live (default {DEFAULT_RUNS_DIR}/ in the working directory)",
    )


def _add_llm_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--llm", help="offline | openai | openai:MODEL (default: by environment)")
    p.add_argument("--model", help="model name for openai (else LERO_MODEL, else the server's first)")
    p.add_argument("--base-url", help="OpenAI-compatible server URL (else OPENAI_BASE_URL)")


def _add_budget_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-llm-requests", type=_positive_int, help="LLM request budget of the run")
    p.add_argument("--max-llm-tokens", type=_positive_int, help="LLM token budget of the run")
    p.add_argument("--wall-clock-s", type=_positive_float, help="wall-clock budget in seconds")


def _add_env_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--env-arg",
        dest="env_args",
        action="append",
        type=_env_arg,
        default=[],
        metavar="KEY=VALUE",
        help="environment argument, repeatable (e.g. N=5, num_agent_neighbors=1)",
    )


def _add_executor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", choices=("local", "ray"),
                   help="where train/evaluate jobs run (default local; ray: docs/ray.md)")
    p.add_argument("--ray-address", help="Ray cluster: auto | HOST:PORT (default: a new local "
                   "instance); implies --executor ray")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="lero",
        description="LLM-evolved hybrid rewards and observation enhancement for cooperative MARL.",
        epilog="exit status: 0 done, 1 run failed, 2 bad input, 3 run waiting for an answer",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )

    run = sub.add_parser("run", help="run the evolutionary LLM loop (unattended or with approvals)")
    run.add_argument("--config", type=Path, help="TOML or JSON file with RunSpec fields")
    run.add_argument("--env", help="environment: a name (lero.envs entry points included) or a PettingZoo package.module:factory (default simple_spread)")
    _add_env_args(run)
    run.add_argument("--task", help="the task for the LLM in words (default: the env's own text)")
    run.add_argument("--algo", help="mappo | ippo | vdn | qmix (default mappo)")
    run.add_argument("--generations", type=_positive_int)
    run.add_argument("--population", type=_positive_int)
    run.add_argument("--steps", type=_positive_int, help="env steps per candidate and seed")
    run.add_argument("--seeds", type=_positive_int, help="seeds per candidate and baseline")
    _add_llm_args(run)
    _add_budget_args(run)
    run.add_argument("--sandbox", choices=("auto", "docker", "process"))
    run.add_argument("--approve", choices=("none", "spec", "candidates", "generations", "all"))
    run.add_argument("--exploit-fraction", type=float, help="share of each generation refining an elite (0..1, default 0.75)")
    run.add_argument("--run-id")
    _add_runs_dir(run, default=None)  # None: the config file's, else RunSpec's default
    run.add_argument(
        "--no-prior", dest="offline_prior", action="store_const", const=False,
        help="offline designer: no hand-written prior in generation 0 (sampled designs only)",
    )  # fmt: skip
    _add_executor_args(run)

    resume = sub.add_parser("resume", help="continue an interrupted or stopped run")
    resume.add_argument("run_id")
    _add_runs_dir(resume)
    resume.add_argument("--answer", type=Path, help="JSON file answering the pending question")
    resume.add_argument("--env", help="confirm the run's package.module:factory env (it is imported and runs here)")
    _add_llm_args(resume)
    _add_budget_args(resume)
    _add_executor_args(resume)

    chat = sub.add_parser("chat", help="design an experiment in a conversation, then run it")
    _add_llm_args(chat)
    _add_runs_dir(chat)

    runs = sub.add_parser("runs", help="list runs")
    _add_runs_dir(runs)

    report = sub.add_parser("report", help="rebuild and summarise a run's report")
    report.add_argument("run_id")
    _add_runs_dir(report)

    train = sub.add_parser("train", help="train one policy on the native reward (no LLM)")
    train.add_argument("--env", required=True)
    _add_env_args(train)
    train.add_argument("--algo", required=True)
    train.add_argument("--steps", required=True, type=_positive_int, help="joint env steps")
    train.add_argument("--seed", required=True, type=_non_negative_int)
    train.add_argument("--out", required=True, type=Path, help="output directory")
    train.add_argument("--n-envs", type=_positive_int, help="parallel envs (default: algo's)")
    train.add_argument("--eval-episodes", type=_positive_int, default=512)
    train.add_argument("--threads", type=_positive_int, help="torch threads")

    bench = sub.add_parser("bench", help="env throughput vs mpe2, and MAPPO training")
    bench.add_argument("--env", default="simple_spread", help="environment to measure")
    _add_env_args(bench)
    bench.add_argument("--n-envs", type=_positive_int, default=4096, help="batch size (envs)")
    bench.add_argument("--seconds", type=_positive_float, default=6.0, help="env measuring time")
    bench.add_argument("--threads", type=_positive_int, default=2, help="torch threads")
    bench.add_argument("--algo", default="mappo", help="algorithm for the training row")
    bench.add_argument("--train-steps", type=_positive_int, default=200_000)
    bench.add_argument("--skip-train", action="store_true", help="only the env throughput")

    _add_study_parser(sub)

    ui = sub.add_parser("ui", help="web app: watch runs, answer approvals, design experiments")
    _add_runs_dir(ui)
    ui.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    ui.add_argument("--port", type=_non_negative_int, default=8765, help="default 8765; 0 picks a free one")
    _add_llm_args(ui)  # the chat page's assistant

    sandbox = sub.add_parser("sandbox", help="build or check the Docker sandbox image")
    sandbox_commands = sandbox.add_subparsers(dest="action", required=True, metavar="ACTION")
    build = sandbox_commands.add_parser("build", help="build the sandbox image locally")
    build.add_argument("--mode", choices=("auto", "dockerfile", "offline"), default="auto")
    sandbox_commands.add_parser("check", help="daemon, image and a contained smoke run")
    return parser


# ---------------------------------------------------------------- run / resume / chat


def load_config_file(path: Path) -> dict:
    """RunSpec fields from a TOML or JSON file (by suffix; TOML otherwise)."""
    if not path.is_file():
        raise UsageError(f"config file not found: {path}")
    from lero.graph.configuration import load_json

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
    fields.update({k: getattr(args, k) for k in RUN_FLAGS if getattr(args, k) is not None})
    if fields.get("runs_dir") is not None:
        fields["runs_dir"] = str(fields["runs_dir"])
    fields.update(executor_fields(args))
    if args.env_args:
        from lero.graph.configuration import RunSpec

        base = fields.get("env_kwargs")
        if base is None:
            base = RunSpec.default_env_kwargs(fields.get("env"))
        fields["env_kwargs"] = {**base, **dict(args.env_args)}
    return fields


def llm_fields(llm: str | None, model: str | None, base_url: str | None) -> dict[str, str | None]:
    """RunSpec's `llm` and `base_url` by the one rule of `agents.config.choose_llm`."""
    from lero.agents.config import choose_llm

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


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    from lero.graph.configuration import RunSpec

    fields = spec_fields(args)
    fields.update(llm_fields(fields.get("llm"), args.model, fields.get("base_url")))
    spec = RunSpec.parse(fields).with_run_id()  # validated before heavy imports
    from lero.graph.console import RichUI
    from lero.graph.runner import start_run

    ui = RichUI(console=console, generations=spec.generations)
    with first_ctrl_c_cancels() as interrupts:
        try:
            with ui:
                outcome = start_run(spec, ui, confirm=args.env)  # --env: the person named it
        except KeyboardInterrupt:
            interrupts.wait()
            return _stopped(spec.run_id, Path(spec.runs_dir))
    return finish_outcome(outcome, console)


class Interrupts:
    """Ctrl-C during a run: the first kills its sandbox jobs (in a thread, so a lock the
    interrupted code holds cannot deadlock it) and raises KeyboardInterrupt; the second
    exits at once."""

    def __init__(self) -> None:
        self.canceller: threading.Thread | None = None

    def handle(self, signum: int, frame: object) -> None:
        if self.canceller is not None:
            os._exit(EXIT_INTERRUPTED)
        from lero.graph.nodes.resources import cancel_jobs

        self.canceller = threading.Thread(target=cancel_jobs, daemon=True)
        self.canceller.start()
        raise KeyboardInterrupt

    def wait(self, timeout_s: float = 10.0) -> None:
        """Until the jobs are killed: no container outlives the command."""
        if self.canceller is not None:
            self.canceller.join(timeout_s)


@contextmanager
def first_ctrl_c_cancels() -> Iterator[Interrupts]:
    interrupts = Interrupts()
    if threading.current_thread() is not threading.main_thread():
        yield interrupts  # signals reach only the main thread
        return
    previous = signal.signal(signal.SIGINT, interrupts.handle)
    try:
        yield interrupts
    finally:
        signal.signal(signal.SIGINT, previous)


def resume_hint(run_id: str, runs_dir: Path) -> str:
    """The command that continues a run (`--runs-dir` only when it is not the default)."""
    default = _runs_dir(DEFAULT_RUNS_DIR)
    where = "" if Path(runs_dir) == default else f" --runs-dir {runs_dir}"
    return f"lero resume {run_id}{where}"


def _stopped(run_id: str, runs_dir: Path) -> int:
    """Ctrl-C: the last checkpoint survives, so say how to continue."""
    return _fail(f"interrupted; continue with: {resume_hint(run_id, runs_dir)}", EXIT_INTERRUPTED)


def read_answer(path: Path | None) -> object | None:
    """The JSON answer to a pending interrupt (`lero resume --answer FILE`)."""
    if path is None:
        return None
    from lero.graph.configuration import load_json

    if not path.is_file():
        raise UsageError(f"answer file not found: {path}")
    return load_json(path.read_text(), f"answer file {path}")


def resume_overrides(args: argparse.Namespace) -> dict[str, object]:
    """Spec fields `lero resume` changes: budgets, the executor, and the LLM when one is named."""
    overrides = {k: getattr(args, k) for k in BUDGET_FLAGS if getattr(args, k) is not None}
    if args.llm is not None or args.model is not None or args.base_url is not None:
        overrides.update(llm_fields(args.llm, args.model, args.base_url))
    return {**overrides, **executor_fields(args)}


def cmd_resume(args: argparse.Namespace, console: Console) -> int:
    path = run_dir(args.runs_dir, args.run_id)
    answer = read_answer(args.answer)
    overrides = resume_overrides(args)
    from lero.graph.console import RichUI
    from lero.graph.report import load_run
    from lero.graph.runner import resume_run

    ui = RichUI(console=console, generations=load_run(path).spec.get("generations"))
    with first_ctrl_c_cancels() as interrupts:
        try:
            with ui:
                outcome = resume_run(
                    args.run_id, args.runs_dir, ui, answer=answer, overrides=overrides, confirm=args.env
                )
        except KeyboardInterrupt:
            interrupts.wait()
            return _stopped(args.run_id, args.runs_dir)
    return finish_outcome(outcome, console)


def finish_outcome(outcome: RunOutcome, console: Console) -> int:
    """Say how the run ended, on the last line; for a pending question, how to answer it."""
    from lero.graph.console import describe_answer, render_summary
    from lero.graph.rundir import REPORT_JSON, REPORT_MD, RunDir

    status, run_id = outcome.status, outcome.run_id
    runs_dir = Path(outcome.run_dir).parent
    if status == "interrupted" and outcome.interrupt is not None:
        console.print(
            f"[yellow]run {run_id} is waiting for an answer:[/] "
            f"{escape(resume_hint(run_id, runs_dir))} --answer FILE",
            soft_wrap=True,
        )
        console.print(describe_answer(outcome.interrupt), markup=False, soft_wrap=True)
        return EXIT_WAITING
    rundir = RunDir(Path(outcome.run_dir))
    report = rundir.read_json(REPORT_JSON)
    if report is not None:
        render_summary(report, console)
        console.print(f"report: {rundir.path / REPORT_MD}", soft_wrap=True)
    last = f"run {run_id}: {status}"
    if outcome.stop_reason and status != "completed":
        last += f": {outcome.stop_reason}"
    if status == "stopped":
        last += f"; continue with: {resume_hint(run_id, runs_dir)}"
    console.print(last, markup=False, highlight=False, soft_wrap=True)
    return EXIT_OK if status == "completed" else EXIT_FAILED


def cmd_chat(args: argparse.Namespace, console: Console) -> int:
    from lero.graph.chat import run_chat

    fields = llm_fields(args.llm, args.model, args.base_url)
    return run_chat(llm=fields["llm"], base_url=fields["base_url"], runs_dir=str(args.runs_dir),
                    console=console)


# ---------------------------------------------------------------- runs / report


def run_dir(runs_dir: str | Path, run_id: str) -> Path:
    path = Path(runs_dir) / run_id
    if not run_id or "/" in run_id or not path.is_dir():
        raise UsageError(f"unknown run id {run_id!r} in {runs_dir}/ (see `lero runs`)")
    return path


def cmd_runs(args: argparse.Namespace, console: Console) -> int:
    from lero.graph.console import render_runs
    from lero.graph.report import run_row, run_rows

    root = Path(args.runs_dir)
    rows = run_rows(root, run_row)
    if not rows:
        console.print(f"no runs in {root}/")
        return EXIT_OK
    render_runs(rows, console)
    return EXIT_OK


def cmd_report(args: argparse.Namespace, console: Console) -> int:
    from lero.graph.console import render_summary
    from lero.graph.report import write_report
    from lero.graph.rundir import REPORT_MD

    path = run_dir(args.runs_dir, args.run_id)
    summary = write_report(path)
    render_summary(summary, console)
    console.print(f"report: {path / REPORT_MD}", soft_wrap=True)
    return EXIT_OK


# ---------------------------------------------------------------- study


def _add_study_parser(sub: argparse._SubParsersAction) -> None:
    study = sub.add_parser(
        "study", help="ablations: native / hrf / oef / hrf+oef x algorithms x seeds, held out"
    )
    study.add_argument("run_id", nargs="?", help="study this run's best candidate")
    study.add_argument("--candidate", type=Path, help="study a candidate module file instead")
    study.add_argument("--candidate-id", help="a candidate of the run other than the best")
    study.add_argument("--config", type=Path, help="TOML or JSON file with StudySpec fields")
    _add_runs_dir(study)
    study.add_argument("--preset", choices=("paper",), help="paper: mappo,ippo,vdn,qmix x 5 seeds")
    study.add_argument("--algos", help="comma-separated, e.g. mappo,vdn (default: the run's)")
    study.add_argument("--seeds", type=_positive_int, help="fresh training seeds (default 5)")
    study.add_argument("--steps", type=_positive_int, help="env steps per training (default: the run's)")
    study.add_argument("--env", help="environment (default: the run's, or simple_spread); names a "
                       "package.module:factory env to confirm importing it")
    _add_env_args(study)
    study.add_argument("--eval-episodes", type=_positive_int)
    study.add_argument("--target-return", type=float, help="return for steps-to-reach (default: native's)")
    study.add_argument("--study-id", help="directory name (default: from the settings)")
    study.add_argument("--sandbox", choices=("auto", "docker", "process"))
    study.add_argument("--max-parallel", type=_positive_int)
    _add_executor_args(study)


def study_fields(args: argparse.Namespace) -> dict:
    """StudySpec fields from the flags (a preset first, flags over it)."""
    from lero.graph.configuration import RunSpec
    from lero.graph.study import PAPER_ALGOS

    fields = load_config_file(args.config) if args.config else {}
    if args.preset == "paper":
        fields["algos"] = PAPER_ALGOS
    if args.algos:
        fields["algos"] = tuple(a.strip() for a in args.algos.split(",") if a.strip())
    if args.candidate is not None:
        fields["candidate"] = str(args.candidate)
    for name in ("run_id", "candidate_id", "runs_dir", "seeds", "steps", "env", "eval_episodes",
                 "target_return", "study_id", "sandbox", "max_parallel"):  # fmt: skip
        if getattr(args, name) is not None:
            fields[name] = str(value) if isinstance(value := getattr(args, name), Path) else value
    if args.env_args:
        base = RunSpec.default_env_kwargs(args.env)
        fields["env_kwargs"] = {**(base or {}), **dict(args.env_args)}
    return {**fields, **executor_fields(args)}


def cmd_study(args: argparse.Namespace, console: Console) -> int:
    from lero.graph.study import StudySpec, run_study

    spec = StudySpec.parse(study_fields(args))
    study = run_study(spec, progress=lambda line: console.print(line, markup=False, soft_wrap=True),
                      confirm=args.env)
    for cell in study["cells"]:
        summary = cell["summary"].get("return")
        test = cell["vs_native"].get("return", {})
        shown = (f"return {summary['mean']:.3f} [{summary['ci_low']:.3f}, {summary['ci_high']:.3f}]"
                 if summary else "no result")  # fmt: skip
        if test.get("welch_p") is not None:
            shown += f", vs native p={test['welch_p']:.3g} g={test['hedges_g'] or 0:.2f}"
        console.print(f"{cell['algo']:6s} {cell['variant']:8s} {shown}", markup=False)
    console.print(f"study {study['study_id']}: {study['status']}")
    return EXIT_OK if study["status"] == "completed" else EXIT_FAILED


# ---------------------------------------------------------------- train / bench / sandbox


def write_curve_csv(curves: dict[str, list[float]], path: Path) -> None:
    """One row per logged point; columns = curve names (`steps` first)."""
    names = ["steps", *sorted(k for k in curves if k != "steps")]
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(names)
        writer.writerows(zip(*(curves[n] for n in names), strict=True))


def cmd_train(args: argparse.Namespace, console: Console) -> int:
    from lero.graph.console import train_progress
    from lero.graph.safefs import write_atomic
    from lero.training import TrainConfig, make_env, save_policy, train

    env_kwargs = dict(args.env_args)
    cfg = TrainConfig(
        env=args.env,
        env_kwargs=env_kwargs,
        algo=args.algo,
        steps=args.steps,
        seed=args.seed,
        n_envs=args.n_envs,
        eval_episodes=args.eval_episodes,
        threads=args.threads,
    )
    make_env(args.env, 1, **env_kwargs)  # bad env kwargs (N=0, typos) fail before any output
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} exists and is not a directory")
    args.out.mkdir(parents=True, exist_ok=True)
    with train_progress(console, f"{args.algo} on {args.env}") as progress:
        result = train(cfg, progress=progress)
    save_policy(result.policy, args.out / "policy.pt")
    write_curve_csv(result.curves, args.out / "curve.csv")
    document = {
        "env": args.env,
        "env_kwargs": env_kwargs,
        "algo": args.algo,
        "steps": result.steps,
        "seed": args.seed,
        "wall_s": result.wall_s,
        "steps_per_s": result.steps_per_s,
        "eval": result.eval,
        "curves": result.curves,
        "reflection_stats": result.reflection_stats,
        "config": cfg.to_dict(),
        "policy_path": "policy.pt",
    }
    write_atomic(args.out / "result.json", json.dumps(document, indent=2) + "\n")
    metrics = ", ".join(f"{k} {v:.3f}" for k, v in result.eval.items())
    console.print(f"eval: {metrics}")
    console.print(
        f"{result.steps} steps in {result.wall_s:.1f} s ({result.steps_per_s:.0f} steps/s) "
        f"-> {args.out / 'result.json'}"
    )
    return EXIT_OK


def cmd_bench(args: argparse.Namespace, console: Console) -> int:
    from lero.training import ALGOS
    from lero.training.bench import bench_env, bench_train, format_table

    if args.algo not in ALGOS:
        raise UsageError(f"unknown algo {args.algo!r}; choose one of {', '.join(ALGOS)}")
    env_kwargs = dict(args.env_args)
    console.print(f"measuring env throughput ({args.n_envs} envs, {args.seconds:g} s) ...")
    rows = [
        bench_env(args.n_envs, args.seconds, env_kwargs, threads=args.threads, env_name=args.env)
    ]
    if not args.skip_train:
        console.print(f"measuring {args.algo} training ({args.train_steps} steps) ...")
        rows.append(
            bench_train(
                args.algo, args.train_steps, env_kwargs, threads=args.threads, env_name=args.env
            )
        )
    for row in rows:  # one table per row: the env and train rows have different columns
        console.out(format_table([row]) + "\n", highlight=False)
    return EXIT_OK


def cmd_sandbox(args: argparse.Namespace, console: Console) -> int:
    from lero.sandbox.check import check
    from lero.sandbox.image import build_image

    def log(message: str) -> None:
        console.print(message, markup=False, highlight=False)

    if args.action == "build":
        console.print(f"built image {build_image(args.mode, log=log)}")
        return EXIT_OK
    report = check()
    for name, (ok, detail) in report.items():
        console.print(f"{'[green]ok[/]  ' if ok else '[red]FAIL[/]'} {name}: {escape(detail)}")
    return EXIT_OK if all(ok for ok, _ in report.values()) else EXIT_FAILED


def cmd_ui(args: argparse.Namespace, console: Console) -> int:
    from lero.agents import LLMConfig
    from lero.graph.ui import serve

    fields = llm_fields(args.llm, args.model, args.base_url)
    serve(str(args.runs_dir), args.host, args.port, LLMConfig.from_spec(fields["llm"], base_url=fields["base_url"]))
    return EXIT_OK


COMMANDS = {
    "run": cmd_run,
    "resume": cmd_resume,
    "chat": cmd_chat,
    "runs": cmd_runs,
    "report": cmd_report,
    "train": cmd_train,
    "bench": cmd_bench,
    "study": cmd_study,
    "sandbox": cmd_sandbox,
    "ui": cmd_ui,
}


OPERATIONAL_ERRORS = (
    ("lero.sandbox", "SandboxUnavailable"),
    ("lero.agents", "LLMError"),
    ("lero.agents", "BudgetExceeded"),
)


def _is_operational(exc: RuntimeError) -> bool:
    """No Docker daemon / image, an LLM server that fails for good: the message says how
    to fix it, so no traceback. Only packages already imported are asked (a package that
    was never imported cannot have raised)."""
    for module, name in OPERATIONAL_ERRORS:
        kind = getattr(sys.modules.get(module), name, None)
        if kind is not None and isinstance(exc, kind):
            return True
    return False


def _fail(message: str, code: int) -> int:
    print(f"lero: error: {message}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None, console: Console | None = None) -> int:
    """Entry point of the `lero` console script; returns the exit status."""
    console = console or Console()
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args, console)
    except (UsageError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        return _fail(one_line(exc), EXIT_USAGE)
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)
    except RuntimeError as exc:
        if not _is_operational(exc):
            raise
        return _fail(one_line(exc), EXIT_FAILED)


if __name__ == "__main__":
    sys.exit(main())
