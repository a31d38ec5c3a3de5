"""Training curves and Eureka-style reflection statistics from finished episodes.

Per-episode sums are accumulated per batch slot with a few tensor adds per
step; when slots finish, their episode values are folded into the current
logging interval. `record` closes an interval into one curve point.
"""

from __future__ import annotations

import torch

from lero.training.envs.task import RETURN

N_SNAPSHOTS = 10


class TrainingLog:
    """Curves keyed `steps`, the task's metrics, `train_reward` and one key per HRF component.

    Task metrics come from the env: `return` from the native reward, every other one from
    `info["episode_metrics"]` at episode end (the env owns their meaning).
    """

    def __init__(
        self, n_envs: int, metric_names: tuple[str, ...], total_steps: int, n_points: int = 200
    ) -> None:
        self.metric_names = tuple(name for name in metric_names if name != RETURN)
        self.record_every = max(1, total_steps // n_points)
        self.next_record = self.record_every
        self.native_return = torch.zeros(n_envs)  # [B] per-agent mean, summed over the episode
        self.train_return = torch.zeros(n_envs)  # [B]
        self.component_return: dict[str, torch.Tensor] = {}  # name -> [B]
        self.interval_sums: dict[str, float] = {}
        self.interval_episodes = 0
        self.curves: dict[str, list[float]] = {"steps": []}

    def on_step(
        self,
        native_reward: torch.Tensor,  # [B, N]
        train_reward: torch.Tensor,  # [B, N]
        components: dict[str, torch.Tensor],  # name -> [B, N] | [B]
        done: torch.Tensor,  # [B] bool
        episode_metrics: dict[str, torch.Tensor],  # name -> [B], the episode ending here
    ) -> None:
        self.native_return += native_reward.mean(dim=1)
        self.train_return += train_reward.mean(dim=1)
        for name, value in components.items():
            per_slot = value.mean(dim=1) if value.dim() == 2 else value  # [B]
            if name not in self.component_return:
                self.component_return[name] = torch.zeros_like(self.native_return)
            self.component_return[name] += per_slot
        if bool(done.any()):
            self._finish_episodes(done, episode_metrics)

    def _finish_episodes(self, done: torch.Tensor, episode_metrics: dict[str, torch.Tensor]) -> None:
        episode_values = {RETURN: self.native_return[done]}
        episode_values.update({name: episode_metrics[name][done] for name in self.metric_names})
        episode_values["train_reward"] = self.train_return[done]
        episode_values.update({name: sums[done] for name, sums in self.component_return.items()})
        for name, values in episode_values.items():
            self.interval_sums[name] = self.interval_sums.get(name, 0.0) + float(values.sum())
        self.interval_episodes += int(done.sum())
        for sums in (self.native_return, self.train_return, *self.component_return.values()):
            sums[done] = 0.0

    def maybe_record(self, done_steps: int, force: bool = False) -> None:
        """Close the interval into a curve point once enough steps and >= 1 episode passed."""
        if self.interval_episodes == 0 or (done_steps < self.next_record and not force):
            return
        self.curves["steps"].append(float(done_steps))
        for name, total in self.interval_sums.items():
            self.curves.setdefault(name, []).append(total / self.interval_episodes)
        self.interval_sums = {}
        self.interval_episodes = 0
        while self.next_record <= done_steps:
            self.next_record += self.record_every

    def latest(self, name: str) -> float | None:
        values = self.curves.get(name)
        return values[-1] if values else None

    def reflection_stats(self) -> dict[str, dict]:
        """For every curve but `steps`: ~10 evenly spaced snapshots plus max / mean / min."""
        return {
            name: summarize(values)
            for name, values in self.curves.items()
            if name != "steps" and values
        }


def summarize(values: list[float]) -> dict:
    """Eureka-style summary of one curve."""
    count = len(values)
    n_snapshots = min(N_SNAPSHOTS, count)
    if n_snapshots == 1:
        indices = [count - 1]
    else:
        indices = [round(i * (count - 1) / (n_snapshots - 1)) for i in range(n_snapshots)]
    return {
        "snapshots": [values[i] for i in indices],
        "max": max(values),
        "mean": sum(values) / count,
        "min": min(values),
    }
