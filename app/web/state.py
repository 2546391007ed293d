"""The service's state: one typed object made in `create_app`, instead of loose `app.state` attributes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from starlette.applications import Starlette

if TYPE_CHECKING:
    from fastapi.templating import Jinja2Templates
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session, sessionmaker

    from app.config import Settings, Threads
    from app.core import Library
    from app.core.redaction import Redactor
    from app.quota.tiers import Tier
    from app.store.learning import EntryStats
    from app.web.encyclopedia import Encyclopedia
    from app.web.gate import Gate
    from app.web.metrics import Metrics
    from app.web.prefilter import PublishedRules


@dataclass
class AppState:
    """What every request of one app shares. Mutable only where noted."""

    settings: Settings
    engine: Engine
    sessionmaker: sessionmaker[Session]
    library: Library
    metrics: Metrics
    threads: Threads
    gate: Gate
    redactor: Redactor
    templates: Jinja2Templates
    encyclopedia: Encyclopedia
    tiers: dict[str, Tier]
    prefilter: PublishedRules
    clock: Callable[[], datetime]  # tests put another clock here to move between UTC days
    # Entry statistics, replaced whole by the periodic summary (app.web.learning).
    seen: dict[str, EntryStats] = field(default_factory=dict)
    diagnosis_paths: dict[str, str] = field(default_factory=dict)  # filled once the routes exist
    secret: bytes | None = None  # the server secret, read from the database on first use


def state_of(app: Starlette) -> AppState:
    """The app's state, as `create_app` made it."""
    state: AppState = app.state.tracelore
    return state


def maybe_state(app: Starlette) -> AppState | None:
    """The app's state, or None for an app `create_app` did not make."""
    state: AppState | None = getattr(app.state, "tracelore", None)
    return state
