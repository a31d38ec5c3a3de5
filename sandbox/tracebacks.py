"""Tracebacks trimmed to the candidate's own frames: what the debugger LLM needs to read.

The candidate source is exec'd with filename `candidate.py`; engine frames are noise
to the debugger (and would leak the sandbox's internals into prompts).
"""

from __future__ import annotations

import linecache
import traceback

from lero.training.contract import CANDIDATE_FILE


def register_source(source: str) -> None:
    """Let tracebacks show the candidate's source lines (it was exec'd, not imported)."""
    linecache.cache[CANDIDATE_FILE] = (len(source), None, source.splitlines(True), CANDIDATE_FILE)


def raised_in_candidate(error: BaseException) -> bool:
    return any(
        frame.filename == CANDIDATE_FILE for frame in traceback.extract_tb(error.__traceback__)
    )


def error_dict(error: BaseException, candidate_only: bool = True) -> dict[str, str]:
    """{"type", "message", "traceback"}, by default with only the candidate's frames."""
    if candidate_only:
        frames = [
            f for f in traceback.extract_tb(error.__traceback__) if f.filename == CANDIDATE_FILE
        ]
        lines = ["Traceback (candidate frames only):\n", *traceback.format_list(frames)]
        lines += traceback.format_exception_only(type(error), error)
    else:
        lines = traceback.format_exception(error)
    message = str(error).splitlines()[0] if str(error) else type(error).__name__
    return {
        "type": type(error).__name__,
        "message": message[:2000],
        "traceback": "".join(lines)[-8000:],
    }
