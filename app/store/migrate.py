"""Alembic, configured in code: no alembic.ini, the URL comes from the caller (or Settings)."""

from __future__ import annotations

from typing import TextIO

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext

from app.resources import resource_dir
from app.store.db import make_engine

MIGRATIONS = resource_dir("migrations")
FOREIGN_PREFIX = "procrastinate_"  # the job queue's own objects (migration 0008), not in our metadata


def ours(name: str | None, type_: str, parent_names: object) -> bool:  # noqa: ARG001 (Alembic's include_name)
    """Whether autogenerate should compare a database object: not the job queue's tables and indexes."""
    return not (name or "").startswith(FOREIGN_PREFIX)


def alembic_config(url: str, *, stdout: TextIO | None = None) -> Config:
    """An Alembic Config for the database at url."""
    cfg = Config(stdout=stdout) if stdout is not None else Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    # env.py reads the URL from here; passing it as an attribute avoids configparser's % interpolation.
    cfg.attributes["url"] = url
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at url up to a revision."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    """Migrate the database at url down to a revision ("base" empties it)."""
    command.downgrade(alembic_config(url), revision)


def current(url: str) -> str | None:
    """The revision the database at url is at, or None if it was never migrated."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
