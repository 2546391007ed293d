"""What `tracelore serve` writes to its own log: the access log names routes, never query strings or
the tokens of sign-in links, and a sign-in link is spent by a POST that carries the token in its body."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from aiosmtpd.controller import Controller

from tests.support import free_port, stop_serve, wait_until_ready
from tests.web.test_accounts import HTML, Inbox, _csrf

SECRET = "hf_" + "Ab3" * 12  # a Hugging Face token, pasted into the search box


@pytest.fixture
def mail() -> Iterator[tuple[Inbox, int]]:
    """A real SMTP server (aiosmtpd) that keeps what it receives."""
    port = free_port()
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield inbox, port
    finally:
        controller.stop()


@pytest.fixture(params=[1, 2], ids=["one-worker", "two-workers"])
def served(
    request: pytest.FixtureRequest, tmp_path: Path, signatures_dir: Path, mail: tuple[Inbox, int]
) -> Iterator[tuple[str, subprocess.Popen[str], list[str]]]:
    small = tmp_path / "signatures"  # one folder: cheap start-up for each worker
    shutil.copytree(signatures_dir / "memory", small / "memory")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACELORE_")}
    env.update(
        {
            "TRACELORE_DATA_DIR": str(tmp_path / "data"),
            "TRACELORE_SIGNATURES_DIR": str(small),
            "TRACELORE_SMTP_HOST": "127.0.0.1",
            "TRACELORE_SMTP_PORT": str(mail[1]),
            "TRACELORE_SMTP_TLS": "none",
        }
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(port), "--workers", str(request.param)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output: list[str] = []
    try:
        wait_until_ready(proc, f"http://127.0.0.1:{port}")
        yield f"http://127.0.0.1:{port}", proc, output
    finally:
        out = stop_serve(proc)
        output.append(out)


def test_the_access_log_holds_no_query_and_no_sign_in_token(
    served: tuple[str, subprocess.Popen[str], list[str]], mail: tuple[Inbox, int]
) -> None:
    url, proc, output = served
    inbox, _ = mail
    with httpx.Client(base_url=url, timeout=30) as client:
        assert client.get("/search", params={"q": f"401 Unauthorized token {SECRET}"}, headers=HTML).status_code == 200
        token = _csrf(client.get("/account", headers=HTML).text)
        seen = len(inbox.messages)
        sent = client.post("/account/sign-in", data={"email": "log@example.org", "csrf": token}, headers=HTML)
        assert sent.status_code == 200
        body = inbox.wait(seen + 1).get_payload(decode=True).decode()  # type: ignore[union-attr]
        link = re.search(r"(http://\S+/account/sign-in/(\S+))", body)
        assert link, body
        sign_in_token = link.group(2)
        confirm = client.get(link.group(1), headers=HTML)
        assert confirm.status_code == 200
        # The button posts the token in the form body, to an address without it.
        action = re.search(r'<form[^>]* action="([^"]+)"', confirm.text)
        assert action and sign_in_token not in action.group(1)
        done = client.post(action.group(1), data={"token": sign_in_token, "csrf": _csrf(confirm.text)}, headers=HTML)
        assert done.status_code == 303 and done.headers["location"] == "/account"
        assert "log@example.org" in client.get("/account", headers=HTML).text
        again = client.post(action.group(1), data={"token": sign_in_token, "csrf": _csrf(confirm.text)}, headers=HTML)
        assert again.status_code == 400 and "expired or was already used" in again.text
    proc.send_signal(signal.SIGINT)
    proc.wait(30)
    log = proc.stdout.read() if proc.stdout else ""
    # The access log is on and names the requests...
    assert '"GET /search?[query] HTTP/1.1" 200' in log
    assert '"GET /account/sign-in/[token] HTTP/1.1" 200' in log
    # ...but neither the pasted secret nor the sign-in token, in any form.
    assert SECRET not in log and "Ab3Ab3" not in log
    assert sign_in_token not in log and sign_in_token[:12] not in log
    assert "q=" not in log
