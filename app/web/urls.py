"""The addresses of stored diagnoses: the API's and the page's, absolute, built without `url_for`'s search."""

from __future__ import annotations

from fastapi import FastAPI, Request
from starlette.datastructures import URLPath

from app.config import Settings
from app.core.stored import StoredDiagnosis
from app.web.state import state_of

DIAGNOSIS_ID = "{diagnosis_id}"
DIAGNOSIS_ROUTES = ("read_diagnosis", "diagnosis_page")  # the routes diagnosis_url serves


def diagnosis_url(request: Request, route: str, diagnosis_id: str) -> str:
    """`request.url_for(route, diagnosis_id=...)` from the route's path, looked up once by create_app.

    url_for tries every route of the app in turn; the path of a diagnosis route never changes.
    """
    path: str = state_of(request.app).diagnosis_paths[route]
    return absolute_url(request, path.replace(DIAGNOSIS_ID, diagnosis_id))


def absolute_url(request: Request, path: str) -> str:
    """`str(URLPath(path).make_absolute_url(request.base_url))` for a path without a host, as a string.

    The same scheme, host and root path, joined without the URL objects starlette builds and parses
    again on the way (a tenth of a stored diagnosis's event-loop time for its two addresses).
    """
    base = request.base_url
    if not base.netloc:  # no Host header and no server address: starlette's relative form
        return str(URLPath(path).make_absolute_url(base))
    return f"{base.scheme}://{base.netloc}{base.path.rstrip('/')}{path}"


def diagnosis_paths(app: FastAPI) -> dict[str, str]:
    """The path of each route that takes a diagnosis id, with `{diagnosis_id}` in its place."""
    return {route: str(app.url_path_for(route, diagnosis_id=DIAGNOSIS_ID)) for route in DIAGNOSIS_ROUTES}


def page_url(request: Request, settings: Settings, diagnosis_id: str) -> str:
    """The public address of a diagnosis page."""
    if settings.base_url:
        return f"{settings.base_url.rstrip('/')}/d/{diagnosis_id}"
    return diagnosis_url(request, "diagnosis_page", diagnosis_id)


def with_url(request: Request, settings: Settings, record: StoredDiagnosis) -> StoredDiagnosis:
    """A stored diagnosis with the address of its page."""
    return record.model_copy(update={"url": page_url(request, settings, record.id)}) if record.id else record
