"""Small shared network pieces: MLPs, agent-id inputs, running return statistics."""

from __future__ import annotations

import math

import torch
from torch import nn


def mlp(in_dim: int, hidden: int, out_dim: int, out_gain: float = 1.0) -> nn.Sequential:
    """Two hidden ReLU layers, orthogonal init (CleanRL): small `out_gain` keeps early policies near-uniform."""
    layers = [
        nn.Linear(in_dim, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, out_dim),
    ]
    linears = [layer for layer in layers if isinstance(layer, nn.Linear)]
    for layer in linears:
        gain = out_gain if layer is linears[-1] else math.sqrt(2.0)
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)
    return nn.Sequential(*layers)


class StackedParameters:
    """S seeds' copies of one parameter list, held in one flat parameter.

    `tensors[i]` is a leaf [S, *shape_i] holding every seed's i-th parameter; the seeds'
    own parameters become views of their slices (data and grad), so their modules see
    the trained weights. An optimizer given `flat` runs each kernel once per step for
    all tensors and seeds (RAdam's step 3x faster for QMIX's 20 tensors than per tensor),
    with bitwise the same result: Adam and RAdam act element by element
    (`training.optim.FlatAdam`). Gradients accumulate into the views, so clear them in
    place (`FlatAdam.zero_grad`). The flat layout is tensor-major ([t0 of every seed,
    t1 of every seed, ...]); with one seed it is the parameters concatenated.
    """

    def __init__(self, per_seed: list[list[nn.Parameter]]) -> None:
        self.n_seeds = len(per_seed)
        self.shapes = [p.shape for p in per_seed[0]]
        if any([p.shape for p in params] != self.shapes for params in per_seed):
            raise ValueError("every seed needs parameters of the same shapes")
        self.flat = nn.Parameter(
            torch.cat([torch.stack([params[i].detach() for params in per_seed]).reshape(-1)
                       for i in range(len(self.shapes))])
        )  # fmt: skip
        self.flat.grad = torch.zeros_like(self.flat)
        self.tensors: list[nn.Parameter] = []
        for i, (data, grad) in enumerate(zip(self._stacked(self.flat.data), self._stacked(self.flat.grad), strict=True)):
            leaf = nn.Parameter(data)
            leaf.grad = grad
            self.tensors.append(leaf)
            for seed, params in enumerate(per_seed):
                params[i].data, params[i].grad = data[seed], grad[seed]

    def _stacked(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """Views [S, *shape_i] of a tensor laid out like `flat`."""
        sizes = [self.n_seeds * shape.numel() for shape in self.shapes]
        return [part.view(self.n_seeds, *shape) for part, shape in zip(flat.split(sizes), self.shapes, strict=True)]

    def split(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """A tensor laid out like `flat` (an optimizer moment) -> one flat copy per seed."""
        stacked = self._stacked(flat)
        return [torch.cat([t[seed].reshape(-1) for t in stacked]) for seed in range(self.n_seeds)]

    def join(self, per_seed: list[torch.Tensor]) -> torch.Tensor:
        """The inverse of `split`."""
        sizes = [shape.numel() for shape in self.shapes]
        parts = [flat.split(sizes) for flat in per_seed]
        return torch.cat([torch.stack([seed_parts[i] for seed_parts in parts]).reshape(-1)
                          for i in range(len(sizes))])  # fmt: skip


def stacked_mlp(layers: list[tuple[torch.Tensor, torch.Tensor]], x: torch.Tensor) -> torch.Tensor:
    """S seeds' `mlp`s at once: layers [(weight [S, out, in], bias [S, out])], x [S, ..., in] -> [S, ..., out].

    Each seed's slice is bitwise the same seed stacked alone, forward and backward, and its
    forward bitwise its own `mlp` on its slice (tests; with MKL's alignment-independent
    mode, training/mkl.py): baddbmm runs the same gemm per seed as nn.Linear's addmm,
    except for one output unit, where addmm takes another kernel, so that layer runs per
    seed. The backward matches nn.Linear's to rounding only on some CPUs (an AVX-512 EPYC).
    """
    n_seeds, lead = x.shape[0], x.shape[1:-1]
    h = x.reshape(n_seeds, -1, x.shape[-1])  # [S, M, in]
    for k, (weight, bias) in enumerate(layers):
        if k:
            h = torch.relu(h)
        if weight.shape[1] == 1:
            h = torch.stack([torch.addmm(bias[s], h[s], weight[s].t()) for s in range(n_seeds)])
        else:
            h = torch.baddbmm(bias.unsqueeze(1), h, weight.transpose(1, 2))  # [S, M, out]
    return h.reshape(n_seeds, *lead, h.shape[-1])


def clip_grad_norm_per_seed(tensors: list[torch.Tensor], max_norm: float) -> None:
    """`nn.utils.clip_grad_norm_` for each seed of stacked parameters [S, ...] on its own:
    a seed's gradient is scaled by its own norm only (bitwise torch's, test)."""
    n_seeds = tensors[0].shape[0]
    grads = [t.grad for t in tensors]
    norms = torch.stack([torch.linalg.vector_norm(g.reshape(n_seeds, -1), dim=1) for g in grads], dim=1)  # [S, L]
    total = torch.linalg.vector_norm(norms, dim=1)  # [S]
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)  # [S]
    for g in grads:
        g.mul_(scale.view(-1, *[1] * (g.dim() - 1)))


def mlp_layers(tensors: list[torch.Tensor]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """An `mlp`'s stacked parameters in `parameters()` order -> [(weight, bias)] per layer."""
    return list(zip(tensors[0::2], tensors[1::2], strict=True))


def clones(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A state dict with its tensors copied: parameters may be views of one buffer
    (`StackedParameters`), and saving a view writes its whole storage."""
    return {name: tensor.clone() for name, tensor in state.items()}


def with_agent_id(x: torch.Tensor) -> torch.Tensor:
    """x [..., N, F] -> [..., N, F + N]: appends each agent's one-hot id so one network serves all agents."""
    n_agents = x.shape[-2]
    agent_id = torch.eye(n_agents, dtype=x.dtype).expand(*x.shape[:-1], n_agents)  # [..., N, N]
    return torch.cat([x, agent_id], dim=-1)


class RunningMeanStd:
    """Running mean / variance of value targets (value normalisation, parallel Welford
    update), one per seed: statistics [S] over x [S, ...]."""

    def __init__(self, n_seeds: int) -> None:
        self.mean = torch.zeros(n_seeds)
        self.var = torch.ones(n_seeds)
        self.count = 1e-4

    def update(self, x: torch.Tensor) -> None:
        per_seed = x.flatten(1)  # [S, K]
        batch_mean, batch_var = per_seed.mean(dim=1), per_seed.var(dim=1, unbiased=False)
        batch_count = per_seed.shape[1]
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean = self.mean + delta * batch_count / total
        self.var = (
            self.var * self.count
            + batch_var * batch_count
            + delta**2 * self.count * batch_count / total
        ) / total
        self.count = total

    def state_dict(self, seed: int) -> dict[str, torch.Tensor | float]:
        """SEED's statistics (scalars): the layout of a one-seed learner state."""
        return {"mean": self.mean[seed].clone(), "var": self.var[seed].clone(), "count": self.count}

    def load_state_dict(self, seed: int, state: dict[str, torch.Tensor | float]) -> None:
        self.mean[seed], self.var[seed], self.count = state["mean"], state["var"], float(state["count"])

    def _per_seed(self, stat: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return stat.view(-1, *[1] * (x.dim() - 1))  # [S, 1, ...] against x [S, ...]

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self._per_seed(self.mean, x)) / self._per_seed(torch.sqrt(self.var + 1e-8), x)

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        return x * self._per_seed(torch.sqrt(self.var + 1e-8), x) + self._per_seed(self.mean, x)
