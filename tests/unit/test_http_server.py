"""The endpoint's server under abuse: capped connections, idle deadline, malformed requests.

Small limits are injected (a cap of 2 or 3, an idle timeout of a fraction of a
second); every wait is for an event on a socket, under a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from structlog.testing import capture_logs

from slot_expiration.telemetry.http_messages import Reply, Request
from slot_expiration.telemetry.http_server import (
    MAX_HEADERS,
    HttpServer,
    Limits,
    start_server,
)
from tests.support.waiting import eventually
from tests.support.wire import WireClient, request_bytes, status_of

SHORT_IDLE = 0.3
LONG_IDLE = 60.0
TEXT = "text/plain"
# More than the kernel's socket buffers on both sides hold: its writer must wait for a reader.
BIG = 32 * 1024 * 1024
BURST = 256
SYN_RETRY_SECONDS = 1.0  # Linux's first retransmission of an unanswered SYN


class Pages:
    """`/slow` answers only once the test opens its gate, `/big` with BIG bytes; any other
    path answers at once with its method and path."""

    def __init__(self) -> None:
        self.slow_entered = asyncio.Event()
        self.slow_gate = asyncio.Event()
        self.bad_requests = 0

    async def answer(self, request: Request) -> Reply:
        if request.path == "/slow":
            self.slow_entered.set()
            await self.slow_gate.wait()
        if request.path == "/big":
            return Reply(200, TEXT, bytes(BIG))
        return Reply(200, TEXT, f"{request.method} {request.path}".encode())

    def count_bad_request(self) -> None:
        self.bad_requests += 1


@asynccontextmanager
async def served(
    pages: Pages, *, cap: int = 64, idle_seconds: float = LONG_IDLE
) -> AsyncIterator[HttpServer]:
    server = await start_server(
        pages.answer,
        "127.0.0.1",
        0,
        limits=Limits(max_connections=cap, idle_timeout_seconds=idle_seconds),
        on_bad_request=pages.count_bad_request,
    )
    try:
        yield server
    finally:
        await server.close(2.0)


async def test_an_idle_connection_is_closed_after_the_idle_timeout() -> None:
    pages = Pages()
    async with served(pages, idle_seconds=SHORT_IDLE) as server:
        started = time.monotonic()
        async with await WireClient.connect(server.port) as client:
            assert (await client.get("/first")).status == 200
            assert await client.closed_by_server()
        waited = time.monotonic() - started

    assert waited >= SHORT_IDLE


async def test_a_connection_that_never_sends_a_request_is_closed_after_the_idle_timeout() -> None:
    async with (
        served(Pages(), idle_seconds=SHORT_IDLE) as server,
        await WireClient.connect(server.port) as client,
    ):
        assert await client.closed_by_server()


async def test_a_request_head_trickling_in_does_not_extend_the_idle_deadline() -> None:
    """Slowloris: a byte now and then keeps no connection open past its deadline."""
    pages = Pages()
    async with (
        served(pages, idle_seconds=SHORT_IDLE) as server,
        await WireClient.connect(server.port) as client,
    ):
        head = b"GET /slow HTTP/1.1\r\nhost: test\r\nx-pad: " + b"a" * 1000
        sent = 0
        started = time.monotonic()

        async def trickle() -> None:
            nonlocal sent
            for byte in head:
                try:
                    await client.send(bytes([byte]))
                except ConnectionError:
                    return
                sent += 1
                await asyncio.sleep(SHORT_IDLE / 6)  # the attacker's pace, not a wait

        trickling = asyncio.create_task(trickle())
        assert await client.closed_by_server()
        closed_after, sent_by_then = time.monotonic() - started, sent
        trickling.cancel()

    assert closed_after >= SHORT_IDLE
    # Closed while the head was still coming: each byte did not push the deadline back
    # (had it, the head would have been sent whole, at its pace, before any close).
    assert sent_by_then < len(head), sent_by_then
    assert not pages.slow_entered.is_set()
    assert pages.bad_requests == 0  # slow is not malformed


async def test_a_client_that_does_not_read_its_answer_gives_way_to_a_newcomer_at_the_cap() -> None:
    """Answered is idle: an answer stuck in a client's unread buffers holds no room."""
    async with served(Pages(), cap=1) as server:
        stuck = await WireClient.connect(server.port)
        await stuck.send(request_bytes("/big"))
        received = len(await stuck.reader.read(1))  # its answer has begun; read no more

        async with await WireClient.connect(server.port) as newcomer:
            answer = await newcomer.get("/healthz")

            async def released() -> bool:  # its socket, though its client reads nothing
                return server.connections == 1

            await eventually(released, 10.0)
        with contextlib.suppress(ConnectionResetError):
            while chunk := await stuck.reader.read(1 << 20):
                received += len(chunk)
        stuck.writer.close()

    assert answer.status == 200
    assert received < BIG  # cut off, not flushed to the end


