"""The endpoint's HTTP server: aiohttp's, on the running event loop, its connections capped.

Where each guarantee comes from:

- HTTP/1.1 (parsing, keep-alive, pipelining, HEAD, 400 for bytes that are not a request):
  aiohttp's low-level server, `aiohttp.web.Server`.
- a deadline for each request head (slowloris): aiohttp's `keepalive_timeout`, armed at
  connect and again after each answer, closes a connection that has not sent a whole
  request head by then. Bytes trickling in do not extend it.
- the head's size: aiohttp's parser refuses (400) a request line or a header line longer
  than `MAX_LINE_BYTES`, or more than `MAX_HEADERS` header lines.
- shutdown: aiohttp's. Idle connections are closed at once; an answer in progress gets
  the timeout, then is cancelled.
- malformed requests counted, never an ERROR line: aiohttp answers them itself and reports
  each one, with the parser's error attached, to the logger it is given. That logger is
  `_BadRequestLog`: it calls `on_bad_request` and logs a DEBUG line instead.
- at most `max_connections` connections: aiohttp has no such limit, and nor has asyncio's
  accept loop. Without one, idle sockets once took every file descriptor the worker had,
  and its database sessions failed. So this module accepts connections itself, one at a
  time, and hands each to aiohttp (`loop.connect_accepted_socket`). At the cap, a newcomer
  closes the connection idle the longest (one that is not being answered), so a probe
  still gets through while others hold idle sockets. A newcomer is turned away only when
  every connection is being answered. Connections waiting in the kernel's listen queue (up
  to `LISTEN_QUEUE`) hold no descriptor of ours. So the server holds the sockets of at
  most `max_connections` connections, plus the one being accepted.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

import structlog
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.log import server_logger

from slot_expiration.telemetry.http_messages import Reply, Request

# Far below any sane RLIMIT_NOFILE (1024 is the smallest soft limit in use): one
# Prometheus, a kubelet's probes and a person with curl need a handful.
MAX_CONNECTIONS: Final = 64
# Long enough for a slow client to send a request head, short enough that idle
# sockets are reclaimed. A scraper's keep-alive connection idle longer than this
# (Prometheus scrapes every 15-60 s) is closed and reopened: one cheap connect.
IDLE_TIMEOUT_SECONDS: Final = 10.0
# The request line and each header line; ours are short paths and a scraper's few
# headers. With MAX_HEADERS, a connection buffers at most about 260 KiB of head.
MAX_LINE_BYTES: Final = 8 * 1024
MAX_HEADERS: Final = 32
# Connections the kernel keeps waiting to be accepted; they hold no descriptor of ours,
# and a burst of connects (a probe among them) waits here rather than in SYN retries.
LISTEN_QUEUE: Final = 1024
# After accept() fails for want of descriptors or memory, as long as asyncio's own
# servers wait: the connections wait in the listen queue meanwhile.
ACCEPT_RETRY_SECONDS: Final = 1.0

_log = structlog.get_logger("slot_expiration")


@dataclass(frozen=True, slots=True)
class Limits:
    max_connections: int = MAX_CONNECTIONS
    idle_timeout_seconds: float = IDLE_TIMEOUT_SECONDS


Handler = Callable[[Request], Awaitable[Reply]]


def _nothing() -> None:
    pass


class _BadRequestLog(logging.Logger):
    """The logger aiohttp's server reports to. A request aiohttp refused as malformed
    comes with the parser's error: it is counted and logged at DEBUG (bytes anyone can
    send must not fill the log). Anything else goes on to aiohttp's own logger."""

    def __init__(self, on_bad_request: Callable[[], None]) -> None:
        # DEBUG: aiohttp reports bytes that are not HTTP at all (a TLS hello) at DEBUG.
        super().__init__("slot_expiration.endpoint", logging.DEBUG)
        self._on_bad_request = on_bad_request

    def handle(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError):
            self._on_bad_request()
            # The class only: the message may quote the request's bytes, a header's value.
            _log.debug("endpoint.bad_request", reason=type(error).__name__)
        elif server_logger.isEnabledFor(record.levelno):
            server_logger.handle(record)


