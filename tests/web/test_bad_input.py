"""Rows of the bad-input matrix not covered by test_api.py: hostile file names, floods of empty
lines, bait for the redaction rules, slow clients, oversized headers. Never a 5xx, never a hang."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from tests.support import SAMPLES, LiveServer

OOM = (SAMPLES / "ddp-cuda-oom.log").read_bytes()
TEXT = {"Content-Type": "text/plain"}


@pytest.mark.parametrize(
    "filename",
    ["../../etc/passwd", "a.log%00.php", "x" * 10_000 + ".log", "evil\r\nX-Injected: 1.log", "/home/alice/train.log"],
    ids=["traversal", "nul-suffix", "10kb-name", "crlf", "home-path"],
)
def test_hostile_file_names_are_never_paths(live: LiveServer, client: httpx.Client, filename: str) -> None:
    before = live.count()
    r = client.post("/api/v1/diagnoses", files={"file": (filename, OOM, "text/plain")})
    assert r.status_code in (201, 400), r.text
    if r.status_code == 400:
        assert r.headers["content-type"].startswith("application/problem+json") and live.count() == before
        return
    files = r.json()["input"]["files"]
    assert all("\r" not in f and "\n" not in f and "alice" not in f for f in files)
    assert "X-Injected" not in r.headers


def test_a_flood_of_empty_lines(live: LiveServer, client: httpx.Client) -> None:
    before = live.count()
    r = client.post("/api/v1/diagnoses", content=b"\n" * 200_000, headers=TEXT)
    assert r.status_code == 422 and live.count() == before
    r = client.post("/api/v1/diagnoses", content=b"\n" * 200_000 + OOM, headers=TEXT)
    assert r.status_code == 201
    assert r.json()["candidates"][0]["line"] > 200_000  # line numbers count the empty lines


@pytest.mark.parametrize(
    "fragment", [b"1.", b"TOKEN_", b"sk-", b"a-", b"eyJa.", b"://a:", b"@a.", b"password=", b"/home/"]
)
def test_bait_for_the_redaction_rules_is_diagnosed(client: httpx.Client, fragment: bytes) -> None:
    body = (fragment * (200_000 // len(fragment)))[:200_000] + b"\n" + OOM
    r = client.post("/api/v1/diagnoses?store=false", content=body, headers=TEXT)
    assert r.status_code == 200, r.text
    assert r.json()["candidates"]


def test_slow_clients_do_not_hold_the_service(live: LiveServer, client: httpx.Client) -> None:
    """Uploads that trickle in take no diagnosis slot: more of them than slots, and a log still gets through."""
    slow = []
    try:
        for _ in range(8):  # twice max_in_flight
            sock = socket.create_connection(("127.0.0.1", live.port), timeout=10)
            sock.sendall(
                b"POST /api/v1/diagnoses HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
                b"Content-Length: 100000\r\n\r\nstarting"
            )
            slow.append(sock)
        time.sleep(0.2)
        assert client.get("/healthz").status_code == 200
        r = client.post("/api/v1/diagnoses?store=false", content=OOM, headers=TEXT)
        assert r.status_code == 200
    finally:
        for sock in slow:
            sock.close()


def _raw_status(port: int, request: bytes) -> int | None:
    """The status of a hand-made request, or None if the server closed the connection without one."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        try:
            sock.sendall(request)
            data = sock.recv(4096)
        except OSError:
            return None
    return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else None


def test_oversized_and_countless_headers_are_refused_by_the_server(live: LiveServer, client: httpx.Client) -> None:
    huge_cookie = b"GET /healthz HTTP/1.1\r\nHost: x\r\nCookie: " + b"a" * 200_000 + b"\r\n\r\n"
    many = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(1000)) + b"\r\n"
    for request in (huge_cookie, many):
        status = _raw_status(live.port, request)
        assert status is None or status < 500
    assert client.get("/healthz").status_code == 200  # and the server is still there
