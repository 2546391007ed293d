"""Accounts end to end: a sign-in link e-mailed through a real SMTP server (aiosmtpd), followed by an HTTP
client; the session cookie, CSRF on every form, API keys made and revoked on the account page, sign-out."""

from __future__ import annotations

import email
import logging
import re
import secrets
import socket
import time
from collections.abc import Iterator
from email.message import Message
from pathlib import Path

import httpx
import pytest
from aiosmtpd.controller import Controller
from sqlalchemy import text

from app.core.knowledge.loading import Library
from app.web.state import state_of
from tests.conftest import BACKENDS, database_for
from tests.support import SAMPLES, LiveServer, live_server, make_settings

OOM = (SAMPLES / "oom-killed.log").read_bytes()
HTML = {"Accept": "text/html"}


class Inbox:
    """An aiosmtpd handler that keeps every message it receives."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def handle_DATA(self, server: object, session: object, envelope: object) -> str:  # noqa: N802 (aiosmtpd's name)
        self.messages.append(email.message_from_bytes(envelope.content))  # type: ignore[attr-defined]
        return "250 OK"

    def wait(self, count: int) -> Message:
        deadline = time.monotonic() + 10
        while len(self.messages) < count:
            assert time.monotonic() < deadline, "no e-mail arrived"
            time.sleep(0.05)
        return self.messages[count - 1]


@pytest.fixture(scope="module")
def smtp() -> Iterator[tuple[Inbox, int]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield inbox, port
    finally:
        controller.stop()


@pytest.fixture(params=BACKENDS)
def server(
    request: pytest.FixtureRequest, library: Library, tmp_path: Path, smtp: tuple[Inbox, int]
) -> Iterator[LiveServer]:
    settings = make_settings(
        database_for(request.param, request, tmp_path),
        tmp_path,
        smtp_host="127.0.0.1",
        smtp_port=smtp[1],
        smtp_tls="none",
        mail_from="Tracelore <noreply@tracelore.test>",
        secret_key=secrets.token_hex(8),
    )
    with live_server(settings, library) as live:
        yield live


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page
    return found.group(1)


def _sign_in(client: httpx.Client, inbox: Inbox, address: str) -> httpx.Response:
    form = client.get("/account", headers=HTML)
    assert form.status_code == 200 and "E-mail me a sign-in link" in form.text
    seen = len(inbox.messages)
    sent = client.post("/account/sign-in", data={"email": address, "csrf": _csrf(form.text)}, headers=HTML)
    assert sent.status_code == 200 and "Check your e-mail" in sent.text
    message = inbox.wait(seen + 1)
    assert message["To"] == address and "sign-in" in message["Subject"]
    body = message.get_payload(decode=True).decode()  # type: ignore[union-attr]
    link = re.search(r"(http://\S+/account/sign-in/\S+)", body)
    assert link, body
    # Following the link shows a button; only pressing it (a POST of the token in the form) spends the link.
    confirm = client.get(link.group(1), headers=HTML)
    assert confirm.status_code == 200 and "Sign in" in confirm.text
    form = {"csrf": _csrf(confirm.text), "token": link.group(1).rsplit("/", 1)[1]}
    done = client.post("/account/session", data=form, headers=HTML)
    assert done.status_code == 303 and done.headers["location"] == "/account"
    again = client.post("/account/session", data=form, headers=HTML)
    assert again.status_code == 400 and "expired or was already used" in again.text
    return done


def test_magic_link_sign_in_keys_and_sign_out(server: LiveServer, smtp: tuple[Inbox, int]) -> None:
    inbox, _ = smtp
    address = f"ada-{secrets.token_hex(3)}@example.org"
    with server.client() as client:
        assert client.get("/api/v1/quota").json()["tier"] == "anonymous"
        done = _sign_in(client, inbox, address)
        cookie = done.headers["set-cookie"]
        assert "tracelore_session=" in cookie and "HttpOnly" in cookie and "SameSite=lax" in cookie
        page = client.get("/account", headers=HTML).text
        assert address in page and "<strong>verified</strong> tier" in page and "<strong>50</strong> of 50" in page
        quota = client.get("/api/v1/quota").json()
        assert quota["tier"] == "verified" and quota["limit"] == 50 and quota["email"] == address
        assert client.post("/api/v1/diagnoses", content=OOM).headers["x-ratelimit-limit"] == "50"
        assert "verified tier" in client.get("/", headers=HTML).text

        # A key is shown once, then only its prefix.
        created = client.post("/account/keys", data={"name": "GitHub Actions", "csrf": _csrf(page)}, headers=HTML)
        assert created.status_code == 201 and created.headers["cache-control"] == "no-store"
        key = re.search(r'id="new-key-value">(tlk_\w+)<', created.text)
        assert key, created.text
        secret = key.group(1)
        assert 'class="copy" data-copy="new-key-value"' in created.text  # shown once: a copy button beside it
        later = client.get("/account", headers=HTML).text
        assert secret not in later and secret[:12] in later and "GitHub Actions" in later

        with server.client() as ci:  # another client, no cookie: the key alone
            r = ci.post("/api/v1/diagnoses", content=OOM, headers={"Authorization": f"Bearer {secret}"})
            assert r.status_code == 201 and r.headers["x-ratelimit-remaining"] == "48"

        key_id = re.search(r'action="/account/keys/(\w+)/revoke"', later)
        assert key_id
        # Revoking asks first: the button is inside a folded confirmation that says what it does.
        confirm = re.search(r"<summary>Revoke…</summary>\s*<form[^>]*/revoke\">\s*<p>([^<]+)</p>", later)
        assert confirm and "cannot be undone" in confirm.group(1)
        revoked = client.post(f"/account/keys/{key_id.group(1)}/revoke", data={"csrf": _csrf(later)}, headers=HTML)
        assert revoked.status_code == 303
        assert "revoked" in client.get("/account", headers=HTML).text
        with server.client() as ci:
            r = ci.post("/api/v1/diagnoses", content=OOM, headers={"Authorization": f"Bearer {secret}"})
            assert r.status_code == 401

        out = client.post("/account/sign-out", data={"csrf": _csrf(later)}, headers=HTML)
        assert out.status_code == 303
        assert client.get("/api/v1/quota").json()["tier"] == "anonymous"
        assert "E-mail me a sign-in link" in client.get("/account", headers=HTML).text

    with state_of(server.app).engine.connect() as conn:
        tokens = conn.execute(text("SELECT token_hash FROM login_tokens")).scalars().all()
        sessions = conn.execute(text("SELECT token_hash FROM sessions")).scalars().all()
    assert all(len(t) == 64 for t in [*tokens, *sessions])  # only hashes are kept


def test_forms_need_their_csrf_token_and_this_site(server: LiveServer, smtp: tuple[Inbox, int]) -> None:
    inbox, _ = smtp
    before = len(inbox.messages)
    with server.client() as client:
        token = _csrf(client.get("/account", headers=HTML).text)
        missing = client.post("/account/sign-in", data={"email": "a@example.org"}, headers=HTML)
        assert missing.status_code == 403 and "reload the page" in missing.text
        wrong = client.post("/account/sign-in", data={"email": "a@example.org", "csrf": "x" + token}, headers=HTML)
        assert wrong.status_code == 403
        for header in ({"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
            cross = client.post(
                "/account/sign-in", data={"email": "a@example.org", "csrf": token}, headers={**HTML, **header}
            )
            assert cross.status_code == 403 and "another site" in cross.text
            diagnose = client.post("/diagnose", files={"log": (None, OOM.decode())}, headers={**HTML, **header})
            assert diagnose.status_code == 403
        bad = client.post("/account/sign-in", data={"email": "not an address", "csrf": token}, headers=HTML)
        assert bad.status_code == 422 and "does not look like an e-mail address" in bad.text
        # Another browser's token does not work with this browser's cookie.
        with server.client() as other:
            theirs = _csrf(other.get("/account", headers=HTML).text)
        assert client.post("/account/sign-in", data={"email": "a@example.org", "csrf": theirs}).status_code == 403
        # Key forms need a session.
        assert client.post("/account/keys", data={"csrf": token}).status_code == 401
        same = client.post(
            "/account/sign-in",
            data={"email": "b@example.org", "csrf": token},
            headers={**HTML, "Origin": server.url, "Sec-Fetch-Site": "same-origin"},
        )
        assert same.status_code == 200
    assert len(inbox.messages) == before + 1


def test_sign_in_links_are_limited_per_address(server: LiveServer, smtp: tuple[Inbox, int]) -> None:
    address = f"flood-{secrets.token_hex(3)}@example.org"
    with server.client() as client:
        token = _csrf(client.get("/account", headers=HTML).text)
        codes = [client.post("/account/sign-in", data={"email": address, "csrf": token}).status_code for _ in range(6)]
    assert codes == [200] * 5 + [429]


def test_without_smtp_the_link_is_logged(
    library: Library, tmp_path: Path, sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings(sqlite_url, tmp_path)
    with live_server(settings, library) as live, live.client() as client, caplog.at_level(logging.WARNING):
        token = _csrf(client.get("/account", headers=HTML).text)
        sent = client.post("/account/sign-in", data={"email": "local@example.org", "csrf": token}, headers=HTML)
        assert sent.status_code == 200
        logged = [r.getMessage() for r in caplog.records if "sign-in link" in r.getMessage()]
        assert logged and "local@example.org" in logged[0]
        link = re.search(r"(http://\S+/account/sign-in/\S+)", logged[0])
        assert link
        confirm = client.get(link.group(1), headers=HTML)
        form = {"csrf": _csrf(confirm.text), "token": link.group(1).rsplit("/", 1)[1]}
        assert client.post("/account/session", data=form).status_code == 303
        assert client.get("/api/v1/quota").json()["email"] == "local@example.org"


def test_an_unreachable_smtp_server_is_a_clear_503(library: Library, tmp_path: Path, sqlite_url: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = int(s.getsockname()[1])
    settings = make_settings(sqlite_url, tmp_path, smtp_host="127.0.0.1", smtp_port=closed, smtp_tls="none")
    with live_server(settings, library) as live, live.client() as client:
        token = _csrf(client.get("/account", headers=HTML).text)
        r = client.post("/account/sign-in", data={"email": "x@example.org", "csrf": token})
        assert r.status_code == 503 and r.headers["retry-after"] == "60"
        assert "could not be sent" in r.json()["detail"]
