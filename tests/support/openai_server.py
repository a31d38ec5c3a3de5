"""A real OpenAI-compatible HTTP server for tests: scripted replies over 127.0.0.1.

It speaks `POST /v1/chat/completions` and `GET /v1/models` through the stdlib HTTP
server in a background thread, so clients are exercised end to end (HTTP, JSON,
status codes, headers, timeouts) with nothing monkeypatched. Each test scripts the
replies: a queue of `Reply` objects and/or a function `request_json -> Reply`.

    with OpenAIServer() as server:
        server.push(Reply(status=429, headers={"Retry-After": "1"}), Reply(content="hi"))
        ChatOpenAI(base_url=server.base_url, api_key="x", model="m", max_retries=0).invoke("q")
        server.requests  # the JSON bodies received, in order

Usage counts are deterministic: prompt tokens = whitespace-separated words of all
message contents, completion tokens = words of all returned choices (`usage=False`: a
server that sends none).

What real servers say about themselves can be scripted too: `props` (llama-server's
`GET /props`), `slots` (its `GET /slots`, a list or a function called per request),
`model_fields` (extra fields of each `/v1/models` entry, e.g. vLLM's `max_model_len`),
`reject_system` (a chat template without a system role: HTTP 400 or 500), and
`tokenizer_chars` (llama-cpp-python's `POST /extras/tokenize/count`, counting one token
per that many characters).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer. `content` is a string (repeated for `n` choices when the
    server honours `n`) or a list of strings (exactly these choices)."""

    content: str | list[str] = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # sleep before answering: a stalled server
    error_message: str = "scripted error"
    tool_calls: list[dict] | None = None  # OpenAI-format tool calls on the first choice
    finish_reason: str = "stop"  # "length": cut off at max_tokens
    body: dict | None = None  # raw JSON body, overriding everything above


Script = Callable[[dict], Reply]


class OpenAIServer:
    """Scripted OpenAI chat-completions server on an ephemeral local port."""

    def __init__(self, honour_n: bool = True, model_ids: tuple[str, ...] = ("test-model",)):
        self.honour_n = honour_n
        self.model_ids = model_ids
        self.usage = True
        self.props: dict | None = None
        self.slots: list | Callable[[], list] | None = None
        self.slot_polls = 0  # GET /slots requests seen
        self.model_fields: dict[str, Any] = {}
        self.reject_system: int | None = None  # the status a system message gets (400 or 500)
        self.models_status = 200  # GET /v1/models answers this status (401: a refused key)
        self.models_auth: list[str | None] = []  # Authorization headers seen at /v1/models
        self.models_delay_s = 0.0  # GET /v1/models waits this long first: a server busy with another client
        self.tokenizer_chars: float | None = None  # None: no tokenizer route
        self.script: Script | None = None
        self.requests: list[dict] = []
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host}:{port}/v1"

    def push(self, *replies: Reply | str) -> None:
        """Queue replies (a bare string is a 200 reply with that content)."""
        with self._lock:
            self._queue.extend(Reply(content=r) if isinstance(r, str) else r for r in replies)

    def __enter__(self) -> OpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()

    def next_reply(self, request: dict) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._queue:
                return self._queue.popleft()
        if self.script is not None:
            return self.script(request)
        return Reply(status=400, error_message="the test server has no scripted reply left")

    def completion_body(self, request: dict, reply: Reply) -> dict[str, Any]:
        n = int(request.get("n") or 1)
        if isinstance(reply.content, list):
            contents = reply.content
        else:
            contents = [reply.content] * (n if self.honour_n else 1)
        choices = []
        for index, text in enumerate(contents):
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if reply.tool_calls and index == 0:
                message["tool_calls"] = reply.tool_calls
            finish = "tool_calls" if reply.tool_calls and index == 0 else reply.finish_reason
            choices.append({"index": index, "message": message, "finish_reason": finish})
        prompt_tokens = sum(_words(m.get("content")) for m in request.get("messages", []))
        completion_tokens = sum(_words(text) for text in contents)
        body = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", self.model_ids[0]),
            "choices": choices,
        }
        if self.usage:
            body["usage"] = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            }
        return body

    def get(self, path: str) -> tuple[int, Any]:
        """The answer to a GET of `path`: the models list and whatever else is scripted."""
        if path == "/props" and self.props is not None:
            return 200, self.props
        if path == "/slots" and self.slots is not None:
            with self._lock:
                self.slot_polls += 1
            return 200, self.slots() if callable(self.slots) else self.slots
        if path != "/v1/models":
            return 404, {"error": {"message": f"no route {path}", "type": "not_found"}}
        if self.models_status != 200:
            return self.models_status, {"error": {"message": "scripted /models error", "type": "scripted"}}
        models = [{"id": m, "object": "model", "owned_by": "test", **self.model_fields} for m in self.model_ids]
        return 200, {"object": "list", "data": models}


def _words(content: object) -> int:
    if isinstance(content, str):
        return len(content.split())
    if isinstance(content, list):
        return sum(_words(part.get("text")) for part in content if isinstance(part, dict))
    return 0


def _handler_for(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # keep pytest output quiet
            return

        def do_GET(self) -> None:
            path = self.path.rstrip("/")
            if path == "/v1/models":
                server.models_auth.append(self.headers.get("Authorization"))
                time.sleep(server.models_delay_s)
            self._send(*server.get(path))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            if self.path.rstrip("/") == "/extras/tokenize/count" and server.tokenizer_chars:
                self._send(200, {"count": math.ceil(len(request.get("input", "")) / server.tokenizer_chars)})
                return
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(
                    404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}
                )
                return
            has_system = any(m.get("role") == "system" for m in request.get("messages", []))
            if server.reject_system and has_system:
                with server._lock:
                    server.requests.append(request)
                error = {"message": "System role not supported", "type": "invalid_request_error"}
                self._send(server.reject_system, {"error": error})
                return
            reply = server.next_reply(request)
            if reply.delay_s:
                time.sleep(reply.delay_s)
            if reply.body is not None:
                self._send(reply.status, reply.body, reply.headers)
            elif reply.status != 200:
                error = {"message": reply.error_message, "type": "scripted", "code": reply.status}
                self._send(reply.status, {"error": error}, reply.headers)
            else:
                self._send(200, server.completion_body(request, reply), reply.headers)

        def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            payload = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                return  # the client gave up (timeout test); nothing left to tell it

    return Handler
