"""The app's database session factory, read from application state in this one place.

Routes take it as a dependency (`SessionsDep` in app/web/deps.py, built on `sessions_of`);
code that runs outside a route's dependencies, such as the signing key's first lookup,
calls `sessions_of` itself.
"""

from __future__ import annotations

from fastapi import Request
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.web.state import state_of

Sessions = sessionmaker[Session]


def sessions_of(request: Request) -> Sessions:
    """The session factory create_app made for this request's app."""
    sessions: Sessions = state_of(request.app).sessionmaker
    return sessions


def engine_of(sessions: Sessions) -> Engine:
    """The engine a session factory binds, for the request path's plain-connection statements."""
    engine: Engine = sessions.kw["bind"]
    return engine
