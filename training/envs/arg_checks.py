"""Argument checks shared by the environment constructors (one-line ValueErrors)."""

from __future__ import annotations

import torch

# Upper bounds on sizes, so one mistyped value (N=1000000) is a one-line error rather than
# a machine that hangs while it allocates gigabytes. Each leaves room for real studies.
MAX_BATCH = 1 << 16  # parallel env copies (n_envs): training batches and evaluation episodes
MAX_AGENTS = 64  # agents (and landmarks) of one world
MAX_EPISODE_STEPS = 10_000  # steps of one episode (max_cycles; defaults are 25)


def positive_int(owner: str, name: str, value: object, maximum: int | None = None) -> int:
    """``value`` as an int in [1, maximum], else a ValueError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{owner}: {name} must be an int, got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"{owner}: {name} must be >= 1, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{owner}: {name} must be <= {maximum}, got {value}")
    return value


def count(owner: str, name: str, value: object, maximum: int) -> int:
    """``value`` as an int in [0, maximum] (a number of things, none allowed)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{owner}: {name} must be an int, got {type(value).__name__} {str(value)[:40]!r}")
    if not 0 <= value <= maximum:
        digits = len(str(abs(value)))
        raise ValueError(f"{owner}: {name} must be in [0, {maximum}], got {value if digits <= 12 else f'a {digits}-digit number'}")
    return value


def optional_positive_int(owner: str, name: str, value: object, maximum: int | None = None) -> int | None:
    """``None`` or an int in [1, maximum]."""
    return None if value is None else positive_int(owner, name, value, maximum)


def fraction(owner: str, name: str, value: object) -> float:
    """``value`` as a float in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{owner}: {name} must be a number, got {type(value).__name__} {value!r}")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{owner}: {name} must be in [0, 1], got {value}")
    return float(value)


def device(owner: str, value: object) -> torch.device:
    """``value`` (str or torch.device) as a torch.device."""
    if not isinstance(value, str | torch.device):
        raise ValueError(f"{owner}: device must be a str or torch.device, got {value!r}")
    try:
        return torch.device(value)
    except RuntimeError as err:
        raise ValueError(f"{owner}: invalid device {value!r}") from err
