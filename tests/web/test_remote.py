"""`tracelore diagnose --server`: the CLI against a real running server (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from app.cli import main
from app.client.remote import padded_log, retry_after_seconds
from app.core.engine.diagnose import diagnose
from app.core.knowledge.loading import Library
from app.core.models import Diagnosis
from app.web.state import state_of
from tests.support import SAMPLES, LiveServer, live_server, make_settings

PROGRESS = b"".join(b"step %d loss 1.%03d lr 0.0001 tokens/s 41234\n" % (i, i % 1000) for i in range(30_000))


def run(*args: str, input: bytes | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), input=input)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A long run that fails with a multi-rank CUDA OOM near its end (~1.4 MB)."""
    path = tmp_path_factory.mktemp("logs") / "train.log"
    path.write_bytes(PROGRESS + (SAMPLES / "ddp-cuda-oom.log").read_bytes())
    return path


def _requests(metrics: Any) -> dict[tuple[str, str, str], float]:
    """The server's response counts by (method, route, status), read from its prometheus counter."""
    return {
        (s.labels["method"], s.labels["route"], s.labels["status"]): s.value
        for family in metrics.requests.collect()
        for s in family.samples
        if s.name.endswith("_total")
    }


def test_remote_sends_the_evidence_and_prints_the_permalink(
    live: LiveServer, signatures_dir: Path, library: Library, big_log: Path
) -> None:
    code, out, err = run(
        "diagnose", str(big_log), "--server", live.url, "--signatures", str(signatures_dir), "--format", "json"
    )
    assert code == 1, err
    record = json.loads(out)
    assert "Sending the evidence of" in err and "of 30,053 lines" in err
    # The same Diagnosis JSON as a local run prints; the permalink is said on standard error.
    assert not {"id", "url", "created_at"} & set(record)
    assert Diagnosis.model_validate(record).model_dump(mode="json") == record
    (permalink,) = [line.removeprefix("Full diagnosis: ") for line in err.splitlines() if "Full diagnosis: " in line]
    assert permalink.startswith(f"{live.url}/d/")
    # The server got an excerpt, far smaller than the log, and found what a local run finds, at the same lines.
    assert record["input"]["excerpt"]["bytes"] < big_log.stat().st_size // 10
    assert (record["input"]["bytes"], record["input"]["lines"]) == (big_log.stat().st_size, 30_053)
    local = diagnose(big_log, library, name="train.log")
    assert [(c["id"], c["role"], c["line"]) for c in record["candidates"]] == [
        (c.id, c.role, c.line) for c in local.candidates
    ]
    assert record["candidates"][0]["id"] == "cuda.oom" and record["candidates"][0]["line"] == 30_020
    assert record["candidates"][0]["file"] == "train.log"
    with live.client() as client:
        stored = client.get(f"/api/v1/diagnoses/{permalink.rsplit('/', 1)[-1]}").json()
    assert stored["candidates"][0]["id"] == "cuda.oom" and stored["url"] == permalink
    # The rules came from the server: the one definition it publishes for its library.
    fetched = [k for k in _requests(state_of(live.app).metrics) if k[0] == "GET" and "prefilter" in k[1]]
    assert fetched and all(status == "200" for _, _, status in fetched)


def test_excerpt_as_text_keeps_line_numbers_for_older_servers(library: Library, big_log: Path) -> None:
    from app.core.selection.rules import prefilter_spec
    from app.core.selection.selector import select_evidence

    with big_log.open("rb") as f:
        excerpt = select_evidence(iter(lambda: f.read(1 << 20), b""), prefilter_spec(library))
    text = padded_log(excerpt.lines)
    assert len(text) < big_log.stat().st_size // 10
    whole, part = diagnose(big_log, library), diagnose(text, library)
    assert [(c.id, c.role, c.line) for c in part.candidates] == [(c.id, c.role, c.line) for c in whole.candidates]


