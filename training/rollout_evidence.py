"""What a candidate's hooks did on its validation rollout, measured: the critic's evidence.

The validate job (`sandbox.jobs.validate`) feeds every step of its short rollout to an
`EvidenceRecorder`; its `to_json()` is the result's `evidence` field. Per reward term (a
component the HRF returns): its mean and std, its effective weight in the hybrid reward
(least squares of the reward on the components, so a term that enters with a minus shows
it), the correlation of its contribution (weight x term) with the native reward and with
each per-step penalty the task reports (a metric where lower is better, e.g. collisions);
how much the hybrid reward changes from step to step in one env while the agents act
(`hybrid_step_std`: its std over the steps, averaged over envs and agents);
per enhanced-observation column: its std over agents, envs and steps, and whether it moved
when other agents' rows were left out of the OEF's batch (`row_leak`). A non-finite term
never gets here: `RewardShaper` fails validation naming it.

Computed next to candidate code, so the host takes it only through `checked_evidence`:
numbers only, bounded sizes (`MAX_TERMS`, `MAX_FEATURES`, `MAX_PENALTIES`, `MAX_NAME`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from lero.training.envs.task import TaskSpec

MAX_TERMS = 32
MAX_FEATURES = 64
MAX_PENALTIES = 8
MAX_NAME = 64
TERM_KEYS = ("mean", "std", "weight", "native_corr")
SUMMARY_KEYS = ("native_std", "native_mean", "explained", "hybrid_step_std")
LEAK_TOLERANCE = 1e-4  # a row-wise OEF gives the same row whatever else is in the batch (float noise is ~1e-7)


def penalty_signals(task: TaskSpec) -> tuple[str, ...]:
    """The task's metrics where lower is better: what it penalises (collisions on MPE)."""
    return tuple(m.name for m in task.metrics if not m.higher_is_better)[:MAX_PENALTIES]


def correlation(a: torch.Tensor, b: torch.Tensor) -> float:
    """Pearson correlation of two flat samples; 0 where either does not vary."""
    a, b = a.double() - a.double().mean(), b.double() - b.double().mean()
    scale = float(a.norm() * b.norm())
    return float((a * b).sum()) / scale if scale > 1e-12 else 0.0


class EvidenceRecorder:
    """Collects each validation step's tensors and summarises them (`to_json`)."""

    def __init__(self, raw_dim: int, penalties: tuple[str, ...]) -> None:
        self.raw_dim = raw_dim
        self.penalties = penalties
        self.native: list[torch.Tensor] = []  # each [B, N]
        self.hybrid: list[torch.Tensor] = []  # each [B, N]
        self.terms: dict[str, list[torch.Tensor]] = {}  # name -> each [B, N]
        self.signals: dict[str, list[torch.Tensor]] = {name: [] for name in penalties}  # each [B, N]
        self.features: list[torch.Tensor] = []  # each [B * N, k]
        self.leaks: torch.Tensor | None = None  # [k] bool

    def add_step(self, native: torch.Tensor, hybrid: torch.Tensor, components: Mapping[str, torch.Tensor],
                 info: Mapping[str, Any]) -> None:
        """native, hybrid [B, N]; components each [B, N] or [B]; info: the env step's (penalties [B])."""
        shape = native.shape
        self.native.append(native.detach().float())
        self.hybrid.append(hybrid.detach().float())
        for name, value in components.items():
            self.terms.setdefault(name, []).append(self._per_agent(value, shape))
        for name in self.penalties:
            value = info.get(name)
            if isinstance(value, torch.Tensor) and value.shape in (shape, shape[:1]):
                self.signals[name].append(self._per_agent(value, shape))

    def add_features(self, enhanced: torch.Tensor) -> None:
        """enhanced [B, N, D + k]: its last k columns are the features."""
        self.features.append(enhanced[..., self.raw_dim:].flatten(0, -2).float())  # [B * N, k]

    def add_leak_check(self, whole: torch.Tensor, again: torch.Tensor, part: torch.Tensor) -> None:
        """whole and again [B, N, D + k]: two calls on the full batch; part [b, N, D + k]: its
        first b envs alone. A column that differs between the two full calls is random, which
        says nothing of what it reads: no leak is claimed for it."""
        k = whole.shape[-1] - self.raw_dim
        if k == 0:
            self.leaks = torch.zeros(0, dtype=torch.bool)
            return
        scale = whole[..., self.raw_dim:].abs().flatten(0, -2).amax(dim=0).clamp_min(1.0)  # [k]

        def moved(other: torch.Tensor) -> torch.Tensor:  # [k]: the column changed beyond the tolerance
            gap = (whole[: other.shape[0], :, self.raw_dim:] - other[..., self.raw_dim:]).abs().flatten(0, -2)
            return gap.amax(dim=0) > LEAK_TOLERANCE * scale  # gap [rows, k]

        self.leaks = moved(part) & ~moved(again)

    @staticmethod
    def _per_agent(value: torch.Tensor, shape: torch.Size) -> torch.Tensor:
        value = value.detach().float()
        return value[:, None].expand(shape) if value.dim() == 1 else value  # [B] -> [B, N]

    def to_json(self) -> dict[str, Any]:
        native = torch.cat([x.reshape(-1) for x in self.native])  # [S]
        hybrid = torch.cat([x.reshape(-1) for x in self.hybrid])  # [S]
        names = list(self.terms)[:MAX_TERMS]
        columns = [torch.cat([x.reshape(-1) for x in self.terms[n]]) for n in names]  # each [S]
        weights, explained = self._weights(columns, hybrid)
        signals = {n: torch.cat([x.reshape(-1) for x in v]) for n, v in self.signals.items() if v}
        terms = {}
        for name, column, weight in zip(names, columns, weights, strict=True):
            contribution = weight * column  # [S]
            terms[name[:MAX_NAME]] = {
                "mean": float(column.mean()), "std": float(column.std()), "weight": weight,
                "native_corr": correlation(contribution, native),
                "penalty_corr": {p: correlation(contribution, s) for p, s in signals.items()},
            }
        features = torch.cat(self.features) if self.features else torch.zeros(0, 0)  # [S, k]
        stds = features.std(dim=0).tolist() if features.shape[0] > 1 and features.shape[1] else []
        leaks = self.leaks.tolist() if self.leaks is not None else [False] * len(stds)
        return {
            "native_std": float(native.std()), "native_mean": float(native.mean()), "explained": explained,
            "hybrid_step_std": float(torch.stack(self.hybrid).std(dim=0).mean()) if len(self.hybrid) > 1 else 0.0,
            "terms": terms,
            "features": [{"std": s, "row_leak": bool(leak)} for s, leak in zip(stds, leaks, strict=True)][:MAX_FEATURES],
        }

    @staticmethod
    def _weights(columns: list[torch.Tensor], hybrid: torch.Tensor) -> tuple[list[float], float]:
        """Each term's effective weight in the hybrid reward, and the share of its variance the
        terms explain (R^2); weights 1 where they explain too little for the fit to mean much."""
        if not columns:
            return [], 0.0
        design = torch.stack([*columns, torch.ones_like(hybrid)], dim=1).double()  # [S, C + 1]
        fit = torch.linalg.lstsq(design, hybrid.double()[:, None], driver="gelsd").solution[:, 0]  # [C + 1]
        residual = hybrid.double() - design @ fit
        total = float(((hybrid.double() - hybrid.double().mean()) ** 2).sum())
        explained = 1.0 - float((residual**2).sum()) / total if total > 1e-12 else 1.0
        weights = [float(w) if math.isfinite(float(w)) else 1.0 for w in fit[:-1]]
        return (weights if explained >= 0.9 else [1.0] * len(columns)), max(0.0, min(1.0, explained))


