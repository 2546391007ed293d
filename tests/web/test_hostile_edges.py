"""Edges an adversary found on a real server (issue #38): reordering characters from a search query
in the page's title, archives that hold nothing or another archive, and a body that never completes."""

from __future__ import annotations

import io
import re
import socket
import tarfile
import time
from pathlib import Path

import httpx
import pytest

from app.core.knowledge.loading import Library
from tests.support import LiveServer, live_server, make_settings
from tests.web.test_api import assert_problem

HTML = {"Accept": "text/html"}
LOG = b"[rank0]: torch.OutOfMemoryError: CUDA out of memory.\n"


def _tar(members: list[tuple[str, bytes]], mode: str = "w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:  # type: ignore[call-overload]
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _refused(live: LiveServer, client: httpx.Client, status: int, **kwargs: object) -> dict[str, object]:
    before = live.count()
    body = assert_problem(client.post("/api/v1/diagnoses", **kwargs), status)  # type: ignore[arg-type]
    assert live.count() == before
    return body


# --- the search page's title ------------------------------------------------------------------


@pytest.mark.parametrize("spoof", ["\u202e", "\u2066", "\u200f", "\x1b"])
def test_reordering_characters_of_a_query_never_reach_the_title(client: httpx.Client, spoof: str) -> None:
    page = client.get("/search", params={"q": f"CUDA {spoof}gnp.exe out of memory"}, headers=HTML).text
    title = re.search(r"<title>(.*?)</title>", page, re.S)
    assert title is not None
    assert spoof not in title.group(1)
    assert f"\\u{ord(spoof):04x}" in title.group(1)


def test_a_multi_line_query_makes_a_one_line_title(client: httpx.Client) -> None:
    page = client.get("/search", params={"q": "Traceback\n  File x\nRuntimeError: CUDA error"}, headers=HTML).text
    title = re.search(r"<title>(.*?)</title>", page, re.S)
    assert title is not None and "\n" not in title.group(1) and "Traceback File x" in title.group(1)


# --- archives ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["w:gz", "w"])
def test_an_empty_archive_is_said_to_hold_no_files(live: LiveServer, client: httpx.Client, mode: str) -> None:
    archive = _tar([], mode)
    for kwargs in (
        {"files": {"file": ("job.tar.gz", archive, "application/gzip")}},
        {"content": archive, "headers": {"Content-Type": "application/gzip"}} if mode == "w:gz" else None,
    ):
        if kwargs is None:
            continue
        body = _refused(live, client, 400, **kwargs)
        assert "holds no files" in str(body["detail"]), body


@pytest.mark.parametrize("inner", ["job.tar.gz", "job.tar"])
def test_an_archive_inside_an_archive_is_refused(live: LiveServer, client: httpx.Client, inner: str) -> None:
    nested = _tar([("rank1.log", LOG)], "w:gz" if inner.endswith(".gz") else "w")
    archive = _tar([("rank0.log", LOG), (inner, nested)])
    for kwargs in (
        {"files": {"file": ("outer.tar.gz", archive, "application/gzip")}},
        {"content": archive, "headers": {"Content-Type": "application/gzip"}},
    ):
        body = _refused(live, client, 400, **kwargs)
        assert "another archive" in str(body["detail"]) and inner in str(body["detail"]), body


# --- a body that never completes --------------------------------------------------------------


def _read_until_closed(sock: socket.socket, seconds: float) -> tuple[bytes, bool]:
    """What the server sent, and whether it closed the connection, within `seconds`."""
    sock.settimeout(seconds)
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except TimeoutError:
        return got, False
    return got, True


@pytest.mark.parametrize("sent", [b"", b"[rank0]: step 1\n"])
def test_a_body_that_never_completes_gets_408_and_its_connection_closed(
    sqlite_url: str, tmp_path: Path, library: Library, sent: bytes
) -> None:
    settings = make_settings(sqlite_url, tmp_path, body_seconds=1)
    with live_server(settings, library) as server:
        before = server.count()
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            started = time.monotonic()
            head = "POST /api/v1/diagnoses HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n"
            sock.sendall(head.encode() + sent)
            got, closed = _read_until_closed(sock, 15)
            took = time.monotonic() - started
        assert got.startswith(b"HTTP/1.1 408"), got[:200]
        assert b"application/problem+json" in got and b"slow-body" in got
        assert closed and took < 10, took
        assert server.count() == before


def test_a_slow_but_steady_body_is_cut_at_the_deadline(sqlite_url: str, tmp_path: Path, library: Library) -> None:
    # One byte every 0.2 s: every piece arrives well within an idle timeout, the whole never within the deadline.
    settings = make_settings(sqlite_url, tmp_path, body_seconds=1)
    with live_server(settings, library) as server, socket.create_connection(("127.0.0.1", server.port)) as sock:
        head = "POST /api/v1/diagnoses HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n"
        sock.sendall(head.encode())
        started = time.monotonic()
        sock.settimeout(0.2)
        got = b""
        while time.monotonic() - started < 10 and not got:
            try:
                sock.sendall(b"x")
                got = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
        assert got.startswith(b"HTTP/1.1 408"), got[:200]
        assert time.monotonic() - started < 5


def test_an_ordinary_upload_is_not_cut(sqlite_url: str, tmp_path: Path, library: Library) -> None:
    settings = make_settings(sqlite_url, tmp_path, body_seconds=5)
    with live_server(settings, library) as server, server.client() as client:
        r = client.post("/api/v1/diagnoses", content=LOG * 1000, headers={"Content-Type": "text/plain"})
        assert r.status_code == 201, r.text
