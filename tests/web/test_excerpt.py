"""Excerpts over HTTP: the browser's prefilter rules, and lines picked out of a larger log."""

from __future__ import annotations

import gzip
import json
from typing import Any

import httpx
import pytest

from app.core.engine.diagnose import diagnose
from app.core.knowledge.loading import Library
from app.core.selection.rules import prefilter_spec
from app.core.selection.selector import select_evidence
from tests.support import SAMPLES, LiveServer
from tests.web.test_api import rejected

OOM = SAMPLES / "ddp-cuda-oom.log"
PADDING = 100_000  # lines of noise before the sample: the excerpt's numbers must be the original ones


def padded_log() -> bytes:
    noise = b"".join(b"[rank0]: {'loss': 1.25, 'epoch': %d}\n" % i for i in range(PADDING))
    return noise + OOM.read_bytes()


def excerpt_body(log: bytes, library: Library, **extra: Any) -> dict[str, Any]:
    excerpt = select_evidence([log], prefilter_spec(library))
    body = {
        "excerpt": [{"line": no, "text": text} for no, text in excerpt.lines],
        "total_lines": excerpt.total_lines,
        "total_bytes": excerpt.total_bytes,
        "name": "train.log",
    }
    body.update(extra)
    return body


def test_prefilter_spec_is_published_with_an_etag(client: httpx.Client, library: Library) -> None:
    r = client.get("/api/v1/signatures/prefilter.json")
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    spec = r.json()
    assert spec["library_version"] == library.version
    assert spec["rules"]["context"] >= 0 and spec["patterns"]
    assert (
        client.get("/api/v1/signatures/prefilter.json", headers={"If-None-Match": r.headers["etag"]}).status_code == 304
    )
    assert client.get("/api/v1/signatures/cuda.oom").json()["id"] == "cuda.oom"  # the route beside it still works


def test_an_excerpt_is_diagnosed_with_original_line_numbers(
    live: LiveServer, client: httpx.Client, library: Library
) -> None:
    log = padded_log()
    full = diagnose(log, library, name="train.log")
    body = excerpt_body(log, library)
    payload = gzip.compress(json.dumps(body).encode())
    assert len(payload) < len(log) // 20
    r = client.post(
        "/api/v1/diagnoses",
        content=payload,
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert r.status_code == 201, r.text
    got = r.json()
    want = full.model_dump(mode="json")
    assert got["candidates"] == want["candidates"]
    assert got["candidates"][0]["line"] > PADDING
    assert got["input"]["lines"] == full.input.lines and got["input"]["bytes"] == len(log)
    assert got["input"]["excerpt"] == {"lines": len(body["excerpt"]), "bytes": got["input"]["excerpt"]["bytes"]}
    windows = client.get(f"/api/v1/diagnoses/{got['id']}/windows").json()
    evidence = {e["line"] for c in got["candidates"] for e in c["evidence"]}
    shown = {line["no"]: line["text"] for w in windows for line in w["lines"]}
    assert evidence <= set(shown)
    original = log.decode().split("\n")
    assert all(original[no - 1] == text for no, text in shown.items())


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"excerpt": [{"line": 5, "text": "a"}, {"line": 5, "text": "b"}]}, "must increase"),
        ({"excerpt": [{"line": 1, "text": "a\nb"}]}, "one line per entry"),
        ({"excerpt": [{"line": 9, "text": "a"}], "total_lines": 3}, "less than the last line"),
        ({"excerpt": [{"line": 0, "text": "a"}]}, "excerpt.0.line"),
        ({"excerpt": [{"line": 1}]}, "excerpt.0.text"),
        ({"excerpt": [{"line": 1, "text": "a"}], "log": "a"}, "either `log`"),
        ({"store": True}, "either `log`"),
        ({"excerpt": "line 1"}, "excerpt"),
    ],
)
def test_impossible_excerpts_get_a_clear_problem(
    live: LiveServer, client: httpx.Client, body: dict[str, Any], message: str
) -> None:
    problem = rejected(live, client, 422, "invalid", json=body)
    assert message in str(problem["detail"])


def test_an_excerpt_of_blank_lines_is_an_empty_log(live: LiveServer, client: httpx.Client) -> None:
    rejected(live, client, 422, json={"excerpt": [{"line": 3, "text": " "}], "total_lines": 10})
