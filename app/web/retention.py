"""What is kept and for how long: the privacy page, deletion by the owner, the periodic purge."""

from __future__ import annotations

import functools
from typing import Annotated

import anyio
from fastapi import APIRouter, Form, Header, Request, Response
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.core.redaction import secret_types
from app.errors import NotFound, NotOwner
from app.jobs.retention import purge_logged
from app.store.diagnoses import delete_diagnosis, may_delete
from app.web.delete_cookie import delete_cookie_name
from app.web.deps import SessionDep, SettingsDep, SubjectDep
from app.web.periodic import Sleep, repeat
from app.web.problems import PROBLEM_JSON
from app.web.state import state_of

PURGE_EVERY = 3600.0  # seconds between purges (`app.jobs.retention`) while the service runs
TOKEN_HEADER = "X-Delete-Token"


api = APIRouter()
pages = APIRouter()


async def purge_periodically(
    make_session: sessionmaker[Session],
    settings: Settings,
    *,
    every: float = PURGE_EVERY,
    sleep: Sleep = anyio.sleep,
) -> None:
    """Purge every `every` seconds until cancelled (the app purges once at start-up itself)."""
    purge = functools.partial(purge_logged, make_session, settings)
    await repeat(purge, every=every, what="the retention purge", first=False, sleep=sleep)


def _delete(session: Session, diagnosis_id: str, *, token: str | None, subject: str) -> None:
    allowed = may_delete(session, diagnosis_id, token=token, subject=subject) if len(diagnosis_id) <= 64 else None
    if allowed is None:
        raise NotFound(f"no diagnosis {diagnosis_id!r}: the id is wrong, or it was deleted or has expired")
    if not allowed:
        raise NotOwner(
            "only the maker of a diagnosis can delete it: send the delete token returned when it was created "
            f"in the {TOKEN_HEADER} header, or sign in to the account that made it"
        )
    delete_diagnosis(session, diagnosis_id)


@api.delete(
    "/diagnoses/{diagnosis_id}",
    status_code=204,
    response_class=Response,
    responses={status: {"content": {PROBLEM_JSON: {}}} for status in (403, 404, 422)},
    tags=["diagnoses"],
)
def delete_diagnosis_api(
    diagnosis_id: str,
    session: SessionDep,
    subject: SubjectDep,
    token: Annotated[str | None, Header(alias=TOKEN_HEADER, max_length=200)] = None,
) -> Response:
    """Delete a stored diagnosis and everything kept of its log, now.

    Allowed with the `delete_token` returned once when it was created, or for the account that made it.
    """
    _delete(session, diagnosis_id, token=token, subject=subject.id)
    return Response(status_code=204)


@pages.post("/d/{diagnosis_id}/delete", name="delete_diagnosis_form")
def delete_diagnosis_form(
    request: Request,
    diagnosis_id: str,
    session: SessionDep,
    subject: SubjectDep,
    token: Annotated[str | None, Form(max_length=200)] = None,
) -> HTMLResponse:
    """The diagnosis page's delete button: the browser that made it holds the token in a cookie.

    Posts from another site are refused before this runs (`check_form_origin`, as for every form).
    """
    cookie = delete_cookie_name(diagnosis_id)
    _delete(session, diagnosis_id, token=token or request.cookies.get(cookie), subject=subject.id)
    templates = state_of(request.app).templates
    response: HTMLResponse = templates.TemplateResponse(request, "deleted.html", {"diagnosis_id": diagnosis_id})
    response.delete_cookie(cookie, path=f"/d/{diagnosis_id}")
    return response


@pages.get("/privacy", name="privacy_page")
def privacy_page(request: Request, settings: SettingsDep) -> HTMLResponse:
    """What Tracelore keeps, where, for how long, and how to delete it."""
    response: HTMLResponse = state_of(request.app).templates.TemplateResponse(
        request,
        "privacy.html",
        {"settings": settings, "secret_types": secret_types(), "token_header": TOKEN_HEADER},
    )
    return response
