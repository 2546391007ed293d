"""A large log picked in the browser: only the evidence is sent, and it is diagnosed like the whole file."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, Request, Route, expect

from app.core.engine.diagnose import diagnose
from app.core.knowledge.loading import Library
from app.core.models import Diagnosis
from app.core.selection.rules import prefilter_spec
from app.core.selection.selector import select_evidence
from bench.loggen import generate
from tests.support import LiveServer

PICK_TIMEOUT = 300_000  # ms: reading 300 MB on a loaded two-core machine


def comparable(diagnosis: dict[str, Any]) -> dict[str, Any]:
    """A diagnosis without what depends on how the log was sent."""
    out = dict(diagnosis)
    out["input"] = {k: v for k, v in diagnosis["input"].items() if k != "excerpt"}
    # A harmless line repeated thousands of times (a warning every step) is counted only up to
    # the evidence cap in an excerpt: its count is a lower bound there (app.core.selection.rules).
    out["harmless"] = [{k: v for k, v in h.items() if k != "count"} for h in diagnosis.get("harmless", [])]
    for key in ("id", "url", "created_at"):
        out.pop(key, None)
    return out


def body_of(request: Request) -> dict[str, Any]:
    raw = request.post_data_buffer or b""
    if request.headers.get("content-encoding") == "gzip":
        raw = gzip.decompress(raw)
    return json.loads(raw)  # type: ignore[no-any-return]


def pick(page: Page, server: LiveServer, path: Path) -> None:
    page.goto(server.url + "/")
    page.set_input_files("#file", str(path))
    page.wait_for_selector("#excerpt-summary[data-kept]", timeout=PICK_TIMEOUT)


def test_300mb_log_sends_under_2mb_and_is_diagnosed_like_the_whole_file(
    page: Page, server: LiveServer, big_log: Path, big_log_diagnosis: Diagnosis, artifacts: Path
) -> None:
    sent: list[Request] = []
    page.on("request", lambda r: sent.append(r) if r.method == "POST" else None)
    pick(page, server, big_log)
    summary = page.locator("#excerpt-summary")
    lines = big_log_diagnosis.input.lines
    expect(summary).to_contain_text(f"of {lines:,} lines")
    expect(summary).to_contain_text("of 300 MB")
    page.screenshot(path=str(artifacts / "large-log-picked.png"), full_page=True)
    assert not sent, "nothing is sent before the person submits"

    with page.expect_navigation(url=re.compile(r"/d/[\w-]+$"), timeout=120_000):
        page.click("button[type=submit]")
    (post,) = sent
    assert len(post.post_data_buffer or b"") < 2 << 20
    payload = body_of(post)
    assert payload["total_lines"] == lines
    assert payload["total_bytes"] == big_log.stat().st_size
    assert len(payload["excerpt"]) < lines // 100

    diagnosis_id = page.url.rsplit("/", 1)[1]
    with httpx.Client(base_url=server.url) as client:
        stored = client.get(f"/api/v1/diagnoses/{diagnosis_id}").json()
    assert comparable(stored) == comparable(big_log_diagnosis.model_dump(mode="json"))
    assert stored["input"]["excerpt"]["lines"] == len(payload["excerpt"])

    initiating = big_log_diagnosis.initiating
    assert initiating is not None
    expect(page.locator("h1")).to_have_text(initiating.title)
    expect(page.locator("p.lead")).to_contain_text(f"line {initiating.line}")
    expect(page.locator("section.meta")).to_contain_text(re.compile(r"300(\.\d)? MiB, "))
    expect(page.locator("section.meta")).to_contain_text(f"only the evidence was sent, {len(payload['excerpt'])} lines")
    page.screenshot(path=str(artifacts / "large-log-diagnosis.png"), full_page=True)


@pytest.fixture(scope="module")
def mid_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("midlog") / "train.log"
    generate(path, 12 << 20, seed=11)
    return path


def sent_and_selected(page: Page, server: LiveServer, library: Library, log: Path) -> tuple[dict[str, Any], Any]:
    """What the page sent for a log, and what `select_evidence` keeps of it: their lines must agree."""
    captured: list[dict[str, Any]] = []

    def capture(route: Route) -> None:
        captured.append(body_of(route.request))
        route.continue_()

    page.route("**/api/v1/diagnoses", capture)
    pick(page, server, log)
    with page.expect_navigation(url=re.compile(r"/d/[\w-]+$")):
        page.click("button[type=submit]")
    (payload,) = captured
    with log.open("rb") as f:
        expected = select_evidence(iter(lambda: f.read(1 << 20), b""), prefilter_spec(library))
    assert payload["total_lines"] == expected.total_lines
    assert [(e["line"], e["text"]) for e in payload["excerpt"]] == list(expected.lines)
    return payload, expected


def test_the_browser_keeps_exactly_what_the_python_rules_keep(
    page: Page, server: LiveServer, library: Library, mid_log: Path
) -> None:
    """One definition of the rules: the page and `select_evidence` pick the same lines."""
    payload, expected = sent_and_selected(page, server, library, mid_log)
    assert payload["total_bytes"] == expected.total_bytes
    full = diagnose(mid_log, library, name=mid_log.name)
    with httpx.Client(base_url=server.url) as client:
        stored = client.get(f"/api/v1/diagnoses/{page.url.rsplit('/', 1)[1]}").json()
    assert comparable(stored) == comparable(full.model_dump(mode="json"))


def test_a_gzip_file_is_read_through_the_browser_s_decompressor(
    page: Page, server: LiveServer, library: Library, mid_log: Path, tmp_path: Path
) -> None:
    packed = tmp_path / "train.log.gz"
    packed.write_bytes(gzip.compress(mid_log.read_bytes(), 1))
    captured: list[dict[str, Any]] = []

    def capture(route: Route) -> None:
        captured.append(body_of(route.request))
        route.continue_()

    page.route("**/api/v1/diagnoses", capture)
    pick(page, server, packed)
    with page.expect_navigation(url=re.compile(r"/d/[\w-]+$")):
        page.click("button[type=submit]")
    (payload,) = captured
    with mid_log.open("rb") as f:
        expected = select_evidence(iter(lambda: f.read(1 << 20), b""), prefilter_spec(library))
    assert payload["total_bytes"] == mid_log.stat().st_size
    assert [(e["line"], e["text"]) for e in payload["excerpt"]] == list(expected.lines)


def test_lines_longer_than_a_block_are_kept_as_the_python_rules_keep_them(
    page: Page, server: LiveServer, library: Library, mid_log: Path, tmp_path: Path
) -> None:
    """A plain file is read in slices from a line's start; a line no slice holds whole is read on as a stream."""
    head = mid_log.read_bytes()[: 6 << 20]
    head = head[: head.rindex(b"\n") + 1]
    log = tmp_path / "long.log"
    log.write_bytes(
        head
        + b"RuntimeError: CUDA out of memory "
        + b"x" * (5 << 20)
        + b"\n"  # over a block, under the carry
        + b"[rank0]: Traceback (most recent call last) "
        + b"y" * (9 << 20)
        + b"\n"  # over the carry: cut
        + head[: 1 << 20]
        + b"Killed"  # a last line without a newline
    )
    payload, expected = sent_and_selected(page, server, library, log)
    assert payload["total_bytes"] == expected.total_bytes == log.stat().st_size


