"""Refusals reach the person as readable messages: the daily quota, and any problem+json."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, Route, expect

from app.config import Settings
from app.core.knowledge.loading import Library
from tests.browser.conftest import browser_settings
from tests.support import SAMPLES, live_server

QUOTAS = "quota_anonymous" in Settings.model_fields


def test_a_spent_quota_is_explained_on_the_page(
    page: Page, request: pytest.FixtureRequest, library: Library, tmp_path: Path, artifacts: Path
) -> None:
    settings = browser_settings(request, tmp_path, quota_anonymous=1)
    with live_server(settings, library) as server:
        page.goto(server.url + "/")
        page.fill("#log", (SAMPLES / "oom-killed.log").read_text(encoding="utf-8"))
        with page.expect_navigation(url=re.compile(r"/d/[\w-]+$")):
            page.click("button[type=submit]")

        if not QUOTAS:  # without daily quotas on this server, a proxy's 429 reaches the page the same way
            problem = {
                "type": "/problems/quota-exceeded",
                "title": "Daily quota spent",
                "status": 429,
                "detail": "1 of 1 diagnoses used today; the count starts again at midnight UTC.",
            }

            def refuse(route: Route) -> None:
                headers = {"Content-Type": "application/problem+json", "Retry-After": "3600"}
                route.fulfill(status=429, headers=headers, body=json.dumps(problem))

            page.route("**/api/v1/diagnoses", refuse)

        page.goto(server.url + "/")
        page.set_input_files("#file", str(SAMPLES / "ddp-cuda-oom.log"))
        page.wait_for_selector("#excerpt-summary[data-kept]")
        with page.expect_response("**/api/v1/diagnoses") as answer:
            page.click("button[type=submit]")
        response = answer.value
        assert response.status == 429
        body = response.json()
        alert = page.locator("#excerpt-error")
        expect(alert).to_be_visible()
        expect(alert).to_contain_text(body["title"])
        expect(alert).to_contain_text(body["detail"])
        expect(page).to_have_url(re.compile(r"/$"))
        page.screenshot(path=str(artifacts / "quota-spent.png"), full_page=True)
        assert "{" not in alert.inner_text()  # no raw JSON

        if QUOTAS:  # and without JavaScript's help: the plain form post
            page.unroute("**/api/v1/diagnoses")
            page.set_input_files("#file", [])
            page.fill("#log", "RuntimeError: CUDA error: out of memory")
            page.click("button[type=submit]")
            expect(page.locator("#form-error")).to_be_visible()


def test_any_problem_from_the_server_is_shown(page: Page, server: object) -> None:
    url = server.url
    problem = {
        "type": "/problems/overloaded",
        "title": "Server busy",
        "status": 503,
        "detail": "4 diagnoses are running.",
    }
    page.route(
        "**/api/v1/diagnoses",
        lambda route: route.fulfill(
            status=503,
            headers={"Content-Type": "application/problem+json", "Retry-After": "5"},
            body=json.dumps(problem),
        ),
    )
    page.goto(url + "/")
    page.set_input_files("#file", str(SAMPLES / "torn-checkpoint.log"))
    page.wait_for_selector("#excerpt-summary[data-kept]")
    page.click("button[type=submit]")
    alert = page.locator("#excerpt-error")
    expect(alert).to_contain_text("Server busy.")
    expect(alert).to_contain_text("4 diagnoses are running. Try again in 5 s.")
