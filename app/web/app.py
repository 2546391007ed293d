"""The app factory: `create_app(settings=None, *, library=None)` is the one way in.

`uvicorn --factory app.web.app:create_app` (what `tracelore serve --workers N` runs)
calls it with no arguments, so each worker builds its Settings from TRACELORE_* variables.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio.to_thread
import fastapi_offline
from fastapi import Depends, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from app import __version__
from app.config import Settings, thread_policy
from app.core import Library, load_library
from app.core.redaction import Redactor
from app.quota.tiers import tier_table
from app.store.accounts import utcnow
from app.store.db import make_engine, make_sessionmaker
from app.web import accounts, api, encyclopedia, learning, openapi, pages, periodic, prefilter, quota, retention
from app.web.access_log import install_access_log_filter
from app.web.body_deadline import BodyDeadlineMiddleware
from app.web.compression import CompressionMiddleware
from app.web.gate import Gate
from app.web.identity import check_form_origin, csrf_token
from app.web.metrics import Metrics, MetricsMiddleware
from app.web.problems import install_problem_handlers
from app.web.security import SecurityHeadersMiddleware
from app.web.state import AppState, state_of
from app.web.templating import make_templates
from app.web.urls import diagnosis_paths

STATIC = Path(__file__).resolve().parent / "static"
# Swagger UI and ReDoc assets, bundled in a package: the docs pages need no CDN either.
DOCS_ASSETS = Path(fastapi_offline.__file__).resolve().parent / "static"
# How long a stopping server waits for diagnoses still running before it closes the store.
SHUTDOWN_DRAIN_SECONDS = 60


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    # What startup made (modules, the library, templates) lives as long as the server: out of the
    # cyclic collector's way while it serves, a full collection no longer walks all of it again
    # under load. Unfrozen when the app stops: a process that outlives it (tests) loses nothing.
    gc.freeze()
    try:
        async with anyio.create_task_group() as tasks:
            await periodic.start(tasks, app)  # the purge and the learning summary: per process or per cluster
            try:
                yield
            finally:
                tasks.cancel_scope.cancel()
        # A diagnosis whose request was cancelled still runs in its worker thread and then stores
        # its row: closing the store under it would strand that connection in a discarded pool.
        with anyio.move_on_after(SHUTDOWN_DRAIN_SECONDS):
            await state_of(app).gate.drained()
    finally:
        state_of(app).engine.dispose()
        gc.unfreeze()


def _add_docs(app: FastAPI) -> None:
    @app.get("/docs", include_in_schema=False)
    def swagger() -> HTMLResponse:
        page = get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="Tracelore API",
            swagger_js_url="/static/docs/swagger-ui-bundle.js",
            swagger_css_url="/static/docs/swagger-ui.css",
            swagger_favicon_url="/static/docs/favicon.png",
        )
        # A way back to the site above the reference (markup only: the page's CSP hashes its scripts).
        back = (
            b'<body>\n<nav aria-label="Site"><a href="/">Tracelore</a> \xc2\xb7 '
            b'<a href="/failures/">Failure encyclopedia</a></nav>'
        )
        return HTMLResponse(bytes(page.body).replace(b"<body>", back, 1))

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url="/openapi.json",
            title="Tracelore API",
            redoc_js_url="/static/docs/redoc.standalone.js",
            redoc_favicon_url="/static/docs/favicon.png",
            with_google_fonts=False,
        )


def create_app(settings: Settings | None = None, *, library: Library | None = None) -> FastAPI:
    """Build the web app: settings, engine, library, routes and error handlers."""
    settings = settings or Settings()
    app = FastAPI(
        title="Tracelore",
        version=__version__,
        summary="Diagnose failed ML training runs from their logs.",
        lifespan=_lifespan,
        docs_url=None,
        redoc_url=None,
        dependencies=[Depends(check_form_origin)],  # every form, present and future, is checked alike
    )
    engine = make_engine(settings.effective_database_url)
    library = library or load_library(settings.signatures_dir, cache=settings.cache_dir)
    library.patterns.get()  # the Set of every pattern built now, not in some request
    threads = thread_policy(settings)
    redactor = Redactor(network=settings.redact_network)
    install_access_log_filter(redactor)
    templates = make_templates()
    templates.env.globals["csrf_token"] = csrf_token
    templates.env.globals["samples"] = pages.SAMPLES  # the encyclopedia's paste box offers them too
    state = AppState(
        settings=settings,
        engine=engine,
        sessionmaker=make_sessionmaker(engine),
        library=library,
        metrics=Metrics(),
        threads=threads,
        gate=Gate(settings.max_in_flight, settings.retry_after, wait=settings.queue_seconds, threads=threads.diagnoses),
        redactor=redactor,
        templates=templates,
        encyclopedia=encyclopedia.Encyclopedia(library, templates.env),
        tiers=tier_table(settings),
        prefilter=prefilter.published_rules(library, settings),
        clock=utcnow,
    )
    app.state.tracelore = state
    install_problem_handlers(app)
    # Before api.router: its /signatures/{signature_id} would take "prefilter.json".
    app.include_router(prefilter.router, prefix="/api/v1", tags=["signatures"])
    app.include_router(api.router, prefix="/api/v1", tags=["diagnoses"])
    app.include_router(retention.api, prefix="/api/v1")
    app.include_router(quota.router, prefix="/api/v1", tags=["quota"])
    app.include_router(api.ops, tags=["operations"])
    app.include_router(pages.router, include_in_schema=False)
    app.include_router(retention.pages, include_in_schema=False)
    app.include_router(accounts.router, include_in_schema=False)
    app.include_router(learning.router, include_in_schema=False)
    app.include_router(encyclopedia.router, include_in_schema=False)
    app.mount("/static/docs", StaticFiles(directory=DOCS_ASSETS), name="docs_assets")
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    _add_docs(app)
    openapi.install(app)
    state.diagnosis_paths = diagnosis_paths(app)
    app.add_middleware(CompressionMiddleware)
    app.add_middleware(accounts.CsrfCookieMiddleware)
    app.add_middleware(SecurityHeadersMiddleware)
    app.add_middleware(MetricsMiddleware, metrics=state.metrics)
    app.add_middleware(BodyDeadlineMiddleware, seconds=settings.body_seconds)
    return app
