"""`slot-expiration ui`'s server: the page on the worker endpoint's own small server.

Read-only by construction: GET and HEAD only, one read-only transaction per page,
no state between requests. Optional HTTP basic authentication (compared in
constant time); strict headers (no script may run, no other page may frame it, no
cache keeps the ids it shows).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Final

from slot_expiration.domain import utc_now
from slot_expiration.options.listen_address import ListenAddress
from slot_expiration.store import StoreError
from slot_expiration.telemetry.endpoints import listen_failure
from slot_expiration.telemetry.http_server import HttpServer, Reply, Request, start_server
from slot_expiration.ui import UiServeError
from slot_expiration.ui.page import render_error, render_page, style_hash
from slot_expiration.ui.snapshot import UiSnapshot, take_snapshot

HTML: Final = "text/html; charset=utf-8"
TEXT: Final = "text/plain; charset=utf-8"
REALM: Final = 'Basic realm="slot-expiration", charset="UTF-8"'
# Pages read at once; more requests wait their turn rather than open more sessions.
CONCURRENT_READS: Final = 2
SHUTDOWN_TIMEOUT_SECONDS: Final = 2.0

Snapshot = Callable[[], Awaitable[UiSnapshot]]


def security_headers() -> tuple[tuple[str, str], ...]:
    policy = (
        f"default-src 'none'; style-src {style_hash()}; img-src 'none'; "
        "form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
    )
    return (
        ("content-security-policy", policy),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("x-frame-options", "DENY"),
        ("cache-control", "no-store"),
    )


class UiPages:
    """Answers each request: the page at `/`, 401 without the credentials it asks for."""

    def __init__(
        self,
        snapshot: Snapshot,
        credentials: tuple[str, str] | None,
        describe_failure: Callable[[StoreError], str],
    ) -> None:
        self._snapshot = snapshot
        self._expected = _basic(credentials) if credentials is not None else None
        self._describe_failure = describe_failure
        self._reads = asyncio.Semaphore(CONCURRENT_READS)

    async def answer(self, request: Request) -> Reply:
        if request.method not in ("GET", "HEAD"):
            return Reply(405, TEXT, b"method not allowed\n", (("allow", "GET, HEAD"),))
        if not self._authorized(request.headers.get("authorization", "")):
            return Reply(401, TEXT, b"authentication required\n", (("www-authenticate", REALM),))
        if request.path != "/":
            return Reply(404, TEXT, b"not found\n")
        return await self._page()

    def _authorized(self, header: str) -> bool:
        if self._expected is None:
            return True
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            given = base64.b64decode(token.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        # Constant time: how much of a guess was right must not show in the timing.
        return hmac.compare_digest(given, self._expected)

    async def _page(self) -> Reply:
        async with self._reads:
            try:
                snapshot = await self._snapshot()
            except StoreError as exc:
                body = render_error(self._describe_failure(exc))
                return Reply(503, HTML, body.encode(), security_headers())
        return Reply(200, HTML, render_page(snapshot).encode(), security_headers())


def _basic(credentials: tuple[str, str]) -> bytes:
    user, password = credentials
    return f"{user}:{password}".encode()


@asynccontextmanager
async def serving_ui(
    address: ListenAddress,
    database_url: str,
    credentials: tuple[str, str] | None,
    describe_failure: Callable[[StoreError], str],
) -> AsyncIterator[str]:
    """Serve the page on `address` until the block ends; yields its URL."""
    pages = UiPages(lambda: take_snapshot(database_url, utc_now()), credentials, describe_failure)
    server = await _listen(pages, address)
    try:
        yield f"http://{ListenAddress(address.host, server.port)}/"
    finally:
        await server.close(SHUTDOWN_TIMEOUT_SECONDS)


async def _listen(pages: UiPages, address: ListenAddress) -> HttpServer:
    try:
        return await start_server(pages.answer, address.host, address.port)
    except OSError as exc:
        # The endpoint's wording for the same failures (a port in use, an unknown host).
        reason = listen_failure(exc)
        raise UiServeError(f"cannot serve the page on {address} (--addr): {reason}") from None
