"""A small HTTP/1.1 server on the running event loop that abusive clients cannot starve.

h11 reads and writes HTTP; this module manages the connections, which is what
failed under abuse with aiohttp (idle sockets piling up until the process had no
file descriptor left for its database sessions):

- at most `max_connections` connections at once. A newcomer at the cap evicts the
  connection idle the longest, so a probe still gets through while others hold idle
  sockets; it is turned away only when every connection is in the middle of a request.
- a connection has `idle_timeout_seconds` from its connect, or from its last response,
  to send one complete request head. Bytes trickling in do not extend it (slowloris),
  and a client that does not read its response is cut at the same deadline.
- a malformed request is answered 400 (431 for an oversized head), closed and counted
  through `on_bad_request`: never an ERROR line, at most a DEBUG one.

asyncio accepts at most `ACCEPT_BATCH` connections per wake-up and an evicted socket is
closed within a few loop turns, so the server holds at most about MAX_CONNECTIONS +
4 x ACCEPT_BATCH sockets (128); up to `LISTEN_QUEUE` more wait in the kernel, costing
no descriptor of ours.
"""

from __future__ import annotations

import asyncio
import socket
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Final, cast

import h11
import structlog

# Far below any sane RLIMIT_NOFILE (1024 is the smallest soft limit in use): one
# Prometheus, a kubelet's probes and a person with curl need a handful.
MAX_CONNECTIONS: Final = 64
# Long enough for a slow client to send a request head, short enough that idle
# sockets are reclaimed. A scraper's keep-alive connection idle longer than this
# (Prometheus scrapes every 15-60 s) is closed and reopened: one cheap connect.
IDLE_TIMEOUT_SECONDS: Final = 10.0
# Request line plus headers; ours are short paths and a scraper's few headers.
MAX_REQUEST_HEAD_BYTES: Final = 8 * 1024
# How many connections asyncio accepts per wake-up (its `backlog`): what bounds the
# sockets accepted but not yet counted against the cap.
ACCEPT_BATCH: Final = 16
# Connections the kernel keeps waiting to be accepted; they hold no descriptor of ours.
LISTEN_QUEUE: Final = 1024

_log = structlog.get_logger("slot_expiration")


@dataclass(frozen=True, slots=True)
class Limits:
    max_connections: int = MAX_CONNECTIONS
    idle_timeout_seconds: float = IDLE_TIMEOUT_SECONDS
    max_request_head_bytes: int = MAX_REQUEST_HEAD_BYTES


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    # Lower-case names; a repeated header's values joined with ", " (RFC 9110 5.3).
    headers: Mapping[str, str]
    query: str = ""  # what followed the path's `?`, as sent


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


Handler = Callable[[Request], Awaitable[Reply]]


def _nothing() -> None:
    pass


