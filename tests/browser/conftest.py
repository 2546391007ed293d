"""Real Chromium (Debian's `chromium`, driven by Playwright) against a real uvicorn server.

`.ci/run` installs the browser with apt-get; Playwright's own browser downloads are never used.
Screenshots for review are written to artifacts/ (gitignored).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, sync_playwright

from app.config import Settings
from app.core.engine.diagnose import diagnose
from app.core.knowledge.loading import Library
from app.core.models import Diagnosis
from bench.loggen import failure_cascade, generate
from tests.conftest import database_for
from tests.support import REPO, LiveServer, live_server, make_settings

CHROMIUM = os.environ.get("TRACELORE_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = REPO / "artifacts"
BIG_LOG_BYTES = 300 << 20
EXCERPT_LIMIT = 8 << 20  # what the test server accepts: an excerpt fits, the whole 300 MB log does not


# Package scope: Playwright's sync API holds an event loop in this thread while it runs,
# and tests after this package start loops of their own.
@pytest.fixture(scope="package")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="package")
def browser(playwright: Playwright) -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install -y chromium` (.ci/run does it)")
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield browser
    browser.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    yield context
    context.close()


@pytest.fixture
def page(context: BrowserContext) -> Iterator[Page]:
    page = context.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


def browser_settings(request: pytest.FixtureRequest, tmp: Path, **overrides: object) -> Settings:
    """A fresh migrated SQLite database; limits that let an excerpt of a large log in, not the log."""
    values: dict[str, object] = {
        "max_upload_bytes": EXCERPT_LIMIT,
        "max_log_anonymous": EXCERPT_LIMIT,
        "quota_anonymous": 1000,
    }
    values.update(overrides)
    return make_settings(database_for("sqlite", request, tmp), tmp, **values)


@pytest.fixture(scope="module")
def server(
    request: pytest.FixtureRequest, library: Library, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """The service on a real uvicorn server, for the browser."""
    with live_server(browser_settings(request, tmp_path_factory.mktemp("browser")), library) as live:
        yield live


@pytest.fixture(scope="session")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 300 MB multi-node training log ending in a failure cascade, written once per session.

    `generate()` writes a 20 MB stretch of noise, repeated to size (seconds instead of a
    minute of generating), then the cascade: CUDA OOM on rank 5, echoes on the others.
    """
    root = tmp_path_factory.mktemp("biglog")
    noise = root / "noise.log"
    generate(noise, 20 << 20, failure=False)
    piece = noise.read_bytes()
    noise.unlink()
    path = root / "train-300M.log"
    with path.open("wb") as out:
        written = 0
        while written + len(piece) <= BIG_LOG_BYTES:
            out.write(piece)
            written += len(piece)
        rest = piece[: BIG_LOG_BYTES - written]
        out.write(rest[: rest.rfind(b"\n") + 1])
        out.write(failure_cascade(32))
    return path


@pytest.fixture(scope="session")
def big_log_diagnosis(big_log: Path, library: Library) -> Diagnosis:
    """The server's own diagnosis of the whole 300 MB log."""
    return diagnose(big_log, library, name=big_log.name)