def test_a_file_picked_while_another_is_read_replaces_it(
    page: Page, server: LiveServer, mid_log: Path, tmp_path: Path
) -> None:
    """Picking again cancels the run in progress (its workers stop); progress ends full."""
    small = tmp_path / "small.log"
    small.write_text("step 1\nRuntimeError: CUDA error: device-side assert triggered\n")
    page.goto(server.url + "/")
    page.set_input_files("#file", str(mid_log))
    expect(page.locator("#excerpt-status")).to_contain_text("Reading train.log")
    page.set_input_files("#file", str(small))
    summary = page.locator("#excerpt-summary")
    expect(summary).to_have_attribute("data-total", "2", timeout=PICK_TIMEOUT)
    # The first run, cancelled, never shows its result over the second file's.
    page.wait_for_timeout(2000)
    expect(summary).to_have_attribute("data-total", "2")
    expect(page.locator("#excerpt-status")).to_contain_text("Read small.log")
    assert page.locator("#excerpt-progress").evaluate("bar => bar.value") == 1


def started(page: Page, workers: list[object]) -> int:
    """How many workers the page has started, once their start has been reported."""
    for _ in range(50):
        if workers:
            break
        page.wait_for_timeout(100)
    page.wait_for_timeout(300)  # the rest of a pool is reported just after its first worker
    return len(workers)


