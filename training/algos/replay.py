"""Fixed-size circular replay of named, batched transition fields."""

from __future__ import annotations

import torch


class ReplayBuffer:
    """Stores transitions field by field; `add` takes a batch [B, ...] per field."""

    def __init__(
        self, capacity: int, shapes: dict[str, tuple[int, ...]], dtypes: dict[str, torch.dtype]
    ) -> None:
        self.capacity = capacity
        self.storage = {
            name: torch.zeros(capacity, *shape, dtype=dtypes.get(name, torch.float32))
            for name, shape in shapes.items()
        }
        self.position = 0
        self.size = 0

    def add(self, **batch: torch.Tensor) -> None:
        """Each field [B, ...]; wraps around the end, overwriting the oldest transitions."""
        n_new = next(iter(batch.values())).shape[0]
        slots = (self.position + torch.arange(n_new)) % self.capacity  # [B]
        for name, values in batch.items():
            self.storage[name][slots] = values.to(self.storage[name].dtype)
        self.position = (self.position + n_new) % self.capacity
        self.size = min(self.size + n_new, self.capacity)

    def sample(self, batch_size: int) -> dict[str, torch.Tensor]:
        """Uniform sample with replacement: field -> [M, ...]."""
        idx = torch.randint(self.size, (batch_size,))
        return {name: values[idx] for name, values in self.storage.items()}
