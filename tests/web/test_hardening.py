"""Hostile input on a real server (SQLite and PostgreSQL): numbers out of range, stray NUL bytes,
spoofing characters, broken multipart bodies, and who may read /metrics."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from app.core.knowledge.loading import Library
from app.core.models import Diagnosis
from app.core.stored import StoredDiagnosis
from app.store.diagnoses import save_diagnosis
from app.web.state import state_of
from tests.support import METRICS_AUTH, SAMPLES, LiveServer, live_server, make_settings
from tests.web.test_api import assert_problem, rejected

OOM = (SAMPLES / "ddp-cuda-oom.log").read_bytes()
HTML = {"Accept": "text/html"}


def _excerpt(**fields: object) -> dict[str, object]:
    body: dict[str, object] = {"excerpt": [{"line": 1, "text": "[rank3]: torch.OutOfMemoryError: CUDA out of memory."}]}
    body.update(fields)
    return body


# --- numbers in request models ---------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"total_bytes": 10**400},
        {"total_bytes": 2**63},
        {"total_lines": 10**30},
        {"excerpt": [{"line": 10**30, "text": "x"}], "total_lines": 10**30},
        {"top": 10**30},
    ],
)
def test_numbers_beyond_any_real_log_are_422(live: LiveServer, client: httpx.Client, fields: dict) -> None:
    body = rejected(
        live,
        client,
        422,
        "invalid",
        content=json.dumps(_excerpt(**fields)),
        headers={"Content-Type": "application/json"},
    )
    assert "less than or equal" in str(body["detail"])


def test_a_large_but_real_excerpt_is_accepted(client: httpx.Client) -> None:
    body = _excerpt(total_bytes=1 << 40, total_lines=50_000_000_000, excerpt=[{"line": 49_999_999_999, "text": "x"}])
    r = client.post("/api/v1/diagnoses", json=body)
    assert r.status_code == 201, r.text
    assert client.get(f"/d/{r.json()['id']}", headers=HTML).status_code == 200


def test_the_page_renders_any_stored_diagnosis(live: LiveServer, client: httpx.Client) -> None:
    # Stored before numbers were bounded, or by another version: the page must still render.
    made = client.post("/api/v1/diagnoses", json=_excerpt()).json()
    huge = {**made, "input": {**made["input"], "bytes": 10**400, "lines": 10**30}}
    for c in huge["candidates"]:
        c["line"] = 10**30
        for e in c["evidence"]:
            e["line"] = 10**30
    diagnosis = Diagnosis.model_validate({k: v for k, v in huge.items() if k not in ("id", "url", "created_at")})
    with state_of(live.app).sessionmaker.begin() as session:
        record = save_diagnosis(
            session,
            StoredDiagnosis.keeping(diagnosis, windows=[], input_bytes=10**18, input_sha256="0" * 64),
            subject="test",
            tier="anonymous",
            created_at=datetime.now(UTC),
        )
    page = client.get(f"/d/{record.id}", headers=HTML)
    assert page.status_code == 200, page.text
    assert "CUDA out of memory" in page.text
    assert client.get(f"/api/v1/diagnoses/{record.id}").status_code == 200


# --- binary is judged by content ------------------------------------------------------------------


@pytest.mark.parametrize("size", [40, 400, 40_000])
def test_one_nul_byte_is_accepted_whatever_the_size(client: httpx.Client, size: int) -> None:
    line = b"[rank3]: torch.OutOfMemoryError: CUDA out of memory.\n"
    text = b"x" * max(0, size - len(line) - 2) + b"\x00\n" + line
    r = client.post("/api/v1/diagnoses", content=text)
    assert r.status_code == 201, r.text
    assert r.json()["candidates"][0]["id"] == "cuda.oom"


def test_a_run_of_nul_bytes_in_a_log_is_accepted(client: httpx.Client) -> None:
    # What a log file holds after the machine crashed while writing it: a block of NULs, then more log.
    r = client.post("/api/v1/diagnoses", content=b"step 1\n" + b"\x00" * 8192 + b"\n" + OOM)
    assert r.status_code == 201, r.text


def test_a_small_paste_with_a_nul_is_accepted_on_the_page(client: httpx.Client) -> None:
    r = client.post("/diagnose", files={"log": (None, "RuntimeError: CUDA error\x00\n")}, headers=HTML)
    assert r.status_code == 303, r.text


@pytest.mark.parametrize(
    "data",
    [bytes(range(256)) * 4, b"\x00" * 64, b"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x0e\x0f" * 20, b"\xff\xfe\xfd" * 50],
)
def test_binary_data_is_still_refused(live: LiveServer, client: httpx.Client, data: bytes) -> None:
    rejected(live, client, 415, "not-text", content=data)


# --- multipart bodies that would be misread ----------------------------------------------------

BOUNDARY = "tlboundary"


def _multipart(disposition: str, *, close: bool = True) -> bytes:
    body = f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; {disposition}\r\n'
    body += "Content-Type: text/plain\r\n\r\n"
    data = body.encode() + OOM + b"\r\n"
    return data + (f"--{BOUNDARY}--\r\n".encode() if close else b"")


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (_multipart('filename="train.log"', close=False), "closing boundary"),
        (_multipart("filename*=UTF-8''tr%C3%A4in.log"), 'filename="train.log"'),
        (f"--{BOUNDARY}\r\nContent-Type: text/plain\r\n\r\nx\r\n--{BOUNDARY}--\r\n".encode(), "name"),
    ],
)
def test_a_misleading_multipart_body_is_400(live: LiveServer, client: httpx.Client, body: bytes, words: str) -> None:
    headers = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
    problem = rejected(live, client, 400, "bad-input", content=body, headers=headers)
    assert words in str(problem["detail"])


def test_a_well_formed_multipart_file_is_diagnosed(client: httpx.Client) -> None:
    # Both forms of the name (a client may send filename*= beside filename=): the plain one counts.
    for disposition in ('filename="train.log"', "filename=\"train.log\"; filename*=UTF-8''train.log"):
        headers = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
        r = client.post("/api/v1/diagnoses", content=_multipart(disposition), headers=headers)
        assert r.status_code == 201, r.text
        assert r.json()["candidates"][0]["id"] == "cuda.oom"


# --- /metrics needs the admin token ------------------------------------------------------------


def test_metrics_need_the_metrics_token(client: httpx.Client) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "test-metrics"}):
        r = client.get("/metrics", headers=headers)
        problem = assert_problem(r, 401, "unauthorized")
        assert "TRACELORE_METRICS_TOKEN" in str(problem["detail"]) and "www-authenticate" in r.headers
    ok = client.get("/metrics", headers=METRICS_AUTH)
    assert ok.status_code == 200 and "tracelore_diagnoses_in_flight" in ok.text


def test_without_a_metrics_token_metrics_are_not_served(sqlite_url: str, tmp_path: Path, library: Library) -> None:
    settings = make_settings(sqlite_url, tmp_path, metrics_token="")
    with live_server(settings, library) as server, server.client() as client:
        for headers in ({}, {"Authorization": "Bearer x"}, METRICS_AUTH):
            problem = assert_problem(client.get("/metrics", headers=headers), 403, "forbidden")
            assert "TRACELORE_METRICS_TOKEN" in str(problem["detail"])


# --- characters that hide or reorder text ---------------------------------------------------

SPOOFS = {"\u202e": "\\u202e", "\u200b": "\\u200b", "\ufeff": "\\ufeff", "\u2066": "\\u2066", "\x07": "\\u0007"}


def test_spoofing_characters_are_shown_as_escapes(client: httpx.Client) -> None:
    # In the evidence line, in the context around it, and in an unexplained error line.
    log = (
        "epoch 1 \u202egnp.exe\u202c done\n"
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. \ufeffTried\u2066 to\u200b allocate\x07 2.00 GiB\n"
        "RuntimeError: unexpected \u202ething\n"
    )
    r = client.post("/api/v1/diagnoses", content=log.encode())
    assert r.status_code == 201, r.text
    assert r.json()["candidates"][0]["id"] == "cuda.oom"
    page = client.get(f"/d/{r.json()['id']}", headers=HTML).text
    for raw, shown in SPOOFS.items():
        assert raw not in page
        assert shown in page
    assert 'title="U+202E right-to-left override"' in page
    assert page.count("\\u202e") >= 3  # evidence context, its own line, the unexplained line
    # The JSON keeps the text as it was: only the page shows it differently.
    assert "\u202e" in json.dumps(client.get(f"/api/v1/diagnoses/{r.json()['id']}/windows").json(), ensure_ascii=False)


# --- one origin check for every form -------------------------------------------------------------

CROSS_SITE = [{"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"}, {"Origin": "https://evil.example"}]


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page
    return found.group(1)


@pytest.mark.parametrize("header", CROSS_SITE)
def test_every_form_refuses_a_post_from_another_site(live: LiveServer, header: dict[str, str]) -> None:
    with live.client() as browser:
        made = browser.post("/diagnose", files={"log": (None, OOM.decode())}, headers=HTML)
        assert made.status_code == 303, made.text
        page = made.headers["location"]
        token = _csrf(browser.get("/account", headers=HTML).text)
        forms = [
            ("/diagnose", {"files": {"log": (None, OOM.decode())}}),
            (page + "/delete", {}),
            ("/account/sign-in", {"data": {"email": "a@example.org", "csrf": token}}),
            ("/account/sign-out", {"data": {"csrf": token}}),
            ("/account/keys", {"data": {"csrf": token}}),
        ]
        before = live.count()
        for path, kwargs in forms:
            r = browser.post(path, headers={**HTML, **header}, **kwargs)  # type: ignore[arg-type]
            assert r.status_code == 403, (path, r.status_code)
            assert "another site" in r.text, path
        assert live.count() == before
        assert browser.get(page, headers=HTML).status_code == 200  # not deleted
        # From this site the same delete works.
        same = {"Origin": live.url, "Sec-Fetch-Site": "same-origin"}
        assert browser.post(page + "/delete", headers={**HTML, **same}).status_code == 200
        assert browser.get(page, headers=HTML).status_code == 404


def test_api_clients_send_no_origin_and_are_not_refused(client: httpx.Client) -> None:
    assert client.post("/api/v1/diagnoses", content=OOM, headers={"Origin": "null"}).status_code == 201
