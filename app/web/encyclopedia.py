"""The failure encyclopedia: /failures/, /failures/{id}, /tags/{tag}, /search, sitemap.xml, robots.txt.

Pages come from the app's loaded library and are rendered once per app (an `Encyclopedia` on
the app's state); serving them touches no database.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

import jinja2
from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from app.core import Library
from app.web.deps import SettingsDep
from app.web.search import MAX_QUERY, Results, SearchIndex, search
from app.web.site import Links, Site, robots
from app.web.state import state_of

router = APIRouter()

PAGES_PER_BASE = 2  # public base URLs whose pages stay cached (TRACELORE_BASE_URL makes it one)
CACHE_CONTROL = "public, max-age=300"
PAGE_METHODS = ["GET", "HEAD"]  # crawlers and link checkers send HEAD


@dataclass(frozen=True)
class Rendered:
    body: str
    etag: str


class Encyclopedia:
    """One app's encyclopedia: its `Site`, rendered pages and search index, built on first use."""

    def __init__(self, library: Library, env: jinja2.Environment) -> None:
        self.library = library
        self.site = Site(library, env)
        self._lock = threading.Lock()
        self._pages: OrderedDict[tuple[str, ...], Rendered] = OrderedDict()
        # Without TRACELORE_BASE_URL the canonical links follow the request's Host: bound what
        # clients sending many Host names can make the cache hold.
        self.cache_limit = PAGES_PER_BASE * (len(library) + len(self.site.tags) + 3)
        self._index: SearchIndex | None = None

    def page(self, key: tuple[str, ...], render: Callable[[], str]) -> Rendered:
        """A rendered page from the cache, rendering it the first time."""
        with self._lock:
            hit = self._pages.get(key)
            if hit is not None:
                self._pages.move_to_end(key)
                return hit
        body = render()  # outside the lock: pages render in parallel; a race renders twice, harmlessly
        rendered = Rendered(body, '"' + hashlib.sha256(body.encode()).hexdigest()[:20] + '"')
        with self._lock:
            self._pages[key] = rendered
            while len(self._pages) > self.cache_limit:
                self._pages.popitem(last=False)
        return rendered

    @property
    def index(self) -> SearchIndex:
        """The word index of the library, built once."""
        with self._lock:
            if self._index is None:
                self._index = SearchIndex.build(self.library)
            return self._index


def get_encyclopedia(request: Request) -> Encyclopedia:
    """The app's encyclopedia."""
    encyclopedia: Encyclopedia = state_of(request.app).encyclopedia
    return encyclopedia


EncyclopediaDep = Annotated[Encyclopedia, Depends(get_encyclopedia)]


def _base(request: Request, base_url: str) -> str:
    return base_url.rstrip("/") or str(request.base_url).rstrip("/")


def _respond(request: Request, page: Rendered, media_type: str = "text/html; charset=utf-8") -> Response:
    headers = {"ETag": page.etag, "Cache-Control": CACHE_CONTROL}
    if page.etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    return Response(page.body, media_type=media_type, headers=headers)


@router.api_route("/failures/", methods=PAGE_METHODS, name="failures_index", response_class=HTMLResponse)
def failures_index(request: Request, encyclopedia: EncyclopediaDep, settings: SettingsDep) -> Response:
    """Every failure the library knows, grouped by layer."""
    base = _base(request, settings.base_url)
    page = encyclopedia.page(("index", base), lambda: encyclopedia.site.render_index(Links(), base=base))
    return _respond(request, page)


@router.api_route("/failures/{signature_id}", methods=PAGE_METHODS, name="failure_page", response_class=HTMLResponse)
def failure_page(request: Request, signature_id: str, encyclopedia: EncyclopediaDep, settings: SettingsDep) -> Response:
    """One failure: what it means, its causes, how to confirm, fix and verify."""
    static_name = signature_id.removesuffix(".html")
    if static_name != signature_id and static_name in encyclopedia.library.signatures:
        # A link copied from a static build of the encyclopedia.
        return RedirectResponse(request.url_for("failure_page", signature_id=static_name).path, status_code=301)
    encyclopedia.site.signature(signature_id)  # NotFound before anything is cached
    base = _base(request, settings.base_url)
    stats = state_of(request.app).seen.get(signature_id)  # the last summary's; the page is cached per summary
    page = encyclopedia.page(
        ("entry", signature_id, base, repr(stats)),
        lambda: encyclopedia.site.render_entry(signature_id, Links(), base=base, seen=stats),
    )
    return _respond(request, page)


@router.api_route("/tags/{tag}", methods=PAGE_METHODS, name="tag_page", response_class=HTMLResponse)
def tag_page(request: Request, tag: str, encyclopedia: EncyclopediaDep, settings: SettingsDep) -> Response:
    """The failures with one tag."""
    encyclopedia.site.tagged(tag)  # NotFound before anything is cached
    base = _base(request, settings.base_url)
    page = encyclopedia.page(("tag", tag, base), lambda: encyclopedia.site.render_tag(tag, Links(), base=base))
    return _respond(request, page)


@router.get("/search", name="search_page", response_class=HTMLResponse)
async def search_page(
    encyclopedia: EncyclopediaDep,
    q: Annotated[str, Query(description="an error line, a traceback or words")] = "",
) -> Response:
    """Find entries for an error line or traceback (the diagnosis matcher), then by words."""
    site = encyclopedia.site
    if len(q) > MAX_QUERY:
        error = (
            f"The search text is {len(q):,} characters; search reads at most {MAX_QUERY:,}. "
            "Paste the error line or the traceback, or diagnose the whole log instead."
        )
        html = site.render_search(Results(q[:MAX_QUERY]), Links(), error=error)
        return HTMLResponse(html, status_code=400)
    index = await run_in_threadpool(lambda: encyclopedia.index)
    results = await run_in_threadpool(search, q, encyclopedia.library, index)
    return HTMLResponse(site.render_search(results, Links()), headers={"Cache-Control": "no-store"})


@router.api_route("/sitemap.xml", methods=PAGE_METHODS, name="sitemap")
def sitemap(request: Request, encyclopedia: EncyclopediaDep, settings: SettingsDep) -> Response:
    """Every encyclopedia page, for search engines."""
    base = _base(request, settings.base_url)
    page = encyclopedia.page(("sitemap", base), lambda: encyclopedia.site.sitemap(Links(), base))
    return _respond(request, page, "application/xml")


@router.api_route("/robots.txt", methods=PAGE_METHODS, name="robots", response_class=PlainTextResponse)
def robots_txt(request: Request, settings: SettingsDep) -> PlainTextResponse:
    """Crawl the encyclopedia; keep diagnoses, the API and search results out of indexes."""
    base = _base(request, settings.base_url)
    text = robots(sitemap=f"{base}/sitemap.xml", disallow=("/d/", "/api/", "/search", "/diagnose"))
    return PlainTextResponse(text, headers={"Cache-Control": CACHE_CONTROL})
