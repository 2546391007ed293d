"""The account page in Chromium: signed in with an e-mailed link, it lists the diagnoses made, newest first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from app.core.knowledge.loading import Library
from tests.browser.conftest import browser_settings
from tests.support import SAMPLES, live_server
from tests.web.test_accounts import Inbox, smtp  # noqa: F401 (the real SMTP server fixture)


def test_a_signed_in_reader_sees_and_deletes_their_diagnoses(
    browser: Browser,
    request: pytest.FixtureRequest,
    library: Library,
    tmp_path: Path,
    smtp: tuple[Inbox, int],  # noqa: F811
    artifacts: Path,
) -> None:
    inbox, port = smtp
    settings = browser_settings(
        request,
        tmp_path,
        smtp_host="127.0.0.1",
        smtp_port=port,
        smtp_tls="none",
        mail_from="Tracelore <t@tracelore.test>",
    )
    with live_server(settings, library) as server:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        try:
            page = context.new_page()
            page.goto(server.url + "/account")
            page.fill("#email", "reader@example.org")
            seen = len(inbox.messages)
            page.click("button[type=submit]")
            body = inbox.wait(seen + 1).get_payload(decode=True).decode()  # type: ignore[union-attr]
            link = re.search(r"(http://\S+/account/sign-in/\S+)", body)
            assert link
            page.goto(link.group(1))
            with page.expect_navigation(url=re.compile(r"/account$")):
                page.click("button[type=submit]")
            expect(page.locator("#made-title")).to_have_text("Your diagnoses")
            expect(page.locator("ol.made")).to_have_count(0)

            made = []
            for sample in ("oom-killed", "ddp-cuda-oom"):
                page.goto(server.url + "/")
                page.fill("#log", (SAMPLES / f"{sample}.log").read_text(encoding="utf-8"))
                with page.expect_navigation(url=re.compile(r"/d/[\w-]+$")):
                    page.click("button[type=submit]")
                made.append((page.url.rsplit("/", 1)[-1], page.locator("h1").inner_text()))

            page.goto(server.url + "/account")
            items = page.locator("ol.made > li")
            expect(items).to_have_count(2)
            # Newest first, each with its initiating failure and a link to it.
            for item, (record_id, title) in zip(items.all(), reversed(made), strict=True):
                expect(item.locator("a").first).to_have_text(title)
                expect(item.locator("a").first).to_have_attribute("href", f"/d/{record_id}")
            page.screenshot(path=str(artifacts / "account-1280.png"), full_page=True)
            # Sign-out sits beside the address, not as the page's main button.
            head = page.locator(".account-head").bounding_box()
            out = page.get_by_role("button", name="Sign out").bounding_box()
            assert head and out and out["y"] < head["y"] + head["height"]

            first = items.first
            first.locator("summary", has_text="Delete").click()
            first.get_by_role("button", name="Delete it for good").click()
            expect(page.locator("h1")).to_have_text("Diagnosis deleted")
            page.goto(server.url + "/account")
            expect(page.locator("ol.made > li")).to_have_count(1)
            expect(page.locator("ol.made > li a").first).to_have_text(made[0][1])

            phone = browser.new_context(viewport={"width": 390, "height": 844}, storage_state=context.storage_state())
            try:
                small = phone.new_page()
                small.goto(server.url + "/account")
                assert small.evaluate("document.documentElement.scrollWidth") <= 390
                small.screenshot(path=str(artifacts / "account-390.png"), full_page=True)
            finally:
                phone.close()
        finally:
            context.close()
