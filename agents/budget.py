"""The run's LLM budget: requests and tokens counted per role (`UsageLedger`), checked before
every request so a run stops cleanly when it is spent (`BudgetExceeded`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


class BudgetExceeded(RuntimeError):
    """The run-level request or token budget is spent; generation should stop cleanly."""


@dataclass
class RoleUsage:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class UsageLedger:
    """Thread-safe counts per role plus the run budget they are checked against."""

    max_requests: int | None = None
    max_tokens: int | None = None
    by_role: dict[str, RoleUsage] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def check_budget(self) -> None:
        with self._lock:
            total = self._total()
        if self.max_requests is not None and total.requests >= self.max_requests:
            raise BudgetExceeded(
                f"LLM request budget spent ({total.requests}/{self.max_requests} requests)"
            )
        used_tokens = total.prompt_tokens + total.completion_tokens
        if self.max_tokens is not None and used_tokens >= self.max_tokens:
            raise BudgetExceeded(f"LLM token budget spent ({used_tokens}/{self.max_tokens} tokens)")

    def record(self, role: str, prompt_tokens: int, completion_tokens: int) -> None:
        with self._lock:
            usage = self.by_role.setdefault(role, RoleUsage())
            usage.requests += 1
            usage.prompt_tokens += prompt_tokens
            usage.completion_tokens += completion_tokens

    def summary(self) -> dict:
        with self._lock:
            total = self._total()
            by_role = {role: vars(usage).copy() for role, usage in self.by_role.items()}
        return {**vars(total), "by_role": by_role}

    def _total(self) -> RoleUsage:
        total = RoleUsage()
        for usage in self.by_role.values():
            total.requests += usage.requests
            total.prompt_tokens += usage.prompt_tokens
            total.completion_tokens += usage.completion_tokens
        return total