async def test_at_the_cap_a_newcomer_evicts_the_oldest_idle_connection_and_is_served() -> None:
    async with served(Pages(), cap=3) as server:
        clients = [await WireClient.connect(server.port) for _ in range(3)]
        for number, client in enumerate(clients):  # idle from oldest to newest
            assert (await client.get(f"/warm-up-{number}")).status == 200

        async with await WireClient.connect(server.port) as newcomer:
            answer = await newcomer.get("/healthz")

            assert answer.status == 200
            assert answer.body == b"GET /healthz"
            assert await clients[0].closed_by_server()
            # The others are still served on their kept-alive connections.
            assert (await clients[1].get("/again")).status == 200
            assert (await clients[2].get("/again")).status == 200
            assert server.connections == 3
        for client in clients:
            client.writer.close()


async def test_a_request_in_progress_is_never_evicted() -> None:
    pages = Pages()
    async with served(pages, cap=2) as server:
        busy = await WireClient.connect(server.port)
        await busy.send(request_bytes("/slow"))
        await pages.slow_entered.wait()
        idle = await WireClient.connect(server.port)
        assert (await idle.get("/warm-up")).status == 200

        async with await WireClient.connect(server.port) as newcomer:
            assert (await newcomer.get("/healthz")).status == 200
            assert await idle.closed_by_server()  # the idle one made room, not the busy one
            pages.slow_gate.set()
            answer = await busy.answer()

        assert answer.status == 200
        assert answer.body == b"GET /slow"
        busy.writer.close()
        idle.writer.close()


async def test_when_every_connection_is_in_a_request_a_newcomer_is_turned_away() -> None:
    pages = Pages()
    async with served(pages, cap=1) as server:
        busy = await WireClient.connect(server.port)
        await busy.send(request_bytes("/slow"))
        await pages.slow_entered.wait()

        async with await WireClient.connect(server.port) as newcomer:
            assert await newcomer.closed_by_server()
        pages.slow_gate.set()

        assert (await busy.answer()).status == 200
        busy.writer.close()


async def test_a_burst_of_connects_waits_in_the_kernels_queue_not_in_syn_retries() -> None:
    """Far more connects at once than asyncio accepts per wake-up all complete before the
    first SYN retry (1 s): the listen queue is long, and a probe in a flood is not held up."""
    loop = asyncio.get_running_loop()
    socks = [socket.socket() for _ in range(BURST)]
    for sock in socks:
        sock.setblocking(False)
    try:
        async with served(Pages()) as server, asyncio.timeout(SYN_RETRY_SECONDS * 0.9):
            await asyncio.gather(*(loop.sock_connect(s, ("127.0.0.1", server.port)) for s in socks))
    finally:
        for sock in socks:
            sock.close()


