"""LLM settings, validated once at the edge (CLI / RunSpec) and passed down typed."""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass
from typing import Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

log = logging.getLogger(__name__)

DUMMY_API_KEY = "sk-no-key-needed"  # local OpenAI-compatible servers ignore the key
OPENAI_URL = "https://api.openai.com/v1"
MODEL_ENV = "LERO_MODEL"  # the model when no --model is given (else the server's first)
# A CPU-served model answers a designer prompt in 10-120 s on 2 busy cores (docs/llm.md); a
# slow request is not retried (the server would still be computing it), so the one wait is long.
DEFAULT_TIMEOUT_S = 600.0
REPLY_TOKENS = 1024  # max_tokens asked per reply; a whole module is 200-700 tokens


PROBE_TIMEOUT_S = 5.0  # GET /models at a run's start: a live server lists its models at once ...


class LLMSetupError(ValueError):
    """The LLM settings cannot work (auth refused, server unreachable, no model): fix, retry."""


class LLMServerBusy(LLMSetupError):
    """... unless it is generating for another client: llama.cpp's servers answer one request at
    a time, so a server shared by two runs took the connection and said nothing for minutes.
    It is there; a run goes on and its requests wait the full `--llm-timeout`."""


def base_url_from(base_url: str | None) -> str | None:
    """`--base-url`, else `OPENAI_BASE_URL`, else None (OpenAI itself)."""
    return base_url or os.environ.get("OPENAI_BASE_URL") or None


def api_key_for(base_url: str | None) -> str | None:
    """`OPENAI_API_KEY`, else a dummy key when a base URL names a (local) server."""
    return os.environ.get("OPENAI_API_KEY") or (DUMMY_API_KEY if base_url else None)


def server_models(base_url: str | None, timeout_s: float | None = None) -> list[str]:
    """The model ids the server lists at GET /models (empty if it does not list any).

    Raises LLMSetupError when the server cannot be reached or refuses the key (401/403):
    nothing a run could do later would change that; LLMServerBusy when it took the
    connection but did not answer within `timeout_s` (default PROBE_TIMEOUT_S).
    """
    url = (base_url or OPENAI_URL).rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {api_key_for(base_url) or ''}"}
    waited = PROBE_TIMEOUT_S if timeout_s is None else timeout_s
    try:
        response = httpx.get(url, headers=headers, timeout=waited)
    except httpx.ReadTimeout:
        raise LLMServerBusy(
            f"the LLM server at {url} took the connection but did not answer in {waited:g} s "
            "(busy with another client's request?)"
        ) from None
    except httpx.HTTPError as error:
        raise LLMSetupError(
            f"cannot reach the LLM server at {url}: {type(error).__name__}: {error}"
        ) from None
    if response.status_code in (401, 403):
        raise LLMSetupError(
            f"the LLM server at {url} refused the key (HTTP {response.status_code}): "
            "check OPENAI_API_KEY"
        )
    if not response.is_success:
        return []
    try:
        data = response.json().get("data") or []
        return [str(entry["id"]) for entry in data if isinstance(entry, dict) and entry.get("id")]
    except (ValueError, AttributeError):
        return []


@dataclass(frozen=True)
class ModelChoice:
    """Which LLM a command uses, and why (said on the first line of a run)."""

    llm: str  # "offline" | "openai:MODEL" (RunSpec.llm)
    base_url: str | None
    reason: str

    def describe(self) -> str:
        where = f" at {self.base_url}" if self.base_url else ""
        return f"{self.llm}{where} ({self.reason})"


def choose_llm(
    llm: str | None = None, model: str | None = None, base_url: str | None = None
) -> ModelChoice:
    """The one rule for `run`, `resume` and `chat`.

    An explicit `--llm` wins (`openai` alone takes its model like below). Otherwise
    `OPENAI_API_KEY` or a base URL (`--base-url`, `OPENAI_BASE_URL`) selects
    `openai:MODEL`, MODEL from `--model`, else `LERO_MODEL`, else the server's first
    `/models` entry. Otherwise the offline designer.
    """
    base_url = base_url_from(base_url)
    if llm == "offline":
        return ModelChoice("offline", None, "--llm offline")
    if llm is not None and llm != "openai":
        backend, sep, name = llm.partition(":")
        if backend != "openai" or not sep or not name.strip():
            raise ValueError(f"unknown --llm {llm!r}: expected 'offline' or 'openai:MODEL'")
        return ModelChoice(f"openai:{name.strip()}", base_url, "--llm")
    key = os.environ.get("OPENAI_API_KEY")
    if llm is None and not key and base_url is None:
        if model:
            raise ValueError("--model needs OPENAI_API_KEY or --base-url/OPENAI_BASE_URL")
        _announce_offline_default()
        return ModelChoice("offline", None, "no OPENAI_API_KEY or base URL")
    why = "--llm openai" if llm else ("OPENAI_API_KEY" if key else "base URL")
    name = model or os.environ.get(MODEL_ENV)
    if name:
        return ModelChoice(f"openai:{name}", base_url, f"{why}, model from {'--model' if model else MODEL_ENV}")
    listed = server_models(base_url)
    if not listed:
        raise LLMSetupError(
            f"the LLM server at {base_url or OPENAI_URL} lists no models: pass --model or set {MODEL_ENV}"
        )
    return ModelChoice(f"openai:{listed[0]}", base_url, f"{why}, the server's first model")


