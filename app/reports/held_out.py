"""`lero eval RUN [CANDIDATE]`: a run's saved policies measured again on held-out episodes.

Nothing read from the run directory is used as it stands. The candidate must be one the run
lists (its folder name, or `baseline`); each seed's policy must lie in the run's own job
folders (`cache/jobs/`), reached without following a link (`graph.safefs.Confined`); the
sandbox then reads the weights itself, capped, only inside those folders. The candidate's
code runs only in the sandbox: every policy is measured by the trusted `evaluate` job that
scores candidates in the loop (weights loaded before any candidate code, the OEF in a
worker), on held-out episodes, seed `FIRST_EVAL_SEED + training seed` as `lero study`
measures, never the selection episodes the loop chose the candidate on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from lero.app.cli.named_run import open_named_run
from lero.app.reports.numbers import fmt_number
from lero.app.reports.run_status import run_label
from lero.app.study.spec import FIRST_EVAL_SEED
from lero.graph.configuration import RunError, RunSpec
from lero.graph.rundir import BASELINE_ID, CACHE_DIR, EVALS_DIR, JOBS_DIR, RunDir
from lero.graph.summary import best_candidate, load_run
from lero.training.files import POLICY_FILE

RENDER_SUFFIXES = (".gif",)  # Pillow writes GIF; no MP4 encoder ships with lero


@dataclass(frozen=True)
class EvalTarget:
    """What `lero eval` measures: one candidate (or the baseline) of a run, checked."""

    rundir: RunDir
    spec: RunSpec
    name: str  # the candidate's folder name, or `baseline`
    code: str | None  # the module its policies were trained with (None: the baseline)
    policies: dict[int, Path]  # training seed -> its policy folder inside the run's job folders


def render_title(target: EvalTarget, seed: int | str) -> str:
    """The GIF's caption: the run by its name and tags as legends show it (`run_label`), by
    its id only when it has neither; then the candidate and the training seed drawn."""
    run = run_label(target.spec.model_dump(mode="json")) or f"run {target.spec.run_id}"
    return f"{run}, {target.name}, seed {seed}: held-out episodes"


def open_target(runs_dir: str | Path, run_id: str, candidate: str | None = None) -> EvalTarget:
    """The run's best candidate (CANDIDATE None), a named one, or `baseline`; RunError (one
    line) for an unknown run or candidate, or one with no saved policy."""
    rundir = open_named_run(runs_dir, run_id)
    run = load_run(rundir.path)
    if candidate == BASELINE_ID:
        name, result = BASELINE_ID, run.baseline
    else:
        found = best_candidate(run) if candidate is None else next(
            (c for c in run.candidates if candidate in (c.folder, c.candidate_id)), None)  # fmt: skip
        if found is None:
            listed = ", ".join(c.folder for c in run.candidates[:8]) or "none"
            wanted = "a best candidate yet" if candidate is None else f"candidate {candidate!r}"
            raise RunError(f"run {run_id!r} has no {wanted} (its candidates: {listed}; or `baseline`)")
        name, result = found.folder, found.result
    if not result:
        raise RunError(f"{name} of run {run_id!r} has no result yet: nothing was trained")
    code = None if name == BASELINE_ID else result.get("code")
    if name != BASELINE_ID and not isinstance(code, str):
        raise RunError(f"{name} of run {run_id!r} records no trained code")
    policies = {}
    for record in result.get("per_seed") or []:
        seed = record.get("seed") if isinstance(record, dict) else None
        if record.get("status") != "ok" or not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            continue
        policies[seed] = policy_folder(rundir, seed, record.get("policy_dir"))
    if not policies:
        raise RunError(f"{name} of run {run_id!r} has no trained seed with a saved policy")
    return EvalTarget(rundir=rundir, spec=rundir.read_spec(), name=name, code=code,
                      policies=dict(sorted(policies.items())))  # fmt: skip


def policy_folder(rundir: RunDir, seed: int, recorded: object) -> Path:
    """SEED's policy folder: the path a seed record names, taken below its `cache/jobs/` (a
    run moved with its runs dir keeps its policies) and found inside this run's job folders
    as a real folder holding a regular `policy.pt`, no link on the way; RunError otherwise."""
    parts = PurePosixPath(recorded).parts if isinstance(recorded, str) else ()
    starts = [i for i in range(len(parts) - 1) if parts[i:i + 2] == (CACHE_DIR, JOBS_DIR)]
    below = parts[starts[-1] + 2:] if starts else ()
    if not below or any(part in ("", ".", "..") for part in below):
        raise RunError(f"seed {seed}'s policy is not in the run's job folders: {str(recorded)[:200]!r}")
    relative = "/".join((CACHE_DIR, JOBS_DIR, *below))
    if rundir.files.kind(f"{relative}/{POLICY_FILE}") != "file":
        raise RunError(f"seed {seed}'s policy is gone or unsafe: no regular {relative}/{POLICY_FILE} "
                       "in the run (its job folder was removed)")  # fmt: skip
    return rundir.path.joinpath(*relative.split("/"))


def evaluate_target(target: EvalTarget, episodes: int, sandbox_kind: str | None = None,
                    record_episodes: int = 0, confirm: str | None = None) -> dict[str, Any]:
    """Every saved seed's policy measured by one group of `evaluate` jobs on held-out
    episodes; returns the evaluation document (`evaluation_document`), with each seed's
    recorded episodes under `trajectories` when RECORD_EPISODES > 0 (not stored). A copied
    run's process sandbox is used only when SANDBOX_KIND gives it again (graph.trust)."""
    from lero.graph.context import open_sandbox
    from lero.graph.trust import confirm_endpoints, confirm_env, job_env
    from lero.sandbox import EVALUATE, Job, Limits

    spec = target.spec
    given = {"sandbox": sandbox_kind} if sandbox_kind else {}
    confirm_endpoints(spec, given, target.rundir.written_here(), "lero eval", ("sandbox",))
    env = job_env(spec, confirm_env(spec.env, confirm))
    sandbox_spec = RunSpec(env=spec.env, env_kwargs={}, sandbox=sandbox_kind or spec.sandbox,
                           max_parallel=spec.max_parallel)  # fmt: skip
    sandbox = open_sandbox(sandbox_spec, target.rundir.cache_dir, env=env)
    try:
        jobs = [Job(kind=EVALUATE.name, code=target.code, env=env, algo=spec.algo, steps=spec.steps, seed=seed,
                    policy_dir=str(folder), eval_seed=FIRST_EVAL_SEED + seed, eval_episodes=episodes,
                    hparams=spec.hparams, limits=Limits(wall_s=spec.job_timeout_s),
                    candidate_id=f"eval:{target.name}", record_episodes=record_episodes)
                for seed, folder in target.policies.items()]  # fmt: skip
        results = sandbox.run_group(jobs)
    finally:
        sandbox.close()
    document = evaluation_document(target, episodes, {job.seed: r.to_dict() for job, r in zip(jobs, results, strict=True)})
    document["trajectories"] = {job.seed: r.trajectories for job, r in zip(jobs, results, strict=True) if r.trajectories}
    return document


