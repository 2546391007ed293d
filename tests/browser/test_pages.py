"""The paste flow, the diagnosis page and the encyclopedia, in a real browser."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Browser, Page, expect

from app.core.diagnose import diagnose
from app.core.library import Library
from tests.support import SAMPLES, LiveServer


def test_paste_flow_shows_the_initiating_failure(
    page: Page, server: LiveServer, library: Library, artifacts: Path
) -> None:
    log = (SAMPLES / "ddp-cuda-oom.log").read_text(encoding="utf-8")
    expected = diagnose(log.encode(), library).initiating
    assert expected is not None
    page.goto(server.url + "/")
    expect(page.locator("h1")).to_have_text("What killed your training run?")
    page.screenshot(path=str(artifacts / "home.png"), full_page=True)

    page.fill("#log", log)
    with page.expect_navigation(url=re.compile(r"/d/[\w-]+$")):
        page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text(expected.title)
    expect(page.locator("p.lead")).to_contain_text(f"line {expected.line}")
    page.screenshot(path=str(artifacts / "diagnosis.png"), full_page=True)


def test_diagnosis_page_links_lead_to_the_encyclopedia(page: Page, server: LiveServer, library: Library) -> None:
    log = (SAMPLES / "oom-killed.log").read_text(encoding="utf-8")
    first = diagnose(log.encode(), library).candidates[0]
    page.goto(server.url + "/")
    page.fill("#log", log)
    with page.expect_navigation(url=re.compile(r"/d/[\w-]+$")):
        page.click("button[type=submit]")

    page.click(f"a[href='/failures/{first.id}']")
    expect(page).to_have_url(re.compile(rf"/failures/{re.escape(first.id)}$"))
    expect(page.locator("h1")).to_contain_text(first.title)

    page.click("header nav >> text=Failure encyclopedia")
    expect(page).to_have_url(re.compile(r"/failures/?$"))
    expect(page.locator(f"a[href$='{first.id}']").first).to_be_visible()


def test_without_javascript_the_form_posts_the_whole_file(
    browser: Browser, server: LiveServer, library: Library
) -> None:
    expected = diagnose(SAMPLES / "torn-checkpoint.log", library).candidates[0]
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(server.url + "/")
        page.set_input_files("#file", str(SAMPLES / "torn-checkpoint.log"))
        with page.expect_navigation(url=re.compile(r"/d/[\w-]+$")):
            page.click("button[type=submit]")
        expect(page.locator("h1")).to_have_text(expected.title)
        expect(page.locator("section.meta")).not_to_contain_text("only the evidence was sent")
    finally:
        context.close()
