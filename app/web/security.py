"""Security headers on every response: a strict CSP without inline script, no framing, no sniffing.

Pages load scripts and styles only from /static; nothing inline runs. The API docs
(/docs, /redoc) are the one exception: the bundled Swagger UI and ReDoc pages carry one
fixed inline bootstrap script, allowed by its SHA-256 hash (never by 'unsafe-inline'),
and need inline styles and blob: workers.
"""

from __future__ import annotations

import base64
import hashlib
import re

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
DOCS_PATHS = ("/docs", "/redoc")
_INLINE_SCRIPT = re.compile(rb"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", re.S)

HEADERS = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",  # permalink ids never leak to other sites
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
    "permissions-policy": "camera=(), microphone=(), geolocation=(), interest-cohort=()",
}


def docs_csp(body: bytes) -> str:
    """The CSP of a docs page: its own inline scripts by hash, inline styles, blob: workers."""
    hashes = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(m.group(1)).digest()).decode()}'"
        for m in _INLINE_SCRIPT.finditer(body)
    )
    return (
        f"default-src 'self'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; object-src 'none'; "
        "base-uri 'none'; frame-ancestors 'none'"
    )


class SecurityHeadersMiddleware:
    """Pure ASGI middleware (no response buffering, except the two small docs pages)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] in DOCS_PATHS:
            await self._docs(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])  # optional in ASGI
                _set_ours(MutableHeaders(scope=message), CSP)
            await send(message)

        await self.app(scope, receive, send_with_headers)

    async def _docs(self, scope: Scope, receive: Receive, send: Send) -> None:
        start: Message | None = None
        body = b""

        async def capture(message: Message) -> None:
            nonlocal start, body
            if message["type"] == "http.response.start":
                start = message
            elif message["type"] == "http.response.body":
                body += message.get("body", b"")
                if not message.get("more_body", False) and start is not None:
                    start.setdefault("headers", [])
                    headers = MutableHeaders(scope=start)
                    _set_ours(headers, docs_csp(body))
                    headers["content-length"] = str(len(body))
                    await send(start)
                    await send({"type": "http.response.body", "body": body})
            else:
                await send(message)

        await self.app(scope, receive, capture)


def _set_ours(headers: MutableHeaders, csp: str) -> None:
    """Our headers in place of any a route set under the same names."""
    for name, value in HEADERS.items():
        headers[name] = value
    headers["content-security-policy"] = csp
