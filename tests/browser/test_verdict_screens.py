"""The answer first, at a desktop's and a phone's width: the first screen states the verdict.

Writes artifacts/verdict-<log>-<width>.png for review: a multi-rank OOM kill, a hang, a healthy run
and a single-process failure.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.support import REPO, LiveServer

CASES = REPO / "tests" / "corpus" / "cases"
# (name, corpus case, the page's first heading, what the verdict line must say)
SCREENS = [
    ("multi-rank-oom", "gen-mem-oom-killed-torchrun-rank", "Process killed by the host OOM killer", r"on rank 1\b"),
    ("hang", "gen-dist-hang-rank3-of-4", "Gloo send/recv timed out", r"suspect rank 3\b"),
    ("healthy", "gen-dist-elastic-restart-static", "Looks healthy", r"finished normally"),
    ("single-process", "gen-ckpt-truncated-pickle-dump", None, r"line \d+"),
]


@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize(("name", "case", "heading", "says"), SCREENS, ids=[s[0] for s in SCREENS])
def test_the_first_screen_states_the_verdict(
    browser: Browser,
    server: LiveServer,
    artifacts: Path,
    width: int,
    name: str,
    case: str,
    heading: str | None,
    says: str,
) -> None:
    context = browser.new_context(viewport={"width": width, "height": 800})
    try:
        page = context.new_page()
        page.goto(server.url + "/")
        page.fill("#log", (CASES / case / "log.txt").read_text(encoding="utf-8"))
        with page.expect_navigation(url=re.compile(r"/d/[\w-]+$")):
            page.click("button[type=submit]")
        h1 = page.locator("h1")
        if heading is not None:
            expect(h1).to_contain_text(heading)
        verdict = page.locator("#verdict")
        expect(verdict).to_contain_text(re.compile(says))
        box = verdict.bounding_box()
        assert box is not None and box["y"] + box["height"] <= 800, "the verdict is below the first screen"
        # Nothing wider than the phone: the page scrolls down, never sideways.
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        page.screenshot(path=str(artifacts / f"verdict-{name}-{width}.png"), full_page=True)
    finally:
        context.close()
