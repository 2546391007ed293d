"""Local mode in a real browser: the person running their own copy pastes log after log, past any
daily allowance, and never meets a quota message or a sign-in."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from app.core.knowledge.loading import Library
from tests.browser.conftest import browser_settings
from tests.support import SAMPLES, LiveServer, live_server


@pytest.fixture
def local_server(request: pytest.FixtureRequest, library: Library, tmp_path: Path) -> Iterator[LiveServer]:
    # The anonymous allowance of a shared server (3), which local mode must not apply.
    with live_server(browser_settings(request, tmp_path, local=True, quota_anonymous=3), library) as live:
        yield live


def test_ten_pastes_in_a_row_meet_no_quota_and_no_sign_in(page: Page, local_server: LiveServer) -> None:
    log = (SAMPLES / "oom-killed.log").read_text()
    for _ in range(10):
        page.goto(local_server.url + "/")
        expect(page.locator("#quota")).to_contain_text("Local mode")
        page.fill("#log", log)
        with page.expect_navigation(url=re.compile(r"/d/[\w-]+$")):
            page.click("form[action='/diagnose'] button[type=submit]")
        expect(page.locator("h1")).to_have_text("Process killed by the host OOM killer")
        assert "Daily allowance" not in page.content() and "Sign in" not in page.locator("main").inner_text()
