"""MKL's results independent of where a tensor sits in memory: set before MKL's first call.

By default MKL may pick its kernels by the operands' alignment. On an AMD EPYC with
AVX-512 that made an IPPO seed trained in a group of two end 3.6e-7 away from the same seed
trained alone: its parameters sit at other offsets of the seeds' flat buffer. With
`MKL_CBWR=AUTO,STRICT` MKL keeps the machine's best instruction set and gives the same
bits at any alignment, so a seed in a group stays bitwise what it is alone (tests in
`tests/training/test_seeds.py`). MKL reads it once, at its first call. A caller who set
MKL_CBWR has chosen and is left alone.

Torch-free: `lero.training` applies it on import, and sandbox job processes start with it
(`sandbox.types.JOB_PROCESS_ENV`).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

STRICT = {"MKL_CBWR": "AUTO,STRICT"}


def settle_mkl(environ: MutableMapping[str, str] = os.environ) -> None:
    """Ask MKL for alignment-independent results unless the caller chose a mode."""
    for key, value in STRICT.items():
        environ.setdefault(key, value)
