"""Test doubles for the loop's injected parts: a ticker the test drives, recording hooks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from slot_expiration.cycle import BatchResult, CycleResult, CycleRun, StopReason
from slot_expiration.telemetry import NoHooks


def empty_result(run: CycleRun) -> CycleResult:
    """What a fake cycle returns: it expired nothing, quickly."""
    return CycleResult(
        run_id=run.run_id,
        as_of=run.as_of,
        batches=1,
        expired_count=0,
        skipped_locked_count=0,
        failed_count=0,
        failed_sample=(),
        duration_ms=1.0,
        stop_reason=StopReason.DRAINED,
    )


class ManualTicker:
    """Ticks only when the test calls `tick()`: no wall-clock waiting in tests."""

    def __init__(self) -> None:
        self._ticks: asyncio.Queue[None] = asyncio.Queue()

    def tick(self) -> None:
        self._ticks.put_nowait(None)

    async def ticks(self, stop: asyncio.Event) -> AsyncIterator[None]:
        stopped = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                next_tick = asyncio.ensure_future(self._ticks.get())
                await asyncio.wait({next_tick, stopped}, return_when=asyncio.FIRST_COMPLETED)
                if stop.is_set():
                    next_tick.cancel()
                    return
                yield
        finally:
            stopped.cancel()


@dataclass
class RecordingHooks(NoHooks):
    """Remembers what the loop reported and lets a test await the next outcome."""

    started: list[UUID] = field(default_factory=list)
    batches: list[BatchResult] = field(default_factory=list)
    completed: list[CycleResult] = field(default_factory=list)
    failed: list[tuple[BaseException, bool]] = field(default_factory=list)
    skipped: int = 0
    stopped: bool = False
    outcome: asyncio.Event = field(default_factory=asyncio.Event)
    began: asyncio.Event = field(default_factory=asyncio.Event)
    backlogs: list[int] = field(default_factory=list)
    clock_skews: list[float] = field(default_factory=list)

    def cycle_started(self, run_id: UUID, as_of: datetime) -> None:
        self.started.append(run_id)
        self.began.set()

    def clock_compared(self, run_id: UUID, skew_seconds: float) -> None:
        self.clock_skews.append(skew_seconds)

    def backlog_measured(self, run_id: UUID, backlog: int) -> None:
        self.backlogs.append(backlog)

    def batch_completed(self, run_id: UUID, batch: BatchResult) -> None:
        self.batches.append(batch)

    def cycle_completed(self, result: CycleResult) -> None:
        self.completed.append(result)
        self.outcome.set()

    def cycle_failed(self, run_id: UUID, error: BaseException, *, budget_exceeded: bool) -> None:
        self.failed.append((error, budget_exceeded))
        self.outcome.set()

    def tick_skipped(self, skipped_ticks_total: int) -> None:
        self.skipped = skipped_ticks_total

    def loop_stopped(self) -> None:
        self.stopped = True

    async def next_outcome(self, timeout_seconds: float = 30.0) -> None:
        """Wait for the next completed or failed cycle (a safety timeout, not a timing)."""
        async with asyncio.timeout(timeout_seconds):
            await self.outcome.wait()
        self.outcome.clear()

    async def next_start(self, timeout_seconds: float = 30.0) -> None:
        async with asyncio.timeout(timeout_seconds):
            await self.began.wait()
        self.began.clear()
