"""A TCP proxy in front of PostgreSQL that a test can freeze: bytes stop flowing both
ways, yet no connection is closed (no FIN, no RST), as on a dead network path."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Self
from urllib.parse import urlsplit, urlunsplit

_CHUNK = 65_536


class FreezableProxy:
    """Listens on 127.0.0.1:<port> and forwards to `target_port`; `freeze()` stops all
    traffic on open and new connections alike, `thaw()` lets it flow again."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0
        self.connections = 0

    @classmethod
    @asynccontextmanager
    async def serving(cls, url: str) -> AsyncIterator[Self]:
        parts = urlsplit(url)
        proxy = cls(parts.hostname or "127.0.0.1", parts.port or 5432)
        await proxy.start()
        try:
            yield proxy
        finally:
            await proxy.close()

    def url_through(self, url: str) -> str:
        """The same database URL, routed through this proxy."""
        parts = urlsplit(url)
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@127.0.0.1:{self.port}" if userinfo else f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    def freeze(self) -> None:
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    @property
    def frozen(self) -> bool:
        return not self._flowing.is_set()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in self._pipes:
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        for writer in self._writers:
            writer.transport.abort()
        if self._server is not None:
            with suppress(Exception):
                await self._server.wait_closed()

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        await self._flowing.wait()  # a frozen network does not answer a new connection either
        try:
            server_r, server_w = await asyncio.open_connection(*self._target)
        except OSError:
            client_w.transport.abort()
            return
        self._writers.update({client_w, server_w})
        for source, sink in ((client_r, server_w), (server_r, client_w)):
            task = asyncio.create_task(self._pipe(source, sink))
            self._pipes.add(task)
            task.add_done_callback(self._pipes.discard)

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with suppress(ConnectionError, asyncio.IncompleteReadError):
            while data := await source.read(_CHUNK):
                await self._flowing.wait()  # frozen: hold the bytes, close nothing
                sink.write(data)
                await sink.drain()
        await self._flowing.wait()
        with suppress(ConnectionError, OSError):
            sink.close()
