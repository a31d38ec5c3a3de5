"""The model layer: one ChatOpenAI client, one retry policy, per-role accounting, one budget.

Retries live only here (tenacity); the openai client's own retries are off so a
request is never retried by two layers. Transient failures (429, 5xx, timeouts,
dropped connections) back off exponentially with jitter, honouring `Retry-After`;
permanent ones (400, 401, 403, 404, ...) raise `LLMError` at once.
"""

from __future__ import annotations

import email.utils
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import openai
from langchain_core.messages import AIMessage, BaseMessage
from langchain_openai import ChatOpenAI
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_random_exponential

from lero.agents.config import LLMConfig

log = logging.getLogger(__name__)

OnCall = Callable[[str, dict], None]


class LLMError(RuntimeError):
    """A model request failed for good (bad key, unknown model, retries spent, ...)."""


class BudgetExceeded(RuntimeError):
    """The run-level request or token budget is spent; generation should stop cleanly."""


@dataclass
class RoleUsage:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class UsageLedger:
    """Thread-safe counts per role plus the run budget they are checked against."""

    max_requests: int | None = None
    max_tokens: int | None = None
    by_role: dict[str, RoleUsage] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def check_budget(self) -> None:
        with self._lock:
            total = self._total()
        if self.max_requests is not None and total.requests >= self.max_requests:
            raise BudgetExceeded(
                f"LLM request budget spent ({total.requests}/{self.max_requests} requests)"
            )
        used_tokens = total.prompt_tokens + total.completion_tokens
        if self.max_tokens is not None and used_tokens >= self.max_tokens:
            raise BudgetExceeded(f"LLM token budget spent ({used_tokens}/{self.max_tokens} tokens)")

    def record(self, role: str, prompt_tokens: int, completion_tokens: int) -> None:
        with self._lock:
            usage = self.by_role.setdefault(role, RoleUsage())
            usage.requests += 1
            usage.prompt_tokens += prompt_tokens
            usage.completion_tokens += completion_tokens

    def summary(self) -> dict:
        with self._lock:
            total = self._total()
            by_role = {role: vars(usage).copy() for role, usage in self.by_role.items()}
        return {**vars(total), "by_role": by_role}

    def _total(self) -> RoleUsage:
        total = RoleUsage()
        for usage in self.by_role.values():
            total.requests += usage.requests
            total.prompt_tokens += usage.prompt_tokens
            total.completion_tokens += usage.completion_tokens
        return total


TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})


def is_transient(error: BaseException) -> bool:
    """Worth retrying: rate limits, server errors, timeouts and dropped connections."""
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
    if isinstance(error, openai.APIStatusError):
        hints = {401: " (check OPENAI_API_KEY)", 404: " (unknown model or wrong --base-url?)"}
        detail = " ".join(str(error.message).split())[:300]
        return f"HTTP {error.status_code}{hints.get(error.status_code, '')}: {detail}"
    if isinstance(error, openai.APITimeoutError):
        return "request timed out"
    if isinstance(error, openai.APIConnectionError):
        return f"connection failed: {error.__cause__ or error}"
    return f"{type(error).__name__}: {error}"