def evaluation_document(target: EvalTarget, episodes: int, results: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """What `lero eval` saves (`evals/<name>.json`): the settings, each seed's status, metric
    means with a 95% bootstrap CI over its episodes, and each metric over seeds
    (`app.study.stats.summary`: no CI below its seed count, and why)."""
    from lero.app.study.stats import bootstrap_ci, summary

    per_seed: dict[str, dict[str, Any]] = {}
    for seed, result in results.items():
        row: dict[str, Any] = {"status": result["status"], "eval_seed": FIRST_EVAL_SEED + seed,
                               "cached": bool(result.get("cached"))}  # fmt: skip
        if result["status"] != "ok":
            error = result.get("error") or {}
            row["error"] = f"{error.get('type', '?')}: {error.get('message', '')}"[:300]
        else:
            row["metrics"] = {}
            for name, values in (result.get("episodes") or {}).items():
                low, high = bootstrap_ci(values) if len(values) > 1 else (None, None)
                row["metrics"][name] = {"mean": float(sum(values) / len(values)), "ci_low": _number(low),
                                        "ci_high": _number(high), "episodes": len(values)}  # fmt: skip
        per_seed[str(seed)] = row
    ok = [row for row in per_seed.values() if row["status"] == "ok"]
    names = list(dict.fromkeys(name for row in ok for name in row["metrics"]))
    over_seeds = {name: summary([row["metrics"][name]["mean"] for row in ok if name in row["metrics"]])
                  for name in names}  # fmt: skip
    spec = target.spec
    return {
        "run_id": spec.run_id, "candidate": target.name, "env": spec.env, "env_kwargs": spec.env_kwargs,
        "algo": spec.algo, "episodes": episodes, "first_eval_seed": FIRST_EVAL_SEED,
        "status": "completed" if len(ok) == len(per_seed) else "incomplete",
        "metrics": names, "per_seed": per_seed, "over_seeds": over_seeds,
    }  # fmt: skip


def _number(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def save_evaluation(target: EvalTarget, document: dict[str, Any]) -> Path:
    """`evals/<name>.json` in the run (through RunDir's confined writes); its path."""
    stored = {k: v for k, v in document.items() if k != "trajectories"}
    relative = f"{EVALS_DIR}/{target.name}.json"
    target.rundir.write_json(relative, stored)
    return target.rundir.path / relative


def evaluation_lines(document: dict[str, Any]) -> list[str]:
    """The terminal's lines: per metric the mean over seeds (with its CI where the seeds
    carry one, else said once why not), then each seed's mean [95% CI over its episodes]."""
    seeds = document["per_seed"]
    lines = [f"{document['candidate']} of run {document['run_id']}: {document['episodes']} held-out episodes "
             f"per seed (episode seed {document['first_eval_seed']} + training seed); "
             "each seed: mean [95% bootstrap CI over its episodes]"]  # fmt: skip
    lines += [f"seed {seed}: {row['status']}: {row.get('error', '')}" for seed, row in seeds.items() if row["status"] != "ok"]
    reasons = {over["no_ci"] for over in document["over_seeds"].values() if over["no_ci"]}
    lines += [f"over seeds: {reason}" for reason in sorted(reasons)]
    for name in document["metrics"]:
        over = document["over_seeds"][name]
        shown = f"{fmt_number(over['mean'])} over {over['n']} seed{'s' * (over['n'] != 1)}"
        if over["ci_low"] is not None:
            shown += f" [{fmt_number(over['ci_low'])}, {fmt_number(over['ci_high'])}]"
        cells = []
        for seed, row in seeds.items():
            if (metric := (row.get("metrics") or {}).get(name)) is not None:
                interval = "" if metric["ci_low"] is None else \
                    f" [{fmt_number(metric['ci_low'])}, {fmt_number(metric['ci_high'])}]"  # fmt: skip
                cells.append(f"seed {seed} {fmt_number(metric['mean'])}{interval}")
        lines.append(f"{name}: {shown}; " + "; ".join(cells))
    return lines


def check_drawable(spec: RunSpec) -> None:
    """`--render` needs agents' positions in the env's world (`eval_render.AGENT_FIELD`): said
    before anything runs for a native env (a person's env is never built on the host; its
    recorded episodes are checked when drawn)."""
    from lero.app.reports.eval_render import AGENT_FIELD
    from lero.training.envs.registry import is_native, task_spec

    if is_native(spec.env) and AGENT_FIELD not in [f.name for f in task_spec(spec.env, **spec.env_kwargs).state_fields]:
        raise RunError(f"--render: {spec.env}'s world has no {AGENT_FIELD} to draw")


def check_render_path(path: Path | None) -> None:
    """`--render FILE`: a .gif in an existing folder, checked before anything runs."""
    if path is None:
        return
    if path.suffix.lower() not in RENDER_SUFFIXES:
        raise RunError(f"--render {path}: only an animated .gif is written (no MP4 encoder ships with lero)")
    if path.is_dir() or not path.parent.is_dir():
        raise RunError(f"--render {path}: give a file in an existing folder")
