"""The diagnosis page for a first-time reader: next steps, a quiet delete, context once, ranks that agree."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from app.core.knowledge.loading import Library
from bench.loggen import failure_cascade
from tests.support import SAMPLES, LiveServer


def _diagnose_on_page(page: Page, server: LiveServer, log: str) -> str:
    page.goto(server.url + "/")
    page.fill("#log", log)
    with page.expect_navigation(url=re.compile(r"/d/[\w-]+$")):
        page.click("button[type=submit]")
    return page.url


def test_a_page_with_no_match_says_what_to_do_next(page: Page, server: LiveServer, artifacts: Path) -> None:
    log = "epoch 1 done\nERROR: widget frobnication failed with code 7\nbye\n"
    _diagnose_on_page(page, server, log)
    expect(page.locator("h1")).to_have_text("No known failure found")
    steps = page.locator("section.next-steps")
    expect(steps).to_contain_text("Search the error line")
    expect(steps).to_contain_text("Include the failing rank's log")
    expect(steps).to_contain_text("Check the unexplained lines")
    page.screenshot(path=str(artifacts / "no-match-1280.png"), full_page=True)
    steps.get_by_role("link", name=re.compile("Search for line 2")).click()
    expect(page).to_have_url(re.compile(r"/search\?q=ERROR"))
    expect(page.locator("textarea#q")).to_have_value(re.compile("widget frobnication failed"))


def test_delete_is_a_quiet_action_behind_a_confirmation(page: Page, server: LiveServer) -> None:
    url = _diagnose_on_page(page, server, (SAMPLES / "oom-killed.log").read_text(encoding="utf-8"))
    confirm = page.get_by_role("button", name="Delete it for good")
    expect(confirm).to_be_hidden()  # nothing is one click from deletion
    summary = page.locator("details.delete > summary")
    expect(summary).to_have_text("Delete this diagnosis…")
    # Quiet: smaller and lighter than the page's primary buttons, no filled background.
    assert summary.evaluate("e => getComputedStyle(e).backgroundColor") in ("rgba(0, 0, 0, 0)", "transparent")
    summary.click()
    expect(confirm).to_be_visible()
    assert confirm.evaluate("e => getComputedStyle(e).backgroundColor") != "rgb(10, 61, 145)"  # not the accent fill
    confirm.click()
    expect(page.locator("h1")).to_contain_text("deleted")
    assert httpx.get(url, headers={"Accept": "text/html"}).status_code == 404


def test_log_context_is_shown_once_and_echo_ranks_agree_with_their_lines(
    page: Page, server: LiveServer, library: Library, artifacts: Path
) -> None:
    # 32 ranks: rank 5 runs out of memory and 31 ranks echo it, more than a candidate keeps lines of.
    log = "[rank0]: step 1\n" * 3 + failure_cascade(32).decode()
    _diagnose_on_page(page, server, log)
    record_id = page.url.rsplit("/", 1)[-1]
    windows = httpx.get(f"{server.url}/api/v1/diagnoses/{record_id}/windows").json()
    starts = {(w.get("file"), w["lines"][0]["no"]) for w in windows["windows"]} if isinstance(windows, dict) else None
    # Each stored window appears once on the page, however many candidates it is context for.
    page.locator("details").evaluate_all("els => els.forEach(e => e.open = true)")
    shown = page.locator("pre.window")
    firsts = [shown.nth(i).locator(".ln").first.inner_text() for i in range(shown.count())]
    assert len(firsts) == len(set(firsts)), f"a window is repeated: {firsts}"
    if starts is not None:
        assert len(firsts) == len(starts)

    echo = page.locator("details#e-nccl\\.watchdog_timeout")
    summary = echo.locator("summary").inner_text()
    named = re.search(r"on ranks ([\d, –]+)", summary)
    assert named, summary
    ranks: set[int] = set()
    for part in named.group(1).split(", "):
        a, _, b = part.partition("–")
        ranks |= set(range(int(a), int(b or a) + 1))
    tags = {
        int(t.removeprefix("rank ")) for t in echo.locator("ol.evidence .tag").all_inner_texts() if t.startswith("rank")
    }
    assert ranks == tags, "every rank named with lines has its line shown, and no other"
    marks = {int(m.get_attribute("data-rank") or -1) for m in page.locator("svg.job g.mark.collateral").all()}
    assert ranks <= marks, "and is in the picture"
    assert "more ranks" in summary and "whose lines are not shown" in summary
    page.screenshot(path=str(artifacts / "cascade-32-ranks-1280.png"), full_page=True)
