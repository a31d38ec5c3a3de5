"""How a generation spends its env steps: `full` trains every candidate for the whole
budget; `halving` (successive halving) trains every candidate for a first rung of 1/4 of
it, continues the best half (by trusted evaluation, mean over seeds) from its learner state
to 1/2, and the best half of those to the full budget. Three rungs cost half of `full`'s
candidate steps; elites come only from candidates that trained the full budget.

A rung's job trains the same plan as a full one (learning rate, exploration and the
HRF's progress follow the whole budget) and stops at its rung's share; the next rung's job
continues the saved learner state (`training.resume`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, Literal

Schedule = Literal["full", "halving"]
SCHEDULES: tuple[str, ...] = ("full", "halving")
RUNG_SHARES: dict[str, tuple[float, ...]] = {"full": (1.0,), "halving": (0.25, 0.5, 1.0)}


def last_rung(schedule: str) -> int:
    """The rung whose jobs train the full budget (the baseline's, the elites')."""
    return len(RUNG_SHARES[schedule]) - 1


def rung_end(steps: int, schedule: str, rung: int) -> int:
    """The env steps of the plan trained by the end of RUNG."""
    return steps if rung == last_rung(schedule) else max(1, round(steps * RUNG_SHARES[schedule][rung]))


def rung_stop(steps: int, schedule: str, rung: int) -> int | None:
    """A rung job's `stop_at` (None: the job trains the whole plan)."""
    return None if rung == last_rung(schedule) else rung_end(steps, schedule, rung)


def rung_steps(steps: int, schedule: str, rung: int) -> int:
    """Env steps one job of RUNG adds: its end minus the previous rung's."""
    return rung_end(steps, schedule, rung) - (rung_end(steps, schedule, rung - 1) if rung else 0)


def loop_env_steps(selection_steps: int, confirm_steps: int = 0, confirm_seeds: int = 0, confirm_arms: int = 0) -> int:
    """native@loop's budget (`graph.confirmation.LOOP_ARM`): the env steps the selection loop
    trained (report.json's `env_steps`, the baseline included) plus the confirmation's:
    CONFIRM_ARMS arms (not native@loop itself) of CONFIRM_SEEDS seeds at CONFIRM_STEPS each."""
    return selection_steps + confirm_steps * confirm_seeds * confirm_arms


def planned(steps: int, schedule: str, candidates: int) -> tuple[int, int]:
    """(train jobs, env steps) per seed of a generation of CANDIDATES, all valid and
    promoted as planned."""
    jobs = total = 0
    alive = candidates
    for rung in range(last_rung(schedule) + 1):
        jobs += alive
        total += alive * rung_steps(steps, schedule, rung)
        alive = math.ceil(alive / 2)
    return jobs, total


def promoted(at_rung: dict[str, list[dict[str, Any]]], seeds: int) -> list[str]:
    """The best half (rounded up) of a rung's candidates: id -> their seed results at the
    rung. Only candidates whose every seed is ok count; ties go to the lower id."""
    scored = {
        cid: sum(r["fitness"] for r in results) / len(results)
        for cid, results in at_rung.items()
        if len(results) == seeds and all(r["status"] == "ok" and r.get("fitness") is not None for r in results)
    }
    best = sorted(scored, key=lambda cid: (-scored[cid], cid))
    return best[: math.ceil(len(at_rung) / 2)]


def seed_groups(lengths: list[float], seeds: list[int], slots: int) -> list[list[list[int]]]:
    """How each branch of a fan-out splits its SEEDS into sandbox jobs. LENGTHS: one seed's
    training in each branch (its share of the budget), in the order the branches are sent;
    SLOTS: jobs at once.

    The seeds of one job (`graph.protocol.train_and_evaluate_seeds`) pay one sandbox start (about
    1.5 CPU-s) and each gets what it gets alone, but a job of g seeds runs g times as long.
    Of the plans that split the last k branches' seeds into jobs of g (the others one job
    per seed), the one with the fewest jobs that ends no later (the jobs taken in order by
    the first free slot) than one job per seed: with 2 slots, 4 candidates of 2 seeds train
    as 4 jobs of 2, and a first generation (the baseline first) as 2 baseline jobs of 1 and
    4 jobs of 2.
    """

    def makespan(plan: list[list[list[int]]]) -> float:
        free = [0.0] * slots
        for length, jobs in zip(lengths, plan, strict=True):
            for job in jobs:
                first = free.index(min(free))
                free[first] += length * len(job)
        return max(free)

    singles = [[[seed] for seed in seeds] for _ in lengths]
    best, limit = singles, makespan(singles) + 1e-9
    for size in range(2, len(seeds) + 1):
        jobs = [seeds[k : k + size] for k in range(0, len(seeds), size)]
        for k in range(1, len(lengths) + 1):
            plan = singles[: len(lengths) - k] + [jobs] * k
            if sum(map(len, plan)) < sum(map(len, best)) and makespan(plan) <= limit:
                best = plan
    return best


def jobs_beside_cache(
    missing: dict[Any, list[int]],
    cached: dict[Any, list[bool]],
    lengths: dict[Any, float],
    seeds: list[int],
    groups: Callable[[list[float], list[int]], list[list[list[int]]]],
) -> list[tuple[Any, list[int]]]:
    """Sandbox jobs for each branch's MISSING seed indexes (branch -> indexes into SEEDS):
    the ones a cache answers (CACHED, per missing index) as one job apart, which takes no slot
    time; the rest split by GROUPS (`sandbox_groups` on the run's slots) over the branches that
    train, each one seed's LENGTH. Planned together, a branch read from the cache would hold
    the slots a training branch could use (a cached native beside a candidate of 3 seeds on 2
    slots: one job of 3 seeds on one slot)."""
    answered = {k: [i for i, hit in zip(missing[k], cached[k], strict=True) if hit] for k in missing}
    to_train = {k: [i for i in missing[k] if i not in answered[k]] for k in missing}
    training = [k for k in missing if to_train[k]]
    plan = groups([lengths[k] for k in training], seeds)
    return [(k, answered[k]) for k in missing if answered[k]] + [
        (k, [i for i in group if i in to_train[k]]) for k, jobs in zip(training, plan, strict=True)
        for group in jobs if set(group) & set(to_train[k])]  # fmt: skip


def sandbox_groups(
    lengths: list[float], seeds: list[int], slots: int, executor: str = "local"
) -> list[list[list[int]]]:
    """`seed_groups`, except on a Ray cluster: one seed per job there, which spreads the
    seeds over its nodes instead."""
    if executor == "ray":
        return [[[seed] for seed in seeds] for _ in lengths]
    return seed_groups(lengths, seeds, slots)


def latest_by_seed(results: Iterable[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    """(candidate, seed) -> its latest result: a later rung (or a re-run branch) replaces an earlier one."""
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for result in results:
        key = (result["candidate_id"], result["seed"])
        if key not in latest or result.get("rung", 0) >= latest[key].get("rung", 0):
            latest[key] = result
    return latest
