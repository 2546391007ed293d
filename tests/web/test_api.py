"""End-to-end API tests against a real uvicorn server, on SQLite and on PostgreSQL."""

from __future__ import annotations

import gzip
import json
import os
import socket
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import httpx

from app.core.knowledge.loading import Library
from app.web.archive import MAX_FILES
from tests.support import METRICS_AUTH, SAMPLES, LiveServer
from tests.web.conftest import LIMIT

OOM = (SAMPLES / "ddp-cuda-oom.log").read_bytes()
KILLED = (SAMPLES / "oom-killed.log").read_bytes()


def assert_problem(response: httpx.Response, status: int, type_: str | None = None) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["status"] == status
    assert body["title"] and body["detail"] and body["type"]
    if type_:
        assert body["type"] == f"/problems/{type_}"
    return body


def rejected(live: LiveServer, client: httpx.Client, status: int, type_: str | None = None, **kwargs: object) -> dict:
    """POST a bad request: assert the problem and that nothing was stored."""
    before = live.count()
    body = assert_problem(client.post("/api/v1/diagnoses", **kwargs), status, type_)  # type: ignore[arg-type]
    assert live.count() == before
    return body


# --- accepted bodies -------------------------------------------------------------------------


def test_text_plain_is_diagnosed_stored_and_readable_at_once(live: LiveServer, client: httpx.Client) -> None:
    before = live.count()
    r = client.post("/api/v1/diagnoses", content=OOM, headers={"Content-Type": "text/plain"})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["candidates"][0]["id"] == "cuda.oom"
    assert body["candidates"][0]["role"] == "initiating"
    assert len(body["id"]) >= 22 and body["url"].endswith(f"/d/{body['id']}")
    assert r.headers["location"].endswith(f"/api/v1/diagnoses/{body['id']}")
    assert live.count() == before + 1
    # The commit happened before the response: a read straight away finds it.
    again = client.get(r.headers["location"])
    assert again.status_code == 200
    assert again.json() == body


def test_json_and_multipart_bodies_give_the_same_diagnosis(client: httpx.Client) -> None:
    plain = client.post("/api/v1/diagnoses", content=KILLED).json()
    as_json = client.post("/api/v1/diagnoses", json={"log": KILLED.decode()}).json()
    as_field = client.post("/api/v1/diagnoses", files={"log": (None, KILLED.decode())}).json()
    as_file = client.post("/api/v1/diagnoses", files={"file": ("../../etc/node7.log", KILLED, "text/plain")}).json()
    for other in (as_json, as_field):
        assert strip(other) == strip(plain)
    assert as_file["input"]["files"] == ["node7.log"]  # the base name only, never a path
    assert [c["id"] for c in as_file["candidates"]] == [c["id"] for c in plain["candidates"]]


def strip(body: dict) -> dict:
    return {k: v for k, v in body.items() if k not in ("id", "url", "created_at")}


def test_store_false_keeps_nothing(live: LiveServer, client: httpx.Client) -> None:
    before = live.count()
    r = client.post("/api/v1/diagnoses?store=false", content=OOM)
    assert r.status_code == 200 and r.json()["id"] is None and "location" not in r.headers
    r = client.post("/api/v1/diagnoses", json={"log": OOM.decode(), "store": False})
    assert r.status_code == 200 and r.json()["id"] is None
    r = client.post("/api/v1/diagnoses", files={"file": ("a.log", OOM), "store": (None, "false")})
    assert r.status_code == 200
    assert live.count() == before


def test_top_limits_the_candidates(client: httpx.Client) -> None:
    assert len(client.post("/api/v1/diagnoses?top=1", content=OOM).json()["candidates"]) == 1
    assert len(client.post("/api/v1/diagnoses", json={"log": OOM.decode(), "top": 2}).json()["candidates"]) == 2


