"""Run summary: report.json (a run-directory contract) rebuilt from a run directory alone.

The engine writes it when a run ends; the app's report (report.md, plots) builds on it.
Only the files the engine leaves on disk are read (spec.json, state.json, events.jsonl,
baseline/result.json, candidates/<gen>-<idx>/...), so a report can be rebuilt for any
run, finished or not, without the checkpoint database or a live graph.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from lero.agents.evidence import NO_JUDGEMENT
from lero.agents.records import VERDICTS, design_mode
from lero.graph.confirmation import confirmation_block
from lero.graph.lineage import lineage
from lero.graph.rundir import BASELINE_ID, SPEC_FILE, STATE_FILE, RunDir
from lero.graph.schedule import last_rung, rung_end
from lero.training.envs.task import TaskSpec
from lero.training.validation import finite_number  # a run dir's numbers: 10**400, NaN are none

RUN_STATUSES = ("completed", "running", "interrupted", "stopped", "failed")
# stop reasons after which the designer could not go on; `lero resume` continues the run
RESUMABLE_STOPS = ("llm_budget", "llm_error", "wall_clock", "disk_budget")
# job statuses that say the sandbox or the engine failed, not the candidate's code
INFRASTRUCTURE_STATUSES = frozenset({"crashed"})


@dataclass
class CandidateRecord:
    """One candidate directory: its result (if trained/judged) and where its code is."""

    candidate_id: str
    generation: int
    index: int
    result: dict
    code_path: Path | None
    folder: str = ""  # its directory under candidates/ (where its files are read)

    @property
    def fitness(self) -> float | None:
        value = self.result.get("fitness")
        return float(value) if finite_number(value) else None

    @property
    def status(self) -> str:
        return str(self.result.get("status", "pending"))

    @property
    def stopped_at(self) -> int | None:
        """Env steps after which successive halving stopped it (None: the whole budget)."""
        value = self.result.get("stopped_at")
        return int(value) if finite_number(value) else None


@dataclass
class RunFiles:
    """Everything read from one run directory."""

    run_dir: Path
    spec: dict
    state: dict
    events: list[dict]
    baseline: dict | None
    candidates: list[CandidateRecord] = field(default_factory=list)
    rundir: RunDir | None = None

    def __post_init__(self) -> None:
        self.rundir = self.rundir or RunDir(self.run_dir)

    @property
    def run_id(self) -> str:
        return str(self.spec.get("run_id") or self.run_dir.name)


def native_task(env: object, env_kwargs: object) -> TaskSpec | None:
    """ENV's own TaskSpec (the owner of what each metric means, which way is better, which
    says success and whether the reward is sparse) as the env declares it without being
    built (`registry.declared_task`); None for an env whose task is known only once built
    (VMAS, a plugin, a `package.module:factory`) or whose stored arguments it refuses: no
    report or page builds an env, whatever its stored arguments say (a copied spec's 2000 agents)."""
    from lero.training.envs.registry import declared_task

    if not isinstance(env, str) or not isinstance(env_kwargs, dict):
        return None
    try:
        return declared_task(env, env_kwargs)
    except (TypeError, ValueError):
        return None
def seed_fitnesses(result: dict | None) -> list[float]:
    """The fitness of each seed of a baseline/candidate result that has one."""
    per_seed = (result or {}).get("per_seed") or []
    return [float(r["fitness"]) for r in per_seed if finite_number(r.get("fitness"))]


def whole(value: object, default: int = 0) -> int:
    """A run dir's count as an int; DEFAULT for anything else (missing, text, NaN, inf)."""
    return int(value) if finite_number(value) else default


def _parse_candidate_dir(name: str) -> tuple[int, int] | None:
    gen, sep, idx = name.partition("-")
    if not sep or not gen.isdigit() or not idx.isdigit():
        return None
    return int(gen), int(idx)


def load_run(run_dir: str | Path, events_tail: int | None = None) -> RunFiles:
    """Read a run directory through RunDir; ValueError (one line) if it is not one or
    cannot be read (a planted symlink, a FIFO, a corrupt or oversized file). EVENTS_TAIL:
    read only the events of events.jsonl's last that many bytes (RunDir.read_events)."""
    rundir = RunDir(Path(run_dir))
    spec = rundir.read_json(SPEC_FILE)
    state = rundir.read_json(STATE_FILE)
    if spec is None and state is None:
        raise ValueError(f"not a lero run directory (no spec.json or state.json): {run_dir}")
    candidates = []
    for name in rundir.candidate_names():
        parsed = _parse_candidate_dir(name)
        if parsed is None:
            continue
        result = rundir.read_result(name) or {}
        candidates.append(
            CandidateRecord(
                candidate_id=str(result.get("candidate_id", name)),
                generation=whole(result.get("generation"), parsed[0]),
                index=parsed[1],
                result=result,
                code_path=rundir.code_path(name) if rundir.has_code(name) else None,
                folder=name,
            )
        )
    candidates.sort(key=lambda c: (c.generation, c.index))
    return RunFiles(
        run_dir=rundir.path,
        spec=spec or {},
        state=state or {},
        events=rundir.read_events(events_tail),
        baseline=rundir.read_result(BASELINE_ID),
        candidates=candidates,
        rundir=rundir,
    )


def eval_of(result: dict | None) -> dict[str, float]:
    if not result:
        return {}
    metrics = result.get("eval") or {}
    return {k: float(v) for k, v in metrics.items() if finite_number(v)}


def metric_names(*evaluations: dict) -> list[str]:
    """The task metrics a run measured (its env's own), `return` first, then as first seen."""
    return list(dict.fromkeys(["return", *(key for e in evaluations for key in e)]))


def best_candidate(run: RunFiles) -> CandidateRecord | None:
    """Highest fitness among candidates that were trained (the whole budget) and evaluated;
    under `--fitness success` the held-out return breaks ties, as in selection."""
    scored = [c for c in run.candidates if c.fitness is not None and c.stopped_at is None]
    ties = run.spec.get("fitness") == "success"
    return max(scored, key=lambda c: (c.fitness, _tie(c) if ties else 0.0)) if scored else None


def _tie(candidate: CandidateRecord) -> float:
    value = (candidate.result.get("eval") or {}).get("return")
    return float(value) if finite_number(value) else -math.inf


def _generation_rows(run: RunFiles) -> list[dict]:
    rows = []
    for gen in sorted({c.generation for c in run.candidates}):
        members = [c for c in run.candidates if c.generation == gen]
        valid = [c for c in members if c.fitness is not None]
        scores = [c.fitness for c in valid if c.stopped_at is None]  # whole-budget ones compare
        rows.append(
            {
                "generation": gen,
                "candidates": len(members),
                "valid": len(valid),
                "stopped_early": len(valid) - len(scores),
                "best_fitness": max(scores) if scores else None,
                "mean_fitness": statistics.fmean(scores) if scores else None,
            }
        )
    return rows


def _llm_usage(run: RunFiles) -> dict[str, int]:
    """state.json's counters; the llm_call events are the fallback for older/crashed runs."""
    usage = run.state.get("llm")
    if isinstance(usage, dict):
        return {
            k: whole(usage.get(k)) for k in ("requests", "prompt_tokens", "completion_tokens")
        }
    calls = [e for e in run.events if e.get("event") == "llm_call"]
    return {
        "requests": len(calls),
        "prompt_tokens": sum(whole(e.get("prompt_tokens")) for e in calls),
        "completion_tokens": sum(whole(e.get("completion_tokens")) for e in calls),
    }


def _wall_s(run: RunFiles) -> float | None:
    if finite_number(run.state.get("wall_s")):
        return float(run.state["wall_s"])
    stamps = [e["ts"] for e in run.events if finite_number(e.get("ts"))]
    return float(max(stamps) - min(stamps)) if stamps else None


JOB_SECONDS = ("elapsed_s", "wait_s", "start_s", "run_s")  # job_finished timing (JobResult.timing)
JOB_NODES = ("train", "confirm")  # these nodes' time is their jobs' time, counted under `jobs`


def time_breakdown(events: list[dict]) -> dict:
    """Where the time went, from events.jsonl: per job kind, the jobs (and cache hits), the
    sandboxes they started (a candidate's seeds may share one: `group_of`) and their seconds
    (`elapsed_s` = `wait_s` for a slot + `start_s` sandbox start and imports + `run_s` the
    work itself); per graph node but train, its wall seconds (`loop`)."""
    jobs: dict[str, dict] = {}
    for event in events:
        if event.get("event") != "job_finished" or not isinstance(event.get("kind"), str):
            continue
        empty = {"jobs": 0, "cached": 0, "sandboxes": 0.0} | dict.fromkeys(JOB_SECONDS, 0.0)
        row = jobs.setdefault(event["kind"], empty)
        row["jobs"] += 1
        row["cached"] += bool(event.get("cached"))
        if not event.get("cached"):
            group_of = event.get("group_of")
            row["sandboxes"] += 1.0 / group_of if isinstance(group_of, int) and group_of > 0 else 1.0
        for key in JOB_SECONDS:
            row[key] += float(event[key]) if finite_number(event.get(key)) else 0.0
    for row in jobs.values():
        row["sandboxes"] = round(row["sandboxes"])
    loop: dict[str, float] = {}
    for event in events:
        node, seconds = event.get("node"), event.get("seconds")
        if event.get("event") != "node_finished" or not isinstance(node, str) or node in JOB_NODES:
            continue
        if finite_number(seconds):
            loop[node] = loop.get(node, 0.0) + float(seconds)
    return {"jobs": jobs, "loop": loop}


def _status(run: RunFiles) -> str:
    status = run.state.get("status")
    return status if status in RUN_STATUSES else "running"


def is_resumable_stop(stop_reason: str | None) -> bool:
    """The designer stopped for a reason more budget or a working server fixes."""
    return bool(stop_reason) and stop_reason.split(":", 1)[0] in RESUMABLE_STOPS


def _failure_text(result: dict) -> str:
    """The first error message of a result.json (aggregated or one seed's)."""
    errors = [result.get("error"), *((r or {}).get("error") for r in result.get("per_seed") or [])]
    for error in errors:
        if isinstance(error, dict) and error.get("message"):
            return f"{error.get('type', 'error')}: {' '.join(str(error['message']).split())}"[:300]
        if isinstance(error, str) and error.strip():
            return " ".join(error.split())[:300]
    return f"status {result.get('status', '?')}"


def run_ending(run: RunFiles, stop_reason: str | None) -> tuple[str, str | None]:
    """(status, stop_reason) of a run whose graph reached its end.

    `failed` when the baseline did not train or every candidate failed in the sandbox
    rather than in its code (nothing the run shows can be trusted); `stopped` when the
    designer could not go on (resumable); else `completed` (a human stop included).
    """
    if run.baseline is not None and run.baseline.get("status") != "ok":
        return "failed", f"the baseline did not train ({_failure_text(run.baseline)})"
    broken = [c for c in run.candidates if c.status in INFRASTRUCTURE_STATUSES]
    if broken and len(broken) == len(run.candidates):
        return "failed", (
            f"all {len(broken)} candidates failed in the sandbox, not in their code "
            f"({_failure_text(broken[0].result)})"
        )
    if is_resumable_stop(stop_reason):
        return "stopped", stop_reason
    return "completed", stop_reason


def summarize(run: RunFiles) -> dict:
    """The report.json document (its keys: docs/internals.md, graph)."""
    best = best_candidate(run)
    env_steps = run.state.get("env_steps")
    return {
        "run_id": run.run_id,
        "status": _status(run),
        "stop_reason": run.state.get("stop_reason"),
        "baseline": {
            "fitness": (run.baseline or {}).get("fitness"),
            "eval": eval_of(run.baseline),
        },
        "best": {
            "candidate_id": best.candidate_id if best else None,
            "generation": best.generation if best else None,
            "fitness": best.fitness if best else None,
            "eval": eval_of(best.result) if best else {},
            "code_path": str(best.code_path.relative_to(run.run_dir))
            if best and best.code_path
            else None,
        },
        "generations": _generation_rows(run),
        "design": design_modes(run.events),
        "verdicts": critic_verdicts(run.events),
        "measured": measured_points(run.events),
        "lineage": _elite_lineage(run),
        "llm": _llm_usage(run),
        "env_steps": int(env_steps) if finite_number(env_steps) else None,
        "schedule": _schedule(run),
        "wall_s": _wall_s(run),
        "time": time_breakdown(run.events),
        "confirmation": confirmation_block(run.rundir, native_task(run.spec.get("env"), run.spec.get("env_kwargs", {})),
                                           run.spec.get("fitness")),  # null: the run confirmed nothing
    }


def design_modes(events: list[dict]) -> dict[str, str]:
    """Candidate id -> how its last code was designed (`agents.records.design_mode`)."""
    return {e["candidate_id"]: design_mode(e["origin"]) for e in events
            if e.get("event") == "candidate" and isinstance(e.get("origin"), str) and e.get("candidate_id")}


MEASURED_KEYS = ("target", "rubric_item", "why")
MAX_MEASURED = 16  # points kept per candidate


def measured_points(events: list[dict]) -> dict[str, list[dict]]:
    """Candidate id -> the rubric points its validation rollouts showed (`measured` events,
    `agents.evidence_rules`), each with `revised`: whether they sent it to revision. Read
    from the run directory, so only string fields of the declared keys are kept."""
    points: dict[str, list[dict]] = {}
    for event in events:
        if event.get("event") != "measured" or not isinstance(event.get("candidate_id"), str):
            continue
        kept = points.setdefault(event["candidate_id"], [])
        for point in event.get("points") if isinstance(event.get("points"), list) else []:
            if isinstance(point, dict) and all(isinstance(point.get(k), str) for k in MEASURED_KEYS):
                kept.append({**{k: point[k] for k in MEASURED_KEYS}, "revised": event.get("revised") is True})
        del kept[MAX_MEASURED:]
    return points


def critic_verdicts(events: list[dict]) -> dict[str, dict[str, int]]:
    """Model -> how many of its LLM critic verdicts were each verdict (`no judgement` included:
    a rejection that named no evidence, after which the candidate went on)."""
    counts: dict[str, dict[str, int]] = {}
    for event in events:
        if event.get("event") == "review" and isinstance(event.get("verdict"), str) and isinstance(event.get("model"), str):
            row = counts.setdefault(event["model"], dict.fromkeys((*VERDICTS, NO_JUDGEMENT), 0))
            row[event["verdict"]] = row.get(event["verdict"], 0) + 1
    return counts


def _schedule(run: RunFiles) -> dict:
    """The run's schedule: per rung, the env steps trained by its end and how many candidates
    reached it; `full_env_steps`: what the same candidates and baseline cost at `full` (each
    job the baseline's trained steps: `steps` rounded up to whole iterations)."""
    name = str(run.spec.get("schedule") or "full")
    steps, seeds = whole(run.spec.get("steps")), whole(run.spec.get("seeds"))
    trained = [c for c in run.candidates if c.result.get("per_seed")]
    rungs = [{"rung": rung, "steps": rung_end(steps, name, rung),
              "candidates": sum(1 for c in trained if whole(c.result.get("rung")) >= rung)}
             for rung in range(last_rung(name) + 1)]  # fmt: skip
    baseline = 1 if run.baseline is not None else 0
    per_job = whole((run.baseline or {}).get("trained_steps")) or steps  # whole iterations, as trained
    return {"name": name, "rungs": rungs, "full_env_steps": (len(trained) + baseline) * per_job * seeds}


def _elite_lineage(run: RunFiles) -> list[dict]:
    fitness = {c.candidate_id: c.fitness for c in run.candidates}
    return lineage(run.events, fitness, whole(run.spec.get("n_elites")) or 2)


def write_summary(run_dir: str | Path) -> dict:
    """Rebuild report.json from the run directory; returns it."""
    run = load_run(run_dir)
    summary = summarize(run)
    run.rundir.write_summary(summary)
    return summary
