"""Local mode (`make serve`): the person running Tracelore on their own machine meets no daily
allowance and no sign-in, while a shared server keeps its allowances, and local mode cannot be
switched on for a server that others reach (a public address, a trusted proxy, forwarded requests)."""

from __future__ import annotations

import secrets
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from app.cli import main
from app.config import Settings
from app.core.knowledge.loading import Library
from app.web.state import state_of
from tests.support import SAMPLES, live_server, make_settings

OOM = (SAMPLES / "oom-killed.log").read_bytes()
HTML = {"Accept": "text/html"}


@pytest.fixture(autouse=True)
def _environment_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """`tracelore serve` writes its flags to TRACELORE_* for its workers: put them back afterwards."""
    for name in ("HOST", "PORT", "WORKERS", "DATABASE_URL", "LOCAL"):
        # setenv records the variable's state before the test (delenv of an unset one records nothing).
        monkeypatch.setenv(f"TRACELORE_{name}", "")
        monkeypatch.delenv(f"TRACELORE_{name}")


def _settings(sqlite_url: str, tmp_path: Path, **overrides: object) -> Settings:
    # A fresh secret: the anonymous subject of 127.0.0.1 starts the day with nothing used.
    return make_settings(sqlite_url, tmp_path, quota_anonymous=3, secret_key=secrets.token_hex(8), **overrides)


def test_local_mode_serves_its_owner_without_allowance_or_sign_in(
    sqlite_url: str, tmp_path: Path, library: Library
) -> None:
    with live_server(_settings(sqlite_url, tmp_path, local=True), library) as server, server.client() as client:
        # Ten in a row from the API and ten from the page's form, well past the anonymous three.
        for _ in range(10):
            made = client.post("/api/v1/diagnoses", content=OOM)
            assert made.status_code == 201, made.text
        for _ in range(10):
            page = client.post("/diagnose", files={"log": (None, OOM.decode())}, headers=HTML)
            assert page.status_code == 303 and "/d/" in page.headers["location"], page.text[:500]
        quota = client.get("/api/v1/quota").json()
        assert quota["tier"] == "local" and quota["remaining"] > 1_000_000
        assert quota["max_log_bytes"] == state_of(server.app).settings.max_upload_bytes
        home = client.get("/", headers=HTML).text
        assert "Local mode" in home and "Sign in" not in home.split('id="quota"')[1].split("</p>")[0]


def test_a_forwarded_request_is_not_the_owner_even_in_local_mode(
    sqlite_url: str, tmp_path: Path, library: Library
) -> None:
    # A proxy on this machine forwards other people's requests: they carry a forwarding header.
    with live_server(_settings(sqlite_url, tmp_path, local=True), library) as server, server.client() as client:
        forwarded = {"X-Forwarded-For": "203.0.113.9"}
        answers = [client.post("/api/v1/diagnoses", content=OOM, headers=forwarded).status_code for _ in range(4)]
        assert answers == [201, 201, 201, 429]
        assert client.get("/api/v1/quota", headers={"Forwarded": "for=203.0.113.9"}).json()["tier"] == "anonymous"
        assert client.post("/api/v1/diagnoses", content=OOM).status_code == 201  # the owner, straight from here


def test_a_shared_server_keeps_its_allowances(sqlite_url: str, tmp_path: Path, library: Library) -> None:
    with live_server(_settings(sqlite_url, tmp_path), library) as server, server.client() as client:
        answers = [client.post("/api/v1/diagnoses", content=OOM).status_code for _ in range(4)]
        assert answers == [201, 201, 201, 429]
        assert client.get("/api/v1/quota").json()["tier"] == "anonymous"
        assert "Local mode" not in client.get("/", headers=HTML).text


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        ({"host": "0.0.0.0"}, "local mode serves this machine only"),
        ({"host": "192.168.1.20"}, "local mode serves this machine only"),
        ({"forwarded_allow_ips": "127.0.0.1"}, "local mode cannot trust a proxy"),
    ],
)
def test_local_mode_refuses_a_server_others_reach(overrides: dict[str, str], said: str) -> None:
    with pytest.raises(ValidationError, match=said):
        Settings(local=True, **overrides)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_local_mode_binds_loopback_addresses(host: str) -> None:
    assert Settings(local=True, host=host).local


def test_serve_refuses_local_mode_on_a_public_address_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACELORE_HOST", "0.0.0.0")
    result = CliRunner().invoke(main, ["serve", "--local"])
    assert result.exit_code == 2
    assert "TRACELORE_LOCAL=0" in result.output and "Traceback" not in result.output


def test_serve_says_in_one_line_that_the_port_is_busy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACELORE_DATABASE_URL", f"sqlite:///{tmp_path / 'never.sqlite'}")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(main, ["serve", "--local", "--port", str(port)])
    assert result.exit_code == 2
    assert f"port {port} on 127.0.0.1 is in use" in result.output and "--port" in result.output
    assert not (tmp_path / "never.sqlite").exists()  # refused before the database was touched


def test_a_bad_setting_is_one_readable_line_per_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACELORE_PORT", "eighty")
    result = CliRunner().invoke(main, ["serve"])
    assert result.exit_code == 2
    assert "TRACELORE_PORT: Input should be a valid integer" in result.output and "Traceback" not in result.output