def test_gzip_content_encoding_and_gzip_bodies(client: httpx.Client) -> None:
    plain = strip(client.post("/api/v1/diagnoses", content=OOM).json())
    packed = gzip.compress(OOM)
    enc = client.post("/api/v1/diagnoses", content=packed, headers={"Content-Encoding": "gzip"})
    body = client.post("/api/v1/diagnoses", content=packed, headers={"Content-Type": "application/gzip"})
    # Several gzip members (cat a.gz b.gz) decode as one log.
    half = len(OOM) // 2
    multi = client.post(
        "/api/v1/diagnoses",
        content=gzip.compress(OOM[:half]) + gzip.compress(OOM[half:]),
        headers={"Content-Encoding": "gzip"},
    )
    as_file = client.post("/api/v1/diagnoses", files={"file": ("train.log.gz", packed)})
    for r in (enc, body, multi):
        assert r.status_code == 201, r.text
        assert strip(r.json()) == plain
    assert as_file.status_code == 201 and as_file.json()["candidates"][0]["id"] == "cuda.oom"


def test_nul_bytes_and_invalid_utf8_are_accepted_on_every_backend(client: httpx.Client) -> None:
    dirty = OOM.replace(b"step 2/12000", b"step\x00 2/12000\xff\xfe\xc0\xaf\xed\xa0\x80")
    r = client.post("/api/v1/diagnoses", content=dirty)
    assert r.status_code == 201, r.text
    got = client.get(f"/api/v1/diagnoses/{r.json()['id']}/windows").json()
    assert got and all("\x00" not in line["text"] for w in got for line in w["lines"])


def test_crlf_lone_cr_and_ansi_are_normalised(client: httpx.Client) -> None:
    plain = strip(client.post("/api/v1/diagnoses", content=OOM).json())
    crlf = client.post("/api/v1/diagnoses", content=OOM.replace(b"\n", b"\r\n")).json()
    assert strip(crlf)["candidates"] == plain["candidates"]
    coloured = OOM.replace(b"torch.OutOfMemoryError", b"\x1b[31mtorch.OutOfMemoryError\x1b[0m")
    coloured = coloured.replace(b"step 1/12000", b"\x1b]0;title\x07 45%|####  | 45/100 [00:01<00:01]\rstep 1/12000")
    r = client.post("/api/v1/diagnoses", content=coloured)
    assert r.status_code == 201 and r.json()["candidates"][0]["id"] == "cuda.oom"
    assert "\x1b" not in r.text
    windows = client.get(f"/api/v1/diagnoses/{r.json()['id']}/windows").text
    assert "\\u001b" not in windows and "\x1b" not in windows


def test_one_line_without_a_newline_as_big_as_the_limit(client: httpx.Client) -> None:
    r = client.post("/api/v1/diagnoses", content=b"a" * (LIMIT - 200) + b" RuntimeError: boom")
    assert r.status_code == 201, r.text
    assert r.json()["input"]["lines"] == 1


def test_only_the_evidence_windows_are_kept(client: httpx.Client) -> None:
    r = client.post("/api/v1/diagnoses", content=OOM).json()
    windows = client.get(f"/api/v1/diagnoses/{r['id']}/windows").json()
    kept = {line["no"] for w in windows for line in w["lines"]}
    assert 20 in kept and 1 not in kept  # the OOM line and its context, not the launcher banner
    assert_problem(client.get(f"/api/v1/diagnoses/{r['id']}/log"), 404, "not-found")


# --- rejected bodies -------------------------------------------------------------------------


def test_empty_and_blank_logs_are_422(live: LiveServer, client: httpx.Client) -> None:
    rejected(live, client, 422, "empty-log", content=b"")
    rejected(live, client, 422, "empty-log", content=b"  \n\n\t\n")
    rejected(live, client, 422, "empty-log", json={"log": ""})
    rejected(live, client, 422, "empty-log", content=gzip.compress(b""), headers={"Content-Encoding": "gzip"})


def test_wrong_media_types_and_encodings_are_415(live: LiveServer, client: httpx.Client) -> None:
    rejected(live, client, 415, "unsupported-media-type", content=b"\x89PNG", headers={"Content-Type": "image/png"})
    rejected(live, client, 415, None, content=b"PK\x03\x04", headers={"Content-Type": "application/zip"})
    body = rejected(live, client, 415, None, data={"log": "x"})  # what curl -d sends
    assert "text/plain" in str(body["detail"])
    rejected(live, client, 415, None, content=OOM, headers={"Content-Encoding": "br"})