def test_pointing_at_the_picker_readies_the_workers_the_pick_then_uses(
    page: Page, server: LiveServer, library: Library, mid_log: Path, tmp_path: Path
) -> None:
    """The workers start while a person chooses the file; the pick reads with them, keeping what Python keeps."""
    workers: list[object] = []
    page.on("worker", lambda worker: workers.append(worker))
    captured: list[dict[str, Any]] = []

    def capture(route: Route) -> None:
        captured.append(body_of(route.request))
        route.continue_()

    page.route("**/api/v1/diagnoses", capture)
    page.goto(server.url + "/")
    form = page.locator("form[data-excerpt]")
    expect(form).not_to_have_attribute("data-warm", "ready")
    assert workers == [], "nothing starts before a person shows they will pick a file"
    page.hover("label[for=file]")
    expect(form).to_have_attribute("data-warm", "ready")
    ready = started(page, workers)
    assert ready >= 1
    page.hover("h1")
    page.hover("label[for=file]")  # pointing again makes no second pool
    page.wait_for_timeout(300)
    assert len(workers) == ready

    page.set_input_files("#file", str(mid_log))
    page.wait_for_selector("#excerpt-summary[data-kept]", timeout=PICK_TIMEOUT)
    assert len(workers) == ready, "the pick used the workers made ready"
    expect(form).not_to_have_attribute("data-warm", "ready")
    with page.expect_navigation(url=re.compile(r"/d/[\w-]+$")):
        page.click("button[type=submit]")
    (payload,) = captured
    with mid_log.open("rb") as f:
        expected = select_evidence(iter(lambda: f.read(1 << 20), b""), prefilter_spec(library))
    assert [(e["line"], e["text"]) for e in payload["excerpt"]] == list(expected.lines)


def test_each_pick_gets_fresh_workers_and_focus_readies_them_too(
    page: Page, server: LiveServer, tmp_path: Path
) -> None:
    """A pool serves one file (it holds which patterns reached their cap); the keyboard path readies one as well."""
    workers: list[object] = []
    page.on("worker", lambda worker: workers.append(worker))
    small = tmp_path / "small.log"
    small.write_text("step 1\nRuntimeError: CUDA error: device-side assert triggered\n")
    other = tmp_path / "other.log"
    other.write_text("step 1\nstep 2\ntorch.OutOfMemoryError: CUDA out of memory.\n")
    page.goto(server.url + "/")
    form = page.locator("form[data-excerpt]")
    page.focus("#file")
    expect(form).to_have_attribute("data-warm", "ready")
    ready = started(page, workers)
    assert ready >= 1
    page.set_input_files("#file", str(small))
    summary = page.locator("#excerpt-summary")
    expect(summary).to_have_attribute("data-total", "2", timeout=PICK_TIMEOUT)
    assert len(workers) == ready
    page.set_input_files("#file", str(other))  # no pointing this time: new workers for it
    expect(summary).to_have_attribute("data-total", "3", timeout=PICK_TIMEOUT)
    page.wait_for_timeout(300)
    assert len(workers) == 2 * ready
