"""Privacy on a real server: secrets never stored or shown, owners delete, headers, escaping, purge."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import httpx
import pytest
from sqlalchemy import text

from app.core.knowledge.loading import Library
from app.core.stored import StoredDiagnosis
from app.jobs.retention import purge_once
from app.store.db import make_engine, make_sessionmaker
from app.store.diagnoses import count_diagnoses, save_diagnosis
from app.web.retention import purge_periodically
from app.web.security import docs_csp
from app.web.state import state_of
from tests.support import LiveServer, live_server, make_settings

HTML = {"Accept": "text/html,application/xhtml+xml"}
OOM = (
    "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
    "GPU 0 has a total capacity of 79.15 GiB of which 1.23 GiB is free.\n"
)
# One of each kind, in the contexts logs put them: env dumps, URLs, JSON, .netrc, headers, PEM.
SECRETS = {
    "AKIAZ7Q4R2VXYLM3NP5K": "export AWS_ACCESS_KEY_ID=AKIAZ7Q4R2VXYLM3NP5K",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY": "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567": "HF_TOKEN=hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567",
    "Sup3rS3cret!": "mlflow.exceptions: postgresql://mlops:Sup3rS3cret!@db.example.com:5432/runs",
    "0123456789abcdef0123456789abcdef01234567": "machine api.wandb.ai login user password 0123456789abcdef0123456789abcdef01234567",
    "ghp_R8e4Xf2LqP9mZ7wN3bV6cT1yK5hJ0aD4sG2u": "git clone https://ghp_R8e4Xf2LqP9mZ7wN3bV6cT1yK5hJ0aD4sG2u@github.com/o/r",
    "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx": '{"slack": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"}',
    "eyJzdWIiOiIxMjM0NTY3ODkwIn0": "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abc123",
    "alice.smith@example.com": "submitted by alice.smith@example.com",
    "MIIEpAIBAAKCAQEAx4TqQzvB8p2mQ5": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAx4TqQzvB8p2mQ5\n-----END RSA PRIVATE KEY-----",
    "10.42.0.17": "NCCL INFO NET/Socket : Using [0]eth0:10.42.0.17<0>",
    "hunter22": "mysql --user=root --password=hunter22",
}
LOG = ("\n".join(SECRETS.values()) + "\n" + OOM).encode()


def _leaks(*texts: str) -> list[str]:
    return [value for value in SECRETS if any(value in t for t in texts)]


def test_secrets_are_gone_from_the_response_windows_page_and_database(live: LiveServer, client: httpx.Client) -> None:
    r = client.post("/api/v1/diagnoses", content=LOG, headers={"Content-Type": "text/plain"})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["candidates"][0]["id"] == "cuda.oom"
    # Counted in what is kept: the context lines before the evidence (the rest of the log is not kept).
    assert body["redactions"] == {"ipv4": 1, "password": 1, "private-key": 1}
    windows = client.get(f"/api/v1/diagnoses/{body['id']}/windows")
    page = client.get(f"/d/{body['id']}", headers=HTML)
    assert "[REDACTED:password]" in windows.text
    assert "1 × private-key" in page.text and "never kept" in page.text
    with state_of(live.app).engine.connect() as conn:
        dump = [str(v) for row in conn.execute(text("SELECT * FROM diagnoses")) for v in row]
    assert _leaks(r.text, windows.text, page.text, *dump) == []


def test_a_kept_whole_log_is_redacted(sqlite_url: str, tmp_path: Path, library: Library) -> None:
    settings = make_settings(sqlite_url, tmp_path, store_log=True)
    with live_server(settings, library) as server, server.client() as client:
        r = client.post("/api/v1/diagnoses", content=LOG, headers={"Content-Type": "text/plain"})
        assert r.status_code == 201
        kept = client.get(f"/api/v1/diagnoses/{r.json()['id']}/log").text
    assert _leaks(kept) == []
    assert kept.count("\n") == LOG.count(b"\n")  # line structure kept
    assert "[REDACTED:private-key]" in kept and "[REDACTED:aws-access-key]" in kept
    assert r.json()["redactions"]["private-key"] == 1


def test_the_maker_deletes_with_the_token_others_cannot(live: LiveServer, client: httpx.Client) -> None:
    r = client.post("/api/v1/diagnoses", content=OOM.encode(), headers={"Content-Type": "text/plain"})
    assert r.status_code == 201
    token, url = r.headers["X-Delete-Token"], f"/api/v1/diagnoses/{r.json()['id']}"
    assert token.startswith("tld_") and token not in client.get(url).text
    for headers in ({}, {"X-Delete-Token": "tld_wrong"}):
        refused = client.delete(url, headers=headers)
        assert refused.status_code == 403 and refused.headers["content-type"] == "application/problem+json"
    assert client.get(url).status_code == 200
    assert client.delete(url, headers={"X-Delete-Token": token}).status_code == 204
    assert client.get(url).status_code == 404
    assert client.delete(url, headers={"X-Delete-Token": token}).status_code == 404
    with state_of(live.app).engine.connect() as conn:
        stored = conn.execute(text("SELECT delete_token_hash FROM diagnoses")).scalars().all()
    assert token not in stored  # only hashes


def test_store_false_returns_no_token(client: httpx.Client) -> None:
    r = client.post("/api/v1/diagnoses?store=false", content=OOM.encode(), headers={"Content-Type": "text/plain"})
    assert r.status_code == 200 and "X-Delete-Token" not in r.headers


def test_the_browser_that_made_a_diagnosis_deletes_it_from_its_page(live: LiveServer) -> None:
    with live.client() as maker, live.client() as stranger:
        files = {"log": (None, OOM), "file": ("", b"", "application/octet-stream")}
        made = maker.post("/diagnose", files=files, headers=HTML, follow_redirects=False)
        assert made.status_code == 303, made.text
        page_url = made.headers["location"]
        page = maker.get(page_url, headers=HTML)
        assert "Delete this diagnosis" in page.text
        refused = stranger.post(page_url + "/delete", headers=HTML)
        assert refused.status_code == 403
        done = maker.post(page_url + "/delete", headers=HTML)
        assert done.status_code == 200 and "Diagnosis deleted" in done.text
        assert maker.get(page_url, headers=HTML).status_code == 404


def test_the_privacy_page_says_what_is_kept_and_for_how_long(client: httpx.Client) -> None:
    page = client.get("/privacy", headers=HTML)
    assert page.status_code == 200
    assert "30 days" in page.text and "[REDACTED:aws-access-key]" in page.text and "X-Delete-Token" in page.text


def test_a_log_with_markup_renders_as_text(client: httpx.Client) -> None:
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    log = f"[rank0]: torch.OutOfMemoryError: CUDA out of memory. {hostile} Tried to allocate 2.00 GiB.\n"
    r = client.post("/api/v1/diagnoses", content=log.encode(), headers={"Content-Type": "text/plain"})
    assert r.status_code == 201
    html = client.get(f"/d/{r.json()['id']}", headers=HTML).text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    assert "<script>alert" not in html and "<img src=x" not in html


def test_pages_carry_security_headers(client: httpx.Client) -> None:
    for path in ["/", "/privacy", "/api/v1/signatures", "/static/tracelore.css"]:
        r = client.get(path, headers=HTML)
        assert r.headers["x-content-type-options"] == "nosniff", path
        assert r.headers["referrer-policy"] == "same-origin"
        assert r.headers["x-frame-options"] == "DENY"
        csp = r.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "script-src 'self';" in csp and "unsafe-inline" not in csp
    docs = client.get("/docs")
    assert docs.status_code == 200
    script_src = docs.headers["content-security-policy"].split("script-src ")[1].split(";")[0]
    assert "'sha256-" in script_src and "unsafe-inline" not in script_src
    assert docs.headers["content-security-policy"] == docs_csp(docs.content)


def test_expired_diagnoses_are_purged_periodically(sqlite_url: str, tmp_path: Path, library: Library) -> None:
    settings = make_settings(sqlite_url, tmp_path, retention_days=1)
    engine = make_engine(sqlite_url)
    sessions = make_sessionmaker(engine)
    with live_server(settings, library) as server, server.client() as client:
        diagnosis = client.post("/api/v1/diagnoses?store=false", content=OOM.encode()).json()
    from app.core.models import Diagnosis

    with sessions.begin() as session:
        for age in (0, 3):
            save_diagnosis(
                session,
                StoredDiagnosis.keeping(
                    Diagnosis.model_validate(diagnosis), windows=[], input_bytes=1, input_sha256="0" * 64
                ),
                subject="anonymous",
                tier="anonymous",
                created_at=datetime.now(UTC) - timedelta(days=age),
            )

    async def run() -> None:
        with anyio.move_on_after(20):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(lambda: purge_periodically(sessions, settings, every=0.05))
                while True:
                    with sessions.begin() as session:
                        if count_diagnoses(session) == 1:
                            tasks.cancel_scope.cancel()
                            return
                    await anyio.sleep(0.05)

    anyio.run(run)
    with sessions.begin() as session:
        assert count_diagnoses(session) == 1
    assert purge_once(sessions, settings, now=datetime.now(UTC) + timedelta(days=2)).diagnoses == 1
    engine.dispose()


@pytest.mark.parametrize("days", [0])
def test_retention_zero_keeps_forever(sqlite_url: str, tmp_path: Path, days: int) -> None:
    engine = make_engine(sqlite_url)
    settings = make_settings(sqlite_url, tmp_path, retention_days=days)
    assert purge_once(make_sessionmaker(engine), settings, now=datetime.now(UTC) + timedelta(days=9999)).diagnoses == 0
    engine.dispose()


def test_gzip_of_secrets_is_redacted_too(client: httpx.Client) -> None:
    r = client.post("/api/v1/diagnoses", content=gzip.compress(LOG), headers={"Content-Type": "application/gzip"})
    assert r.status_code == 201 and _leaks(r.text) == []


def test_tracelore_purge(sqlite_url: str, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from app.cli import main
    from app.core.models import Diagnosis, InputInfo

    engine = make_engine(sqlite_url)
    with make_sessionmaker(engine).begin() as session:
        for age in (0, 40):
            save_diagnosis(
                session,
                StoredDiagnosis.keeping(
                    Diagnosis(library_version="x", input=InputInfo(bytes=1, lines=1), candidates=[], unexplained=[]),
                    windows=[],
                    input_bytes=1,
                    input_sha256="0" * 64,
                ),
                subject="anonymous",
                tier="anonymous",
                created_at=datetime.now(UTC) - timedelta(days=age),
            )
    env = {"TRACELORE_DATABASE_URL": sqlite_url, "TRACELORE_DATA_DIR": str(tmp_path)}
    result = CliRunner().invoke(main, ["purge"], env=env)
    assert result.exit_code == 0 and "purged 1 diagnoses older than 30 days" in result.output
    result = CliRunner().invoke(main, ["purge", "--days", "1"], env=env)
    assert result.exit_code == 0 and "purged 0" in result.output
    with make_sessionmaker(engine).begin() as session:
        assert count_diagnoses(session) == 1
    engine.dispose()


def test_tracelore_purge_keeps_diagnoses_forever_but_not_old_counters(sqlite_url: str, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from app.cli import main
    from app.quota import counters

    engine = make_engine(sqlite_url)
    today = datetime.now(UTC).date()
    with make_sessionmaker(engine).begin() as session:
        for age in (0, 30):
            counters.consume(
                session, subject="anonymous:purge", tier="anonymous", day=today - timedelta(days=age), limit=9
            )
    env = {"TRACELORE_DATABASE_URL": sqlite_url, "TRACELORE_DATA_DIR": str(tmp_path), "TRACELORE_RETENTION_DAYS": "0"}
    result = CliRunner().invoke(main, ["purge"], env=env)
    assert result.exit_code == 0, result.output
    assert "no diagnosis purged" in result.output and "purged 1 quota counters older than 7 days" in result.output
    with make_sessionmaker(engine).begin() as session:
        assert counters.used(session, subject="anonymous:purge", day=today) == 1
        assert counters.used(session, subject="anonymous:purge", day=today - timedelta(days=30)) == 0
    engine.dispose()


def test_network_redaction_can_be_switched_off(sqlite_url: str, tmp_path: Path, library: Library) -> None:
    log = b"NCCL INFO connect to 10.42.0.17:29500 on gpu-7.cluster.local password=hunter22\n" + OOM.encode()
    settings = make_settings(sqlite_url, tmp_path, redact_network=False)
    with live_server(settings, library) as server, server.client() as client:
        r = client.post("/api/v1/diagnoses", content=log, headers={"Content-Type": "text/plain"})
        windows = client.get(f"/api/v1/diagnoses/{r.json()['id']}/windows").text
    assert "10.42.0.17" in windows and "gpu-7.cluster.local" in windows and "hunter22" not in windows
    assert r.json()["redactions"] == {"password": 1}


def test_an_account_deletes_its_own_diagnoses_without_a_token(live: LiveServer, client: httpx.Client) -> None:
    from click.testing import CliRunner

    from app.cli import main

    env = {"TRACELORE_DATABASE_URL": state_of(live.app).settings.database_url}
    keys = []
    for who in ("owner", "other"):
        result = CliRunner().invoke(main, ["admin", "create-key", f"{who}-{live.port}@example.org"], env=env)
        assert result.exit_code == 0, result.output
        keys.append({"Authorization": f"Bearer {result.stdout.strip()}"})
    owner, other = keys
    r = client.post("/api/v1/diagnoses", content=OOM.encode(), headers={**owner, "Content-Type": "text/plain"})
    assert r.status_code == 201
    url = f"/api/v1/diagnoses/{r.json()['id']}"
    assert client.delete(url, headers=other).status_code == 403
    assert client.delete(url).status_code == 403  # anonymous, no token
    assert client.delete(url, headers=owner).status_code == 204
    assert client.get(url).status_code == 404
