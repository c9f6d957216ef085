"""The worker's HTTP endpoint: /metrics, /healthz (liveness) and /readyz (readiness).

It runs on the worker's own event loop (aiohttp), beside the polling loop.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Final

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from slot_expiration.options.listen_address import ListenAddress
from slot_expiration.telemetry.liveness import LivenessReport
from slot_expiration.telemetry.readiness import ReadinessReport

OK: Final = 200
UNAVAILABLE: Final = 503
# How long open connections (a scraper's keep-alive) may delay the stop.
SHUTDOWN_TIMEOUT_SECONDS: Final = 2.0


class EndpointError(Exception):
    """The endpoint could not start: its port is taken, or the host is not ours."""


@asynccontextmanager
async def serving(
    address: ListenAddress,
    metrics: Callable[[], bytes],
    liveness: Callable[[], LivenessReport],
    readiness: Callable[[], Awaitable[ReadinessReport]],
) -> AsyncIterator[str]:
    """Serve the three paths on `address` until the block ends; yields the base URL."""

    async def metrics_page(request: web.Request) -> web.Response:
        return web.Response(body=metrics(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(request: web.Request) -> web.Response:
        report = liveness()
        return web.json_response(report.as_json(), status=OK if report.live else UNAVAILABLE)

    async def readyz(request: web.Request) -> web.Response:
        report = await readiness()
        return web.json_response(report.as_json(), status=OK if report.ready else UNAVAILABLE)

    app = web.Application()
    app.router.add_get("/metrics", metrics_page)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_SECONDS)
    await runner.setup()
    try:
        await _listen(runner, address)
        yield base_url(runner, address)
    finally:
        await runner.cleanup()


async def _listen(runner: web.AppRunner, address: ListenAddress) -> None:
    try:
        await web.TCPSite(runner, address.host, address.port).start()
    except OSError as exc:
        raise EndpointError(
            f"cannot serve metrics on {address} (--metrics-addr): {_reason(exc)}"
        ) from None


def _reason(exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return "the port is already in use"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host ({exc.strerror})"
    return (os.strerror(exc.errno) if exc.errno else str(exc)).lower()


def base_url(runner: web.AppRunner, address: ListenAddress) -> str:
    """http://host:port as bound: port 0 becomes the port the system chose."""
    port = runner.addresses[0][1] if runner.addresses else address.port
    return f"http://{ListenAddress(address.host, int(port))}"