def test_binary_data_is_not_a_text_log(live: LiveServer, client: httpx.Client) -> None:
    rejected(live, client, 415, "not-text", content=os.urandom(4096))
    rejected(live, client, 415, "not-text", content=b"\x00" * 4096)
    body = rejected(live, client, 415, "not-text", content=OOM.decode().encode("utf-16"))
    assert "UTF-16" in str(body["detail"])
    body = rejected(live, client, 415, "not-text", content=gzip.compress(OOM))  # gzip sent as text/plain
    assert "Content-Encoding: gzip" in str(body["detail"])


def test_a_garbled_windows_paste_is_text_diagnosed_on_its_readable_lines(
    live: LiveServer, client: httpx.Client
) -> None:
    from tests.test_cli import MOJIBAKE

    r = client.post("/api/v1/diagnoses", content=MOJIBAKE, headers={"Content-Type": "text/plain"})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["candidates"][0]["id"] == "cuda.oom" and body["input"]["unreadable_lines"] == 1
    page = client.get(body["url"])
    assert "could not be read (replacement characters, U+FFFD)" in page.text


def test_malformed_json_is_400_and_invalid_json_is_422(live: LiveServer, client: httpx.Client) -> None:
    headers = {"Content-Type": "application/json"}
    rejected(live, client, 400, "bad-input", content=b'{"log": ', headers=headers)
    rejected(live, client, 400, "bad-input", content=b"[" * 100_000 + b"]" * 100_000, headers=headers)
    rejected(live, client, 400, "bad-input", content=b'{"log": "a", "top": ' + b"9" * 5000 + b"}", headers=headers)
    rejected(live, client, 422, "invalid", json={"text": "a log"})
    rejected(live, client, 422, "invalid", json={"log": "x", "colour": "red"})
    rejected(live, client, 422, "invalid", json=["a log"])
    rejected(live, client, 422, "invalid", json={"log": "x", "top": 0})


def test_bad_options_are_422(live: LiveServer, client: httpx.Client) -> None:
    body = rejected(live, client, 422, "invalid", content=OOM, params={"top": "0"})
    assert "top" in str(body["detail"])
    rejected(live, client, 422, "invalid", content=OOM, params={"top": "many"})
    rejected(live, client, 422, "invalid", content=OOM, params={"store": "perhaps"})
    rejected(live, client, 422, "invalid", files={"file": ("a.log", OOM), "top": (None, "x")})


def test_malformed_multipart_is_400(live: LiveServer, client: httpx.Client) -> None:
    rejected(live, client, 400, "bad-input", content=b"--x\r\n", headers={"Content-Type": "multipart/form-data"})
    too_many = [("file", (f"rank{i}.log", b"x\n")) for i in range(MAX_FILES + 1)]
    body = rejected(live, client, 400, "bad-input", files=too_many)
    assert "files" in str(body["detail"]).lower()
    many = {f"f{i}": (None, "x") for i in range(20)}
    rejected(live, client, 400, "bad-input", files=many)
    rejected(live, client, 422, "invalid", files={"other": (None, "x")})


def test_hostile_multipart_framing_is_400(live: LiveServer, client: httpx.Client) -> None:
    long = "x" * 300
    cases = [
        (f'--{long}\r\nContent-Disposition: form-data; name="log"\r\n\r\nhi\r\n--{long}--\r\n', long),
        ('--b\r\nContent-Disposition: form-data; name="log"\r\n' + "X-H: v\r\n" * 20 + "\r\nhi\r\n--b--\r\n", "b"),
        ('--b\r\nContent-Disposition: form-data; name="log"\r\nX-Big: ' + "v" * 5000 + "\r\n\r\nhi\r\n--b--\r\n", "b"),
        ("--b\r\nContent-Disposition: form-data; name*=UTF-8''log\r\n\r\nhi\r\n--b--\r\n", "b"),
        ("--b\r\nno colon here\r\n\r\nhi\r\n--b--\r\n", "b"),
    ]
    for body, boundary in cases:
        headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
        rejected(live, client, 400, "bad-input", content=body.encode(), headers=headers)


def test_multipart_preamble_and_epilogue_are_skipped(client: httpx.Client) -> None:
    part = b'--b\r\nContent-Disposition: form-data; name="log"\r\n\r\n' + OOM + b"\r\n--b--\r\n"
    body = b"\r\n" * 50_000 + part + b"\r\n" * 50_000
    r = client.post("/api/v1/diagnoses", content=body, headers={"Content-Type": "multipart/form-data; boundary=b"})
    assert r.status_code == 201 and r.json()["candidates"][0]["id"] == "cuda.oom"


