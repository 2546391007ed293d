"""The paste flow, the diagnosis page and the encyclopedia, in a real browser."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

from playwright.sync_api import Browser, Page, expect

from app.core.engine.diagnose import diagnose
from app.core.knowledge.loading import Library
from tests.support import REPO, SAMPLES, LiveServer


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


JOB = REPO / "tests" / "corpus" / "cases" / "gen-dist-per-rank-index-error"


def _job_page_names_each_file(page: Page, files: list[str]) -> None:
    """The page of a job: the initiating failure, and each evidence line with the file it is from."""
    expect(page.locator("h1")).to_have_text("Token or label index out of range (CPU)")
    names = page.locator("ol.evidence span.file").all_text_contents()
    assert names and set(names) <= set(files)
    expect(page.locator("section.meta")).to_contain_text(files[0])


def test_the_logs_of_a_job_are_sent_together(page: Page, server: LiveServer, tmp_path: Path) -> None:
    ranks = sorted(JOB.glob("rank*.log"))
    page.goto(server.url + "/")
    page.set_input_files("#file", [str(p) for p in reversed(ranks)])
    expect(page.locator("#excerpt-status")).to_contain_text("3 files")
    with page.expect_navigation(url=re.compile(r"/d/[\w-]+$")):
        page.click("button[type=submit]")
    _job_page_names_each_file(page, [p.name for p in ranks])

    archive = tmp_path / "job.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for p in ranks:
            tar.add(p, arcname=f"job/{p.name}")
    page.goto(server.url + "/")
    page.set_input_files("#file", str(archive))
    expect(page.locator("#excerpt-status")).to_contain_text("sent whole")
    with page.expect_navigation(url=re.compile(r"/d/[\w-]+$")):
        page.click("button[type=submit]")
    _job_page_names_each_file(page, [f"job/{p.name}" for p in ranks])