def checked_evidence(raw: Any) -> dict[str, Any]:
    """The evidence field of an untrusted result: ValueError (one line) unless it has exactly
    the shape `EvidenceRecorder.to_json` gives, finite numbers only, within the bounds."""

    def number(value: Any, where: str) -> float:
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            raise ValueError(f"evidence: {where} must be a finite number")
        return float(value)

    def name(value: Any, where: str) -> str:
        if not isinstance(value, str) or not 0 < len(value) <= MAX_NAME:
            raise ValueError(f"evidence: {where} must be a name of 1 to {MAX_NAME} characters")
        return value

    if not isinstance(raw, dict) or set(raw) != {*SUMMARY_KEYS, "terms", "features"}:
        raise ValueError(f"evidence must be {{{', '.join(SUMMARY_KEYS)}, terms, features}}")
    terms, features = raw["terms"], raw["features"]
    if not isinstance(terms, dict) or len(terms) > MAX_TERMS:
        raise ValueError(f"evidence: terms must map at most {MAX_TERMS} names to their statistics")
    if not isinstance(features, list) or len(features) > MAX_FEATURES:
        raise ValueError(f"evidence: features must list at most {MAX_FEATURES} columns")
    out_terms = {}
    for term, stats in terms.items():
        where = f"term {name(term, 'a term name')!r}"
        if not isinstance(stats, dict) or set(stats) != {*TERM_KEYS, "penalty_corr"}:
            raise ValueError(f"evidence: {where} must be {{{', '.join(TERM_KEYS)}, penalty_corr}}")
        penalties = stats["penalty_corr"]
        if not isinstance(penalties, dict) or len(penalties) > MAX_PENALTIES:
            raise ValueError(f"evidence: {where} penalty_corr must map at most {MAX_PENALTIES} names to numbers")
        out_terms[term] = {**{k: number(stats[k], f"{where} {k}") for k in TERM_KEYS},
                           "penalty_corr": {name(p, "a penalty name"): number(v, f"{where} penalty {p}")
                                            for p, v in penalties.items()}}
    out_features = []
    for index, column in enumerate(features):
        if not isinstance(column, dict) or set(column) != {"std", "row_leak"} or not isinstance(column["row_leak"], bool):
            raise ValueError(f"evidence: feature {index} must be {{std, row_leak (a bool)}}")
        out_features.append({"std": number(column["std"], f"feature {index} std"), "row_leak": column["row_leak"]})
    return {**{k: number(raw[k], k) for k in SUMMARY_KEYS},
            "terms": out_terms, "features": out_features}
