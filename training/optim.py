"""Adam and RAdam for one flat parameter (`networks.StackedParameters`), written out.

Why not torch.optim: building its first optimizer imports `torch._dynamo`, about 1.3 s of
CPU (as much as importing torch), which every sandbox job paid (a warm runner preloaded
it), and each step wraps a few kernels in ~0.3 ms of Python. The maths is torch's foreach
Adam and RAdam without weight decay or amsgrad, op for op, so the numbers are the same to
the bit (test), and `state_dict` keeps torch's layout (`state[0]` step / exp_avg /
exp_avg_sq, `param_groups[0]` lr / betas / eps): saved learner states load either way.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from lero.training.networks import StackedParameters


class FlatAdam:
    """Adam on one parameter; `rectified=True` is RAdam (Liu et al. 2020: no update scaling
    by the second moment until its variance estimate is tractable, rho_t > 5)."""

    def __init__(
        self,
        param: nn.Parameter,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        rectified: bool = False,
    ) -> None:
        if param.grad is None:
            raise ValueError("FlatAdam needs a parameter with a grad buffer (networks.StackedParameters)")
        self.param, self.lr, self.betas, self.eps, self.rectified = param, lr, betas, eps, rectified
        self.steps = 0
        self.exp_avg = torch.zeros_like(param)  # first moment, same shape as param
        self.exp_avg_sq = torch.zeros_like(param)  # second moment

    def zero_grad(self) -> None:
        """Clear the grad in place: the views `StackedParameters` made keep pointing at it."""
        self.param.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        beta1, beta2 = self.betas
        grad = self.param.grad
        self.steps += 1
        t = float(self.steps)
        self.exp_avg.lerp_(grad, 1 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias_correction1 = 1 - beta1**t
        if not self.rectified:
            step_size = (self.lr / bias_correction1) * -1
            denom = self.exp_avg_sq.sqrt().div_((1 - beta2**t) ** 0.5).add_(self.eps)
            self.param.addcdiv_(self.exp_avg, denom, value=step_size)
            return
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * t * (beta2**t) / (1 - beta2**t)
        rect = (
            ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            if rho_t > 5
            else 0
        )
        unrectified = 0 if rect > 0 else 1.0
        plain_step = (self.lr * unrectified / bias_correction1) * -1  # SGD-with-momentum phase
        adaptive_step = ((1 - beta2**t) ** 0.5) * (self.lr * rect / bias_correction1) * -1
        # step per element: adaptive_step / (sqrt(v) + eps) + plain_step (one of them is 0)
        scale = self.exp_avg_sq.sqrt().add_(self.eps).div_(adaptive_step).reciprocal_().add_(plain_step)
        self.param.addcmul_(self.exp_avg, scale)

    def state_dict(self) -> dict[str, Any]:
        state = {"step": torch.tensor(float(self.steps)), "exp_avg": self.exp_avg.clone(),
                 "exp_avg_sq": self.exp_avg_sq.clone()}  # fmt: skip
        # foreach: torch's implementation these numbers match (its default on the CPU differs)
        group = {"lr": self.lr, "betas": self.betas, "eps": self.eps, "weight_decay": 0, "foreach": True,
                 "params": [0]}  # fmt: skip
        return {"state": {0: state}, "param_groups": [group]}

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        state, group = saved["state"][0], saved["param_groups"][0]
        self.steps = int(float(state["step"]))
        self.exp_avg.copy_(state["exp_avg"])
        self.exp_avg_sq.copy_(state["exp_avg_sq"])
        self.lr = float(group["lr"])


def seed_states(saved: dict[str, Any], stack: StackedParameters) -> list[dict[str, Any]]:
    """The state of a FlatAdam over `stack.flat` -> one state per seed, each laid out as a
    one-seed optimizer's (what a one-seed job saves and resumes)."""
    state = saved["state"][0]
    moments = {key: stack.split(state[key]) for key in ("exp_avg", "exp_avg_sq")}
    return [
        {"state": {0: {"step": state["step"].clone(), **{key: parts[seed] for key, parts in moments.items()}}},
         "param_groups": [dict(saved["param_groups"][0])]}
        for seed in range(stack.n_seeds)
    ]  # fmt: skip


def joined_state(states: list[dict[str, Any]], stack: StackedParameters) -> dict[str, Any]:
    """The inverse of `seed_states`; the seeds must be at the same step (one plan, one point of it)."""
    steps = {float(s["state"][0]["step"]) for s in states}
    if len(steps) != 1:
        raise ValueError(f"the seeds' optimizer states are at different steps: {sorted(steps)}")
    state = {key: stack.join([s["state"][0][key] for s in states]) for key in ("exp_avg", "exp_avg_sq")}
    return {"state": {0: {"step": states[0]["state"][0]["step"], **state}},
            "param_groups": states[0]["param_groups"]}  # fmt: skip