async def test_a_malformed_request_is_answered_400_counted_closed_and_not_logged_as_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pages = Pages()
    caplog.set_level(logging.DEBUG)
    with capture_logs() as logs:
        async with served(pages) as server:
            for garbage in (b"NOT HTTP AT ALL\r\n\r\n", b"GET / HTTP/1.1\r\nno colon\r\n\r\n"):
                async with await WireClient.connect(server.port) as client:
                    await client.send(garbage)
                    answer = await client.raw_answer()  # read to the server's close

                assert status_of(answer) == 400, answer

    assert pages.bad_requests == 2
    assert {log["log_level"] for log in logs} <= {"debug"}, logs
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.parametrize(
    "head",
    [
        pytest.param(b"GET / HTTP/1.1\r\nx-pad: " + b"a" * 20_000, id="a long line, unfinished"),
        pytest.param(
            b"GET / HTTP/1.1\r\nhost: x\r\nx-pad: " + b"a" * 64_000 + b"\r\n\r\n",
            id="a long line, whole in one write",
        ),
        pytest.param(
            b"GET / HTTP/1.1\r\nhost: x\r\n" + b"x-pad: a\r\n" * (MAX_HEADERS + 1) + b"\r\n",
            id="too many header lines",
        ),
        pytest.param(b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\n\r\n", id="a long target"),
    ],
)
async def test_an_oversized_request_head_is_answered_400_and_counted(head: bytes) -> None:
    pages = Pages()
    async with served(pages) as server, await WireClient.connect(server.port) as client:
        await client.send(head)
        answer = await client.raw_answer()

    assert status_of(answer) == 400, answer
    assert pages.bad_requests == 1
    assert not pages.slow_entered.is_set()


async def test_keep_alive_serves_a_scraper_many_requests_on_one_connection() -> None:
    async with served(Pages()) as server, await WireClient.connect(server.port) as client:
        answers = [await client.get(f"/scrape-{n}") for n in range(5)]

        assert server.connections == 1
    assert [a.body for a in answers] == [f"GET /scrape-{n}".encode() for n in range(5)]
    assert all("close" not in a.headers.get("connection", "") for a in answers)


async def test_pipelined_requests_are_answered_in_order() -> None:
    async with served(Pages()) as server, await WireClient.connect(server.port) as client:
        await client.send(request_bytes("/one") + request_bytes("/two", "HEAD"))
        first = await client.answer()
        second = await client.answer("HEAD")

    assert first.body == b"GET /one"
    assert (second.status, second.body) == (200, b"")
    assert second.headers["content-length"] == str(len(b"HEAD /two"))


async def test_a_client_asking_to_close_gets_its_answer_then_the_connection_closes() -> None:
    async with served(Pages()) as server, await WireClient.connect(server.port) as client:
        answer = await client.get("/last", connection="close")

        assert answer.status == 200
        assert answer.headers["connection"] == "close"
        assert await client.closed_by_server()


async def test_stop_closes_idle_connections_and_lets_a_request_in_progress_finish() -> None:
    pages = Pages()
    server = await start_server(pages.answer, "127.0.0.1", 0)
    idle = await WireClient.connect(server.port)
    assert (await idle.get("/warm-up")).status == 200
    busy = await WireClient.connect(server.port)
    await busy.send(request_bytes("/slow"))
    await pages.slow_entered.wait()

    stopping = asyncio.create_task(server.close(10.0))
    assert await idle.closed_by_server()
    assert not stopping.done()
    pages.slow_gate.set()
    answer = await busy.answer()
    await stopping

    assert answer.status == 200
    assert answer.headers["connection"] == "close"
    assert await busy.closed_by_server()
    idle.writer.close()
    busy.writer.close()


async def test_stop_gives_up_on_a_request_still_running_at_the_timeout() -> None:
    pages = Pages()
    server = await start_server(pages.answer, "127.0.0.1", 0)
    busy = await WireClient.connect(server.port)
    await busy.send(request_bytes("/slow"))
    await pages.slow_entered.wait()

    await server.close(SHORT_IDLE)  # the gate never opens

    assert await busy.closed_by_server()
    assert server.connections == 0
    busy.writer.close()


async def test_stop_cuts_an_answer_its_client_never_reads() -> None:
    """The socket is let go at the stop, not kept until the client reads its answer."""
    server = await start_server(Pages().answer, "127.0.0.1", 0)
    stuck = await WireClient.connect(server.port)
    await stuck.send(request_bytes("/big"))
    received = len(await stuck.reader.read(1))  # its answer has begun; read no more

    await server.close(SHORT_IDLE)
    with contextlib.suppress(ConnectionResetError):
        while chunk := await stuck.reader.read(1 << 20):
            received += len(chunk)
    stuck.writer.close()

    assert received < BIG
