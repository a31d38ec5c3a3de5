"""`lero`: the command line (argparse). The optional parts (Docker's SDK, Ray, the web
server) load only in the commands that use them, so a broken one never stops the others
from starting.

Errors the user can fix (bad flags, bad config, unknown run, invalid spec) print one line
`lero: error: ...` on stderr and exit with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from lero.app.cli.args import (
    COMMANDS,
    UsageError,
    build_parser,
    checked_hparams,
    llm_fields,
    llm_setting_fields,
    one_line,
    resume_overrides,
    spec_fields,
    study_export,
    study_fields,
)
from lero.app.cli.stops import EXIT_INTERRUPTED, first_stop_cancels
from lero.app.reports.tracking import require as require_logger
from lero.graph.configuration import (
    DEFAULT_RUNS_DIR,
    RunSpec,
    absolute_runs_dir,
    llm_settings,
    load_json,
)

if TYPE_CHECKING:
    from lero.app.console.progress import RichUI
    from lero.graph.runner import RunOutcome

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_WAITING = 0, 1, 2, 3  # EXIT_INTERRUPTED (130): app.cli.stops


# ---------------------------------------------------------------- parser


# ---------------------------------------------------------------- run / resume / chat


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    fields = spec_fields(args)
    fields.update(llm_fields(fields.get("llm"), args.model, fields.get("base_url")))
    spec = RunSpec.parse(fields).with_run_id()  # validated before heavy imports
    if spec.logger is not None:
        require_logger(spec.logger)
    from lero.app.chat.desk import estimate_in_background
    from lero.app.cli.run_hooks import app_front
    from lero.app.console.progress import RichUI
    from lero.graph.runner import start_run

    ui = RichUI(console=console, generations=spec.generations, env_steps=spec.budget()[1])
    estimate_in_background(ui, spec, args.env)  # the run bar's ETA before the first report
    with first_stop_cancels() as interrupts:
        try:
            with ui:  # --env: the person named it
                outcome = start_run(spec, ui, confirm=args.env, front=app_front(interrupts.scope))
        except KeyboardInterrupt:
            interrupts.wait()
            return _stopped(spec.run_id, Path(spec.runs_dir))
    return finish_outcome(outcome, console)


def resume_hint(run_id: str, runs_dir: Path) -> str:
    """The command that continues a run (`--runs-dir` only when it is not the default)."""
    default = Path(absolute_runs_dir(DEFAULT_RUNS_DIR))
    where = "" if Path(runs_dir) == default else f" --runs-dir {runs_dir}"
    return f"lero resume {run_id}{where}"


def _stopped(run_id: str, runs_dir: Path) -> int:
    """Ctrl-C: the last checkpoint survives, so say how to continue."""
    return _fail(f"interrupted; continue with: {resume_hint(run_id, runs_dir)}", EXIT_INTERRUPTED)


def read_answer(path: Path | None) -> object | None:
    """The JSON answer to a pending interrupt (`lero resume --answer FILE`)."""
    if path is None:
        return None
    if not path.is_file():
        raise UsageError(f"answer file not found: {path}")
    return load_json(path.read_text(), f"answer file {path}")


def resume_ui(path: Path, console: Console) -> RichUI:
    """`lero resume`'s display: the run bar as `lero run`'s (the stored spec's whole budget,
    confirmation included), from the env steps the run's state already counts. A stored spec
    that no longer parses (a run from an older lero) gets no run bar, not an error."""
    from lero.app.console.progress import RichUI
    from lero.graph.summary import load_run
    from lero.training.validation import finite_number

    run = load_run(path)
    try:
        planned = RunSpec.parse(run.spec).budget()[1]
    except (ValueError, TypeError):
        planned = None
    done = run.state.get("env_steps")
    return RichUI(console=console, generations=run.spec.get("generations"), env_steps=planned,
                  env_steps_done=int(done) if finite_number(done) else 0)  # fmt: skip


def cmd_resume(args: argparse.Namespace, console: Console) -> int:
    path = run_dir(args.runs_dir, args.run_id)
    answer = read_answer(args.answer)
    overrides = resume_overrides(args)
    from lero.app.cli.run_hooks import app_front
    from lero.graph.runner import resume_run

    ui = resume_ui(path, console)
    with first_stop_cancels() as interrupts:
        try:
            with ui:
                outcome = resume_run(args.run_id, args.runs_dir, ui, answer=answer, overrides=overrides,
                                     confirm=args.env, front=app_front(interrupts.scope))
        except KeyboardInterrupt:
            interrupts.wait()
            return _stopped(args.run_id, args.runs_dir)
    return finish_outcome(outcome, console)


def finish_outcome(outcome: RunOutcome, console: Console) -> int:
    """Say how the run ended, on the last line; for a pending question, how to answer it."""
    from lero.app.console.approvals import describe_answer
    from lero.app.console.progress import render_summary
    from lero.app.reports.run_report import run_headline
    from lero.graph.rundir import RunDir

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
    report = rundir.read_summary()
    if report is not None:
        render_summary(report, console, run_headline(outcome.run_dir))
        console.print(f"report: {rundir.report_md_path}", soft_wrap=True)
    last = f"run {run_id}: {status}"
    if outcome.stop_reason and status != "completed":
        last += f": {outcome.stop_reason}"
    if status == "stopped":
        last += f"; continue with: {resume_hint(run_id, runs_dir)}"
    console.print(last, markup=False, highlight=False, soft_wrap=True)
    return EXIT_OK if status == "completed" else EXIT_FAILED


def cmd_chat(args: argparse.Namespace, console: Console) -> int:
    from lero.app.chat.terminal import run_chat

    fields = llm_fields(args.llm, args.model, args.base_url)
    return run_chat(llm=fields["llm"], base_url=fields["base_url"], runs_dir=str(args.runs_dir),
                    console=console, settings=llm_setting_fields(args))


# ---------------------------------------------------------------- runs / report


def run_dir(runs_dir: str | Path, run_id: str) -> Path:
    path = Path(runs_dir) / run_id
    if not run_id or "/" in run_id or not path.is_dir():
        raise UsageError(f"unknown run id {run_id!r} in {runs_dir}/ (see `lero runs`)")
    return path


def cmd_runs(args: argparse.Namespace, console: Console) -> int:
    from lero.app.console.progress import render_runs
    from lero.app.reports.run_report import run_row, run_rows

    root = Path(args.runs_dir)
    rows = run_rows(root, run_row)
    if not rows:
        console.print(f"no runs in {root}/")
        return EXIT_OK
    render_runs(rows, console)
    return EXIT_OK


def cmd_report(args: argparse.Namespace, console: Console) -> int:
    path = run_dir(args.runs_dir, args.run_id)  # an unknown run: said before the heavy imports
    from lero.app.console.progress import render_summary
    from lero.app.reports.confirmation_verdict import headline
    from lero.app.reports.run_report import write_report
    from lero.graph.rundir import RunDir

    summary = write_report(path)
    render_summary(summary, console, headline(summary["confirmation"]))
    console.print(f"report: {RunDir(path).report_md_path}", soft_wrap=True)
    return EXIT_OK


# ---------------------------------------------------------------- study


def _combine(args: argparse.Namespace, console: Console, export: tuple[str, Path] | None) -> int:
    from lero.app.study.combine import load_studies, shown_improvement, shown_row, write_combined
    from lero.app.study.export import write_export
    from lero.graph.rundir import STUDIES_DIR

    if args.run_id is not None or args.candidate is not None:
        raise UsageError("--combine takes finished study folders, not a run id or --candidate")
    studies = load_studies(args.combine)
    out = args.out or Path(args.runs_dir) / STUDIES_DIR / "combined"
    combined = write_combined(studies, out)
    for arm, row in combined["arms"].items():
        poi = shown_improvement(combined, arm)
        shown = f", P(better than native) {poi}" if poi != "-" else ""
        console.print(f"{arm:20s} IQM {shown_row(row, 'iqm')} over {row['tasks']} task(s){shown}", markup=False)
    if export is not None:
        console.print(f"export: {write_export(export[0], studies, export[1])}", soft_wrap=True)
    console.print(f"combined: {out / 'combined.md'}", soft_wrap=True)
    return EXIT_OK


def cmd_study(args: argparse.Namespace, console: Console) -> int:
    from lero.app.study import StudySpec, run_study
    from lero.app.study.export import write_export
    from lero.app.study.report import cell_line, equal_compute_sentences, seed_notes

    export = study_export(args)
    if args.combine:
        return _combine(args, console, export)
    if args.out is not None:
        raise UsageError("--out goes with --combine")
    spec = StudySpec.parse(study_fields(args))
    if args.logger is not None:
        require_logger(args.logger)
    with first_stop_cancels():  # SIGTERM as Ctrl-C: the study's jobs are killed, its finished cells kept
        try:
            study = run_study(spec, progress=lambda line: console.print(line, markup=False, soft_wrap=True),
                              confirm=args.env)
        except KeyboardInterrupt:
            return _fail("interrupted; its finished cells are kept: the same command continues the study",
                         EXIT_INTERRUPTED)
    for line in [*seed_notes(study), *map(cell_line, study["cells"])]:
        console.print(line, markup=False, soft_wrap=True)
    for line in equal_compute_sentences(study["equal_compute"]):
        console.print(line, markup=False, soft_wrap=True)
    if (check := study["recheck"]) is not None:
        console.print(f"reward-hacking check: {'FLAGGED' if check['reward_hacking'] else 'not flagged'} "
                      f"(native return past the budget: {check['trends'].get('return', {}).get('direction')})")
    if export is not None:
        console.print(f"export: {write_export(export[0], [study], export[1])}", soft_wrap=True)
    if args.logger is not None:
        from lero.app.reports.command_tracking import log_study

        log_study(args.logger, study, Path(spec.runs_dir))
    console.print(f"study {study['study_id']}: {study['status']}; report: {study['study_md']}", soft_wrap=True)
    return EXIT_OK if study["status"] == "completed" else EXIT_FAILED


def cmd_eval(args: argparse.Namespace, console: Console) -> int:
    """A run's saved policies (its best, a named candidate or the baseline) measured on
    held-out episodes in the sandbox (`app.reports.held_out`); `--render` draws some as a GIF."""
    from lero.app.reports.held_out import (
        check_drawable,
        check_render_path,
        evaluate_target,
        evaluation_lines,
        open_target,
        render_title,
        save_evaluation,
    )
    from lero.sandbox.types import MAX_RECORD_EPISODES

    check_render_path(args.render)
    if args.render_episodes > MAX_RECORD_EPISODES:
        raise UsageError(f"--render-episodes must be <= {MAX_RECORD_EPISODES}, got {args.render_episodes}")
    target = open_target(args.runs_dir, args.run_id, args.candidate)
    if args.render:
        check_drawable(target.spec)
    episodes = args.episodes or target.spec.eval_episodes
    record = min(args.render_episodes, episodes) if args.render else 0
    document = evaluate_target(target, episodes, args.sandbox, record, confirm=args.env)
    for line in evaluation_lines(document):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(f"saved: {save_evaluation(target, document)}", soft_wrap=True)
    if args.render and document["trajectories"]:
        from lero.app.reports.eval_render import write_gif

        seed, episodes_drawn = next(iter(document["trajectories"].items()))
        drawn = write_gif(episodes_drawn, args.render, render_title(target, seed))
        console.print(f"rendered: {drawn}", soft_wrap=True)
    return EXIT_OK if document["status"] == "completed" else EXIT_FAILED


def cmd_compare(args: argparse.Namespace, console: Console) -> int:
    """Runs side by side (`app.reports.compare_runs`): the table on the terminal, files in --out."""
    from lero.app.reports.compare_runs import (
        cells,
        comparison_rows,
        default_out,
        load_runs,
        write_comparison,
    )

    runs = load_runs(args.runs_dir, args.run_ids)
    out = args.out or default_out(args.runs_dir, args.run_ids)
    written = write_comparison(runs, out)
    rows, metrics = comparison_rows(runs)
    for row in rows:
        shown = dict(zip(("run", "name", "status", "env", "algo", "steps", "seeds", "generations", "confirmed", "loop baseline",
                          "loop best", "loop best fitness", "loop improvement"), cells(row, metrics), strict=False))  # fmt: skip
        console.print("; ".join(f"{k} {v}" for k, v in shown.items()), markup=False, highlight=False, soft_wrap=True)
    for kind, path in written.items():
        console.print(f"{kind}: {path}", soft_wrap=True)
    return EXIT_OK


# ---------------------------------------------------------------- train / bench / sandbox


def cmd_train(args: argparse.Namespace, console: Console) -> int:
    """One seed writes DIR/{policy.pt, curve.csv, result.json}; several (`--seed 0 1 2`)
    train in one process (`training.train_seeds`, each seed bitwise what it gives alone),
    write that per seed in DIR/seed-<k>/, and DIR/seeds.json the evaluation over the seeds."""
    import torch

    from lero.app.console.progress import train_progress
    from lero.graph.safefs import write_atomic
    from lero.training import TrainConfig, make_env, train_seeds
    from lero.training.openmp import openmp_wait
    from lero.training.outputs import write_train_outputs

    seeds = args.seed
    if len(set(seeds)) != len(seeds):
        raise UsageError(f"--seed values must differ, got {' '.join(map(str, seeds))}")
    env_kwargs = dict(args.env_args)
    hparams = checked_hparams((args.algo,), {}, args.hparams)  # recorded in result.json's config
    if args.logger is not None:
        require_logger(args.logger)
    cfgs = [
        TrainConfig(env=args.env, env_kwargs=env_kwargs, algo=args.algo, steps=args.steps, seed=seed,
                    n_envs=args.n_envs, eval_episodes=args.eval_episodes, threads=args.threads, hparams=hparams,
                    eval_every=args.eval_every or None)
        for seed in seeds
    ]  # fmt: skip
    make_env(args.env, 1, **env_kwargs)  # bad env kwargs (N=0, typos) fail before any output
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} exists and is not a directory")
    args.out.mkdir(parents=True, exist_ok=True)
    label = f"{args.algo} on {args.env}" + (f", seeds {' '.join(map(str, seeds))}" if len(seeds) > 1 else "")
    with train_progress(console, label) as progress:
        results = train_seeds(cfgs, progress=progress)
    measured_on = {"threads": args.threads or torch.get_num_threads(), "omp_wait": openmp_wait()}
    written = write_train_outputs(results, args.out, measured_on, write_atomic)
    for result in results:
        metrics = ", ".join(f"{k} {v:.3f}" for k, v in result.eval.items())
        console.print(f"seed {result.config.seed} eval: {metrics}")
    steps = sum(result.steps for result in results)  # each seed holds 1/S of the job's seconds:
    wall_s, train_s = (sum(getattr(result, name) for result in results) for name in ("wall_s", "train_s"))
    console.print(f"{steps} steps in {wall_s:.1f} s ({steps / train_s:.0f} steps/s on {measured_on['threads']} "
                  f"thread(s), OpenMP wait {measured_on['omp_wait']}) -> {written}", soft_wrap=True)
    if args.logger is not None:
        from lero.app.reports.command_tracking import log_training

        log_training(args.logger, args.out, results, written)
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


def sandbox_check_env(name: str) -> dict[str, Any]:
    """The job env `lero sandbox check --env NAME` asks about, nothing imported: a
    package.module:factory spec is found in the working directory, as `lero run` finds it."""
    from lero.training.envs.registry import check_env_name, is_installed

    check_env_name(name)
    return {"name": name} if is_installed(name) else {"name": name, "import_root": os.getcwd()}


def cmd_sandbox(args: argparse.Namespace, console: Console) -> int:
    from lero.sandbox.check import check
    from lero.sandbox.image import build_image

    def log(message: str) -> None:
        console.print(message, markup=False, highlight=False)

    if args.action == "build":
        console.print(f"built image {build_image(args.mode, log=log)}")
        return EXIT_OK
    report = check(sandbox_check_env(args.env) if args.env else None)
    for name, (ok, detail) in report.items():
        console.print(f"{'[green]ok[/]  ' if ok else '[red]FAIL[/]'} {name}: {escape(detail)}")
    return EXIT_OK if all(ok for ok, _ in report.values()) else EXIT_FAILED


def cmd_ui(args: argparse.Namespace, console: Console) -> int:
    from lero.agents import LLMConfig
    from lero.app.ui import PortUnavailable, serve

    fields = llm_fields(args.llm, args.model, args.base_url)
    given = llm_setting_fields(args)
    try:
        serve(str(args.runs_dir), args.host, args.port,
              LLMConfig.from_spec(fields["llm"], base_url=fields["base_url"], **llm_settings(given)), llm_settings=given)
    except PortUnavailable as error:
        return _fail(str(error), EXIT_FAILED)
    return EXIT_OK


def command_function(name: str) -> Callable[[argparse.Namespace, Console], int]:
    """The `cmd_` function that `lero NAME`'s declaration (`args.COMMANDS`) names, imported
    now: a command declared outside lero runs from its own module."""
    module, _, function = COMMANDS[name].run.partition(":")
    return getattr(importlib.import_module(module), function)


OPERATIONAL_ERRORS = (
    ("lero.sandbox.types", "SandboxUnavailable"),
    ("lero.agents.retry", "LLMError"),
    ("lero.agents.budget", "BudgetExceeded"),
)


def _is_operational(exc: RuntimeError) -> bool:
    """No Docker daemon / image, an LLM server that fails for good: the message says how
    to fix it, so no traceback. Only the errors' modules already imported are asked (one
    never imported cannot have raised)."""
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
        return command_function(args.command)(args, console)
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
