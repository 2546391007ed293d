"""A refused diagnosis keeps what the person sent, and a spent allowance is said before they paste."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, expect

from app.core.knowledge.loading import Library
from tests.browser.conftest import browser_settings
from tests.support import SAMPLES, live_server


def test_a_refused_paste_stays_in_the_box_and_the_reset_is_in_local_time(
    browser: Browser, request: pytest.FixtureRequest, library: Library, tmp_path: Path, artifacts: Path
) -> None:
    settings = browser_settings(request, tmp_path, quota_anonymous=1)
    # A reader in New York: midnight UTC is 19:00 the day before (EST, December).
    context = browser.new_context(
        viewport={"width": 1280, "height": 900}, timezone_id="America/New_York", locale="en-US"
    )
    try:
        with live_server(settings, library) as server:
            page = context.new_page()
            page.goto(server.url + "/")
            expect(page.locator("#quota")).to_contain_text("1 of 1 diagnoses left")
            page.fill("#log", (SAMPLES / "oom-killed.log").read_text(encoding="utf-8"))
            with page.expect_navigation(url=re.compile(r"/d/[\w-]+$")):
                page.click("button[type=submit]")

            # The allowance is spent: the page says so above the form, before anything is pasted.
            page.goto(server.url + "/")
            spent = page.locator("#quota.spent")
            expect(spent).to_be_visible()
            expect(spent).to_contain_text("No diagnoses left today")
            expect(spent.locator("time.local")).to_contain_text(re.compile(r"07:00\s*PM EST \(midnight UTC\)"))
            expect(spent.locator("a", has_text="Sign in")).to_have_attribute("href", "/account")
            assert page.locator("#quota").bounding_box()["y"] < page.locator("#log").bounding_box()["y"]  # type: ignore[index]

            # Pasting anyway: the refusal keeps the text.
            log = (SAMPLES / "ddp-cuda-oom.log").read_text(encoding="utf-8")
            page.fill("#log", log)
            page.click("button[type=submit]")
            expect(page.locator("#form-error")).to_contain_text("Nothing was diagnosed")
            # The same heading as the JavaScript path shows: the problem's title.
            with httpx.Client(base_url=server.url) as client:
                title = client.post("/api/v1/diagnoses", content=b"x\n").json()["title"]
            expect(page.locator("#form-error strong")).to_have_text(f"{title}.")
            assert page.locator("#log").input_value().strip() == log.strip()
            expect(page.locator("#quota.spent")).to_be_visible()
            page.screenshot(path=str(artifacts / "refused-1280.png"), full_page=True)
    finally:
        context.close()


def test_a_refused_file_is_named_without_javascript(
    browser: Browser, request: pytest.FixtureRequest, library: Library, tmp_path: Path
) -> None:
    settings = browser_settings(request, tmp_path, quota_anonymous=0)
    context = browser.new_context(java_script_enabled=False)
    try:
        with live_server(settings, library) as server:
            page = context.new_page()
            page.goto(server.url + "/")
            expect(page.locator("#quota.spent")).to_contain_text("midnight UTC")
            page.set_input_files("#file", str(SAMPLES / "torn-checkpoint.log"))
            page.click("button[type=submit]")
            expect(page.locator("#form-error")).to_contain_text("torn-checkpoint.log")
            expect(page.locator("#form-error")).to_contain_text("choose it again")
    finally:
        context.close()