class _Pool:
    """The connections handed to aiohttp: their count, and which are idle, oldest first."""

    def __init__(self, server: web.Server, max_connections: int) -> None:
        self._server = server
        self._max_connections = max_connections
        # Open connections, the one idle the longest first; `_busy` are being answered.
        self._open: OrderedDict[web.RequestHandler, asyncio.Transport] = OrderedDict()
        self._busy: set[web.RequestHandler] = set()
        self.closing = False

    def make_room(self) -> bool:
        """Room for one more, the oldest idle connection closed if need be; False when
        every connection is being answered."""
        still_open = set(self._server.connections)  # aiohttp forgets a connection once closed
        for gone in [c for c in self._open if c not in still_open]:
            del self._open[gone]
            self._busy.discard(gone)
        if len(self._open) < self._max_connections:
            return True
        oldest_idle = next((c for c in self._open if c not in self._busy), None)
        if oldest_idle is None:
            return False
        _log.debug("endpoint.connection_evicted")
        # Abort, not close: an answer the client never read must not keep the socket.
        self._open.pop(oldest_idle).abort()
        return True

    def add(self, connection: web.RequestHandler, transport: asyncio.Transport) -> None:
        self._open[connection] = transport

    def busy(self, connection: web.RequestHandler) -> None:
        self._busy.add(connection)

    def idle(self, connection: web.RequestHandler) -> None:
        self._busy.discard(connection)
        if connection in self._open:
            self._open.move_to_end(connection)

    def abort_all(self) -> None:
        for transport in self._open.values():
            transport.abort()
        self._open.clear()


class HttpServer:
    """Listening sockets, the connections accepted from them, and aiohttp answering."""

    def __init__(self, handler: Handler, limits: Limits, on_bad_request: Callable[[], None]):
        self._handler = handler
        self._server = web.Server(
            self._answer,
            keepalive_timeout=limits.idle_timeout_seconds,
            max_line_size=MAX_LINE_BYTES,
            max_field_size=MAX_LINE_BYTES,
            max_headers=MAX_HEADERS,
            logger=_BadRequestLog(on_bad_request),
            access_log=None,
        )
        self._pool = _Pool(self._server, limits.max_connections)
        self._listeners: list[socket.socket] = []
        self._accepting: list[asyncio.Task[None]] = []

    @property
    def port(self) -> int:
        """The bound port (the one the system chose for port 0)."""
        return int(self._listeners[0].getsockname()[1])

    @property
    def connections(self) -> int:
        return len(self._server.connections)

    async def listen(self, host: str, port: int) -> None:
        """Bind every address `host` resolves to (OSError when one cannot be) and accept."""
        loop = asyncio.get_running_loop()
        found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        try:
            for family, *_, address in dict.fromkeys(found):
                listener = socket.create_server(address, family=family, backlog=LISTEN_QUEUE)
                listener.setblocking(False)
                self._listeners.append(listener)
        except OSError:
            self._close_listeners()
            raise
        self._accepting = [loop.create_task(self._accept(each)) for each in self._listeners]

    async def close(self, timeout_seconds: float) -> None:
        """Stop listening, close idle connections, let answers in progress finish."""
        for task in self._accepting:
            task.cancel()
        await asyncio.gather(*self._accepting, return_exceptions=True)
        self._close_listeners()
        self._pool.closing = True
        self._server.pre_shutdown()
        await self._server.shutdown(timeout_seconds)
        self._pool.abort_all()  # what still holds a socket: an answer its client never read

    def _close_listeners(self) -> None:
        for listener in self._listeners:
            listener.close()

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, _ = await loop.sock_accept(listener)
            except ConnectionAbortedError:  # gone before we took it
                continue
            except OSError as error:  # out of descriptors or memory: it waits in the queue
                reason = os.strerror(error.errno) if error.errno else str(error)
                _log.warning("endpoint.accept_failed", reason=reason)
                await asyncio.sleep(ACCEPT_RETRY_SECONDS)
                continue
            if not self._pool.make_room():
                _log.debug("endpoint.connection_refused")
                sock.close()
                continue
            try:
                transport, connection = await loop.connect_accepted_socket(self._server, sock)
            except OSError:
                sock.close()
                continue
            self._pool.add(connection, transport)

    async def _answer(self, request: web.BaseRequest) -> web.StreamResponse:
        connection = request.protocol
        self._pool.busy(connection)
        try:
            reply = await self._handler(_request_of(request))
        # A bug of ours, not the client's: logged, answered 500, and the connection goes on.
        except Exception:  # noqa: BLE001 - logged with its traceback just below
            _log.exception("endpoint.handler_failed", path=request.path)
            reply = Reply(500, "text/plain; charset=utf-8", b"internal error\n")
        finally:
            # Answered: evictable from now on, even while the answer is being written
            # to a client that does not read it.
            self._pool.idle(connection)
        response = web.Response(
            status=reply.status,
            body=reply.body,
            headers={"content-type": reply.content_type, **dict(reply.headers)},
        )
        if self._pool.closing:
            response.force_close()
        return response


def _request_of(request: web.BaseRequest) -> Request:
    headers = {name.lower(): ", ".join(request.headers.getall(name)) for name in request.headers}
    return Request(request.method, request.path, headers, request.rel_url.raw_query_string)


async def start_server(
    handler: Handler,
    host: str,
    port: int,
    *,
    limits: Limits | None = None,
    on_bad_request: Callable[[], None] = _nothing,
) -> HttpServer:
    """Listen on host:port (OSError when it cannot) and answer each request with `handler`."""
    server = HttpServer(handler, limits or Limits(), on_bad_request)
    await server.listen(host, port)
    return server
