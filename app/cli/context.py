"""What every command of one `tracelore` run shares: the settings, read once, and what is built from them.

Commands reach it with `current()`; the settings are read from the environment on first use,
so a command that sets TRACELORE_* variables first (`serve`) calls `configure` before.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from app.cli.errors import CommandError
from app.config import Settings, thread_policy

if TYPE_CHECKING:
    from pydantic import ValidationError
    from sqlalchemy.orm import Session

    from app.core import Library


def scan_threads() -> int:
    """Threads that scan one large log when it is the one diagnosis running (`app.config.thread_policy`)."""
    return thread_policy(current().settings, diagnoses=1).scan


def safe_url(url: str) -> str:
    """A database URL fit to print: its password hidden."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def settings_problem(exc: ValidationError) -> str:
    """What is wrong with the configuration, by the variable a person sets, one line each."""
    lines = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"])
        name = f"TRACELORE_{where.upper()}" if where else "the settings"
        lines.append(f"{name}: {error['msg'].removeprefix('Value error, ')}")
    return "invalid configuration:\n  " + "\n  ".join(lines)


class CliContext:
    """The shared state of one command line: one Settings, the library and store built from it."""

    @functools.cached_property
    def settings(self) -> Settings:
        from pydantic import ValidationError

        try:
            return Settings()
        except ValidationError as exc:
            raise CommandError(settings_problem(exc)) from None

    def configure(self, **values: object) -> None:
        """Set TRACELORE_<NAME> here and for what this process starts (uvicorn's workers); read the settings anew."""
        for name, value in values.items():
            if value is not None:
                os.environ[f"TRACELORE_{name.upper()}"] = str(value)
        self.__dict__.pop("settings", None)

    def library(self, signatures: Path | None) -> Library:
        """The signature library of --signatures (or the configured one), through the parse cache."""
        from app.core import load_library
        from app.errors import LibraryError

        try:
            return load_library(signatures or self.settings.signatures_dir, cache=self.settings.cache_dir)
        except LibraryError as exc:
            raise CommandError(f"the signature library is broken:\n{exc.detail}") from exc

    @contextlib.contextmanager
    def store(self) -> Iterator[Session]:
        """One transaction on the configured database, its engine disposed of afterwards."""
        from sqlalchemy.exc import SQLAlchemyError

        from app.store.db import make_engine, make_sessionmaker

        url = self.settings.effective_database_url
        engine = make_engine(url)
        try:
            with make_sessionmaker(engine).begin() as session:
                yield session
        except SQLAlchemyError as exc:
            raise CommandError(
                f"the database at {safe_url(url)} is not usable (is it migrated? `tracelore db upgrade`): {exc}"
            ) from exc
        finally:
            engine.dispose()

    def local_service_url(self) -> str:
        """The address `tracelore serve` answers on with the current settings."""
        host = "127.0.0.1" if self.settings.host in ("0.0.0.0", "::", "") else self.settings.host
        return f"http://{host}:{self.settings.port}"


def current() -> CliContext:
    """The context of the running command line (a fresh one when called outside a command)."""
    ctx = click.get_current_context(silent=True)
    return ctx.ensure_object(CliContext) if ctx is not None else CliContext()


def library(signatures: Path | None) -> Library:
    """The library of the running command line (see `CliContext.library`)."""
    return current().library(signatures)
