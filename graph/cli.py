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
import sys
import tomllib
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
    "sandbox", "approve", "run_id", "runs_dir", "executor", "ray_address",
)  # fmt: skip


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
    run.add_argument("--env", help="environment (default simple_spread)")
    _add_env_args(run)
    run.add_argument("--algo", help="mappo | ippo | vdn | qmix (default mappo)")
    run.add_argument("--generations", type=_positive_int)
    run.add_argument("--population", type=_positive_int)
    run.add_argument("--steps", type=_positive_int, help="env steps per candidate and seed")
    run.add_argument("--seeds", type=_positive_int, help="seeds per candidate and baseline")
    run.add_argument("--llm", help="offline | openai:MODEL")
    run.add_argument("--base-url", help="OpenAI-compatible server URL (else OPENAI_BASE_URL)")
    run.add_argument("--sandbox", choices=("auto", "docker", "process"))
    run.add_argument("--approve", choices=("none", "spec", "candidates", "generations", "all"))
    run.add_argument("--run-id")
    run.add_argument("--runs-dir", help=f"where runs live (default {DEFAULT_RUNS_DIR}/)")
    _add_executor_args(run)

    resume = sub.add_parser("resume", help="continue an interrupted run")
    resume.add_argument("run_id")
    resume.add_argument("--runs-dir", default=DEFAULT_RUNS_DIR)
    resume.add_argument("--answer", type=Path, help="JSON file answering the pending question")
    _add_executor_args(resume)

    chat = sub.add_parser("chat", help="design an experiment in a conversation, then run it")
    chat.add_argument("--llm", help="offline | openai:MODEL (default: by environment)")
    chat.add_argument("--base-url")
    chat.add_argument("--runs-dir", default=DEFAULT_RUNS_DIR)

    runs = sub.add_parser("runs", help="list runs")
    runs.add_argument("--runs-dir", default=DEFAULT_RUNS_DIR)

    report = sub.add_parser("report", help="rebuild and summarise a run's report")
    report.add_argument("run_id")
    report.add_argument("--runs-dir", default=DEFAULT_RUNS_DIR)

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

    bench = sub.add_parser("bench", help="simple_spread throughput vs mpe2, and MAPPO training")
    _add_env_args(bench)
    bench.add_argument("--n-envs", type=_positive_int, default=4096, help="batch size (envs)")
    bench.add_argument("--seconds", type=_positive_float, default=6.0, help="env measuring time")
    bench.add_argument("--threads", type=_positive_int, default=2, help="torch threads")
    bench.add_argument("--algo", default="mappo", help="algorithm for the training row")
    bench.add_argument("--train-steps", type=_positive_int, default=200_000)
    bench.add_argument("--skip-train", action="store_true", help="only the env throughput")

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
    text = path.read_text()
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot parse config {path}: {one_line(exc)}") from None
    if not isinstance(data, dict):
        raise UsageError(f"config {path} must hold a table/object of RunSpec fields")
    return data


def spec_fields(args: argparse.Namespace) -> dict:
    """RunSpec fields: config file, then CLI flags; --env-arg entries update env_kwargs."""
    fields = load_config_file(args.config) if args.config else {}
    fields.update({k: getattr(args, k) for k in RUN_FLAGS if getattr(args, k) is not None})
    fields.update(executor_fields(args))
    if args.env_args:
        from lero.graph.configuration import RunSpec

        env_changed = "env" in fields and fields["env"] != "simple_spread"
        base = fields.get("env_kwargs")
        if base is None:
            base = {} if env_changed else RunSpec.default_env_kwargs()
        fields["env_kwargs"] = {**base, **dict(args.env_args)}
    return fields


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

    spec = RunSpec.parse(spec_fields(args)).with_run_id()  # validated before heavy imports
    from lero.graph.console import RichUI
    from lero.graph.runner import start_run

    ui = RichUI(console=console, generations=spec.generations)
    try:
        with ui:
            outcome = start_run(spec, ui)
    except KeyboardInterrupt:
        return _stopped(spec.run_id, spec.runs_dir)
    return finish_outcome(outcome, console)


def _stopped(run_id: str, runs_dir: str) -> int:
    """Ctrl-C: the last checkpoint survives, so say how to continue."""
    return _fail(
        f"interrupted; continue with: lero resume {run_id} --runs-dir {runs_dir}", EXIT_INTERRUPTED
    )


