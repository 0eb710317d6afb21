"""What the service did: Prometheus metrics (served at /metrics) and the access log on stderr.

One ASGI middleware, outermost, sees every response (the 401/408/413/422/429 of the other layers
too), times it, counts it by route template (unknown paths are "other", so a scan of random
URLs cannot grow the label set) and logs one line. An exception that escapes the app is logged
with its traceback and answered 500 here, so it is counted like any response.
"""

from __future__ import annotations

import logging
import time

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .limits import reply

log = logging.getLogger("siamese.access")
# any other request method is counted as "other": made-up methods must not grow the label set either
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
errors = logging.getLogger("siamese.serve")

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


class Metrics:
    """The service's instruments, in a registry of its own (several apps can live in one process)."""

    def __init__(self):
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "siamese_requests",
            "HTTP requests by route, method and status",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "siamese_request_seconds",
            "Time from the request to the end of the response",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.queue_wait = Histogram(
            "siamese_queue_wait_seconds",
            "Time a request waited for its model call",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.batch_texts = Histogram(
            "siamese_batch_texts", "Texts per model call", buckets=SIZE_BUCKETS, registry=self.registry
        )
        self.batch_requests = Histogram(
            "siamese_batch_requests", "Requests per model call", buckets=SIZE_BUCKETS, registry=self.registry
        )

    def observe_batch(self, waits: list[float], texts: int) -> None:
        for wait in waits:
            self.queue_wait.observe(wait)
        self.batch_texts.observe(texts)
        self.batch_requests.observe(len(waits))

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class Observe:
    """ASGI middleware: metrics and an access line (method, path, status, ms) per request."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics, routes: set[str]):
        self.app, self.metrics = app, metrics
        self.routes = routes  # the app's paths: requests refused before routing still count under theirs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start = time.perf_counter()
        status = 0

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        except Exception:
            errors.exception("%s %s failed", scope["method"], _printable(scope["path"]))
            if status == 0:
                await reply(send_status, 500, "internal error (logged on the server)")
        finally:
            seconds = time.perf_counter() - start
            route = scope.get("route")
            label = getattr(route, "path", None) or (scope["path"] if scope["path"] in self.routes else "other")
            method = scope["method"] if scope["method"] in METHODS else "other"
            self.metrics.requests.labels(label, method, str(status or 499)).inc()  # 499: client left
            self.metrics.latency.labels(label).observe(seconds)
            log.info("%s %s %d %.1f ms", scope["method"], _printable(scope["path"]), status or 499, 1000 * seconds)


def _printable(path: str) -> str:
    """The path with control characters escaped: a %0A in a URL must not forge a log line."""
    return path if path.isprintable() else repr(path)[1:-1][:300]
