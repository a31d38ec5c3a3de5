"""`lero ui`: a local web app to watch runs, answer approvals and design experiments.

Server-side rendered pages (Starlette + Jinja, autoescaped), one small script for the
live SSE stream, and nothing to build: the templates and static files ship with the
package. `serve` binds 127.0.0.1 by default and prints the URL with a random access
token; see `auth` for the token cookie and CSRF rules, `workers` for how runs are
driven (the CLI's runner, in child processes), `chat` for the chat page.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from lero.app.ui.auth import TOKEN_PARAM, new_token
from lero.graph.configuration import DEFAULT_RUNS_DIR

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765


class PortUnavailable(OSError):
    """The address cannot be bound (in use, not this machine's): one line, exit 1."""


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so that a busy port is one clear error (uvicorn's own
    bind logs a raw errno and exits); `serve` hands it to uvicorn."""
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((bare, port))
    except OSError as error:
        sock.close()
        hint = " (another lero ui?): choose another --port, or --port 0 for a free one" if error.errno == errno.EADDRINUSE else ""
        raise PortUnavailable(f"cannot serve on {host}:{port}: {error.strerror or error}{hint}") from None
    sock.set_inheritable(True)
    return sock


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False


def serve(runs_dir: str = DEFAULT_RUNS_DIR, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, llm_cfg: Any = None,
          token: str | None = None, announce: Callable[[str], None] | None = None,
          llm_settings: dict[str, Any] | None = None) -> None:
    """Run the server until Ctrl-C (a clean stop: one line, no error); workers it started
    are stopped on the way out (their runs stay resumable). PortUnavailable before anything
    starts when the address cannot be bound. `llm_settings`: RunSpec's LLM settings the
    command line gave, kept by the runs the chat page starts."""
    import uvicorn

    from lero.agents import LLMConfig
    from lero.app.ui.app import create_app

    sock = bind(host, port)
    token = token or new_token()
    announce = announce or partial(print, flush=True)  # flushed: a pipe reader waits for the URL
    if not is_loopback(host):
        announce(f"lero ui: warning: binding {host} exposes the UI (and every run it can start) beyond "
                 "this machine; anyone who gets the URL with its token can drive runs")
    bound = sock.getsockname()[1]  # --port 0: the one picked, so that the cookie names this server
    app = create_app(runs_dir, token, bound, llm_cfg or LLMConfig.from_spec(None), llm_settings=llm_settings)

    class Server(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            if self.started:  # listening: the URL works from now on (port 0 = the one picked)
                bound = self.servers[0].sockets[0].getsockname()[1]
                shown = f"[{host}]" if ":" in host else host
                announce(f"lero ui: serving {Path(runs_dir)}/ at http://{shown}:{bound}/?{TOKEN_PARAM}={token}")

    server = Server(uvicorn.Config(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=2))
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn shut down gracefully, then passed the Ctrl-C on
        pass
    finally:
        app.state.workers.close()
        sock.close()
    announce("lero ui: stopped")
