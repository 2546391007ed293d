"""A real server per test module, once on SQLite and once on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from app.core.library import Library
from tests.conftest import BACKENDS, database_for
from tests.support import LiveServer, live_server, make_settings

LIMIT = 256 << 10


@pytest.fixture(scope="module", params=BACKENDS)
def live(
    request: pytest.FixtureRequest, library: Library, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp(f"live-{request.param}")
    settings = make_settings(database_for(request.param, request, tmp), tmp, max_upload_bytes=LIMIT)
    with live_server(settings, library) as server:
        yield server


@pytest.fixture
def client(live: LiveServer) -> Iterator[httpx.Client]:
    with live.client() as c:
        yield c