def read_answer(path: Path | None) -> object | None:
    """The JSON answer to a pending interrupt (`lero resume --answer FILE`)."""
    if path is None:
        return None
    if not path.is_file():
        raise UsageError(f"answer file not found: {path}")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UsageError(f"answer file {path} is not JSON: {exc.msg} (line {exc.lineno})") from None


def cmd_resume(args: argparse.Namespace, console: Console) -> int:
    path = run_dir(args.runs_dir, args.run_id)
    answer = read_answer(args.answer)
    from lero.graph.console import RichUI
    from lero.graph.report import load_run
    from lero.graph.runner import resume_run

    ui = RichUI(console=console, generations=load_run(path).spec.get("generations"))
    try:
        with ui:
            outcome = resume_run(args.run_id, args.runs_dir, ui, answer=answer,
                                 executor=executor_fields(args))
    except KeyboardInterrupt:
        return _stopped(args.run_id, args.runs_dir)
    return finish_outcome(outcome, console)


def finish_outcome(outcome: RunOutcome, console: Console) -> int:
    """Say how the run ended; for a pending question, how to answer it without a terminal."""
    from lero.graph.console import describe_answer, render_summary

    status, run_id = outcome.status, outcome.run_id
    if status == "interrupted" and outcome.interrupt is not None:
        runs_dir = Path(outcome.run_dir).parent
        console.print(
            f"[yellow]run {run_id} is waiting for an answer:[/] "
            f"lero resume {run_id} --runs-dir {escape(str(runs_dir))} --answer FILE",
            soft_wrap=True,
        )
        console.print(describe_answer(outcome.interrupt), markup=False, soft_wrap=True)
        return EXIT_WAITING
    report_path = Path(outcome.run_dir) / "report.json"
    if report_path.is_file():
        render_summary(json.loads(report_path.read_text()), console)
        console.print(f"report: {Path(outcome.run_dir) / 'report.md'}", soft_wrap=True)
    console.print(f"run {run_id}: {status}")
    return EXIT_OK if status in ("completed", "interrupted") else EXIT_FAILED


def cmd_chat(args: argparse.Namespace, console: Console) -> int:
    from lero.graph.chat import run_chat

    return run_chat(llm=args.llm, base_url=args.base_url, runs_dir=args.runs_dir, console=console)


# ---------------------------------------------------------------- runs / report


def run_dir(runs_dir: str | Path, run_id: str) -> Path:
    path = Path(runs_dir) / run_id
    if not run_id or "/" in run_id or not path.is_dir():
        raise UsageError(f"unknown run id {run_id!r} in {runs_dir}/ (see `lero runs`)")
    return path


def cmd_runs(args: argparse.Namespace, console: Console) -> int:
    from lero.graph.console import render_runs
    from lero.graph.report import run_row

    root = Path(args.runs_dir)
    rows = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        if path.is_dir() and ((path / "spec.json").is_file() or (path / "state.json").is_file()):
            rows.append(run_row(path))
    if not rows:
        console.print(f"no runs in {root}/")
        return EXIT_OK
    render_runs(rows, console)
    return EXIT_OK


def cmd_report(args: argparse.Namespace, console: Console) -> int:
    from lero.graph.console import render_summary
    from lero.graph.report import write_report

    path = run_dir(args.runs_dir, args.run_id)
    summary = write_report(path)
    render_summary(summary, console)
    console.print(f"report: {path / 'report.md'}", soft_wrap=True)
    return EXIT_OK


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
    from lero.graph.report import write_atomic
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
    rows = [bench_env(args.n_envs, args.seconds, env_kwargs, threads=args.threads)]
    if not args.skip_train:
        console.print(f"measuring {args.algo} training ({args.train_steps} steps) ...")
        rows.append(bench_train(args.algo, args.train_steps, env_kwargs, threads=args.threads))
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


COMMANDS = {
    "run": cmd_run,
    "resume": cmd_resume,
    "chat": cmd_chat,
    "runs": cmd_runs,
    "report": cmd_report,
    "train": cmd_train,
    "bench": cmd_bench,
    "sandbox": cmd_sandbox,
}


OPERATIONAL_ERRORS = (
    ("sandbox", "SandboxUnavailable"),
    ("agents", "LLMError"),
    ("agents", "BudgetExceeded"),
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
