"""Fixed-rate ticks: one every interval on the monotonic clock, whatever the cycles do."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

Sleep = Callable[[asyncio.Event, float], Awaitable[None]]


class Ticker(Protocol):
    def ticks(self, stop: asyncio.Event) -> AsyncIterator[None]:
        """Yield at each tick until `stop` is set."""
        ...


async def wait_or_stop(stop: asyncio.Event, delay_seconds: float) -> None:
    """Sleep `delay_seconds`, waking at once if `stop` is set."""
    if delay_seconds <= 0:
        return
    try:
        async with asyncio.timeout(delay_seconds):
            await stop.wait()
    except TimeoutError:
        return


def next_tick_after(first_tick: float, interval: float, now: float) -> float:
    """The first tick of the grid first_tick + k * interval that lies after `now`.

    A late wake-up (a suspended host, a slow event loop) moves to the next
    point of the grid rather than firing a burst of missed ticks.
    """
    elapsed = max(now - first_tick, 0.0)
    tick = first_tick + (math.floor(elapsed / interval) + 1) * interval
    # When `now` is itself a grid point, the float quotient can round down to
    # the tick we are on; never return a tick that is not strictly later.
    return tick if tick > now else tick + interval


class IntervalTicker:
    """Ticks at once, then every `interval_seconds`, at a fixed rate (no drift)."""

    def __init__(
        self,
        interval_seconds: float,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Sleep = wait_or_stop,
    ) -> None:
        if interval_seconds <= 0:
            raise ValueError("interval_seconds must be positive")
        self._interval = interval_seconds
        self._monotonic = monotonic
        self._sleep = sleep

    async def ticks(self, stop: asyncio.Event) -> AsyncIterator[None]:
        first = self._monotonic()
        deadline = first
        while not stop.is_set():
            yield
            deadline = next_tick_after(first, self._interval, max(deadline, self._monotonic()))
            await self._sleep(stop, deadline - self._monotonic())
