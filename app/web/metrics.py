"""Prometheus metrics through `prometheus-client`, summed over every worker process of a server.

`tracelore serve` points PROMETHEUS_MULTIPROC_DIR at a clean directory before any worker
starts (`app/web/metrics_dir.py`); each process then keeps its values in memory-mapped files
there, and a scrape of any worker reads them all, so counters, the histogram and the
in-flight gauge are the whole server's. Without that variable (an app embedded in a test or
another server) each `Metrics` keeps its values in its own registry, in memory.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, values
from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from app.web.metrics_dir import MULTIPROC_ENV

# Diagnosis latency buckets, in seconds.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

# The `*_created` series only say when a process first counted; multiprocess mode never has them.
# (The library leaves these functions unannotated.)
disable_created_metrics()  # type: ignore[no-untyped-call]


def multiprocess() -> bool:
    """Whether values go to PROMETHEUS_MULTIPROC_DIR (decided by the library when it was first imported)."""
    return values.ValueClass is not values.MutexValue


class Metrics:
    """Counters, one histogram and one gauge; safe to update from worker threads."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        # In multiprocess mode values live in the directory's files whatever registry holds the
        # metric; each scrape collects them with a fresh MultiProcessCollector instead.
        owner = None if multiprocess() else self.registry
        self.requests = Counter(
            "tracelore_http_requests",
            "HTTP responses by method, route and status.",
            ("method", "route", "status"),
            registry=owner,
        )
        self.rejections = Counter(
            "tracelore_rejections", "Requests refused, by reason (problem type).", ("reason",), registry=owner
        )
        self.candidates = Counter(
            "tracelore_candidates",
            "Candidate failures reported, by signature id and role.",
            ("id", "role"),
            registry=owner,
        )
        self.latency = Histogram(
            "tracelore_diagnosis_seconds",
            "Time to diagnose one log (read, match, rank).",
            buckets=BUCKETS,
            registry=owner,
        )
        self.in_flight = Gauge(
            "tracelore_diagnoses_in_flight",
            "Diagnoses running now in the server's live processes.",
            multiprocess_mode="livesum",
            registry=owner,
        )

    def request(self, method: str, route: str, status: int) -> None:
        """Count one HTTP response."""
        self.requests.labels(method, route, str(status)).inc()

    def rejection(self, reason: str) -> None:
        """Count one rejected request by problem type."""
        self.rejections.labels(reason).inc()

    def diagnosis(self, seconds: float, candidates: Iterable[tuple[str, str]]) -> None:
        """Record one diagnosis: its latency and the candidates it found."""
        self.latency.observe(seconds)
        for sig_id, role in candidates:
            self.candidates.labels(sig_id, role).inc()

    def add_in_flight(self, delta: int) -> None:
        """Move the in-flight gauge."""
        self.in_flight.inc(delta)

    def render(self, accept: str = "") -> tuple[bytes, str]:
        """The exposition in the format the scraper accepts, and its content type."""
        encode, content_type = choose_encoder(accept)
        if not multiprocess():
            return encode(self.registry), content_type
        directory = os.environ[MULTIPROC_ENV]
        _forget_dead_processes(Path(directory))
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
        return encode(registry), content_type


def _forget_dead_processes(directory: Path) -> None:
    """Drop the in-flight gauge of workers that died (uvicorn replaces them); their counts stay."""
    for file in directory.glob("gauge_live*_*.db"):
        pid = file.stem.rpartition("_")[2]
        if pid.isdigit() and not _alive(int(pid)):
            mark_process_dead(int(pid), str(directory))  # type: ignore[no-untyped-call]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


API_PREFIX = "/api/v1"


def route_label(scope: Any) -> str:
    """The route template that served a request ("/api/v1/diagnoses/{diagnosis_id}"), never the raw path."""
    path: str = scope["path"]
    template: str | None = getattr(scope.get("route"), "path", None)
    if template is None:
        return "/static" if path.startswith("/static/") else "unmatched"
    # Routes of an included router report their path without the router's prefix.
    if path.startswith(API_PREFIX + "/") and not template.startswith(API_PREFIX):
        return API_PREFIX + template
    return template


class MetricsMiddleware:
    """Count every response by method, route template and status (pure ASGI, streams untouched)."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def send_wrapper(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            self.metrics.request(scope["method"], route_label(scope), status)