class _Pool:
    """Every open connection, and the idle ones (no request being answered) oldest first."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.closing = False
        self.open: set[_Connection] = set()
        self.idle: OrderedDict[_Connection, None] = OrderedDict()
        self.empty = asyncio.Event()
        self.empty.set()

    def admit(self, connection: _Connection) -> bool:
        """Make room by evicting the oldest idle connection; False when there is none."""
        if self.closing:
            return False
        if len(self.open) >= self.limits.max_connections:
            if not self.idle:
                return False
            oldest = next(iter(self.idle))
            _log.debug("endpoint.connection_evicted")
            oldest.abort()
        self.open.add(connection)
        self.empty.clear()
        return True

    def waiting(self, connection: _Connection) -> None:
        self.idle[connection] = None
        self.idle.move_to_end(connection)

    def busy(self, connection: _Connection) -> None:
        self.idle.pop(connection, None)

    def forget(self, connection: _Connection) -> None:
        self.idle.pop(connection, None)
        self.open.discard(connection)
        if not self.open:
            self.empty.set()

    async def drain(self, timeout_seconds: float) -> None:
        """Close idle connections now, let requests in progress finish within the timeout."""
        self.closing = True
        for connection in list(self.idle):
            connection.abort()
        with suppress(TimeoutError):
            async with asyncio.timeout(timeout_seconds):
                await self.empty.wait()
        answering = [c.task for c in self.open if c.task is not None]
        for connection in list(self.open):
            connection.abort()
        await asyncio.gather(*answering, return_exceptions=True)


class _Connection(asyncio.Protocol):
    """One client: h11 parses, this decides when to read, answer, wait and close."""

    def __init__(self, handler: Handler, pool: _Pool, on_bad_request: Callable[[], None]) -> None:
        self._handler = handler
        self._pool = pool
        self._on_bad_request = on_bad_request
        self._http = h11.Connection(
            h11.SERVER, max_incomplete_event_size=pool.limits.max_request_head_bytes
        )
        self._transport: asyncio.Transport | None = None
        self._deadline: asyncio.TimerHandle | None = None
        self._request: Request | None = None
        self._head_bytes = 0  # received since the last answer, before a head was whole
        self._can_write = True
        self.task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        if not self._pool.admit(self):
            _log.debug("endpoint.connection_refused")
            self._transport.abort()
            return
        self._wait_for_request()

    def data_received(self, data: bytes) -> None:
        # h11 bounds only a head still incomplete: a whole oversized one in one read
        # would pass it, so the bytes before a head are counted here too.
        if self._request is None and self.task is None:
            self._head_bytes += len(data)
            if self._head_bytes > self._pool.limits.max_request_head_bytes:
                self._reject(h11.RemoteProtocolError("request head too large", 431))
                return
        self._http.receive_data(data)
        self._advance()

    def eof_received(self) -> bool:
        self._http.receive_data(b"")
        self._advance()
        return True  # a request sent before a half-close is still answered

    def pause_writing(self) -> None:
        self._can_write = False

    def resume_writing(self) -> None:
        self._can_write = True
        self._advance()

    def connection_lost(self, exc: Exception | None) -> None:
        self._pool.forget(self)
        self._stop_deadline()
        if self.task is not None:
            self.task.cancel()

    def abort(self) -> None:
        """Close at once, unsent bytes dropped (eviction, idle deadline, shutdown)."""
        self._pool.forget(self)
        self._stop_deadline()
        if self._transport is not None:
            self._transport.abort()

    def _wait_for_request(self) -> None:
        self._pool.waiting(self)
        self._stop_deadline()
        loop = asyncio.get_running_loop()
        self._deadline = loop.call_later(self._pool.limits.idle_timeout_seconds, self._expire)
        assert self._transport is not None
        self._transport.resume_reading()

    def _expire(self) -> None:
        _log.debug("endpoint.connection_idle_timeout")
        self.abort()

    def _stop_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _advance(self) -> None:
        """Read events until a request is complete, or more bytes are needed."""
        assert self._transport is not None
        while self.task is None and self._can_write and not self._transport.is_closing():
            try:
                event = self._http.next_event()
            except h11.RemoteProtocolError as error:
                self._reject(error)
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.ConnectionClosed):
                self._transport.close()
            elif isinstance(event, h11.Request):
                self._request = _request_of(event)
            elif isinstance(event, h11.EndOfMessage) and self._request is not None:
                self._start(self._request)
            # h11.Data: a body nobody asked for, dropped.

    def _start(self, request: Request) -> None:
        assert self._transport is not None
        self._pool.busy(self)
        self._stop_deadline()
        # Pipelined bytes wait in the kernel, not in our buffer, while this one is answered.
        self._transport.pause_reading()
        self.task = asyncio.get_running_loop().create_task(self._answer(request))

    async def _answer(self, request: Request) -> None:
        try:
            reply = await self._handler(request)
        # A bug of ours, not the client's: logged, answered 500, and the connection goes
        # on (an unanswered one would stay busy, never evictable).
        except Exception:  # noqa: BLE001 - logged with its traceback just below
            _log.exception("endpoint.handler_failed", path=request.path)
            reply = Reply(500, "text/plain; charset=utf-8", b"internal error\n")
        self.task = None
        assert self._transport is not None
        if not self._transport.is_closing():  # the client may have gone meanwhile
            self._respond(request.method, reply)

    def _respond(self, method: str, reply: Reply) -> None:
        assert self._transport is not None
        headers = [
            ("content-type", reply.content_type),
            ("content-length", str(len(reply.body))),
            *reply.headers,
        ]
        if self._pool.closing:
            headers.append(("connection", "close"))
        data = self._http.send(h11.Response(status_code=reply.status, headers=headers))
        if method != "HEAD":
            data += self._http.send(h11.Data(data=reply.body))
        self._transport.write(data + self._http.send(h11.EndOfMessage()))
        self._next_cycle()

    def _next_cycle(self) -> None:
        """Keep the connection for the client's next request, or close it after this one."""
        assert self._transport is not None
        self._request = None
        self._head_bytes = 0
        # Idle again: evictable, and cut at the deadline if it does not read its answer.
        self._wait_for_request()
        if self._http.our_state is not h11.DONE or self._http.their_state is not h11.DONE:
            self._transport.close()
            return
        self._http.start_next_cycle()
        self._advance()  # a pipelined request may already be buffered

    def _reject(self, error: h11.RemoteProtocolError) -> None:
        """Answer a malformed request with h11's status hint and close; count it."""
        assert self._transport is not None
        self._on_bad_request()
        _log.debug("endpoint.bad_request", reason=str(error))
        headers = [("connection", "close"), ("content-length", "0")]
        try:
            data = self._http.send(
                h11.Response(status_code=error.error_status_hint, headers=headers)
            )
            data += self._http.send(h11.EndOfMessage())
        except h11.LocalProtocolError:  # no state to answer from: just go
            self.abort()
            return
        self._transport.write(data)
        self._transport.close()


