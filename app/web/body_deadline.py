"""A deadline for a request's body: one that never completes does not hold its connection for ever.

Neither uvicorn nor Starlette bounds the time a body takes to arrive: a client that sends the
headers and then a byte a minute (or nothing) kept its connection, and a slot in the queue of
requests being read, as long as it liked (issue #38). Every `http.request` message of the body
must arrive before `seconds` after the request began; past that the app's `receive` raises
`SlowBody` (408, rendered as a problem like any other error) and the connection is closed, its
body unread. Waiting for the client to disconnect once the body is in is not bounded.
"""

from __future__ import annotations

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import SlowBody


class BodyDeadlineMiddleware:
    """Pure ASGI middleware: the body of an HTTP request must arrive within `seconds`."""

    def __init__(self, app: ASGIApp, *, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadline = anyio.current_time() + self.seconds
        whole = False  # the last piece of the body has arrived

        async def timed_receive() -> Message:
            nonlocal whole
            if whole:
                return await receive()
            with anyio.move_on_after(deadline - anyio.current_time()):
                message = await receive()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    whole = True
                return message
            raise SlowBody(
                f"the request body did not arrive within {self.seconds:g} s; send it in one go, "
                "or send a smaller log (the evidence, or the end of the log)"
            )

        await self.app(scope, timed_receive, send)
