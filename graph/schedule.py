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
from collections.abc import Iterable
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


def seed_groups(seeds: list[int], branches: int, slots: int) -> list[list[int]]:
    """A candidate's SEEDS split into sandbox jobs, for a fan-out of BRANCHES candidates on
    SLOTS concurrent jobs.

    The seeds of one job (`Sandbox.train_and_evaluate_seeds`) pay one sandbox start (about
    1.5 CPU-s) and each gets what it gets alone, but a job of g seeds runs g times as long.
    So the largest g whose jobs still end within as many seed-lengths (rounds x g) as one
    job per seed does: with 2 slots, 4 candidates of 2 seeds train as 4 jobs of 2, while 5
    (a first generation with its baseline) train as 10 jobs of 1.
    """
    def length(size: int) -> int:
        return math.ceil(branches * math.ceil(len(seeds) / size) / slots) * size

    size = max(g for g in range(1, len(seeds) + 1) if length(g) <= length(1))
    return [seeds[k : k + size] for k in range(0, len(seeds), size)]


def latest_by_seed(results: Iterable[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    """(candidate, seed) -> its latest result: a later rung (or a re-run branch) replaces an earlier one."""
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for result in results:
        key = (result["candidate_id"], result["seed"])
        if key not in latest or result.get("rung", 0) >= latest[key].get("rung", 0):
            latest[key] = result
    return latest