class ChatModel:
    """Sends chat requests for every role through one client, one retry policy and one ledger."""

    def __init__(self, cfg: LLMConfig, ledger: UsageLedger, on_call: OnCall | None = None):
        if cfg.backend != "openai":
            raise ValueError("ChatModel needs backend='openai'")
        self.cfg = cfg
        self.ledger = ledger
        self.on_call = on_call
        self.supports_n = True
        self.supports_tools = True
        self.client = ChatOpenAI(
            model=cfg.model,
            base_url=cfg.base_url,
            api_key=cfg.api_key,
            timeout=cfg.timeout_s,
            max_retries=0,
            temperature=cfg.temperature,
        )

    def complete(
        self,
        role: str,
        messages: Sequence[BaseMessage],
        n: int = 1,
        temperature: float | None = None,
    ) -> list[str]:
        """`n` reply texts; asks for `n` choices at once, else one request per reply."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        params: dict[str, Any] = {} if temperature is None else {"temperature": temperature}
        replies: list[str] = []
        while len(replies) < n:
            want = n - len(replies) if self.supports_n else 1
            try:
                generations = self._request(role, messages, n=want, **params)
            except LLMError as error:
                if want > 1 and isinstance(error.__cause__, openai.BadRequestError):
                    log.info("server refused n=%d choices; asking one reply per request", want)
                    self.supports_n = False
                    continue
                raise
            if want > 1 and len(generations) < want:
                self.supports_n = False
            replies.extend(_text(message) for message in generations[: n - len(replies)])
        return replies

    def chat(
        self, role: str, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()
    ) -> AIMessage:
        """One reply, with tool calls where the server supports them, else plain text."""
        if tools and self.supports_tools:
            try:
                return self._request(role, messages, n=1, tools=tools)[0]
            except LLMError as error:
                if not isinstance(error.__cause__, openai.BadRequestError):
                    raise
                log.info("server refused tool calling; the assistant answers in plain text")
                self.supports_tools = False
        return self._request(role, messages, n=1)[0]

    def _request(
        self,
        role: str,
        messages: Sequence[BaseMessage],
        n: int,
        tools: Sequence[Any] = (),
        **params: Any,
    ) -> list[AIMessage]:
        self.ledger.check_budget()
        client = self.client.bind_tools(list(tools)) if tools else self.client
        retrying = Retrying(
            stop=stop_after_attempt(self.cfg.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(is_transient),
            reraise=True,
        )

        def send() -> list[AIMessage]:
            if tools:
                return [client.invoke(list(messages), **params)]
            result = client.generate([list(messages)], n=n, **params)
            return [generation.message for generation in result.generations[0]]

        started = time.monotonic()
        attempts = 0
        size = {"prompt_chars": sum(len(_text(m)) for m in messages)}  # logged per request
        try:
            for attempt in retrying:
                with attempt:
                    attempts += 1
                    generated = send()
        except Exception as error:
            self._report(role, n, attempts, started, status="error", error=describe_error(error), **size)
            raise LLMError(
                f"{role} LLM request failed after {attempts} attempt(s): {describe_error(error)}"
            ) from error
        if not generated:
            self._report(role, n, attempts, started, status="error", error="no choices", **size)
            raise LLMError(f"{role} LLM request returned no choices")
        usage = generated[0].usage_metadata or {}
        prompt_tokens = int(usage.get("input_tokens", 0))
        completion_tokens = int(usage.get("output_tokens", 0))
        self.ledger.record(role, prompt_tokens, completion_tokens)
        self._report(
            role,
            n,
            attempts,
            started,
            status="ok",
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            choices=len(generated),
            **size,
        )
        return generated

    def _wait(self, state: RetryCallState) -> float:
        """The server's Retry-After when given (capped), else exponential backoff with jitter."""
        error = state.outcome.exception() if state.outcome else None
        asked = retry_after_s(error)
        if asked is not None:
            return min(asked, self.cfg.retry_max_s)
        backoff = wait_random_exponential(
            multiplier=self.cfg.retry_base_s, max=self.cfg.retry_max_s
        )
        return backoff(state)

    def _report(self, role: str, n: int, attempts: int, started: float, **fields: Any) -> None:
        if self.on_call is not None:
            info = {
                "role": role,
                "model": self.cfg.model,
                "n": n,
                "attempts": attempts,
                "elapsed_s": round(time.monotonic() - started, 3),
                **fields,
            }
            self.on_call(role, info)


def _text(message: BaseMessage) -> str:
    """The reply as text, whether the content came back as a string or a list of parts."""
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(
        part.get("text", "") if isinstance(part, dict) else str(part) for part in content
    )
