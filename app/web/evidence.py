"""What the browser needs to pick the evidence out of a large log before sending it.

`GET /api/v1/signatures/prefilter.json` publishes the selection rules and the library's
patterns in a form the browser's regex engine runs (`app.core.evidence.prefilter_spec`);
static/excerpt.js applies them and posts the excerpt to `POST /api/v1/diagnoses`.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.core.evidence import SPEC_VERSION, prefilter_spec
from app.web.deps import LibraryDep, SettingsDep

router = APIRouter()

_SPEC_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The selection rules (head, tail, context, caps) and every pattern as a JavaScript "
        "RegExp source with its flags and the literals that screen lines for it",
        "content": {"application/json": {}},
    },
    304: {"description": "Not modified (the ETag matches)"},
}


@router.get("/signatures/prefilter.json", responses=_SPEC_DOC, response_class=Response)
def read_prefilter(request: Request, library: LibraryDep, settings: SettingsDep) -> Response:
    """The rules and patterns a client uses to keep only the evidence of a large log."""
    etag = f'"{SPEC_VERSION}-{library.version}-{settings.context_lines}"'
    headers = {"ETag": etag, "Cache-Control": "public, max-age=300"}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    cached: tuple[str, bytes] | None = getattr(request.app.state, "prefilter", None)
    if cached is None or cached[0] != etag:  # built once per process (a few hundred ms)
        spec = prefilter_spec(library, context=settings.context_lines)
        cached = (etag, json.dumps(spec, separators=(",", ":")).encode())
        request.app.state.prefilter = cached
    return Response(cached[1], media_type="application/json", headers=headers)
