"""`slot-expiration ui`'s server: the page on the worker endpoint's server (`http_server`).

Read-only by construction: GET and HEAD only, one read-only transaction per page,
no state between requests. Optional HTTP basic authentication (compared in
constant time); strict headers (no script may run, no other page may frame it, no
cache keeps the ids it shows). `?refresh=SECONDS` asks the browser to reload the page
that often (a <meta> refresh: no script); any other query is refused in one line (400).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Final
from urllib.parse import parse_qs

from slot_expiration.db import StoreError
from slot_expiration.options.listen_address import ListenAddress
from slot_expiration.status.check import Verdict, judge
from slot_expiration.telemetry.endpoints import listen_failure
from slot_expiration.telemetry.http_messages import Reply, Request
from slot_expiration.telemetry.http_server import HttpServer, start_server
from slot_expiration.ui import UiServeError
from slot_expiration.ui.page import PageOptions, render_page, render_unjudged, style_hash
from slot_expiration.ui.snapshot import UiSnapshot, take_snapshot

HTML: Final = "text/html; charset=utf-8"
TEXT: Final = "text/plain; charset=utf-8"
REALM: Final = 'Basic realm="slot-expiration", charset="UTF-8"'
# Pages read at once; more requests wait their turn rather than open more sessions.
CONCURRENT_READS: Final = 2
SHUTDOWN_TIMEOUT_SECONDS: Final = 2.0
# `?refresh=SECONDS`: no faster than this (each page is a snapshot of the database), no
# slower than an hour.
REFRESH_SECONDS: Final = range(5, 3_601)

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
        interval_seconds: float,
        options: PageOptions,
    ) -> None:
        self._snapshot = snapshot
        self._expected = _basic(credentials) if credentials is not None else None
        self._describe_failure = describe_failure
        self._interval_seconds = interval_seconds
        self._options = options
        self._reads = asyncio.Semaphore(CONCURRENT_READS)

    async def answer(self, request: Request) -> Reply:
        if request.method not in ("GET", "HEAD"):
            return Reply(405, TEXT, b"method not allowed\n", (("allow", "GET, HEAD"),))
        if not self._authorized(request.headers.get("authorization", "")):
            return Reply(401, TEXT, b"authentication required\n", (("www-authenticate", REALM),))
        if request.path != "/":
            return Reply(404, TEXT, b"not found\n")
        try:
            options = _with_query(self._options, request.query)
        except ValueError as exc:
            return Reply(400, TEXT, f"{exc}\n".encode())
        return await self._page(options)

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

    async def _page(self, options: PageOptions) -> Reply:
        async with self._reads:
            try:
                snapshot = await self._snapshot()
            except StoreError as exc:
                # Nothing could be judged: the verdict `status --check` gives then.
                unknown = Verdict.unknown(self._describe_failure(exc))
                body = render_unjudged(unknown, options)
                return Reply(503, HTML, body.encode(), security_headers())
        verdict = judge(snapshot.health, self._interval_seconds)
        body = render_page(snapshot, verdict, options)
        return Reply(200, HTML, body.encode(), security_headers())


def _with_query(options: PageOptions, query: str) -> PageOptions:
    """The page's options with the request's `?refresh=SECONDS`; ValueError, in one line
    naming the parameter, for anything else."""
    if not query:
        return options
    try:
        given = parse_qs(query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise ValueError("the query is not name=value pairs: give ?refresh=SECONDS") from None
    unknown = sorted(set(given) - {"refresh"})
    if unknown:
        raise ValueError(f"unknown parameter {unknown[0]!r}: the page takes ?refresh=SECONDS")
    (value, *more) = given["refresh"]
    seconds = int(value) if value.isdigit() and not more else None
    if seconds not in REFRESH_SECONDS:
        raise ValueError(
            f"refresh: a whole number of seconds from {REFRESH_SECONDS.start} to "
            f"{REFRESH_SECONDS.stop - 1}, once"
        )
    return replace(options, refresh_seconds=seconds)


def _basic(credentials: tuple[str, str]) -> bytes:
    user, password = credentials
    return f"{user}:{password}".encode()


@asynccontextmanager
async def serving_ui(  # noqa: PLR0913 - where, what from, who may read, how to judge and link
    address: ListenAddress,
    database_url: str,
    *,
    credentials: tuple[str, str] | None,
    describe_failure: Callable[[StoreError], str],
    interval_seconds: float,
    options: PageOptions,
    replicas: Sequence[ListenAddress] = (),
) -> AsyncIterator[str]:
    """Serve the page on `address` until the block ends; yields its URL. Each page asks
    the `replicas` for their /readyz too."""
    pages = UiPages(
        lambda: take_snapshot(database_url, interval_seconds, replicas),
        credentials,
        describe_failure,
        interval_seconds,
        options,
    )
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
