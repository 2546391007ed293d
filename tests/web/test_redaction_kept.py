"""Every shape of secret issue #38 found, and the vendor shapes added with them, gone from everything a
real server keeps and shows (SQLite and PostgreSQL): the answer, the windows, the page, the whole log
(`TRACELORE_STORE_LOG`), and every row of every table, the kept log decompressed."""

from __future__ import annotations

import gzip
import random
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from app.core.knowledge.loading import Library
from app.core.redaction.vendor_shapes import VENDOR_SHAPES
from app.web.state import state_of
from tests.conftest import BACKENDS, database_for
from tests.support import LiveServer, live_server, make_settings

HTML = {"Accept": "text/html"}
# The secret of each line below, which must not be found anywhere.
LINES = {
    "Zx81RedisPw": "celery: broker redis://:Zx81RedisPw@cache-0:6379/0 refused",
    "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": (
        "SENDGRID_API_KEY=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"
    ),
    "SK9f8e7d6c5b4a39281706f5e4d3c2b1a0": "twilio key SK9f8e7d6c5b4a39281706f5e4d3c2b1a0 loaded",
    "key-3f2a9c0d8e7b6a5f4e3d2c1b0a9f8e7d": "auth=('api', 'key-3f2a9c0d8e7b6a5f4e3d2c1b0a9f8e7d')",
    "Hunter22sshpw": "+ sshpass -p Hunter22sshpw rsync -a ckpt/ node-1:/ckpt",
    "Zq8sDRmQ1hubtok": "python run_clm.py --push_to_hub --hub_token Zq8sDRmQ1hubtok --output_dir out",
    "Zq8sDRmQ1flagtok": "huggingface-cli login --token Zq8sDRmQ1flagtok",
    "Cu8rlPassw0rd": "curl -sS -u ci-bot:Cu8rlPassw0rd https://registry.example.org/v2/",
    "Qy7queryToken123": "GET https://api.example.org/v1/runs?token=Qy7queryToken123&limit=5 -> 401",
    "123456789:AAF3k9xQ2mZ7nR5tY8wV3cL1pJ6hG0dS4aE": "bot https://api.telegram.org/bot123456789:AAF3k9xQ2mZ7nR5tY8wV3cL1pJ6hG0dS4aE/x",
    "Dw3bhK0oKtOk3n" + "x" * 54: "webhook https://discord.com/api/webhooks/123456789012345678/Dw3bhK0oKtOk3n"
    + "x" * 54,
}
for spec in VENDOR_SHAPES:  # each vendor rule's own example, as the log prints it
    LINES[f"example of {spec['type']}"] = spec["positive"][0]
OOM = "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
LOG = ("\n".join(LINES.values()) + "\n" + OOM + "\n").encode()


def _secrets() -> list[str]:
    """Every value that must be gone: the ones named above, and what each vendor rule redacts in its example."""
    from app.core.redaction.redactor import all_rules

    values = [v for v in LINES if not v.startswith("example of ")]
    for spec in VENDOR_SHAPES:
        rule = next(r for r in all_rules() if r.regex.pattern == spec["pattern"])
        found = rule.regex.search(spec["positive"][0])
        assert found is not None, spec["type"]
        values.append(found.group(rule.group))
    return values


@pytest.fixture(scope="module", params=BACKENDS)
def keeping(
    request: pytest.FixtureRequest, library: Library, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """A server that keeps whole logs, with windows wide enough to hold every line above the evidence."""
    tmp = tmp_path_factory.mktemp(f"keep-{request.param}")
    settings = make_settings(
        database_for(request.param, request, tmp), tmp, store_log=True, context_lines=50, max_upload_bytes=16 << 20
    )
    with live_server(settings, library) as server:
        yield server


def _text_of(raw: bytes) -> str:
    """A stored value as text: a gzip stream as far as it decompresses (the PostgreSQL database is
    shared by the session's modules, and some store cut or hostile streams), other bytes as Latin-1."""
    if raw[:2] != b"\x1f\x8b":
        return raw.decode("latin-1")
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw).decode("utf-8", "replace")
    except zlib.error:
        return raw.decode("latin-1")


