"""A raw HTTP/1.1 client for tests of the endpoint's connection handling.

Requests go out as bytes written by hand (malformed ones too); answers are read
back with h11, so keep-alive and pipelining are seen exactly as a scraper sees them.
Every read has a deadline: a server that never answers fails the test, never hangs it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from types import TracebackType

import h11

READ_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def request_bytes(path: str, method: str = "GET", **headers: str) -> bytes:
    """One request head; keyword `accept_encoding` becomes the `accept-encoding` header."""
    lines = [f"{method} {path} HTTP/1.1", "host: test"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def status_of(raw: bytes) -> int:
    """The status code of a raw answer (`HTTP/1.x 400 Bad Request...`), whatever its version."""
    _, status, _ = raw.split(b" ", 2)
    return int(status)


class WireClient:
    """One TCP connection to the endpoint."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._http = h11.Connection(h11.CLIENT)

    @classmethod
    async def connect(cls, port: int) -> WireClient:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def __aenter__(self) -> WireClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.writer.close()

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def get(self, path: str, method: str = "GET", **headers: str) -> Answer:
        await self.send(request_bytes(path, method, **headers))
        return await self.answer(method)

    async def answer(self, method: str = "GET") -> Answer:
        """The next answer on this connection, to a request of `method` sent before."""
        # h11 frames a response by the request it answers: tell it which that was.
        self._http.send(h11.Request(method=method, target="/", headers=[("host", "test")]))
        self._http.send(h11.EndOfMessage())
        status, headers, body = 0, {}, b""
        while True:
            event = self._http.next_event()
            if event is h11.NEED_DATA:
                self._http.receive_data(await self._read())
            elif isinstance(event, h11.Response):
                status = event.status_code
                headers = {k.decode(): v.decode() for k, v in event.headers}
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
        if self._http.our_state is h11.DONE and self._http.their_state is h11.DONE:
            self._http.start_next_cycle()
        return Answer(status, headers, body)

    async def raw_answer(self) -> bytes:
        """Everything the server sends until it closes (for answers to malformed bytes)."""
        async with asyncio.timeout(READ_TIMEOUT_SECONDS):
            return await self.reader.read()

    async def closed_by_server(self) -> bool:
        """True once the server closes this connection (nothing more to read)."""
        try:
            return await self.raw_answer() == b""
        except ConnectionResetError:
            return True

    async def _read(self) -> bytes:
        async with asyncio.timeout(READ_TIMEOUT_SECONDS):
            return await self.reader.read(65_536)
