"""Training statistics -> the text the designer reads next (Eureka-style reward reflection).

For each candidate: its evaluated task metrics, then every HRF component and training
metric as ~10 snapshots over training plus max / mean / min, followed by concrete tips
derived from those numbers. The generation text adds the baseline, the other candidates
and the failures (so the designer stops repeating them). Each piece appears once in a
designer prompt: the elites (with their statistics), the general tips and the researcher's
feedback are rendered by the designer (`agents.templates`), not repeated here.
"""

from __future__ import annotations

import math
from typing import Any

from lero.training.envs.task import RETURN, TaskSpec


def _fmt(value: Any) -> str:
    if isinstance(value, int | float) and math.isfinite(value):
        return f"{value:.3g}"
    return "n/a"


def _stats_line(name: str, stats: dict[str, Any]) -> str:
    snapshots = ", ".join(_fmt(value) for value in stats.get("snapshots", []))
    return (
        f"  {name}: [{snapshots}]  max {_fmt(stats.get('max'))}  "
        f"mean {_fmt(stats.get('mean'))}  min {_fmt(stats.get('min'))}"
    )


def _component_tips(reflection_stats: dict[str, dict], task: TaskSpec) -> list[str]:
    """Tips read off the numbers: flat components, components dwarfing the others, and a
    success measure that never leaves zero."""
    tips: list[str] = []
    metrics = task.metric_names
    components = {name: s for name, s in reflection_stats.items() if name not in metrics}
    scales = {
        name: max(abs(s.get("max", 0.0) or 0.0), abs(s.get("min", 0.0) or 0.0))
        for name, s in components.items()
    }
    for name, stats in components.items():
        spread = (stats.get("max") or 0.0) - (stats.get("min") or 0.0)
        if scales[name] > 0 and spread <= 0.01 * scales[name]:
            tips.append(f"- `{name}` hardly changes during training: the policy cannot optimise it.")
    positive = {name: scale for name, scale in scales.items() if scale > 0}
    if len(positive) >= 2:
        largest = max(positive, key=positive.__getitem__)
        smallest = min(positive, key=positive.__getitem__)
        if positive[largest] > 10 * positive[smallest]:
            tips.append(
                f"- `{largest}` is over 10x larger than `{smallest}`"
                f" ({_fmt(positive[largest])} vs {_fmt(positive[smallest])}): rescale."
            )
    success = reflection_stats.get(task.success_metric)
    rising = task.metric(task.success_metric).higher_is_better
    if task.success_metric != RETURN and rising and success is not None and (success.get("max") or 0.0) < 0.05:
        tips.append(
            f"- `{task.success_metric}` (the task's success measure) stays near zero: the agents "
            "rarely solve the task, so reward the steps that lead to it."
        )
    return tips


def candidate_feedback(record: dict[str, Any], task: TaskSpec) -> str:
    """Reflection text for one evaluated candidate (its result.json record)."""
    seeds = len(record.get("per_seed", []))
    lines = [
        f"Candidate {record['candidate_id']} (status {record['status']}): fitness "
        f"{_fmt(record.get('fitness'))} ± {_fmt(record.get('fitness_std'))} over {seeds} seed(s)."
    ]
    if record.get("stopped_at") is not None:
        lines.append(
            f"Successive halving stopped it after {record['stopped_at']} env steps (not among the best "
            "half of its rung): its fitness is for that shorter training."
        )
    evaluation = record.get("eval") or {}
    if evaluation:
        lines.append(
            "Evaluation (native reward, greedy policy): "
            + ", ".join(f"{key} {_fmt(evaluation.get(key))}" for key in task.metric_names if key in evaluation)
        )
    stats = record.get("reflection_stats") or {}
    if stats:
        lines.append("Training statistics (snapshots over training; max / mean / min):")
        lines.extend(_stats_line(name, stats[name]) for name in sorted(stats))
        lines.extend(_component_tips(stats, task))
    error = ((record.get("per_seed") or [{}])[0] or {}).get("error")
    if error:
        lines.append(f"Error: {error.get('type')}: {error.get('message')}")
    return "\n".join(lines)


def generation_reflection(
    generation: int,
    records: list[dict[str, Any]],
    elites: list[dict[str, Any]],
    baseline: dict[str, Any] | None,
    dropped: list[dict[str, Any]],
    task: TaskSpec,
) -> str:
    """The text the designer reads before writing generation `generation + 1`.

    `elites` are left out here (the designer shows each with its code and statistics).
    """
    parts = [f"# Reflection after generation {generation}"]
    if baseline is not None:
        parts.append(
            f"Baseline (native reward, raw observations, same budget): fitness "
            f"{_fmt(baseline.get('fitness'))}; "
            + ", ".join(f"{k} {_fmt(v)}" for k, v in (baseline.get("eval") or {}).items())
        )
    others = [r for r in records if r["candidate_id"] not in {e["candidate_id"] for e in elites}]
    if others:
        parts.append(f"## Other candidates of generation {generation}")
        parts.extend(candidate_feedback(record, task) for record in others)
    if dropped:
        parts.append("## Candidates that never trained (avoid these mistakes)")
        parts.extend(
            f"- {c['candidate_id']}: {c.get('status')}: {(c.get('error') or '').strip()[:400]}"
            for c in dropped
        )
    return "\n\n".join(parts)


def merge_feedback(reflection: str, feedback: list[str]) -> str:
    """The reflection with the researcher's feedback appended (it outranks the tips)."""
    notes = [note.strip() for note in feedback if note.strip()]
    if not notes:
        return reflection
    listed = "\n".join(f"- {note}" for note in notes)
    return f"{reflection}\n\n## Feedback from the researcher (follow it)\n{listed}"
