"""Sandboxes for LLM-written code: Docker (default) and process backends, jobs, result cache.

The kinds table (`sandbox.types.KINDS`) holds lero's own kinds (`sandbox.jobkinds`) once
this package is imported; `sandbox.types.register_kind` adds one declared anywhere else.

The docker SDK is imported only when the Docker backend is chosen: the same package
is mounted into the image, where `sandbox.harness` runs without it.
"""

from lero.sandbox.base import Sandbox
from lero.sandbox.cache import ResultCache
from lero.sandbox.factory import get_sandbox
from lero.sandbox.jobkinds import DESCRIBE, EVALUATE, TRAIN, VALIDATE
from lero.sandbox.types import Job, JobResult, Limits, SandboxUnavailable, ScriptResult

__all__ = [
    "DESCRIBE",
    "EVALUATE",
    "TRAIN",
    "VALIDATE",
    "Job",
    "JobResult",
    "Limits",
    "ResultCache",
    "Sandbox",
    "SandboxUnavailable",
    "ScriptResult",
    "get_sandbox",
]
