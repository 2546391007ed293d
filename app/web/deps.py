"""Request dependencies: settings, library, database session, the current subject."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from app.config import Settings
from app.core.library import Library
from app.web.identity import Subject as Subject  # re-exported: routes import it from here
from app.web.identity import resolve_subject
from app.web.metrics import Metrics


def get_settings(request: Request) -> Settings:
    """The app's settings."""
    settings: Settings = request.app.state.settings
    return settings


def get_library(request: Request) -> Library:
    """The signature library, loaded once per process."""
    library: Library = request.app.state.library
    return library


def get_metrics(request: Request) -> Metrics:
    """The app's metrics registry."""
    metrics: Metrics = request.app.state.metrics
    return metrics


def get_session(request: Request) -> Iterator[Session]:
    """A session whose transaction commits when the route returns and rolls back if it raises."""
    with request.app.state.sessionmaker.begin() as session:
        yield session


def get_subject(request: Request) -> Subject:
    """The caller: an account (API key or session cookie) or an anonymous client address."""
    return resolve_subject(request)


SettingsDep = Annotated[Settings, Depends(get_settings)]
LibraryDep = Annotated[Library, Depends(get_library)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
# scope="function": the commit happens before the response is sent, so a client that
# reads right after a 201 finds the row, and a failed commit reaches the client.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
SubjectDep = Annotated[Subject, Depends(get_subject)]