@dataclass(frozen=True)
class DesignMode:
    """One way an LLM designs (`--design`), declared once: the CLI's choices and help, the
    spec's and LLMConfig's validation and `make_team` read these.

    `writes`: what the designer writes (`code`: modules, free-form; `structured`: the task's
    design schema as JSON, agents/structured.py; `expression`: each term, the potential and
    each feature as an expression under the task's grammar, agents/expression/);
    `edits`: the designer edits complete modules; `fallback`: a slot whose code stays invalid
    gets a rendered draft, an expression one where the server takes a grammar, else a
    structured one; `expressions`: designs may be expressions, so the debugger replaces a
    failing expression; `rendered_review`: the critic answers a verdict schema and sees a
    rendered design beside its code."""

    name: str
    help: str
    writes: Literal["code", "structured", "expression"]
    edits: bool = False
    fallback: bool = False
    expressions: bool = False
    rendered_review: bool = True


DESIGN_MODES: tuple[DesignMode, ...] = (
    DesignMode("auto", "edits modules, falling back to expression or structured", "code", edits=True, fallback=True,
               expressions=True),
    DesignMode("code", "writes modules", "code", rendered_review=False),
    DesignMode("structured", "picks from the task's grammar as JSON", "structured"),
    DesignMode("expression", "writes each term and feature as an expression under the task's grammar", "expression",
               expressions=True),
)
DESIGNS: tuple[str, ...] = tuple(mode.name for mode in DESIGN_MODES)
DEFAULT_DESIGN = DESIGNS[0]
Design = Literal[DESIGNS]  # type: ignore[valid-type]  # one of DESIGNS, checked where a spec or config is read


def design_mode(name: str) -> DesignMode:
    """The declared mode NAME (a validated config's `design` always is one)."""
    return DESIGN_MODES[DESIGNS.index(name)]


def designs_help() -> str:
    """`--design`'s help, from the declarations."""
    modes = "; ".join(f"{m.name}{' (default)' if m.name == DEFAULT_DESIGN else ''} {m.help}" for m in DESIGN_MODES)
    return f"how the LLM designs: {modes}"


class LLMConfig(BaseModel):
    """Which model answers the agents, how patiently, and how much it may spend."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal["offline", "openai"] = "offline"
    model: str | None = None
    base_url: str | None = None
    api_key: SecretStr | None = Field(default=None, repr=False)
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)  # one request (`--llm-timeout`)
    # the model's context window when the server does not say (`--context-tokens`;
    # None = agents.window.DEFAULT_CONTEXT_TOKENS)
    context_tokens: int | None = Field(default=None, ge=256)
    reply_tokens: int = Field(default=REPLY_TOKENS, ge=16)  # max_tokens per reply (capped by the window)
    max_retries: int = Field(default=4, ge=0, le=20)
    retry_base_s: float = Field(default=1.0, gt=0)  # first backoff step; doubles with jitter
    retry_max_s: float = Field(default=60.0, gt=0)  # cap on one wait, Retry-After included
    temperature: float = Field(default=0.8, ge=0, le=2)
    max_requests: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    seed: int = 0  # --designer-seed: the offline designer's draws and each request's sampling seed
    # offline designer: start generation 0 from its hand-written prior design (False = the
    # first generation is sampled from the grammar only, so evolution gets no head start)
    offline_prior: bool = True
    design: Design = DEFAULT_DESIGN  # how an LLM designs (`--design`, DESIGN_MODES)

    @model_validator(mode="after")
    def _openai_needs_a_model(self) -> LLMConfig:
        if self.backend == "openai" and not self.model:
            raise ValueError("backend 'openai' needs a model name (use --llm openai:MODEL)")
        return self

    @classmethod
    def from_spec(
        cls, spec: str | None = None, base_url: str | None = None, **overrides: object
    ) -> LLMConfig:
        """Build from a CLI spec (`offline`, `openai:MODEL`, or None = `choose_llm`'s rule).

        The base URL comes from the argument, else `OPENAI_BASE_URL`; the key from
        `OPENAI_API_KEY`, else a dummy key when a base URL is set (local servers).
        """
        choice = choose_llm(spec, base_url=base_url)
        if choice.llm == "offline":
            return cls(backend="offline", **overrides)
        base_url = choice.base_url
        api_key = api_key_for(base_url)
        if api_key is None:
            raise ValueError(
                "--llm openai:MODEL needs OPENAI_API_KEY or --base-url/OPENAI_BASE_URL"
            )
        return cls(
            backend="openai",
            model=choice.llm.removeprefix("openai:"),
            base_url=base_url,
            api_key=SecretStr(api_key),
            **overrides,
        )


@functools.cache
def _announce_offline_default() -> None:
    """Say once per process that no model is configured, so the offline designer is used."""
    log.warning(
        "no OPENAI_API_KEY or base URL: using the offline designer (--llm offline); "
        "pass --llm openai:MODEL [--base-url URL] to use an LLM"
    )
