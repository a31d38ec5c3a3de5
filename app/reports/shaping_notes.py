"""Which candidates shape only through a potential, and which look good only to their shaping.

Potential-based shaping (training.shaping) provably keeps the task's optimal policies; a
hybrid reward that changes the native reward does not. The engine's curves say which a
candidate did (`potential_shaping`: it has a potential; `hrf_change`, 0 throughout: its HRF
kept the native reward). On a sparse task the opposite failure is the one to name: the
shaped training return rises while the task is never solved. Only a candidate that shapes
is named so: one whose training reward is the native reward up to a positive scale (native
itself, `env` x 1.366) learned the task's own reward, whatever its success.
"""

from __future__ import annotations

import statistics
from typing import Any

from lero.app.reports.provenance import native_task
from lero.graph.summary import RunFiles
from lero.training.curves import HRF_CHANGE_CURVE, SHAPING_CURVE
from lero.training.validation import finite_number

INVARIANT, CHANGES_REWARD = "policy-invariant", "not policy-invariant"
SHAPED_CURVE = "train_reward"  # the per-agent training (shaped) return during training
NATIVE_CURVE = "return"  # the native return of the same training episodes
SCALE_TOLERANCE = 1e-4  # relative: float32 episode sums of c * r against c times those of r


def shaping_kind(result: dict[str, Any]) -> str | None:
    """`policy-invariant` (shapes only through its potential), `not policy-invariant` (its
    HRF changes the native reward), None for a candidate with no potential or no training."""
    stats = result.get("reflection_stats") or {}
    change = (stats.get(HRF_CHANGE_CURVE) or {}).get("max")
    if SHAPING_CURVE not in stats or not finite_number(change):
        return None
    return INVARIANT if change == 0 else CHANGES_REWARD


def adds_shaping(result: dict[str, Any]) -> bool:
    """Whether the candidate's training reward adds shaping to the native reward: it has a
    potential (`shaping_kind`), or its training return is not the native return of the same
    episodes times one positive constant. False for native and for a scaled native reward."""
    if shaping_kind(result):
        return True
    curves = result.get("curves") or {}
    shaped, native = curves.get(SHAPED_CURVE) or [], curves.get(NATIVE_CURVE) or []
    pairs = [(s, n) for s, n in zip(shaped, native, strict=False) if finite_number(s) and finite_number(n)]
    if not pairs or len(shaped) != len(native):
        return True  # not comparable: say what the curves show
    power = sum(n * n for _, n in pairs)
    scale = sum(s * n for s, n in pairs) / power if power else 0.0
    largest = max(abs(s) for s, _ in pairs)
    scaled = scale > 0 and all(abs(s - scale * n) <= SCALE_TOLERANCE * largest for s, n in pairs)
    return not scaled


def shaped_without_success(result: dict[str, Any], success: str) -> bool:
    """Whether the shaped training return rose (its last third above its first) while the
    task's SUCCESS metric stayed 0 on the held-out episodes and throughout training."""
    curves, evaluation = result.get("curves") or {}, result.get("eval") or {}
    shaped = [v for v in curves.get(SHAPED_CURVE) or [] if finite_number(v)]
    if len(shaped) < 3 or not finite_number(evaluation.get(success)) or evaluation[success] != 0:
        return False
    third = len(shaped) // 3
    rose = statistics.fmean(shaped[-third:]) > statistics.fmean(shaped[:third])
    return rose and not any(v for v in curves.get(success) or [] if finite_number(v))


def hollow_note(result: dict[str, Any], success: str | None) -> str | None:
    """The sentence naming a candidate that learned its shaping, not the task (SUCCESS: the
    task's success metric; None: not known, nothing said); None for any other candidate,
    native and a scaled native reward included (`adds_shaping`)."""
    if not success or not adds_shaping(result) or not shaped_without_success(result, success):
        return None
    return f"its shaped training return rose while {success} stayed 0: it learned the shaping, not the task"


def success_metric_of(spec: dict[str, Any]) -> str | None:
    """The success metric of a stored spec's task where it is one of lero's envs (read from
    its TaskSpec without building it); None for a custom env, which is not imported."""
    task = native_task(spec.get("env"), spec.get("env_kwargs") or {})
    return task.success_metric if task else None


def shaping_markdown(run: RunFiles, success: str | None) -> list[str]:
    """report.md's section: each candidate with a potential, invariant or not, and each whose
    shaped return rose while SUCCESS (the task's success metric; None: not shown) stayed 0."""
    kinds = {c.candidate_id: shaping_kind(c.result) for c in run.candidates}
    hollow = {c.candidate_id: note for c in run.candidates if (note := hollow_note(c.result, success))}
    if not any(kinds.values()) and not hollow:
        return []
    lines = ["", "## Shaping", "", "Potential-based shaping (lero adds gamma Phi(s') - Phi(s)) keeps the task's "
             "optimal policies; a hybrid reward that changes the native reward does not.", ""]  # fmt: skip
    lines += [f"- `{cid}`: {kind}" + (" (shapes only through its potential)" if kind == INVARIANT
                                      else " (its potential is beside an HRF that changes the native reward)")
              for cid, kind in kinds.items() if kind]  # fmt: skip
    lines += [f"- `{cid}`: {note}" for cid, note in hollow.items()]
    return lines
