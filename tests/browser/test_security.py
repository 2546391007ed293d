"""In a real browser: the CSP lets the pages' own scripts run and nothing else, logs render as
text, secrets are gone, and the browser that made a diagnosis can delete it."""

from __future__ import annotations

import re

from playwright.sync_api import ConsoleMessage, Dialog, Page, expect

from tests.support import SAMPLES, LiveServer

HOSTILE = '<script>alert("x")</script><img src=x onerror="alert(1)"> token: hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567\n'


def test_csp_markup_in_logs_secrets_and_deleting(page: Page, server: LiveServer) -> None:
    console: list[str] = []
    dialogs: list[str] = []
    page.on("console", lambda m: console.append(m.text) if isinstance(m, ConsoleMessage) else None)
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()) if isinstance(d, Dialog) else None)
    log = HOSTILE + (SAMPLES / "ddp-cuda-oom.log").read_text(encoding="utf-8")
    page.goto(server.url + "/")
    page.fill("#log", log)
    with page.expect_navigation(url=re.compile(r"/d/[\w-]+$")):
        page.click("form[enctype] button[type=submit]")
    html = page.content()
    assert "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567" not in html
    expect(page.locator("dd.redactions")).to_contain_text("in the lines kept")
    # tracelore.js ran under the CSP: it reveals the copy buttons it wires up.
    expect(page.locator("button.copy").first).to_be_visible()
    page.click("details.delete > summary")  # deleting is behind a confirmation
    page.click("details.delete button[type=submit]")
    expect(page.locator("h1")).to_have_text("Diagnosis deleted")
    assert dialogs == []  # no script from the log ran
    assert not [m for m in console if "Content Security Policy" in m or "Refused to" in m], console
