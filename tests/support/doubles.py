"""Test doubles for the loop's injected parts: a ticker the test drives, a recording sink."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from uuid import UUID

from slot_expiration.domain import CycleOutcome
from slot_expiration.expiry import (
    BacklogMeasured,
    BatchCommitted,
    BatchResult,
    ClockCompared,
    CycleEnded,
    CycleResult,
    CycleRun,
    CycleStarted,
    StopReason,
)
from slot_expiration.loop import Event, LoopStopped, TickSkipped


def empty_result(run: CycleRun) -> CycleResult:
    """What a fake cycle returns: it expired nothing, quickly."""
    return CycleResult(
        run_id=run.run_id,
        as_of=run.as_of,
        started_at=run.started_at,
        outcome=CycleOutcome.SUCCESS,
        batches=1,
        expired_count=0,
        skipped_locked_count=0,
        failed_count=0,
        failed_sample=(),
        duration_ms=1.0,
        stop_reason=StopReason.DRAINED,
        backlog=None,
        clock_skew_seconds=None,
        throttled_seconds=0.0,
        throttled_by=None,
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
class RecordingSink:
    """Remembers what the loop told and lets a test await the next cycle's end."""

    started: list[UUID] = field(default_factory=list)
    batches: list[BatchResult] = field(default_factory=list)
    completed: list[CycleResult] = field(default_factory=list)
    failed: list[CycleEnded] = field(default_factory=list)
    skipped: int = 0
    stopped: bool = False
    outcome: asyncio.Event = field(default_factory=asyncio.Event)
    began: asyncio.Event = field(default_factory=asyncio.Event)
    backlogs: list[int] = field(default_factory=list)
    clock_skews: list[float] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        match event:
            case CycleStarted(run_id):
                self.started.append(run_id)
                self.began.set()
            case ClockCompared(_, skew_seconds):
                self.clock_skews.append(skew_seconds)
            case BacklogMeasured(_, backlog):
                self.backlogs.append(backlog)
            case BatchCommitted(_, batch):
                self.batches.append(batch)
            case CycleEnded(result, None):
                self.completed.append(result)
                self.outcome.set()
            case CycleEnded():
                self.failed.append(event)
                self.outcome.set()
            case TickSkipped(total):
                self.skipped = total
            case LoopStopped():
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
