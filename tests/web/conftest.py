"""Web tests use the `live` server and `client` fixtures of tests/conftest.py."""

from __future__ import annotations

from tests.conftest import LIVE_UPLOAD_LIMIT

LIMIT = LIVE_UPLOAD_LIMIT
