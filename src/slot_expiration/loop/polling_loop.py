"""The polling loop: ticks, the cycle budget, skipped ticks and the graceful stop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from slot_expiration.domain import utc_now
from slot_expiration.expiry import Cycle, CycleFailed, run_cycle
from slot_expiration.loop.events import LoopStopped, LoopStopping, Sink, TickSkipped
from slot_expiration.loop.signals import StopSignal
from slot_expiration.loop.ticker import Ticker


@dataclass(frozen=True, slots=True)
class LoopTiming:
    max_cycle_seconds: float
    shutdown_grace_seconds: float


@dataclass(slots=True)
class LoopStats:
    cycles_completed: int = 0
    cycles_failed: int = 0
    ticks_skipped: int = 0


class PollingLoop:
    """Starts a cycle on each tick unless one is running; never lets a cycle kill it."""

    def __init__(
        self,
        cycle: Cycle,
        ticker: Ticker,
        emit: Sink,
        timing: LoopTiming,
        now: Callable[[], datetime] = utc_now,
    ) -> None:
        self._cycle = cycle
        self._ticker = ticker
        self._emit = emit
        self._timing = timing
        self._now = now
        self._in_flight: asyncio.Task[None] | None = None
        self._stop = StopSignal()
        self.stats = LoopStats()

    async def run(self, stop: StopSignal) -> LoopStats:
        self._stop = stop
        async for _ in self._ticker.ticks(stop.requested):
            self._on_tick()
        in_flight = self._in_flight is not None and not self._in_flight.done()
        self._emit(LoopStopping(cycle_in_flight=in_flight))
        await self._finish_in_flight(stop)
        self._emit(LoopStopped())
        return self.stats

    def _on_tick(self) -> None:
        if self._in_flight is not None and not self._in_flight.done():
            self.stats.ticks_skipped += 1
            self._emit(TickSkipped(self.stats.ticks_skipped))
            return
        self._in_flight = asyncio.create_task(self._guarded_cycle(), name="slot-expiration-cycle")

    async def _guarded_cycle(self) -> None:
        try:
            await run_cycle(
                self._cycle,
                self._emit,
                self._timing.max_cycle_seconds,
                self._now(),
                self._stop,
                as_of_is_now=True,
            )
        except asyncio.CancelledError:
            self.stats.cycles_failed += 1
            raise
        except CycleFailed:  # told as CycleEnded already; it must never kill the loop
            self.stats.cycles_failed += 1
            return
        self.stats.cycles_completed += 1

    async def _finish_in_flight(self, stop: StopSignal) -> None:
        """Give the cycle in flight a bounded grace to commit; past it, roll it back."""
        task = self._in_flight
        if task is None or task.done():
            return
        forced = asyncio.create_task(stop.forced.wait())
        await asyncio.wait(
            {task, forced},
            timeout=self._timing.shutdown_grace_seconds,
            return_when=asyncio.FIRST_COMPLETED,
        )
        forced.cancel()
        if not task.done():
            task.cancel()
        await asyncio.gather(task, forced, return_exceptions=True)
