"""Prometheus metrics of one app: requests per route template, predictions, retrain jobs.

Each app has its own ``CollectorRegistry`` so several apps (tests, benchmarks) can live in
one process.  The middleware is plain ASGI: it adds a few microseconds per request, where
``BaseHTTPMiddleware`` would add a task and a copy of the body.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ServiceMetrics:
    """The app's metric families."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "ssdpredict_http_requests_total",
            "HTTP requests by method, route template and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "ssdpredict_http_request_duration_seconds",
            "HTTP request latency by method and route template",
            ["method", "route"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.predictions = Counter(
            "ssdpredict_predictions_total",
            "Workloads predicted, by device",
            ["device"],
            registry=self.registry,
        )
        self.jobs = Counter(
            "ssdpredict_retrain_jobs_total",
            "Retrain jobs by state reached (started, succeeded, failed)",
            ["state"],
            registry=self.registry,
        )
        self.jobs_running = Gauge(
            "ssdpredict_retrain_jobs_running", "Retrain jobs running now", registry=self.registry
        )

        # labels() takes a lock and hashes its arguments; the hot path reuses the children.
        self._request_children: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self._prediction_children: dict[str, Any] = {}

    def observe_request(self, method: str, route: str, status: str, seconds: float) -> None:
        """Count and time one request."""
        key = (method, route, status)
        children = self._request_children.get(key)
        if children is None:
            children = (self.requests.labels(method, route, status), self.latency.labels(method, route))
            self._request_children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def count_predictions(self, device: str, n: int = 1) -> None:
        """Count ``n`` predicted workloads of a (known) device."""
        child = self._prediction_children.get(device)
        if child is None:
            child = self._prediction_children[device] = self.predictions.labels(device)
        child.inc(n)

    def job_state(self, state: str) -> None:
        """Count a job reaching ``state`` and keep the running gauge in step."""
        self.jobs.labels(state=state).inc()
        if state == "started":
            self.jobs_running.inc()
        elif state in ("succeeded", "failed"):
            self.jobs_running.dec()


class MetricsMiddleware:
    """Count and time every HTTP request under its route template (``/v1/devices/{device}``)."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500  # stays 500 when the app raises before responding

        async def send_and_record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_record)
        finally:
            route = scope.get("route")
            # Unmatched paths share one label so random URLs cannot blow up cardinality.
            template = getattr(route, "path", None) or "<unmatched>"
            method = scope.get("method", "")
            self.metrics.observe_request(method, template, str(status), time.perf_counter() - start)