def test_pathological_content_type_is_answered_fast(live: LiveServer, client: httpx.Client) -> None:
    started = time.monotonic()
    header = "text/plain; !=" + '"\\' * 2000
    r = client.post("/api/v1/diagnoses", content=OOM, headers={"Content-Type": header})
    assert r.status_code in (201, 400, 415) and time.monotonic() - started < 2


# --- size limits -----------------------------------------------------------------------------


def test_too_large_body_is_413_with_the_limit(live: LiveServer, client: httpx.Client) -> None:
    body = rejected(live, client, 413, "too-large", content=b"x" * (LIMIT + 1))
    assert "256 KiB" in str(body["detail"]) and body["limit"] == LIMIT
    assert "`tail -c 128K train.log`" in str(body["detail"])  # a tail that fits, not one over the limit


def test_a_pasted_field_over_the_limit_is_413(live: LiveServer, client: httpx.Client) -> None:
    rejected(live, client, 413, "too-large", files={"log": (None, "z" * (LIMIT + 10))})


def test_every_route_holds_the_decoded_log_to_the_limit(live: LiveServer, client: httpx.Client) -> None:
    over = "y" * (LIMIT + 10)
    body = rejected(live, client, 413, "too-large", json={"log": over})
    assert body["limit"] == LIMIT
    packed = gzip.compress(json.dumps({"log": over}).encode())
    json_gzip = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    rejected(live, client, 413, "too-large", content=packed, headers=json_gzip)
    lines = [{"line": i + 1, "text": "z" * 1000} for i in range(LIMIT // 1000 + 10)]
    rejected(live, client, 413, "too-large", json={"excerpt": lines})
    rejected(live, client, 413, "too-large", files={"log": (None, over)})
    rejected(live, client, 413, "too-large", files={"file": ("big.log.gz", gzip.compress(over.encode()))})


def test_escapes_count_once_decoded(client: httpx.Client) -> None:
    """A log just under the limit is accepted as JSON though its escapes make the body half as large again."""
    log = 'x"\n' * (LIMIT // 3)
    body = json.dumps({"log": log, "store": False}).encode()
    assert len(body) > 1.5 * LIMIT
    r = client.post("/api/v1/diagnoses", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    assert r.json()["input"]["bytes"] == len(log)


def test_gzip_bomb_is_413_fast(live: LiveServer, client: httpx.Client) -> None:
    bomb = gzip.compress(b"\0" * (64 << 20), compresslevel=9)  # 64 MiB -> 64 KiB
    assert len(bomb) < LIMIT
    started = time.monotonic()
    body = rejected(live, client, 413, "too-large", content=bomb, headers={"Content-Encoding": "gzip"})
    assert time.monotonic() - started < 2
    assert "decompressed" in str(body["detail"])
    rejected(live, client, 413, "too-large", files={"file": ("bomb.log.gz", bomb)})


def test_corrupt_and_truncated_gzip_are_400(live: LiveServer, client: httpx.Client) -> None:
    packed = gzip.compress(OOM)
    rejected(live, client, 400, "bad-input", content=packed[: len(packed) // 2], headers={"Content-Encoding": "gzip"})
    rejected(live, client, 400, "bad-input", content=b"not gzip at all", headers={"Content-Encoding": "gzip"})


def _raw(port: int, head: bytes, body: Iterable[bytes] = ()) -> bytes:
    """Send a hand-made request; read the response while the body is still being sent."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head)

        def send() -> None:
            try:
                for chunk in body:
                    sock.sendall(chunk)
            except OSError:  # the server answered and closed: expected
                pass

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        data = b""
        try:
            while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
                piece = sock.recv(65536)
                if not piece:
                    break
                data += piece
        except OSError:
            pass
        return data


def test_content_length_over_the_limit_is_413_before_the_body(live: LiveServer) -> None:
    head = (
        b"POST /api/v1/diagnoses HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nContent-Length: 600000000\r\n\r\n"
    )
    started = time.monotonic()
    response = _raw(live.port, head)
    assert response.startswith(b"HTTP/1.1 413"), response[:200]
    assert b"application/problem+json" in response and time.monotonic() - started < 2


def test_chunked_body_growing_past_the_limit_is_413(live: LiveServer) -> None:
    before = live.count()
    head = b"POST /api/v1/diagnoses HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunk = b"y" * (32 << 10)
    body = (b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(4096))  # 128 MiB if nobody stops it
    response = _raw(live.port, head, body)
    assert response.startswith(b"HTTP/1.1 413"), response[:200]
    assert live.count() == before


def test_a_client_that_hangs_up_mid_upload_is_not_a_server_error(live: LiveServer, client: httpx.Client) -> None:
    before = live.count()
    with socket.create_connection(("127.0.0.1", live.port), timeout=10) as sock:
        sock.sendall(b"POST /api/v1/diagnoses HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n" + b"a" * 1000)
    time.sleep(0.2)
    assert client.get("/healthz").status_code == 200
    assert live.count() == before


def test_bad_content_length_is_400(live: LiveServer) -> None:
    for value in (b"-5", b"ten"):
        head = b"POST /api/v1/diagnoses HTTP/1.1\r\nHost: t\r\nContent-Length: " + value + b"\r\n\r\n"
        assert _raw(live.port, head).startswith(b"HTTP/1.1 400")


# --- reads, signatures, operations ------------------------------------------------------------


def test_unknown_ids_routes_and_methods(client: httpx.Client) -> None:
    assert_problem(client.get("/api/v1/diagnoses/does-not-exist"), 404, "not-found")
    assert_problem(client.get("/api/v1/diagnoses/" + "x" * 500), 404, "not-found")
    assert_problem(client.get("/api/v1/nothing-here"), 404, "not-found")
    r = client.put("/api/v1/diagnoses")
    assert_problem(r, 405, "method-not-allowed")
    assert "POST" in r.headers["allow"]


def test_signatures(client: httpx.Client, library: Library) -> None:
    listed = client.get("/api/v1/signatures").json()
    assert {s["id"] for s in listed} == set(library.signatures)
    one = client.get(listed[0]["url"]).json()
    assert one["id"] == listed[0]["id"] and one["fingerprints"]
    assert_problem(client.get("/api/v1/signatures/no.such"), 404, "not-found")


def test_health_readiness_metrics_and_docs(client: httpx.Client) -> None:
    assert client.get("/healthz").json()["status"] == "ok"
    ready = client.get("/readyz").json()
    assert ready["status"] == "ready" and ready["checks"]["database"] == "ok"
    client.post("/api/v1/diagnoses", content=OOM)
    client.post("/api/v1/diagnoses", content=b"")
    text = client.get("/metrics", headers=METRICS_AUTH).text
    assert 'tracelore_http_requests_total{method="POST",route="/api/v1/diagnoses",status="201"}' in text
    assert 'tracelore_diagnosis_seconds_bucket{le="+Inf"}' in text
    assert 'tracelore_candidates_total{id="cuda.oom",role="initiating"}' in text
    assert 'tracelore_rejections_total{reason="empty-log"}' in text
    assert client.get("/openapi.json").json()["paths"]["/api/v1/diagnoses"]["post"]["requestBody"]
    docs = client.get("/docs").text
    assert "/static/docs/swagger-ui-bundle.js" in docs and "cdn" not in docs
    assert client.get("/static/docs/swagger-ui-bundle.js").status_code == 200
    assert "cdn" not in client.get("/redoc").text


def test_zz_no_request_in_this_module_got_a_500(client: httpx.Client) -> None:
    text = client.get("/metrics", headers=METRICS_AUTH).text
    assert 'status="5' not in text.replace('status="503"', "")


def test_cli_and_api_give_the_same_json(client: httpx.Client, tmp_path: Path, signatures_dir: Path) -> None:
    from click.testing import CliRunner

    from app.cli import main

    log = tmp_path / "train.log"
    log.write_bytes(OOM)
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        result = CliRunner().invoke(
            main, ["diagnose", "train.log", "--format", "json", "--signatures", str(signatures_dir)]
        )
    finally:
        os.chdir(old)
    assert result.exit_code == 1, result.output
    cli = json.loads(result.stdout)
    api = client.post("/api/v1/diagnoses", files={"file": ("train.log", OOM)}).json()
    assert strip(api) == cli
