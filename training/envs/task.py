"""What an environment says about its task, so no package outside ``training.envs`` names one.

Every environment carries a ``TaskSpec`` (``env.task``, and ``task_spec(name)`` without
building an env): its name, the kwargs LERO uses by default (partial observability), the
task text for the LLM, the reward-context state fields, the episode metrics it reports and
which of them measures success. The graph, the reports, the reflection, the agents and the
offline designer read metric names, directions and state fields from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

RETURN = "return"  # mean per-agent native episode return: every task reports it first


@dataclass(frozen=True)
class Metric:
    """One episode metric an environment reports at episode end (averaged over episodes)."""

    name: str
    higher_is_better: bool
    doc: str

    @property
    def better(self) -> str:
        """Which way is better, in the word reports print ("higher" / "lower")."""
        return "higher" if self.higher_is_better else "lower"


@dataclass(frozen=True)
class StateField:
    """One named tensor of ``env.world()`` / ``ctx.state``: shape in symbols, meaning in words."""

    name: str
    shape: str  # e.g. "[B, N, 2]"; B batch slots, N agents, other letters documented in `doc`
    doc: str


@dataclass(frozen=True)
class Pairing:
    """A state field whose entity dim follows the agents: entity i belongs to agent i (e.g. agent i's own goal)."""

    field: str  # a name in state_fields, shape [B, N, ...]
    doc: str  # what entity i is to agent i, for prompts


@dataclass(frozen=True)
class TaskSpec:
    """The task an environment poses, as the rest of lero needs to know it."""

    name: str
    text: str  # the task for the LLM, one paragraph
    lero_kwargs: dict[str, Any]  # the setting LERO runs by default (partial observability)
    state_fields: tuple[StateField, ...]
    metrics: tuple[Metric, ...]  # RETURN first
    success_metric: str  # the metric that says the task was solved (ties in selection)
    grammar: str | None = None  # offline-designer grammar name; None = generic from state_fields
    notes: dict[str, Any] = field(default_factory=dict)  # task constants others may read
    reference: str | None = None  # module with the reference ``parallel_env(**kwargs)`` (mpe2)
    pairings: tuple[Pairing, ...] = ()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskSpec:
        """The inverse of `dataclasses.asdict` after a JSON round trip (a `describe` job's result)."""
        return cls(**{**data, "state_fields": tuple(StateField(**f) for f in data["state_fields"]),
                      "metrics": tuple(Metric(**m) for m in data["metrics"]),
                      "pairings": tuple(Pairing(**p) for p in data.get("pairings", ()))})

    def __post_init__(self) -> None:
        names = [m.name for m in self.metrics]
        if not names or names[0] != RETURN:
            raise ValueError(f"{self.name}: the first metric must be {RETURN!r}")
        if len(set(names)) != len(names) or self.success_metric not in names:
            raise ValueError(f"{self.name}: metric names must be unique and include the success metric")

    @property
    def metric_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.metrics)

    def metric(self, name: str) -> Metric:
        return next(m for m in self.metrics if m.name == name)

    def state_text(self) -> str:
        """The ``ctx.state`` fields as prompt lines."""
        return "\n".join(f"- `{f.name}` {f.shape}: {f.doc}" for f in self.state_fields)

    def world_lines(self, reward: str, max_steps: int, ends_when: str) -> list[str]:
        """The closing lines of a generic adapter's `describe()` (PettingZoo, VMAS), whose
        world state is exactly `state_fields`: its reward, `ctx.state`, the episode's length."""
        return [f"Reward: {reward}", "", "World state (ctx.state, training only, B parallel envs):",
                self.state_text(), "", f"Episode: at most {max_steps} steps; it ends early when {ends_when}."]
