"""Does the offline designer improve fitness over generations? (in-process, no sandbox, no LLM)

Runs the evolutionary loop with `training.train` directly on LERO's default setting
(simple_spread, N=3, partial observability: 1 agent neighbour, 2 landmark neighbours,
MAPPO) and reports, per generation, the best and mean fitness (native per-agent episode
return of the greedy policy, mean over seeds) next to the baseline trained on the
native reward with raw observations, under the same budget and seeds.

    python -m benchmarks.offline_designer --generations 4 --population 4 --steps 200000

Elitist selection: the best `--elites` candidates seen so far are the parents of the
next generation, with their evaluation metrics and reflection statistics. A candidate
whose training raises is handed to the offline debugger once. At the end the best
candidate and the baseline are retrained on held-out seeds, since the best of many
candidates on the selection seeds is optimistically biased.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import traceback
from dataclasses import dataclass

import torch

from lero.agents import Elite, LLMConfig, Problem, make_team
from lero.graph.configuration import RunSpec
from lero.graph.context import problem
from lero.training import TrainConfig, load_candidate, train
from lero.training.defaults import DEFAULT_ALGO, DEFAULT_ENV

LERO_ENV = RunSpec.default_env_kwargs()  # simple_spread as LERO runs it
HELD_OUT_SEED = 1000  # the final best and the baseline are retrained on seeds selection never saw
TASK = "Cover every landmark with an agent while avoiding collisions (cooperative navigation)."


@dataclass
class Scored:
    candidate_id: str
    code: str | None  # None = baseline
    fitness: float | None
    metrics: dict[str, float]
    reflection_stats: dict[str, dict]
    error: str | None = None


def score(
    candidate_id: str, code: str | None, args: argparse.Namespace, first_seed: int = 0
) -> Scored:
    """Train with `args.seeds` seeds from `first_seed` and evaluate; fitness = mean native return."""
    evals, stats = [], {}
    hooks = None if code is None else load_candidate(code)
    for seed in range(first_seed, first_seed + args.seeds):
        cfg = TrainConfig(
            env=DEFAULT_ENV,
            env_kwargs=LERO_ENV,
            algo=args.algo,
            steps=args.steps,
            seed=seed,
            eval_episodes=args.eval_episodes,
            threads=args.threads,
        )
        result = train(cfg, hooks)
        evals.append(result.eval)
        stats = stats or result.reflection_stats
    metrics = {key: statistics.fmean(e[key] for e in evals) for key in evals[0]}
    return Scored(candidate_id, code, metrics["return"], metrics, stats)


def score_or_repair(candidate_id: str, code: str, team, task: Problem, args) -> Scored:
    try:
        return score(candidate_id, code, args)
    except Exception:
        error = traceback.format_exc(limit=-3)
    repaired = team.debugger.repair(task, code, error, history=[])
    if repaired.code is None:
        return Scored(candidate_id, code, None, {}, {}, error.splitlines()[-1])
    try:
        return score(candidate_id + "r", repaired.code, args)
    except Exception as second:
        return Scored(
            candidate_id, repaired.code, None, {}, {}, f"{type(second).__name__}: {second}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--population", type=int, default=4)
    parser.add_argument("--elites", type=int, default=2)
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--algo", default=DEFAULT_ALGO)
    parser.add_argument("--eval-episodes", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0, help="the offline designer's seed")
    parser.add_argument("--out", help="write the per-generation numbers as JSON here")
    args = parser.parse_args()
    if min(args.generations, args.population, args.elites, args.steps, args.seeds) < 1:
        parser.error("generations, population, elites, steps and seeds must be >= 1")
    torch.set_num_threads(args.threads)

    spec = RunSpec(algo=args.algo, task=TASK, population=args.population)
    task = problem(spec)
    team = make_team(LLMConfig(backend="offline", seed=args.seed))
    started = time.perf_counter()
    baseline = score("baseline", None, args)
    print(f"baseline: fitness {baseline.fitness:.3f}  {_metrics(baseline.metrics)}", flush=True)

    pool: list[Scored] = []
    report = {
        "baseline": baseline.fitness,
        "baseline_eval": baseline.metrics,
        "generations": [],
        "args": vars(args),
    }
    for generation in range(args.generations):
        ranked = sorted(
            (s for s in pool if s.fitness is not None), key=lambda s: s.fitness, reverse=True
        )
        elites = [
            Elite(s.candidate_id, s.code, s.fitness, s.metrics, s.reflection_stats, "")
            for s in ranked[: args.elites]
        ]
        exploit = spec.exploit_slots(bool(elites))
        drafts = team.designer.design(task, args.population, elites, reflection="", exploit=exploit)
        scored = [
            score_or_repair(f"{generation}-{index}", draft.code, team, task, args)
            for index, draft in enumerate(drafts)
        ]
        pool.extend(scored)
        fitnesses = [s.fitness for s in scored if s.fitness is not None]
        best_so_far = max((s.fitness for s in pool if s.fitness is not None), default=None)
        row = {
            "generation": generation,
            "valid": len(fitnesses),
            "best_fitness": max(fitnesses, default=None),
            "mean_fitness": statistics.fmean(fitnesses) if fitnesses else None,
            "best_so_far": best_so_far,
            "candidates": [
                {"id": s.candidate_id, "fitness": s.fitness, "eval": s.metrics, "error": s.error}
                for s in scored
            ],
        }
        report["generations"].append(row)
        print(
            f"gen {generation}: best {_num(row['best_fitness'])}  mean {_num(row['mean_fitness'])}  "
            f"best so far {_num(best_so_far)}  (baseline {_num(baseline.fitness)}, "
            f"{len(fitnesses)}/{len(scored)} valid)",
            flush=True,
        )
        for s in scored:
            print(
                f"    {s.candidate_id}: {_num(s.fitness)}  {_metrics(s.metrics)}  {s.error or ''}"
            )
    valid = [s for s in pool if s.fitness is not None]
    if not valid:
        raise SystemExit("no candidate trained successfully; see the errors above")
    best = max(valid, key=lambda s: s.fitness)
    held_out_best = score(best.candidate_id, best.code, args, first_seed=HELD_OUT_SEED)
    held_out_baseline = score("baseline", None, args, first_seed=HELD_OUT_SEED)
    report["held_out"] = {
        "candidate_id": best.candidate_id,
        "seeds": list(range(HELD_OUT_SEED, HELD_OUT_SEED + args.seeds)),
        "best_fitness": held_out_best.fitness,
        "best_eval": held_out_best.metrics,
        "baseline_fitness": held_out_baseline.fitness,
        "baseline_eval": held_out_baseline.metrics,
    }
    print(
        f"held-out seeds: best {best.candidate_id} {held_out_best.fitness:.3f} "
        f"({_metrics(held_out_best.metrics)}) vs baseline {held_out_baseline.fitness:.3f} "
        f"({_metrics(held_out_baseline.metrics)})"
    )
    report["wall_s"] = round(time.perf_counter() - started, 1)
    print(f"wall {report['wall_s']} s")
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(report, handle, indent=2)


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _metrics(metrics: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.3g}" for k, v in metrics.items() if k != "return")


if __name__ == "__main__":
    main()
