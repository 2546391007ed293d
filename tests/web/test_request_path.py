"""The request path's shortcuts give what the general forms they replace give (behaviour, never timing)."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.datastructures import URLPath
from starlette.requests import Request

from app.web.identity import anonymous_id
from app.web.urls import absolute_url

SCOPES: list[dict[str, Any]] = [
    {"scheme": "http", "server": ("127.0.0.1", 8000), "headers": [(b"host", b"127.0.0.1:8000")], "root_path": ""},
    {"scheme": "https", "server": ("10.0.0.1", 443), "headers": [(b"host", b"example.org")], "root_path": "/tl"},
    {"scheme": "https", "server": ("10.0.0.1", 443), "headers": [(b"host", b"example.org")], "root_path": "/tl/"},
    {"scheme": "http", "server": ("::1", 8000), "headers": [], "root_path": ""},
    {"scheme": "http", "server": ("::1", 80), "headers": [(b"host", b"[::1]:80")], "root_path": ""},
    {"scheme": "http", "server": ("h", 81), "headers": [(b"host", b"not a host!")], "root_path": "/a b"},
    {"scheme": "http", "server": None, "headers": [], "root_path": ""},  # no address at all: a relative URL
]


@pytest.mark.parametrize("scope", SCOPES)
def test_absolute_url_is_starlettes_make_absolute_url(scope: dict[str, Any]) -> None:
    request = Request({"type": "http", "method": "POST", "path": "/api/v1/diagnoses", "query_string": b"a=1", **scope})
    for path in ("/api/v1/diagnoses/Zz09_-abc", "/d/Zz09_-abc"):
        assert absolute_url(request, path) == str(URLPath(path).make_absolute_url(request.base_url))


def test_an_anonymous_id_is_the_same_remembered_or_not() -> None:
    first = anonymous_id(b"key", "2001:db8::1")
    assert anonymous_id(b"key", "2001:db8::1") == first == anonymous_id.__wrapped__(b"key", "2001:db8::1")
    assert anonymous_id(b"key", "2001:db8::2") == first  # the same /64
    assert anonymous_id(b"other key", "2001:db8::1") != first
