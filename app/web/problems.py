"""Every error leaves here: application/problem+json (RFC 9457) for clients, an HTML page for browsers."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import Match

from app.errors import TraceloreError
from app.web.state import maybe_state, state_of

log = logging.getLogger("tracelore")

PROBLEM_JSON = "application/problem+json"

# Problem types for HTTP errors raised by the framework itself (routing, methods, server limits).
_HTTP_TYPES = {
    400: ("/problems/bad-input", "Malformed input"),
    404: ("/problems/not-found", "Not found"),
    405: ("/problems/method-not-allowed", "Method not allowed"),
    413: ("/problems/too-large", "Request too large"),
    415: ("/problems/unsupported-media-type", "Unsupported media type"),
}


def wants_html(request: Request) -> bool:
    """Browsers on page routes get an HTML error page; everything else gets problem+json."""
    if request.url.path.startswith("/api/"):
        return False
    return "text/html" in request.headers.get("accept", "")


def problem_response(
    request: Request,
    *,
    status: int,
    type_: str,
    title: str,
    detail: str,
    headers: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> Response:
    """Render one problem, as JSON or as the error page, and count the rejection."""
    state = maybe_state(request.app)  # a handler may run before create_app has made it
    metrics = state.metrics if state is not None else None
    if metrics is not None and status != 500:
        metrics.rejection(type_.rsplit("/", 1)[-1])
    if wants_html(request):
        templates = state_of(request.app).templates
        page: Response = templates.TemplateResponse(
            request,
            "error.html",
            {"status": status, "title": title, "detail": detail},
            status_code=status,
            headers=headers,
        )
        return page
    body = {"type": type_, "title": title, "status": status, "detail": detail, "instance": request.url.path}
    body.update(extra or {})
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_JSON)


async def _tracelore_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, TraceloreError)
    if exc.status >= 500 and exc.status != 503:
        log.error("internal error: %s", exc.detail)
    return problem_response(
        request,
        status=exc.status,
        type_=exc.type,
        title=exc.title,
        detail=exc.detail,
        headers=exc.headers,
        extra=exc.extra,
    )


def _error_location(err: Any) -> str:
    loc = [str(p) for p in err.get("loc", ()) if p not in ("body",)]
    return ".".join(loc) or "request"


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = [{"location": _error_location(e), "message": e.get("msg", "")} for e in exc.errors()]
    detail = "; ".join(f"{e['location']}: {e['message']}" for e in errors)
    return problem_response(
        request,
        status=422,
        type_="/problems/invalid",
        title="Invalid request",
        detail=detail,
        extra={"errors": errors},
    )


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    type_, title = _HTTP_TYPES.get(exc.status_code, ("about:blank", "HTTP error"))
    detail = exc.detail if isinstance(exc.detail, str) else title
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"nothing at {request.url.path}"
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        detail = f"{request.method} is not allowed on {request.url.path}"
        headers["Allow"] = ", ".join(_allowed_methods(request)) or headers.get("Allow", "")
    return problem_response(request, status=exc.status_code, type_=type_, title=title, detail=detail, headers=headers)


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at this path (routes of one path may live in several routers)."""
    routes = request.app.router.routes
    return [
        method
        for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
        if any(route.matches({**request.scope, "method": method})[0] == Match.FULL for route in routes)
    ]


async def _disconnected(_request: Request, _exc: Exception) -> Response:
    # The client went away mid-upload: nobody reads this answer, and it is not our error.
    return Response(status_code=400)


async def _unexpected(request: Request, exc: Exception) -> Response:
    # A bug: log it with its traceback, tell the client nothing internal.
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(
        request,
        status=500,
        type_="/problems/internal",
        title="Internal error",
        detail="Tracelore failed on this request; the error has been logged. Try again later.",
    )


def install_problem_handlers(app: FastAPI) -> None:
    """Register the handlers that turn every error into a problem."""
    app.add_exception_handler(TraceloreError, _tracelore_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(ClientDisconnect, _disconnected)
    app.add_exception_handler(Exception, _unexpected)
