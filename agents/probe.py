"""What an OpenAI-compatible server says about itself: its context window, its tokenizer's
count of a text, and whether it is busy.

Only some servers say. llama.cpp's own `llama-server` answers `GET /props` with
`default_generation_settings.n_ctx` and `GET /slots` with each slot's `is_processing`;
vLLM lists `max_model_len` for each model at `GET /v1/models`. llama-cpp-python's server,
Ollama, LM Studio and OpenAI say neither, so the `context_tokens` setting (`--context-tokens`)
or DEFAULT_CONTEXT_TOKENS stands in for the window until a refusal states it
(`stated_window`: llama-cpp-python's server and vLLM name it when a prompt is too long),
and a busy server cannot be told apart from a slow one (see `ChatModel`: a timed-out request is then not sent again).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import httpx
from langchain_core.messages import HumanMessage

from lero.agents import bounded_json

DEFAULT_CONTEXT_TOKENS = 4096  # the smallest window common local servers run with by default
PROBE_TIMEOUT_S = 5.0
TOKENIZE_ROUTES = (("/tokenize", "content", "tokens"), ("/extras/tokenize/count", "input", "count"))  # (path, field, answer)


@dataclass(frozen=True)
class Window:
    """A context window in tokens and where that number came from (logged and recorded)."""

    tokens: int
    source: str  # "llama-server /props", "vLLM /v1/models", "context_tokens setting", "default",
    # or REFUSAL_SOURCE


# How servers state their window when they refuse a prompt too long for it: llama-cpp-python's
# server and vLLM ("This model's maximum context length is 2048 tokens. ..."), and the error
# llama-cpp-python's server wraps that from ("Requested tokens (2345) exceed context window of 2048").
REFUSAL_WINDOW = re.compile(r"maximum context length is (\d+) tokens|exceed context window of (\d+)\b")
REFUSAL_SOURCE = "the server's refusal"
MIN_STATED_WINDOW = 256  # a stated window outside these bounds is not believed (it came from a reply)
MAX_STATED_WINDOW = 10_000_000


def server_root(base_url: str) -> str:
    """`http://host:port` of `http://host:port/v1` (llama-server serves /props and /slots there)."""
    root = base_url.rstrip("/")
    return root.removesuffix("/v1")


def _get_json(url: str, api_key: str | None) -> Any:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.get(url, headers=headers, timeout=PROBE_TIMEOUT_S)
    except httpx.HTTPError:
        return None
    if not response.is_success:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def stated_window(message: str) -> int | None:
    """The context window a server's refusal states, when it states a sane one."""
    match = REFUSAL_WINDOW.search(message)
    digits = match and (match.group(1) or match.group(2))
    if not digits or len(digits) > len(str(MAX_STATED_WINDOW)):
        return None
    tokens = int(digits)
    return tokens if MIN_STATED_WINDOW <= tokens <= MAX_STATED_WINDOW else None


def context_window(
    base_url: str | None, model: str | None, setting: int | None, api_key: str | None = None
) -> Window:
    """The window the server states, else the `context_tokens` setting, else the default."""
    if base_url:
        props = _get_json(server_root(base_url) + "/props", api_key)
        if isinstance(props, dict):
            settings = props.get("default_generation_settings")
            n_ctx = _positive_int(settings.get("n_ctx")) if isinstance(settings, dict) else None
            if n_ctx:
                return Window(n_ctx, "llama-server /props")
        listed = _get_json(base_url.rstrip("/") + "/models", api_key)
        entries = listed.get("data") if isinstance(listed, dict) else None
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and (model is None or entry.get("id") == model):
                length = _positive_int(entry.get("max_model_len"))
                if length:
                    return Window(length, "vLLM /v1/models")
    if setting:
        return Window(setting, "context_tokens setting")
    return Window(DEFAULT_CONTEXT_TOKENS, "default")


def count_tokens(base_url: str | None, model: str | None, text: str, api_key: str | None = None) -> int | None:
    """The server's own token count of `text` (no chat template), or None where it has no
    tokenizer route: llama.cpp's `llama-server` answers `POST /tokenize` {"content"} with
    its tokens, llama-cpp-python's server `POST /extras/tokenize/count` {"input"} with a count."""
    if not base_url:
        return None
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    for path, field, answer in TOKENIZE_ROUTES:
        try:
            response = httpx.post(server_root(base_url) + path, json={field: text, "model": model},
                                  headers=headers, timeout=PROBE_TIMEOUT_S)
            body = response.json() if response.is_success else None
        except (httpx.HTTPError, ValueError):
            body = None
        value = body.get(answer) if isinstance(body, dict) else None
        count = len(value) if isinstance(value, list) and value else _positive_int(value)
        if count:
            return count
    return None


def server_busy(base_url: str | None, api_key: str | None = None) -> bool | None:
    """True while a llama-server slot is still processing, False when all are idle, None when
    the server does not say (no `/slots`)."""
    if not base_url:
        return None
    slots = _get_json(server_root(base_url) + "/slots", api_key)
    if not isinstance(slots, list) or not slots:
        return None
    flags = [slot.get("is_processing") for slot in slots if isinstance(slot, dict)]
    if not flags or not all(isinstance(flag, bool) for flag in flags):
        return None
    return any(flags)


# How a JSON Schema goes on the wire, tried in this order (`ChatModel.structured_form`):
# `json_schema`: OpenAI's `response_format`, also taken by llama.cpp's llama-server, vLLM and
# Ollama on their OpenAI-compatible endpoints; `json_object`: llama-cpp-python's server, with
# the schema beside the type; `none`: a plain request.
STRUCTURED_FORMS = ("json_schema", "json_object", "none")
PROBE_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
                "required": ["answer"], "additionalProperties": False}
PROBE_MESSAGES = [HumanMessage('Is 2 greater than 1? Answer with JSON like {"answer": "yes"}.')]
PROBE_TOKENS = 16


def response_format(form: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The request's `response_format` for `schema` in `form` (None: a plain request)."""
    if form == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "lero_reply", "schema": schema, "strict": False}}
    if form == "json_object":
        return {"type": "json_object", "schema": schema}
    return None


def keeps_probe_schema(text: str) -> bool:
    """The probe's reply is exactly an object of PROBE_SCHEMA (a server that ignored it writes prose)."""
    try:
        body = bounded_json.loads(text.strip())
    except ValueError:
        return False
    return isinstance(body, dict) and set(body) == {"answer"} and body["answer"] in ("yes", "no")
