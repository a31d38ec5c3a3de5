"""Sandboxes for LLM-written code: Docker (default) and process backends, jobs, result cache.

The docker SDK is imported only when the Docker backend is chosen: the same package
is mounted into the image, where `sandbox.runner` runs without it.
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
