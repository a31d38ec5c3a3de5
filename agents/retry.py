"""Which model-request failures are worth sending again, and how long to wait: transient ones
(429, 5xx, dropped connections, timeouts) back off honouring `Retry-After`; permanent ones
(400, 401, 403, 404, ...) raise `LLMError` at once. Also the refusals a server's quirks
explain (no system role, no `seed`), each said in one line without a key (`describe_error`).
"""

from __future__ import annotations

import email.utils
import time
from types import ModuleType


class LLMError(RuntimeError):
    """A model request failed for good (bad key, unknown model, retries spent, ...)."""


def openai_module() -> ModuleType:
    """`openai`, imported on first use: its error classes matter only once a request failed,
    and what never asks a model (an offline run, `lero runs`, `lero report`, the UI's
    workers) should not pay the second its import takes."""
    import openai

    return openai


TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})


def is_transient(error: BaseException) -> bool:
    """Worth retrying: rate limits, server errors, timeouts and dropped connections."""
    openai = openai_module()
    if isinstance(error, openai.APIStatusError):
        return error.status_code in TRANSIENT_STATUS or error.status_code >= 500
    return isinstance(error, openai.APIConnectionError | TimeoutError | ConnectionError)


def retry_after_s(error: BaseException | None) -> float | None:
    """Seconds the server asked us to wait (`retry-after-ms` or `Retry-After`, seconds or date)."""
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    if (millis := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value.strip() else None
        return None if when is None else max(0.0, when.timestamp() - time.time())


def describe_error(error: BaseException) -> str:
    """One line saying what went wrong, without a stack trace or a key."""
    openai = openai_module()
    if isinstance(error, openai.APIStatusError):
        hints = {401: " (check OPENAI_API_KEY)", 404: " (unknown model or wrong --base-url?)"}
        detail = " ".join(str(error.message).split())[:300]
        return f"HTTP {error.status_code}{hints.get(error.status_code, '')}: {detail}"
    if isinstance(error, openai.APITimeoutError):
        return "request timed out"
    if isinstance(error, openai.APIConnectionError):
        return f"connection failed: {error.__cause__ or error}"
    return f"{type(error).__name__}: {error}"


def is_timeout(error: BaseException) -> bool:
    openai = openai_module()
    return isinstance(error, openai.APITimeoutError | TimeoutError)


def rejects_system_role(error: BaseException) -> bool:
    """A chat template that has no system role (Gemma-style templates raise on one)."""
    openai = openai_module()
    if not isinstance(error, openai.APIStatusError) or error.status_code not in (400, 422, 500):
        return False
    message = str(error.message).lower()
    return "system" in message and any(w in message for w in ("role", "template", "support"))


def rejects_seed(error: BaseException | None) -> bool:
    """A server that refuses the `seed` parameter (OpenAI's words for an unknown one:
    "Unrecognized request argument supplied: seed")."""
    openai = openai_module()
    return (isinstance(error, openai.APIStatusError) and error.status_code in (400, 422)
            and "seed" in str(error.message).lower())
