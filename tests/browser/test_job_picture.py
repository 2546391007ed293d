"""The picture of the job on the diagnosis page: lanes per rank, drawn by the server, in Chromium."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Browser, Page, expect

from app.core.engine.diagnose import diagnose
from app.core.knowledge.loading import Library
from tests.support import REPO, LiveServer

# Rank 5 runs out of memory at 09:14:41; ranks 0-3 time out in NCCL 9 min 48 s later.
TIMED_JOB = """\
[rank0]:[2026-03-14 09:12:09,402] INFO: torch 2.3.1+cu121, NCCL version 2.20.5, world size 8
[rank0]:[2026-03-14 09:13:02,551] INFO: step 1/12000 loss 2.4113
[rank0]:[2026-03-14 09:14:00,488] INFO: step 2/12000 loss 2.3805
[rank5]:[2026-03-14 09:14:41,010] ERROR: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. \
GPU 5 has a total capacity of 79.15 GiB of which 2.12 GiB is free.
""" + "".join(
    f"[rank{r}]:[2026-03-14 09:24:29,{118 + r}] ERROR: [Rank {r}] Watchdog caught collective operation timeout: "
    f"WorkNCCL(SeqNum=1187, OpType=ALLREDUCE, NumelIn=131334144, NumelOut=131334144, Timeout(ms)=600000) "
    f"ran for 6000{40 + r} milliseconds before timing out.\n"
    for r in (0, 3, 1, 2)
)
HANG = REPO / "tests" / "corpus" / "cases" / "gen-dist-hang-rank3-of-4" / "log.txt"


def _diagnose_on_page(page: Page, server: LiveServer, log: str) -> str:
    page.goto(server.url + "/")
    page.fill("#log", log)
    with page.expect_navigation(url=re.compile(r"/d/[\w-]+$")):
        page.click("button[type=submit]")
    return page.url


def test_the_job_is_drawn_rank_by_rank_with_the_wait_labelled(
    page: Page, browser: Browser, server: LiveServer, library: Library, artifacts: Path
) -> None:
    d = diagnose(TIMED_JOB.encode(), library)
    first = d.initiating
    assert first is not None and first.rank == 5
    url = _diagnose_on_page(page, server, TIMED_JOB)

    svg = page.locator("svg.job")
    expect(svg).to_be_visible()
    assert svg.get_attribute("data-axis") == "time"
    lanes = svg.locator("g.lane text.lane-label")
    expect(lanes).to_have_text(["rank 0", "rank 1", "rank 2", "rank 3", "rank 5"])
    # The first failure sits in rank 5's lane, and only there.
    initiating = svg.locator("g.mark.initiating")
    expect(initiating).to_have_count(1)
    assert initiating.get_attribute("data-rank") == "5"
    assert initiating.get_attribute("data-line") == str(first.line)
    # One echo in each waiting rank's lane, to the right of the first failure.
    echoes = svg.locator("g.mark.collateral")
    expect(echoes).to_have_count(4)
    assert sorted(echoes.nth(i).get_attribute("data-rank") or "" for i in range(4)) == ["0", "1", "2", "3"]
    first_x = initiating.bounding_box()
    assert first_x is not None
    for i in range(4):
        box = echoes.nth(i).bounding_box()
        assert box is not None and box["x"] > first_x["x"]
    # Each echo is drawn at its own rank's lane height.
    for i in range(4):
        rank = echoes.nth(i).get_attribute("data-rank")
        lane = svg.locator(f"g.lane[data-ranks='{rank}'] line.lane-line").bounding_box()
        mark = echoes.nth(i).bounding_box()
        assert lane is not None and mark is not None
        assert abs((mark["y"] + mark["height"] / 2) - lane["y"]) < 2
    expect(svg.locator("g.wait text")).to_have_text("9 min 48 s later")
    expect(page.locator("figure.job-picture figcaption")).to_contain_text(first.title)
    page.screenshot(path=str(artifacts / "job-picture-1280.png"), full_page=True)
    page.locator("figure.job-picture").screenshot(path=str(artifacts / "job-picture-figure-1280.png"))

    # On a 390 px phone: the picture fits without scrolling and its text keeps a readable size.
    phone = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2)
    try:
        small = phone.new_page()
        small.goto(url)
        picture = small.locator("svg.job")
        expect(picture).to_be_visible()
        box = picture.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
        size = small.locator("svg.job text.lane-label").first.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
        assert size >= 11
        assert small.evaluate("document.documentElement.scrollWidth") <= 390, "the page scrolls sideways"
        small.screenshot(path=str(artifacts / "job-picture-390.png"), full_page=True)
        small.locator("figure.job-picture").screenshot(path=str(artifacts / "job-picture-figure-390.png"))
    finally:
        phone.close()


def test_a_hang_highlights_the_suspect_rank_even_though_it_logged_nothing(
    page: Page, server: LiveServer, library: Library, artifacts: Path
) -> None:
    log = HANG.read_text(encoding="utf-8")
    d = diagnose(log.encode(), library)
    assert d.hang is not None and d.hang.rank == 3
    _diagnose_on_page(page, server, log)

    svg = page.locator("svg.job")
    assert svg.get_attribute("data-axis") == "line"  # the gloo errors carry no time
    suspect = svg.locator("g.lane.suspect")
    expect(suspect).to_have_count(1)
    assert suspect.get_attribute("data-ranks") == "3"
    expect(suspect.locator("text.lane-note")).to_have_text("suspect")
    expect(suspect.locator("rect.suspect-band")).to_be_visible()
    # Rank 3 never reported the timeout: its lane is empty; the waiting ranks' lanes are not.
    expect(svg.locator("g.mark[data-rank='3']")).to_have_count(0)
    for rank in (0, 1, 2):
        expect(svg.locator(f"g.mark[data-rank='{rank}']")).not_to_have_count(0)
    expect(svg.locator("g.mark.initiating")).to_have_count(1)
    page.screenshot(path=str(artifacts / "job-picture-hang-1280.png"), full_page=True)
