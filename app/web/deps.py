"""Request dependencies: settings, library, database session, the current subject.

The ones that only read app state are `async def`: FastAPI runs a plain `def` dependency in a
worker thread, a hop that costs more than the lookup it wraps.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session

from app.config import Settings
from app.core import Library
from app.web.identity import Subject as Subject  # re-exported: routes import it from here
from app.web.identity import needs_database, resolve_subject
from app.web.metrics import Metrics
from app.web.sessions import Sessions as Sessions  # re-exported: routes import it from here
from app.web.sessions import sessions_of
from app.web.state import state_of


async def get_settings(request: Request) -> Settings:
    """The app's settings."""
    settings: Settings = state_of(request.app).settings
    return settings


async def get_library(request: Request) -> Library:
    """The signature library, loaded once per process."""
    library: Library = state_of(request.app).library
    return library


async def get_metrics(request: Request) -> Metrics:
    """The app's metrics registry."""
    metrics: Metrics = state_of(request.app).metrics
    return metrics


async def get_sessions(request: Request) -> Sessions:
    """The app's session factory, for a route that runs its own short transactions."""
    return sessions_of(request)


def get_session(sessions: Annotated[Sessions, Depends(get_sessions)]) -> Iterator[Session]:
    """A session whose transaction commits when the route returns and rolls back if it raises."""
    with sessions.begin() as session:
        yield session


async def get_subject(request: Request) -> Subject:
    """The caller: an account (API key or session cookie) or an anonymous client address.

    An anonymous caller is a keyed hash of the client address, worked out here on the event
    loop; a caller whose key or session needs the database is looked up in a worker thread.
    The session factory is read here, not taken as a sub-dependency (solving one costs more than this).
    """
    sessions = sessions_of(request)
    if needs_database(request):
        return await run_in_threadpool(resolve_subject, request, sessions)
    return resolve_subject(request, sessions)


SettingsDep = Annotated[Settings, Depends(get_settings)]
SessionsDep = Annotated[Sessions, Depends(get_sessions)]
LibraryDep = Annotated[Library, Depends(get_library)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
# scope="function": the commit happens before the response is sent, so a client that
# reads right after a 201 finds the row, and a failed commit reaches the client.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
SubjectDep = Annotated[Subject, Depends(get_subject)]
