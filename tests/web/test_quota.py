"""Daily allowances on a real server, on SQLite and PostgreSQL: headers, 429, what is and is not counted,
day rollover (through the app's clock), tiers, API keys and their revocation, and the admin commands."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from app.cli import main
from app.core.knowledge.loading import Library
from app.web.state import state_of
from tests.conftest import BACKENDS, database_for
from tests.support import SAMPLES, LiveServer, live_server, make_settings

OOM = (SAMPLES / "oom-killed.log").read_bytes()
DAY = datetime(2026, 11, 30, 21, 0, tzinfo=UTC)


class Clock:
    """The server's clock, moved by the test."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(params=BACKENDS)
def server(
    request: pytest.FixtureRequest, library: Library, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LiveServer]:
    url = database_for(request.param, request, tmp_path)
    # A fresh secret per test: the anonymous subject (127.0.0.1, hashed) is new even on the shared database.
    settings = make_settings(
        url,
        tmp_path,
        quota_anonymous=3,
        max_log_anonymous=64 << 10,
        secret_key=secrets.token_hex(8),
        max_upload_bytes=1 << 20,
    )
    monkeypatch.setenv("TRACELORE_DATABASE_URL", url)  # for the admin commands
    with live_server(settings, library) as live:
        state_of(live.app).clock = Clock(DAY)
        yield live


