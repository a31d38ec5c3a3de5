"""LLM settings, validated once at the edge (CLI / RunSpec) and passed down typed."""

from __future__ import annotations

import functools
import logging
import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

log = logging.getLogger(__name__)

DEFAULT_MODEL = "gpt-4o-mini"  # used only when credentials exist but no `openai:MODEL` was given
DUMMY_API_KEY = "sk-no-key-needed"  # local OpenAI-compatible servers ignore the key


class LLMConfig(BaseModel):
    """Which model answers the agents, how patiently, and how much it may spend."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal["offline", "openai"] = "offline"
    model: str | None = None
    base_url: str | None = None
    api_key: SecretStr | None = Field(default=None, repr=False)
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=4, ge=0, le=20)
    retry_base_s: float = Field(default=1.0, gt=0)  # first backoff step; doubles with jitter
    retry_max_s: float = Field(default=60.0, gt=0)  # cap on one wait, Retry-After included
    temperature: float = Field(default=0.8, ge=0, le=2)
    max_requests: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    seed: int = 0
    # offline designer: start generation 0 from its hand-written prior design (False = the
    # first generation is sampled from the grammar only, so evolution gets no head start)
    offline_prior: bool = True

    @model_validator(mode="after")
    def _openai_needs_a_model(self) -> LLMConfig:
        if self.backend == "openai" and not self.model:
            raise ValueError("backend 'openai' needs a model name (use --llm openai:MODEL)")
        return self

    @classmethod
    def from_spec(
        cls, spec: str | None = None, base_url: str | None = None, **overrides: object
    ) -> LLMConfig:
        """Build from a CLI spec (`offline`, `openai:MODEL`, or None = pick by environment).

        The base URL comes from the argument, else `OPENAI_BASE_URL`; the key from
        `OPENAI_API_KEY`, else a dummy key when a base URL is set (local servers).
        """
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        api_key = os.environ.get("OPENAI_API_KEY") or None
        if spec is None:
            if api_key is None and base_url is None:
                _announce_offline_default()
                return cls(backend="offline", **overrides)
            spec = f"openai:{DEFAULT_MODEL}"
        if spec == "offline":
            return cls(backend="offline", **overrides)
        backend, sep, model = spec.partition(":")
        if backend != "openai" or not sep or not model.strip():
            raise ValueError(f"unknown --llm {spec!r}: expected 'offline' or 'openai:MODEL'")
        if api_key is None and base_url is None:
            raise ValueError(
                "--llm openai:MODEL needs OPENAI_API_KEY or --base-url/OPENAI_BASE_URL"
            )
        return cls(
            backend="openai",
            model=model.strip(),
            base_url=base_url,
            api_key=SecretStr(api_key or DUMMY_API_KEY),
            **overrides,
        )


@functools.cache
def _announce_offline_default() -> None:
    """Say once per process that no model is configured, so the offline designer is used."""
    log.warning(
        "no OPENAI_API_KEY or base URL: using the offline designer (--llm offline); "
        "pass --llm openai:MODEL [--base-url URL] to use an LLM"
    )
