"""What the browser needs to pick the evidence out of a large log before sending it.

`GET /api/v1/signatures/prefilter.json` publishes the selection rules and the library's
patterns in a form the browser's regex engine runs (`app.core.selection.rules.prefilter_spec`);
static/excerpt.js applies them and posts the excerpt to `POST /api/v1/diagnoses`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.config import Settings
from app.core import Library
from app.core.selection import SPEC_VERSION, prefilter_spec
from app.web.state import state_of

router = APIRouter()

_SPEC_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The selection rules (head, tail, context, caps) and every pattern as a JavaScript "
        "RegExp source with its flags and the literals that screen lines for it",
        "content": {"application/json": {}},
    },
    304: {"description": "Not modified (the ETag matches)"},
}


@dataclass(frozen=True)
class PublishedRules:
    """The selection rules as served: their JSON and its entity tag (built once, by create_app)."""

    etag: str
    body: bytes


def published_rules(library: Library, settings: Settings) -> PublishedRules:
    """The rules for a library and context, as JSON (a few hundred ms: done once per process)."""
    spec = prefilter_spec(library, context=settings.context_lines)
    return PublishedRules(
        etag=f'"{SPEC_VERSION}-{library.version}-{settings.context_lines}"',
        body=json.dumps(spec, separators=(",", ":")).encode(),
    )


@router.get("/signatures/prefilter.json", responses=_SPEC_DOC, response_class=Response)
async def read_prefilter(request: Request) -> Response:
    """The rules and patterns a client uses to keep only the evidence of a large log."""
    rules: PublishedRules = state_of(request.app).prefilter
    headers = {"ETag": rules.etag, "Cache-Control": "public, max-age=300"}
    if request.headers.get("if-none-match") == rules.etag:
        return Response(status_code=304, headers=headers)
    return Response(rules.body, media_type="application/json", headers=headers)
