"""One-line ValueErrors for configuration checks: ``TrainConfig`` and each learner's hparams."""

from __future__ import annotations

import sys
from dataclasses import fields
from typing import Any


def require(condition: bool, message: str) -> None:
    """Raise ``ValueError(message)`` unless ``condition`` holds."""
    if not condition:
        raise ValueError(message)


def is_int(value: Any) -> bool:
    """An int that is not a bool (``True`` is an int to Python, never a count here)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """An int or float that is not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def in_float_range(value: int | float) -> bool:
    """A number a float can hold exactly or approximately (finite), compared without converting:
    a JSON integer of 400 digits must not raise OverflowError (NaN compares false)."""
    return -sys.float_info.max <= value <= sys.float_info.max


def finite_number(value: Any) -> bool:
    """A finite int or float that is not a bool, checked without converting: what a number read
    from a file, a result or a reply must be before lero computes with it."""
    return is_number(value) and in_float_range(value)


def check_hparam_fields(hparams: Any, may_be_zero: frozenset[str] = frozenset()) -> None:
    """Type and sign check every field of a hyper-parameter dataclass against its default's type.

    Numbers must be positive, except the fields in ``may_be_zero`` (>= 0).
    """
    for f in fields(hparams):
        value = getattr(hparams, f.name)
        if isinstance(f.default, bool):
            require(isinstance(value, bool), f"hparam {f.name} must be a bool, got {value!r}")
            continue
        if isinstance(f.default, int):
            require(is_int(value), f"hparam {f.name} must be an int, got {value!r}")
        else:
            require(is_number(value), f"hparam {f.name} must be a number, got {value!r}")
        if f.name in may_be_zero:
            require(value >= 0, f"hparam {f.name} must be >= 0, got {value}")
        else:
            require(value > 0, f"hparam {f.name} must be > 0, got {value}")
