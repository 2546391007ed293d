"""Every page at 1280 and 390 px wide, screenshots written for review; small things that looked broken."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, expect

from tests.support import SAMPLES, LiveServer

WIDTHS = (1280, 390)


def _pages(server: LiveServer) -> dict[str, str]:
    with httpx.Client(base_url=server.url) as client:
        made = client.post("/api/v1/diagnoses", content=(SAMPLES / "ddp-cuda-oom.log").read_bytes()).json()
    return {
        "home": "/",
        "diagnosis": made["url"].replace(server.url, ""),
        "encyclopedia": "/failures/",
        "entry": "/failures/cuda.oom",
        "tag": "/tags/nccl",
        "search": "/search?q=CUDA+out+of+memory",
        "privacy": "/privacy",
        "sign-in": "/account",
        "not-found": "/no/such/page",
    }


def test_every_page_is_screenshotted_at_both_widths_and_fits_a_phone(
    browser: Browser, server: LiveServer, artifacts: Path
) -> None:
    pages = _pages(server)
    overflowing = []
    for width in WIDTHS:
        context = browser.new_context(viewport={"width": width, "height": 900})
        try:
            page = context.new_page()
            for name, path in pages.items():
                page.goto(server.url + path)
                page.screenshot(path=str(artifacts / f"page-{name}-{width}.png"), full_page=True)
                if width == 390 and page.evaluate("document.documentElement.scrollWidth") > 390:
                    overflowing.append(name)
        finally:
            context.close()
    assert not overflowing, f"these pages scroll sideways on a 390 px phone: {overflowing}"


def test_the_favicon_is_served_and_linked(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url) as client:
        icon = client.get("/favicon.ico")
        assert icon.status_code == 200 and icon.headers["content-type"] == "image/x-icon"
        assert icon.content[:4] == b"\x00\x00\x01\x00"  # an ICO file
        home = client.get("/", headers={"Accept": "text/html"}).text
        linked = re.search(r'<link rel="icon" href="([^"]+)"', home)
        assert linked and client.get(linked.group(1)).headers["content-type"].startswith("image/svg+xml")


@pytest.mark.parametrize(("path", "heading"), [("/no/such/page", "Not found"), ("/d/unknown-id", "Not found")])
def test_error_pages_read_as_sentences_and_lead_somewhere(
    browser: Browser, server: LiveServer, path: str, heading: str
) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(server.url + path)
        expect(page.locator("h1")).to_contain_text(heading)
        detail = page.locator("[role=alert]").inner_text()
        assert detail[0].isupper() and detail.endswith("."), detail
        for link in ("Diagnose a log", "Browse the failure encyclopedia", "Search an error message"):
            expect(page.locator("#main").get_by_role("link", name=link)).to_be_visible()
    finally:
        context.close()
