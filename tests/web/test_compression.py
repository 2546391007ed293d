"""Pages, the published rules and static files are served gzip-compressed to clients that accept
it; pages that hold a secret never are; static files carry a cache lifetime."""

from __future__ import annotations

import gzip

import httpx

from tests.support import LiveServer

HTML = {"Accept": "text/html"}


def _raw(client: httpx.Client, path: str, **headers: str) -> tuple[httpx.Response, bytes]:
    """The response and its body as sent, still encoded."""
    with client.stream("GET", path, headers=headers) as r:
        return r, b"".join(r.iter_raw())


def test_pages_and_rules_are_compressed_for_clients_that_accept_gzip(live: LiveServer, client: httpx.Client) -> None:
    for path in ("/", "/api/v1/signatures/prefilter.json", "/failures/", "/failures/cuda.oom"):
        plain, plain_body = _raw(client, path, **HTML, **{"Accept-Encoding": "identity"})
        packed, packed_body = _raw(client, path, **HTML, **{"Accept-Encoding": "gzip"})
        assert plain.status_code == packed.status_code == 200, path
        assert "content-encoding" not in plain.headers, path
        assert packed.headers["content-encoding"] == "gzip", path
        assert gzip.decompress(packed_body) == plain_body, path
        assert len(packed_body) * 2 < len(plain_body), path


def test_pages_with_a_secret_are_never_compressed(live: LiveServer, client: httpx.Client) -> None:
    page, body = _raw(client, "/account", **HTML, **{"Accept-Encoding": "gzip"})
    assert 'name="csrf"' in body.decode()
    assert "content-encoding" not in page.headers


def test_static_files_are_cached_and_compressed(live: LiveServer, client: httpx.Client) -> None:
    r, body = _raw(client, "/static/tracelore.js", **{"Accept-Encoding": "gzip"})
    assert r.status_code == 200
    assert r.headers["cache-control"] == "public, max-age=3600" and r.headers["etag"]
    assert r.headers["content-encoding"] == "gzip"
    assert b"data-quota-url" in gzip.decompress(body)
    assert "cache-control" not in client.get("/static/no-such-file.js").headers
