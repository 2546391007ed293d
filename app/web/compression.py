"""Responses compressed for clients that accept gzip, and static files cached by browsers.

The home page is ~120 KB of HTML and the published evidence rules ~400 KB of JSON, both text
that gzip shrinks several times. Starlette's GZipMiddleware does the work (streamed bodies
are compressed chunk by chunk, event streams and already-encoded bodies left alone); this
decides where. Pages under /account are never compressed: they hold a secret (the form's CSRF
token, a new API key) next to text the visitor controls, which is what a compression
side-channel (BREACH) needs to read the secret from the response's size.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

SECRET_PATHS = ("/account",)
STATIC_PATH = "/static/"
# Static files change with a release: an hour of browser cache, then a revalidation (ETag).
STATIC_CACHE = "public, max-age=3600"


class CompressionMiddleware:
    """gzip where it is safe; a cache lifetime for static files."""

    def __init__(self, app: ASGIApp, minimum_size: int = 1024) -> None:
        self.app = app
        # Level 6 (zlib's default): nearly level 9's size at about half its CPU per response.
        self.gzip = GZipMiddleware(app, minimum_size=minimum_size, compresslevel=6)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not path or path.startswith(SECRET_PATHS):
            await self.app(scope, receive, send)
            return
        if path.startswith(STATIC_PATH):
            send = _cached(send)
        await self.gzip(scope, receive, send)


def _cached(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            if message["status"] == 200 and "cache-control" not in headers:
                headers["Cache-Control"] = STATIC_CACHE
        await send(message)

    return sending
