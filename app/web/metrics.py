"""Prometheus metrics in the text exposition format, per process, with no client library."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

# Diagnosis latency buckets, in seconds.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def _labels(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')

    return "{" + ",".join(f'{n}="{esc(v)}"' for n, v in zip(names, values, strict=True)) + "}"


class Metrics:
    """Counters and one histogram; safe to update from worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter[tuple[str, str, str]] = Counter()  # method, route, status
        self.rejections: Counter[tuple[str]] = Counter()  # reason
        self.candidates: Counter[tuple[str, str]] = Counter()  # id, role
        self.latency_counts = [0] * len(BUCKETS)
        self.latency_sum = 0.0
        self.latency_count = 0
        self.in_flight = 0

    def request(self, method: str, route: str, status: int) -> None:
        """Count one HTTP response."""
        with self._lock:
            self.requests[(method, route, str(status))] += 1

    def rejection(self, reason: str) -> None:
        """Count one rejected request by problem type."""
        with self._lock:
            self.rejections[(reason,)] += 1

    def diagnosis(self, seconds: float, candidates: Iterable[tuple[str, str]]) -> None:
        """Record one diagnosis: its latency and the candidates it found."""
        with self._lock:
            for i, bound in enumerate(BUCKETS):
                if seconds <= bound:
                    self.latency_counts[i] += 1
            self.latency_sum += seconds
            self.latency_count += 1
            for key in candidates:
                self.candidates[key] += 1

    def add_in_flight(self, delta: int) -> None:
        """Move the in-flight gauge."""
        with self._lock:
            self.in_flight += delta

    def render(self) -> str:
        """The exposition text."""
        with self._lock:
            out: list[str] = []
            out += [
                "# HELP tracelore_http_requests_total HTTP responses by method, route and status.",
                "# TYPE tracelore_http_requests_total counter",
            ]
            for key, n in sorted(self.requests.items()):
                out.append(f"tracelore_http_requests_total{_labels(('method', 'route', 'status'), key)} {n}")
            out += [
                "# HELP tracelore_rejections_total Requests refused, by reason (problem type).",
                "# TYPE tracelore_rejections_total counter",
            ]
            for reason, n in sorted(self.rejections.items()):
                out.append(f"tracelore_rejections_total{_labels(('reason',), reason)} {n}")
            out += [
                "# HELP tracelore_candidates_total Candidate failures reported, by signature id and role.",
                "# TYPE tracelore_candidates_total counter",
            ]
            for id_role, n in sorted(self.candidates.items()):
                out.append(f"tracelore_candidates_total{_labels(('id', 'role'), id_role)} {n}")
            out += [
                "# HELP tracelore_diagnosis_seconds Time to diagnose one log (read, match, rank).",
                "# TYPE tracelore_diagnosis_seconds histogram",
            ]
            for bound, n in zip(BUCKETS, self.latency_counts, strict=True):
                out.append(f'tracelore_diagnosis_seconds_bucket{{le="{bound}"}} {n}')
            out.append(f'tracelore_diagnosis_seconds_bucket{{le="+Inf"}} {self.latency_count}')
            out.append(f"tracelore_diagnosis_seconds_sum {self.latency_sum:.6f}")
            out.append(f"tracelore_diagnosis_seconds_count {self.latency_count}")
            out += [
                "# HELP tracelore_diagnoses_in_flight Diagnoses running now in this process.",
                "# TYPE tracelore_diagnoses_in_flight gauge",
                f"tracelore_diagnoses_in_flight {self.in_flight}",
            ]
            return "\n".join(out) + "\n"


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
