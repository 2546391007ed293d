"""Session cookies and CSRF tokens signed by itsdangerous: the newest key signs, every listed key verifies,
cookies expire with the session lifetime, and cookies of the earlier format sign nobody in and break nothing."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from itsdangerous import BadSignature, TimestampSigner

from app.core.knowledge.loading import Library
from app.store import accounts
from app.web.identity import CSRF_COOKIE, SESSION_COOKIE, csrf_signer, session_cookie, session_signer
from app.web.state import state_of
from tests.conftest import BACKENDS, database_for
from tests.support import SAMPLES, LiveServer, live_server, make_settings

OOM = (SAMPLES / "oom-killed.log").read_bytes()
HTML = {"Accept": "text/html"}
OLD, NEW, UNKNOWN = b"key-of-last-year", b"key-of-this-year", b"key-never-configured"
SESSION_DAYS = 7


@pytest.fixture(params=BACKENDS)
def server(request: pytest.FixtureRequest, library: Library, tmp_path: Path) -> Iterator[LiveServer]:
    settings = make_settings(
        database_for(request.param, request, tmp_path),
        tmp_path,
        secret_key=NEW.decode(),
        previous_secret_keys=OLD.decode(),  # as TRACELORE_PREVIOUS_SECRET_KEYS gives it
        session_days=SESSION_DAYS,
    )
    with live_server(settings, library) as live:
        yield live


def _session_token(server: LiveServer) -> tuple[str, str]:
    """A live session of a new account: (its token, the account's e-mail)."""
    address = f"grace-{secrets.token_hex(3)}@example.org"
    now = accounts.utcnow()
    with state_of(server.app).sessionmaker.begin() as session:
        account = accounts.ensure_account(session, address, now=now)
        token = accounts.create_session(session, account.id, now=now, lifetime=timedelta(days=SESSION_DAYS))
    return token, address


def _earlier_format(key: bytes, value: str, purpose: str) -> str:
    """A value signed as Tracelore signed cookies before itsdangerous: value.base64(HMAC-SHA256[:18])."""
    mac = hmac.new(key, f"{purpose}:{value}".encode(), hashlib.sha256).digest()[:18]
    return f"{value}.{base64.urlsafe_b64encode(mac).decode()}"


def _tier(client: httpx.Client, cookie: str) -> str:
    client.cookies.set(SESSION_COOKIE, cookie)
    quota = client.get("/api/v1/quota")
    assert quota.status_code == 200
    return str(quota.json()["tier"])


def test_the_newest_key_signs_and_every_listed_key_verifies() -> None:
    cookie = session_cookie([OLD, NEW], "a-session-token")
    assert session_signer([NEW]).unsign(cookie) == b"a-session-token"
    with pytest.raises(BadSignature):
        session_signer([OLD]).unsign(cookie)
    assert session_signer([UNKNOWN, OLD, NEW]).unsign(session_cookie([OLD], "t")) == b"t"
    # A CSRF signature is not a session signature: the salts keep the purposes apart.
    seed = "a-csrf-seed"
    with pytest.raises(BadSignature):
        session_signer([NEW]).unsign(f"{seed}.{csrf_signer([NEW]).get_signature(seed).decode()}")


def test_cookies_signed_with_the_current_or_a_previous_key_sign_in(server: LiveServer) -> None:
    token, address = _session_token(server)
    with server.client() as client:
        assert _tier(client, session_cookie([NEW], token)) == "free"
        assert _tier(client, session_cookie([OLD], token)) == "free"  # signed before the rotation
        assert address in client.get("/account", headers=HTML).text
        assert _tier(client, session_cookie([UNKNOWN], token)) == "anonymous"


def test_a_cookie_older_than_the_session_lifetime_signs_nobody_in(server: LiveServer) -> None:
    token, _ = _session_token(server)  # the session row is alive: only the cookie's own age refuses it

    class SignedLongAgo(TimestampSigner):
        def get_timestamp(self) -> int:
            return int(time.time()) - SESSION_DAYS * 86400 - 60

    stale = SignedLongAgo([NEW], salt=session_signer([NEW]).salt, key_derivation="hmac", digest_method=hashlib.sha256)
    with server.client() as client:
        assert _tier(client, stale.sign(token).decode()) == "anonymous"


def test_a_cookie_of_the_earlier_format_is_a_signed_out_browser_not_an_error(server: LiveServer) -> None:
    token, _ = _session_token(server)
    with server.client() as client:
        for key in (NEW, OLD):
            client.cookies.set(SESSION_COOKIE, _earlier_format(key, token, "session"))
            assert client.get("/api/v1/quota").json()["tier"] == "anonymous"
            page = client.get("/account", headers=HTML)
            assert page.status_code == 200 and "E-mail me a sign-in link" in page.text
            assert client.get("/", headers=HTML).status_code == 200
            created = client.post("/api/v1/diagnoses", content=OOM)
            assert created.status_code == 201 and created.headers["x-ratelimit-limit"] == "100000"
        client.cookies.clear()
        for junk in (b"", b".", b"..", b"x" * 600, b"a.b.c", "é.é".encode(), b"\xff.\xfe"):
            quota = client.get("/api/v1/quota", headers={"Cookie": f"{SESSION_COOKIE}=".encode() + junk})
            assert quota.status_code == 200 and quota.json()["tier"] == "anonymous"
        # A form left open across the upgrade carries a token of the earlier format: reload, not a 500.
        client.get("/account", headers=HTML)
        seed = client.cookies[CSRF_COOKIE]
        stale_form = {"csrf": _earlier_format(NEW, seed, "csrf").rpartition(".")[2]}
        refused = client.post("/account/sign-out", data=stale_form, headers=HTML)
        assert refused.status_code == 403 and "reload the page" in refused.text


def test_forms_signed_with_a_previous_key_are_accepted_and_unknown_keys_refused(server: LiveServer) -> None:
    with server.client() as client:
        client.get("/account", headers=HTML)
        seed = client.cookies[CSRF_COOKIE]
        for key, status in ((OLD, 303), (NEW, 303), (UNKNOWN, 403)):
            form = {"csrf": csrf_signer([key]).get_signature(seed).decode()}
            assert client.post("/account/sign-out", data=form, headers=HTML).status_code == status
