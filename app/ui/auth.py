"""Access control: a random token for every request, a CSRF token on every POST.

The token travels once in the URL `lero ui` prints; the gate trades it for an HttpOnly,
SameSite=Strict cookie and redirects to the same URL without it. Requests without the
cookie (or with a wrong one) get 401. POST forms carry a CSRF token derived from the
session token (HMAC), checked by `checked_form` before a handler acts.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import urlencode

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import HTTPConnection, Request
from starlette.responses import PlainTextResponse, RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

TOKEN_PARAM = "token"
CSRF_FIELD = "csrf"


def new_token() -> str:
    return secrets.token_urlsafe(24)


def csrf_token(token: str) -> str:
    """The CSRF token of a session: bound to its access token, unguessable without it."""
    return hmac.new(token.encode(), b"lero-ui csrf", hashlib.sha256).hexdigest()


def cookie_name(port: int) -> str:
    """Per port: two servers on one host must not overwrite each other's cookie."""
    return f"lero_ui_{port}"


SECURITY_HEADERS = [  # defence in depth: even escaped-wrongly text could not load or run a script
    (b"content-security-policy", b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                                 b"img-src 'self' data:; frame-ancestors 'none'; form-action 'self'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


def same_site(path: str) -> str:
    """A redirect target that stays on this server: `//evil.example/x` (or `/\\evil...`) would be
    read by a browser as another host, so leading slashes and backslashes collapse to one `/`."""
    return "/" + path.lstrip("/\\")


class TokenGate:
    """ASGI middleware: 401 unless the request holds the token (cookie, or URL once);
    every response also gets the security headers (CSP: scripts only from /static)."""

    def __init__(self, app: ASGIApp, token: str, cookie: str) -> None:
        self.app = app
        self.token = token
        self.cookie = cookie

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        await self._gate(scope, receive, send_with_headers)

    async def _gate(self, scope: Scope, receive: Receive, send: Send) -> None:
        conn = HTTPConnection(scope)
        given = conn.query_params.get(TOKEN_PARAM)
        if given is not None and hmac.compare_digest(given, self.token):
            rest = [(k, v) for k, v in conn.query_params.multi_items() if k != TOKEN_PARAM]
            target = same_site(conn.url.path) + (f"?{urlencode(rest)}" if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(self.cookie, self.token, httponly=True, samesite="strict", path="/")
            await response(scope, receive, send)
            return
        if not hmac.compare_digest(conn.cookies.get(self.cookie, ""), self.token):
            response = PlainTextResponse(
                "401 Unauthorized: open the URL that `lero ui` printed (it carries the access token)\n",
                status_code=401,
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def checked_form(request: Request) -> FormData:
    """The POST's form, once its CSRF token matches the session's; else 403."""
    form = await request.form()
    expected = request.app.state.csrf
    if not hmac.compare_digest(str(form.get(CSRF_FIELD, "")), expected):
        raise HTTPException(status_code=403, detail="missing or wrong CSRF token (reload the page)")
    return form
