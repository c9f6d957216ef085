"""The worker's HTTP endpoint: /metrics, /healthz (liveness) and /readyz (readiness).

It runs on the worker's own event loop, beside the polling loop, on aiohttp's server
as `http_server` runs it (capped connections, a deadline for each request head, bad
requests counted).
/metrics negotiates its format and compression with prometheus_client's own rules.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.registry import Collector

from slot_expiration.options.listen_address import ListenAddress
from slot_expiration.telemetry.http_messages import Reply, Request
from slot_expiration.telemetry.liveness import LivenessReport
from slot_expiration.telemetry.readiness import ReadinessReport

if TYPE_CHECKING:
    from slot_expiration.telemetry.http_server import HttpServer

OK: Final = 200
UNAVAILABLE: Final = 503
# How long requests in progress (a slow /readyz) may delay the stop.
SHUTDOWN_TIMEOUT_SECONDS: Final = 2.0
JSON: Final = "application/json; charset=utf-8"
TEXT: Final = "text/plain; charset=utf-8"


class EndpointError(Exception):
    """The endpoint could not start: its port is taken, or the host is not ours."""


def _nothing() -> None:
    pass


class _Pages:
    """What each path answers."""

    def __init__(
        self,
        registry: Collector,
        liveness: Callable[[], LivenessReport],
        readiness: Callable[[], Awaitable[ReadinessReport]],
    ) -> None:
        self._registry = registry
        self._liveness = liveness
        self._readiness = readiness

    async def answer(self, request: Request) -> Reply:
        if request.method not in ("GET", "HEAD"):
            return Reply(405, TEXT, b"method not allowed\n", (("allow", "GET, HEAD"),))
        if request.path == "/metrics":
            return self.metrics(request)
        if request.path == "/healthz":
            report = self._liveness()
            return _json(OK if report.live else UNAVAILABLE, report.as_json())
        if request.path == "/readyz":
            ready = await self._readiness()
            return _json(OK if ready.ready else UNAVAILABLE, ready.as_json())
        return Reply(404, TEXT, b"not found\n")

    def metrics(self, request: Request) -> Reply:
        """Text format, or OpenMetrics when `Accept` asks; gzip when `Accept-Encoding` allows."""
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        body = encoder(self._registry)
        headers = [("vary", "Accept, Accept-Encoding")]
        if gzip_accepted(request.headers.get("accept-encoding", "")):
            body = gzip.compress(body)
            headers.append(("content-encoding", "gzip"))
        return Reply(OK, content_type, body, tuple(headers))


def _json(status: int, document: dict[str, Any]) -> Reply:
    return Reply(status, JSON, json.dumps(document).encode())


@asynccontextmanager
async def serving(
    address: ListenAddress,
    registry: Collector,
    liveness: Callable[[], LivenessReport],
    readiness: Callable[[], Awaitable[ReadinessReport]],
    *,
    on_bad_request: Callable[[], None] = _nothing,
) -> AsyncIterator[str]:
    """Serve the three paths on `address` until the block ends; yields the base URL.

    `on_bad_request` is called once per malformed request (the worker counts them).
    """
    pages = _Pages(registry, liveness, readiness)
    server = await _listen(pages, address, on_bad_request)
    try:
        yield base_url(server, address)
    finally:
        await server.close(SHUTDOWN_TIMEOUT_SECONDS)


async def _listen(
    pages: _Pages,
    address: ListenAddress,
    on_bad_request: Callable[[], None],
) -> HttpServer:
    # The server, and aiohttp with it, is imported when an endpoint starts: every command
    # imports this module (its error, its pages), and `once`, `status`, `migrate` and the
    # others, which serve nothing, peak 11 MB lower without aiohttp (`once`: 69.8 -> 58.3 MB).
    from slot_expiration.telemetry.http_server import start_server  # noqa: PLC0415

    try:
        return await start_server(
            pages.answer, address.host, address.port, on_bad_request=on_bad_request
        )
    except OSError as exc:
        raise EndpointError(
            f"cannot serve metrics on {address} (--metrics-addr): {listen_failure(exc)}"
        ) from None


def listen_failure(exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return "the port is already in use"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host ({exc.strerror})"
    return (os.strerror(exc.errno) if exc.errno else str(exc)).lower()


def base_url(server: HttpServer, address: ListenAddress) -> str:
    """http://host:port as bound: port 0 becomes the port the system chose."""
    return f"http://{ListenAddress(address.host, server.port)}"