def test_remote_full_sends_the_whole_log(live: LiveServer, signatures_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "short.log"
    log.write_bytes(PROGRESS[:100_000] + (SAMPLES / "ddp-cuda-oom.log").read_bytes())
    code, out, err = run(
        "diagnose", str(log), "--server", live.url + "/", "--full", "--signatures", str(signatures_dir), "--top", "1"
    )
    assert code == 1, err
    assert "the whole log" in err
    assert out.startswith("Verdict: CUDA out of memory") and "\nINITIATING: CUDA out of memory [cuda.oom]" in out
    permalink = out.strip().splitlines()[-1]
    assert permalink.startswith(f"Full diagnosis: {live.url}/d/")
    diagnosis_id = permalink.rsplit("/", 1)[1]
    with live.client() as client:
        stored = client.get(f"/api/v1/diagnoses/{diagnosis_id}").json()
    assert stored["input"]["bytes"] == log.stat().st_size
    assert len(stored["candidates"]) == 1


def test_remote_reports_in_every_format_with_the_permalink(
    live: LiveServer, signatures_dir: Path, tmp_path: Path
) -> None:
    log = tmp_path / "oom.log"
    log.write_bytes((SAMPLES / "oom-killed.log").read_bytes())
    summary = tmp_path / "summary.md"
    code, out, err = run(
        "diagnose", str(log), "--server", live.url, "--signatures", str(signatures_dir),
        "--format", "github", "--report", f"markdown={summary}",
    )  # fmt: skip
    assert code == 1, err
    report = summary.read_text()
    assert f"Full diagnosis: {live.url}/d/" in report
    # Encyclopedia links point at the server that answered.
    assert f"]({live.url}/failures/host.oom_killed)" in report
    assert out.startswith("::error file=") and f"More: {live.url}/d/" in out


def test_server_errors_are_clear_and_exit_2(live: LiveServer, signatures_dir: Path, big_log: Path) -> None:
    code, out, err = run(
        "diagnose", str(big_log), "--server", live.url + "/nowhere", "--signatures", str(signatures_dir)
    )
    assert (code, out) == (2, "")
    assert "the server refused the log (404" in err
    with socket.socket() as sock:  # a port with nothing listening
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    code, _, err = run(
        "diagnose", str(big_log), "--server", f"http://127.0.0.1:{closed}", "--signatures", str(signatures_dir)
    )
    assert code == 2 and "cannot reach" in err
    code, _, err = run("diagnose", str(big_log), "--server", "ftp://example.org", "--signatures", str(signatures_dir))
    assert code == 2 and "http(s) URL" in err


@pytest.fixture
def busy(live: LiveServer) -> Iterator[object]:
    """Every diagnosis slot of the server taken, as under load; Retry-After 1 s."""
    gate = state_of(live.app).gate
    saved = gate.busy, gate.retry_after
    gate.busy, gate.retry_after = gate.limit, 1
    yield gate
    gate.busy, gate.retry_after = saved


def test_busy_server_beyond_max_wait_is_reported(
    busy: object, live: LiveServer, signatures_dir: Path, big_log: Path
) -> None:
    code, out, err = run(
        "diagnose", str(big_log), "--server", live.url, "--signatures", str(signatures_dir), "--max-wait", "0"
    )
    assert (code, out) == (2, "")
    assert "the server is busy (503" in err and "try again in 1 s" in err


def test_busy_server_is_waited_out_as_retry_after_asks(
    busy: object, live: LiveServer, signatures_dir: Path, big_log: Path
) -> None:
    gate, metrics = state_of(live.app).gate, state_of(live.app).metrics
    saved = gate.busy

    def refused() -> int:
        return sum(n for (method, _, status), n in _requests(metrics).items() if method == "POST" and status == "503")

    before = refused()
    done = threading.Event()

    def free_after_first_refusal() -> None:
        # The slots free up once the client has been turned away and is waiting.
        while not done.is_set() and refused() == before:
            time.sleep(0.02)
        gate.busy = 0

    watcher = threading.Thread(target=free_after_first_refusal, daemon=True)
    watcher.start()
    try:
        code, out, err = run("diagnose", str(big_log), "--server", live.url, "--signatures", str(signatures_dir))
    finally:
        done.set()
        watcher.join(5)
        gate.busy = saved
    assert code == 1, err
    assert "retrying in 1 s as the server asks (Retry-After)" in err
    assert out.startswith("Verdict: CUDA out of memory") and "\nINITIATING: CUDA out of memory" in out


def test_spent_allowance_is_a_clear_429(
    library: Library, signatures_dir: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from tests.conftest import database_for

    settings = make_settings(database_for("sqlite", request, tmp_path), tmp_path, quota_anonymous=1)
    log = tmp_path / "oom.log"
    log.write_bytes((SAMPLES / "oom-killed.log").read_bytes())
    with live_server(settings, library) as server:
        assert run("diagnose", str(log), "--server", server.url, "--signatures", str(signatures_dir))[0] == 1
        code, out, err = run("diagnose", str(log), "--server", server.url, "--signatures", str(signatures_dir))
    assert (code, out) == (2, "")
    assert "the daily allowance on this server is used up (429" in err
    assert "try again" in err and "UTC" in err


def test_api_key_counts_against_its_account(live: LiveServer, signatures_dir: Path, tmp_path: Path) -> None:
    from app.store import accounts

    with state_of(live.app).sessionmaker.begin() as session:
        account = accounts.ensure_account(session, "ci@example.org", now=accounts.utcnow(), tier="pro")
        key, secret = accounts.create_api_key(session, account.id, name="CI", now=accounts.utcnow())
    log = tmp_path / "oom.log"
    log.write_bytes((SAMPLES / "oom-killed.log").read_bytes())
    lib = ("--signatures", str(signatures_dir))
    code, _, err = run("diagnose", str(log), "--server", live.url, "--api-key", secret, *lib)
    assert code == 1, err
    with live.client(headers={"Authorization": f"Bearer {secret}"}) as client:
        quota = client.get("/api/v1/quota").json()
    assert (quota["email"], quota["tier"], quota["used"]) == ("ci@example.org", "pro", 1)
    with state_of(live.app).sessionmaker.begin() as session:
        accounts.revoke_api_key(session, key.id, now=accounts.utcnow())
    code, out, err = run("diagnose", str(log), "--server", live.url, "--api-key", secret, *lib)
    assert (code, out) == (2, "")
    assert "the server refused the API key (401" in err


def test_retry_after_accepts_seconds_and_dates() -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert retry_after_seconds("120", now) == 120
    assert retry_after_seconds("Thu, 01 Jan 2026 12:01:00 GMT", now) == 60
    assert retry_after_seconds("Thu, 01 Jan 2026 11:00:00 GMT", now) == 0
    assert retry_after_seconds("soon", now) is None and retry_after_seconds(None) is None


@pytest.mark.parametrize("full", [False, True])
def test_remote_sends_the_files_of_a_job_together(live: LiveServer, tmp_path: Path, full: bool) -> None:
    ranks = tmp_path / "job"
    ranks.mkdir()
    (ranks / "rank0.log").write_bytes(PROGRESS[:20_000] + b"[rank0]: waiting for the other ranks\n")
    (ranks / "rank1.log").write_bytes(PROGRESS[:20_000] + (SAMPLES / "ddp-cuda-oom.log").read_bytes())
    args = ["diagnose", str(ranks / "rank0.log"), str(ranks / "rank1.log"), "--server", live.url, "--format", "json"]
    code, out, err = run(*args, *(["--full"] if full else []))
    assert code == 1, err
    assert "Sending 2 files" in err
    record = json.loads(out)
    first = record["candidates"][0]
    assert first["id"] == "cuda.oom" and first["file"] == "rank1.log"
    # Line numbers are those of the file, whether the whole log or only its evidence was sent.
    oom_line = PROGRESS[:20_000].count(b"\n") + next(
        i
        for i, line in enumerate((SAMPLES / "ddp-cuda-oom.log").read_bytes().splitlines(), 1)
        if b"OutOfMemory" in line
    )
    assert first["line"] == oom_line
