"""An encyclopedia entry's paste box is the home page's: file picker with local evidence, samples, allowance."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, Request, expect

from app.core.engine.diagnose import diagnose
from app.core.knowledge.loading import Library
from bench.loggen import generate
from tests.browser.test_large_log import body_of
from tests.support import LiveServer


def test_an_entry_page_diagnoses_a_large_file_by_sending_only_its_evidence(
    page: Page, server: LiveServer, library: Library, tmp_path: Path, artifacts: Path
) -> None:
    log = tmp_path / "train.log"
    generate(log, 12 << 20)  # over the test server's 8 MiB limit: only its evidence can be sent
    expected = diagnose(log, library).initiating
    assert expected is not None

    page.goto(server.url + "/failures/nccl.watchdog_timeout")
    expect(page.locator("#quota")).to_contain_text(re.compile(r"Today: \d+ of \d+ diagnoses left"))
    samples = page.locator("#paste-log a[href*='?sample=']")
    expect(samples).to_have_count(3)
    page.screenshot(path=str(artifacts / "entry-paste-box-1280.png"), full_page=False)

    sent: list[Request] = []
    page.on("request", lambda r: sent.append(r) if r.method == "POST" else None)
    page.set_input_files("#file", str(log))
    page.wait_for_selector("#excerpt-summary[data-kept]", timeout=120_000)
    assert not sent, "nothing is sent before the person submits"
    with page.expect_navigation(url=re.compile(r"/d/[\w-]+$"), timeout=120_000):
        page.click("#paste-log button[type=submit]")
    (post,) = sent
    assert post.url.endswith("/api/v1/diagnoses")
    assert len(post.post_data_buffer or b"") < 1 << 20
    payload = body_of(post)
    assert payload["total_bytes"] == log.stat().st_size and len(payload["excerpt"]) < payload["total_lines"] // 5
    expect(page.locator("h1")).to_have_text(expected.title)
    expect(page.locator("p.lead")).to_contain_text(f"line {expected.line}")
