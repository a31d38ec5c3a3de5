"""Sandboxes for LLM-written code: Docker (default) and process backends, jobs, result cache.

Light on import (no docker SDK, no torch): `sandbox.runner` runs inside the image too.
"""

from sandbox.base import Sandbox
from sandbox.cache import ResultCache
from sandbox.factory import get_sandbox
from sandbox.types import Job, JobResult, Limits, SandboxUnavailable, ScriptResult

__all__ = [
    "Job",
    "JobResult",
    "Limits",
    "ResultCache",
    "Sandbox",
    "SandboxUnavailable",
    "ScriptResult",
    "get_sandbox",
]