def _dump(server: LiveServer) -> list[str]:
    """Every value of every row of every table, a kept log decompressed."""
    out: list[str] = []
    engine = state_of(server.app).engine
    with engine.connect() as conn:
        for table in inspect(engine).get_table_names():
            for row in conn.execute(text(f'SELECT * FROM "{table}"')):
                for value in row:
                    if isinstance(value, bytes | memoryview):
                        raw = bytes(value)
                        out.append(_text_of(raw))
                    else:
                        out.append(str(value))
    return out


def test_every_new_shape_is_gone_from_everything_kept(keeping: LiveServer, tmp_path: Path) -> None:
    assert len(LOG.splitlines()) <= 50  # all within the window above the evidence line
    with keeping.client() as client:
        r = client.post("/api/v1/diagnoses", content=LOG, headers={"Content-Type": "text/plain"})
        assert r.status_code == 201, r.text
        made = r.json()
        assert made["candidates"][0]["id"] == "cuda.oom"
        windows = client.get(f"/api/v1/diagnoses/{made['id']}/windows")
        page = client.get(f"/d/{made['id']}", headers=HTML)
        kept = client.get(f"/api/v1/diagnoses/{made['id']}/log")
        assert kept.status_code == 200, kept.text
    shown = [r.text, windows.text, page.text, kept.text, *_dump(keeping)]
    assert kept.text.count("[REDACTED:") >= len(LINES)
    assert windows.text.count("[REDACTED:") >= len(LINES)
    leaks = [value for value in _secrets() if any(value in t for t in shown)]
    assert leaks == []
    # The counts say so by type, never the values.
    assert {"sendgrid-key", "twilio-key", "mailgun-key", "telegram-bot-token", "discord-webhook"} <= set(
        made["redactions"]
    )


def test_the_windows_say_where_each_secret_was(keeping: LiveServer) -> None:
    with keeping.client() as client:
        r = client.post("/api/v1/diagnoses", content=LOG, headers={"Content-Type": "text/plain"})
        windows = client.get(f"/api/v1/diagnoses/{r.json()['id']}/windows").json()
    lines = [line["text"] for w in windows for line in w["lines"]]
    assert "celery: broker redis://:[REDACTED:url-password]@cache-0:6379/0 refused" in lines
    assert "+ sshpass -p [REDACTED:password] rsync -a ckpt/ node-1:/ckpt" in lines


def test_a_log_dense_in_secrets_is_diagnosed_but_not_kept_whole(keeping: LiveServer) -> None:
    # Issue #38: redacting such a log whole took 100x the CPU of an ordinary one, store=false or not.
    rng = random.Random(38)
    dense = "".join(
        f"10.1.{rng.randrange(256)}.{rng.randrange(256)} 10.2.0.{rng.randrange(256)}\n" for _ in range(200_000)
    )
    body = (dense + OOM + "\n").encode()
    with keeping.client() as client:
        r = client.post("/api/v1/diagnoses", content=gzip.compress(body), headers={"Content-Encoding": "gzip"})
        assert r.status_code == 201, r.text
        made = r.json()
        assert made["candidates"][0]["id"] == "cuda.oom"
        assert client.get(f"/api/v1/diagnoses/{made['id']}/log").status_code == 404
        windows = client.get(f"/api/v1/diagnoses/{made['id']}/windows").json()
        assert [line for w in windows for line in w["lines"]]
        assert "[REDACTED:ipv4]" in str(windows) and "10.1." not in str(windows)
        # An ordinary log on the same server is still kept whole.
        r = client.post("/api/v1/diagnoses", content=LOG, headers={"Content-Type": "text/plain"})
        assert client.get(f"/api/v1/diagnoses/{r.json()['id']}/log").status_code == 200