def _admin(*args: str) -> str:
    result = CliRunner().invoke(main, ["admin", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_anonymous_allowance_headers_and_429(server: LiveServer) -> None:
    with server.client() as client:
        before = server.count()
        for left in (2, 1, 0):
            r = client.post("/api/v1/diagnoses", content=OOM)
            assert r.status_code == 201
            assert r.headers["ratelimit-policy"] == '"daily";q=3;w=86400'
            assert r.headers["ratelimit"] == f'"daily";r={left};t=10800'
            assert r.headers["x-ratelimit-limit"] == "3"
            assert r.headers["x-ratelimit-remaining"] == str(left)
            assert r.headers["x-ratelimit-reset"] == str(int(datetime(2026, 12, 1, tzinfo=UTC).timestamp()))
        spent = client.post("/api/v1/diagnoses", content=OOM)
        assert spent.status_code == 429
        assert spent.headers["content-type"] == "application/problem+json"
        assert spent.headers["retry-after"] == "10800"
        assert spent.headers["x-ratelimit-remaining"] == "0"
        problem = spent.json()
        assert problem["type"] == "/problems/quota-spent" and problem["violated-policies"] == ["daily"]
        assert problem["next_tier"] == {"name": "verified", "limit": 50, "how": problem["next_tier"]["how"]}
        assert (
            "midnight UTC (2026-12-01 00:00 UTC, in 3 h 0 min)" in problem["detail"] and "50 a day" in problem["detail"]
        )
        assert problem["quota"]["reset"] == "2026-12-01T00:00:00Z"  # the machine-readable time stays ISO
        assert "sign in at /account" in problem["detail"]
        # The page form is refused the same way, and says so on the page.
        page = client.post("/diagnose", files={"log": (None, OOM.decode())}, headers={"Accept": "text/html"})
        assert page.status_code == 429 and "50 a day" in page.text and page.headers["retry-after"] == "10800"
        assert server.count() == before + 3
        quota = client.get("/api/v1/quota").json()
        assert quota | {"reset_in_seconds": 0} == {
            "tier": "anonymous",
            "limit": 3,
            "used": 3,
            "remaining": 0,
            "reset": "2026-12-01T00:00:00Z",
            "reset_in_seconds": 0,
            "max_log_bytes": 64 << 10,
            "subject": "anonymous",
            "email": None,
            "next_tier": quota["next_tier"],
        }


def test_rejections_are_not_counted_and_failures_are_given_back(server: LiveServer) -> None:
    with server.client() as client:
        too_large = client.post("/api/v1/diagnoses", content=b"x\n" * (40 << 10))
        assert too_large.status_code == 413 and "x-ratelimit-limit" not in too_large.headers
        wrong_type = client.post("/api/v1/diagnoses", content=b"a", headers={"Content-Type": "image/png"})
        assert wrong_type.status_code == 415
        empty = client.post("/api/v1/diagnoses", content=b"")
        assert empty.status_code in (400, 422)
        # Binary data is found only once the diagnosis runs, after the count: the count is given back.
        binary = client.post("/api/v1/diagnoses", content=bytes(range(256)) * 64)
        assert binary.status_code == 415
        assert binary.json()["charged"] is False and "not counted" in binary.json()["detail"]
        assert binary.headers["x-ratelimit-remaining"] == "3"
        assert client.get("/api/v1/quota").json()["used"] == 0
        for _ in range(3):
            assert client.post("/api/v1/diagnoses?store=false", content=OOM).status_code == 200
        assert client.post("/api/v1/diagnoses", content=OOM).status_code == 429


def test_the_allowance_starts_again_at_utc_midnight(server: LiveServer) -> None:
    clock: Clock = state_of(server.app).clock
    clock.now = datetime(2026, 11, 30, 23, 59, 30, tzinfo=UTC)
    with server.client() as client:
        for _ in range(3):
            assert client.post("/api/v1/diagnoses", content=OOM).status_code == 201
        spent = client.post("/api/v1/diagnoses", content=OOM)
        assert spent.status_code == 429 and spent.headers["retry-after"] == "30"
        clock.now = datetime(2026, 12, 1, 0, 0, 1, tzinfo=UTC)
        fresh = client.post("/api/v1/diagnoses", content=OOM)
        assert fresh.status_code == 201 and fresh.headers["x-ratelimit-remaining"] == "2"
        assert fresh.headers["ratelimit"] == '"daily";r=2;t=86399'
    usage = _admin("usage", "--days", "3650")
    assert "2026-11-30" in usage and "2026-12-01" in usage and "anonymous" in usage


def test_home_page_shows_what_is_left(server: LiveServer) -> None:
    with server.client() as client:
        html = {"Accept": "text/html"}
        first = client.get("/", headers=html).text
        assert "<strong>3</strong> of 3 diagnoses left" in first and "up to 64 KiB" in first
        created = client.post("/diagnose", files={"log": (None, OOM.decode())}, headers=html)
        assert created.status_code == 303 and created.headers["x-ratelimit-remaining"] == "2"
        home = client.get("/", headers=html).text
        assert "<strong>2</strong> of 3 diagnoses left" in home and "verified tier</a>" in home


def test_api_keys_tiers_and_revocation(server: LiveServer) -> None:
    email = f"ci-{secrets.token_hex(4)}@example.org"
    key = _admin("create-key", email, "--name", "GitHub Actions").strip()
    assert key.startswith("tlk_") and len(key) == 40
    bearer = {"Authorization": f"Bearer {key}"}
    with server.client() as client:
        r = client.post("/api/v1/diagnoses", content=OOM, headers=bearer)
        assert r.status_code == 201 and r.headers["x-ratelimit-limit"] == "10"
        assert r.headers["x-ratelimit-remaining"] == "9"
        quota = client.get("/api/v1/quota", headers=bearer).json()
        assert quota["tier"] == "free" and quota["email"] == email and quota["next_tier"]["name"] == "verified"
        # The anonymous allowance of the same address is untouched.
        assert client.get("/api/v1/quota").json()["used"] == 0

        assert "pro tier" in _admin("set-tier", email, "pro")
        r = client.post("/api/v1/diagnoses", content=OOM, headers=bearer)
        assert r.headers["x-ratelimit-limit"] == "5000" and r.headers["x-ratelimit-remaining"] == "4998"
        assert client.get("/api/v1/quota", headers=bearer).json()["next_tier"] is None

        with state_of(server.app).engine.connect() as conn:
            stored = conn.execute(text("SELECT prefix, key_hash, last_used_at FROM api_keys")).all()
        mine = [row for row in stored if row.prefix == key[:12]]
        assert len(mine) == 1 and mine[0].last_used_at is not None
        assert all(key not in str(value) for row in stored for value in row)

        assert "revoked" in _admin("revoke-key", key[:12])
        refused = client.post("/api/v1/diagnoses", content=OOM, headers=bearer)
        assert refused.status_code == 401 and refused.headers["content-type"] == "application/problem+json"
        assert 'error="invalid_token"' in refused.headers["www-authenticate"]
        assert client.get("/api/v1/quota", headers=bearer).status_code == 401


def test_bad_credentials_are_clear_errors(server: LiveServer) -> None:
    with server.client() as client:
        in_url = client.post("/api/v1/diagnoses?api_key=tlk_abc", content=OOM)
        assert in_url.status_code == 400 and "Authorization header" in in_url.json()["detail"]
        basic = client.post("/api/v1/diagnoses", content=OOM, headers={"Authorization": "Basic dXNlcjpwdw=="})
        assert basic.status_code == 401 and basic.headers["www-authenticate"].startswith("Bearer")
        unknown = client.get("/api/v1/quota", headers={"Authorization": "Bearer tlk_" + "a" * 36})
        assert unknown.status_code == 401
        empty = client.get("/api/v1/quota", headers={"Authorization": "Bearer"})
        assert empty.status_code == 401
        assert client.get("/api/v1/quota").json()["used"] == 0


def test_admin_commands_explain_mistakes(server: LiveServer) -> None:
    result = CliRunner().invoke(main, ["admin", "revoke-key", "tlk_nothing"])
    assert result.exit_code == 2 and "no single API key" in result.output
    result = CliRunner().invoke(main, ["admin", "set-tier", "someone@example.org", "emperor"])
    assert result.exit_code == 2
    assert server.url  # the server's database is the one the commands use


def test_a_day_later_the_counts_of_yesterday_are_kept(server: LiveServer) -> None:
    clock: Clock = state_of(server.app).clock
    with server.client() as client:
        assert client.post("/api/v1/diagnoses", content=OOM).status_code == 201
        clock.now += timedelta(days=1)
        assert client.get("/api/v1/quota").json()["used"] == 0
        clock.now -= timedelta(days=1)
        assert client.get("/api/v1/quota").json()["used"] == 1


def test_the_cli_uses_an_api_key_against_a_running_server(server: LiveServer, signatures_dir: Path) -> None:
    email = f"cli-{secrets.token_hex(4)}@example.org"
    key = _admin("create-key", email).strip()
    _admin("set-tier", email, "free")
    log = str(SAMPLES / "oom-killed.log")
    common = ["diagnose", log, "--server", server.url, "--signatures", str(signatures_dir), "--format", "json"]

    def cli(*extra: str) -> tuple[int, str, str]:
        result = CliRunner().invoke(main, [*common, *extra])
        return result.exit_code, result.stdout, result.stderr

    code, out, err = cli("--api-key", key)
    assert code == 1, err  # a failure was identified
    with server.client() as client:
        quota = client.get("/api/v1/quota", headers={"Authorization": f"Bearer {key}"}).json()
    assert quota["email"] == email and quota["used"] == 1
    # The allowance of the account, not of the address, was spent.
    with server.client() as client:
        assert client.get("/api/v1/quota").json()["used"] == 0

    _admin("revoke-key", key)
    code, _, err = cli("--api-key", key)
    assert code == 2 and "revoked" in err


def test_without_a_database_pages_still_render_and_the_api_says_503(library: Library, tmp_path: Path) -> None:
    settings = make_settings("postgresql+psycopg://nobody@127.0.0.1:1/none", tmp_path)
    with live_server(settings, library) as live, live.client() as client:
        home = client.get("/", headers={"Accept": "text/html"})
        assert home.status_code == 200 and "diagnoses left" not in home.text
        quota = client.get("/api/v1/quota")
        assert quota.status_code == 503 and quota.headers["retry-after"] == "5"
        assert client.post("/api/v1/diagnoses", content=OOM).status_code == 503