def _request_of(event: h11.Request) -> Request:
    headers: dict[str, str] = {}
    for raw_name, raw_value in event.headers:
        name, value = raw_name.decode("ascii"), raw_value.decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    target = event.target.decode("ascii", errors="replace")
    path, _, query = target.partition("?")
    return Request(event.method.decode("ascii"), path, headers, query)


class HttpServer:
    """A listening server and its connections."""

    def __init__(self, server: asyncio.Server, pool: _Pool) -> None:
        self._server = server
        self._pool = pool

    @property
    def port(self) -> int:
        """The bound port (the one the system chose for port 0)."""
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def connections(self) -> int:
        return len(self._pool.open)

    async def close(self, timeout_seconds: float) -> None:
        """Stop listening, close idle connections, let requests in progress finish."""
        self._server.close()
        await self._pool.drain(timeout_seconds)
        await self._server.wait_closed()


async def start_server(
    handler: Handler,
    host: str,
    port: int,
    *,
    limits: Limits | None = None,
    on_bad_request: Callable[[], None] = _nothing,
) -> HttpServer:
    """Listen on host:port (OSError when it cannot) and answer each request with `handler`."""
    pool = _Pool(limits or Limits())
    server = await asyncio.get_running_loop().create_server(
        lambda: _Connection(handler, pool, on_bad_request), host, port, backlog=ACCEPT_BATCH
    )
    _lengthen_listen_queue(server)
    return HttpServer(server, pool)


def _lengthen_listen_queue(server: asyncio.Server) -> None:
    """asyncio listens with its accept batch as the kernel's queue: a burst of connects
    beyond 16 would see SYNs dropped and retried a second later, probes included. Waiting
    connections hold no descriptor of ours, so the queue can be long."""
    for listening in server.sockets:
        raw = socket.socket(fileno=listening.fileno())  # the same socket, not a copy
        try:
            raw.listen(LISTEN_QUEUE)
        finally:
            raw.detach()  # asyncio still owns it: do not close it with this object
