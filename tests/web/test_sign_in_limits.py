"""Sign-in e-mail cannot be used to flood inboxes or multiply accounts: links are limited per address,
per client and for the whole server, and addresses whose provider ignores dots and plus tags are one
account. A real server (SQLite and PostgreSQL) and a real SMTP server (aiosmtpd)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from app.core.knowledge.loading import Library
from app.store.accounts import canonical_email
from app.web.accounts import _to_next_hour
from app.web.state import state_of
from tests.conftest import BACKENDS, database_for
from tests.support import LiveServer, live_server, make_settings
from tests.web.test_accounts import HTML, Inbox, _csrf, _sign_in, smtp  # noqa: F401 (smtp is a fixture)

PER_CLIENT = 4
PER_HOUR = 6


@pytest.fixture(params=BACKENDS)
def server(
    request: pytest.FixtureRequest,
    library: Library,
    tmp_path: Path,
    smtp: tuple[Inbox, int],  # noqa: F811 (the fixture)
) -> Iterator[LiveServer]:
    settings = make_settings(
        database_for(request.param, request, tmp_path),
        tmp_path,
        smtp_host="127.0.0.1",
        smtp_port=smtp[1],
        smtp_tls="none",
        secret_key=secrets.token_hex(8),  # new client hashes and counters on the shared database
        sign_in_mail_per_client=PER_CLIENT,
        sign_in_mail_per_hour=PER_HOUR,
    )
    _clear_of_the_hours_turn()
    with live_server(settings, library) as live:
        # The service-wide count is shared by every test on the session's PostgreSQL database.
        with state_of(live.app).engine.begin() as conn:
            conn.execute(text("DELETE FROM quota_usage WHERE subject LIKE 'mail:all:%'"))
        yield live


def _clear_of_the_hours_turn(margin: int = 60) -> None:
    """Wait for the next UTC hour when it is less than `margin` seconds away: the counters are hourly, so
    requests on both sides of the turn would be counted apart and a limit would look unenforced."""
    if (left := _to_next_hour(datetime.now(UTC))) < margin:
        time.sleep(left + 1)


def _ask(client: httpx.Client, address: str, client_ip: str) -> httpx.Response:
    # The test server trusts X-Forwarded-For from 127.0.0.1 (uvicorn's default), so each
    # address stands for another client.
    headers = {**HTML, "X-Forwarded-For": client_ip}
    token = _csrf(client.get("/account", headers=headers).text)
    return client.post("/account/sign-in", data={"email": address, "csrf": token}, headers=headers)


def test_links_are_limited_per_client(server: LiveServer, smtp: tuple[Inbox, int]) -> None:  # noqa: F811
    inbox, _ = smtp
    before = len(inbox.messages)
    tag = secrets.token_hex(3)
    with server.client() as client:
        codes = [
            _ask(client, f"victim{i}-{tag}@example.org", "198.51.100.7").status_code for i in range(PER_CLIENT + 2)
        ]
        refused = _ask(client, f"one-more-{tag}@example.org", "198.51.100.7")
        other_client = _ask(client, f"someone-{tag}@example.org", "198.51.100.8")
    assert codes == [200] * PER_CLIENT + [429, 429]
    assert refused.status_code == 429 and "from this address of yours" in refused.text
    assert "retry-after" in refused.headers
    assert other_client.status_code == 200
    assert len(inbox.messages) == before + PER_CLIENT + 1


def test_links_are_limited_for_the_whole_server(server: LiveServer, smtp: tuple[Inbox, int]) -> None:  # noqa: F811
    inbox, _ = smtp
    before = len(inbox.messages)
    tag = secrets.token_hex(3)
    with server.client() as client:
        codes = [_ask(client, f"u{i}-{tag}@example.org", f"203.0.113.{i}").status_code for i in range(PER_HOUR + 2)]
        last = _ask(client, f"late-{tag}@example.org", "203.0.113.99")
    assert codes == [200] * PER_HOUR + [503, 503]
    assert last.status_code == 503 and "too many sign-in e-mails" in last.text and "retry-after" in last.headers
    assert len(inbox.messages) == before + PER_HOUR


@pytest.mark.parametrize(
    ("typed", "canonical"),
    [
        ("S.Ame+ci@gmail.com", "same@gmail.com"),
        ("s.a.m.e@googlemail.com", "same@gmail.com"),
        ("same+x@outlook.com", "same@outlook.com"),
        ("s.ame+x@example.org", "s.ame+x@example.org"),  # an unknown provider may treat both as different
        ("  Ada@Example.ORG ", "ada@example.org"),
    ],
)
def test_canonical_addresses(typed: str, canonical: str) -> None:
    assert canonical_email(typed) == canonical


def test_dots_and_plus_tags_are_one_account(server: LiveServer, smtp: tuple[Inbox, int]) -> None:  # noqa: F811
    inbox, _ = smtp
    name = f"sam{secrets.token_hex(3)}"
    dotted = f"{name[0]}.{name[1:]}+ci@gmail.com"
    with server.client() as first, server.client() as second:
        _sign_in(first, inbox, dotted)  # the mail goes to the address as typed
        _sign_in(second, inbox, f"{name}@googlemail.com")
        one = first.get("/api/v1/quota").json()
        two = second.get("/api/v1/quota").json()
    assert one["email"] == two["email"] == f"{name}@gmail.com"
    assert one["tier"] == "verified" and one["used"] == two["used"]
    with state_of(server.app).sessionmaker() as session:
        rows = session.execute(text("SELECT email FROM accounts WHERE email LIKE :p"), {"p": f"%{name[1:]}%"}).all()
    assert [r[0] for r in rows] == [f"{name}@gmail.com"]


def test_the_per_address_limit_counts_every_spelling(server: LiveServer) -> None:
    name = f"flood{secrets.token_hex(3)}"
    spellings = [f"{name}+{i}@gmail.com" if i % 2 else f"{name[:2]}.{name[2:]}+{i}@gmail.com" for i in range(6)]
    with server.client() as client:
        codes = [_ask(client, address, f"192.0.2.{i}").status_code for i, address in enumerate(spellings)]
    assert codes == [200] * 5 + [429]
