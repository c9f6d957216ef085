"""The polling loop around a fake cycle: skipped ticks, failures, budget and graceful stop.

Synchronised with events only: the ticker ticks when the test says so, the fake cycle
blocks until the test releases it, and the recorded tell the test what happened.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from uuid import UUID

from slot_expiration.domain import CycleOutcome
from slot_expiration.expiry import CycleEnded, CycleResult, CycleRun, CycleStarted
from slot_expiration.loop import (
    Event,
    LoopStats,
    LoopStopping,
    LoopTiming,
    PollingLoop,
    StopSignal,
    TickSkipped,
)
from tests.support.doubles import ManualTicker, RecordingSink, empty_result

AS_OF = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
SAFETY_SECONDS = 10.0  # a net against a hung test, never a timing the test relies on

BLOCK = "block"  # a step of the fake cycle: wait for `release`, which may never come
Step = str | BaseException


class FakeCycle:
    """Runs a script, one step per run: return a result, raise, or block until released."""

    def __init__(self, *script: Step) -> None:
        self._script = list(script)
        self.runs: list[tuple[UUID, datetime]] = []
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def run(self, run: CycleRun) -> CycleResult:
        self.runs.append((run.run_id, run.as_of))
        step = self._script.pop(0) if self._script else "ok"
        if isinstance(step, BaseException):
            raise step
        if step == BLOCK:
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        return empty_result(run)


@dataclass
class LoopHooks(RecordingSink):
    """A RecordingSink that also lets the test await a skipped tick and the stop."""

    tick_was_skipped: asyncio.Event = field(default_factory=asyncio.Event)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    stopping_with_cycle_in_flight: list[bool] = field(default_factory=list)
    started_at: list[datetime] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        super().__call__(event)
        match event:
            case CycleStarted(_, as_of):
                self.started_at.append(as_of)
            case TickSkipped():
                self.tick_was_skipped.set()
            case LoopStopping(cycle_in_flight):
                self.stopping_with_cycle_in_flight.append(cycle_in_flight)
                self.stopping.set()

    async def next_skip(self) -> None:
        async with asyncio.timeout(SAFETY_SECONDS):
            await self.tick_was_skipped.wait()
        self.tick_was_skipped.clear()


@dataclass
class Running:
    loop: PollingLoop
    ticker: ManualTicker
    recorded: LoopHooks
    stop: StopSignal
    task: asyncio.Task[LoopStats]

    async def finished(self) -> LoopStats:
        async with asyncio.timeout(SAFETY_SECONDS):
            return await self.task

    async def stopped(self) -> LoopStats:
        self.stop.request()
        return await self.finished()


@asynccontextmanager
async def running_loop(
    cycle: FakeCycle,
    *,
    max_cycle_seconds: float = 30.0,
    shutdown_grace_seconds: float = 30.0,
    now: Callable[[], datetime] = lambda: AS_OF,
) -> AsyncIterator[Running]:
    ticker, recorded, stop = ManualTicker(), LoopHooks(), StopSignal()
    timing = LoopTiming(
        max_cycle_seconds=max_cycle_seconds, shutdown_grace_seconds=shutdown_grace_seconds
    )
    loop = PollingLoop(cycle, ticker, recorded, timing, now=now)
    task = asyncio.create_task(loop.run(stop))
    try:
        yield Running(loop, ticker, recorded, stop, task)
    finally:
        if not task.done():
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _ends(failed: list[CycleEnded]) -> list[tuple[CycleOutcome, BaseException | None]]:
    return [(ended.result.outcome, ended.error) for ended in failed]


# -- ticks while a cycle runs ---------------------------------------------------------------


async def test_a_tick_while_a_cycle_runs_is_skipped_and_counted_never_queued() -> None:
    cycle = FakeCycle(BLOCK)
    async with running_loop(cycle) as running:
        running.ticker.tick()
        await running.recorded.next_start()
        running.ticker.tick()
        await running.recorded.next_skip()

        assert running.recorded.skipped == 1
        assert running.loop.stats.ticks_skipped == 1

        cycle.release.set()
        await running.recorded.next_outcome()
        stats = await running.stopped()

    assert len(cycle.runs) == 1  # two ticks, one cycle: the skipped tick did not run later
    assert len(running.recorded.started) == 1
    assert stats.cycles_completed == 1
    assert stats.ticks_skipped == 1


async def test_every_skipped_tick_is_counted_in_the_running_total_reported_to_the_sinks() -> None:
    cycle = FakeCycle(BLOCK)
    async with running_loop(cycle) as running:
        running.ticker.tick()
        await running.recorded.next_start()
        for expected_total in (1, 2, 3):
            running.ticker.tick()
            await running.recorded.next_skip()
            assert running.recorded.skipped == expected_total

        cycle.release.set()
        stats = await running.stopped()

    assert stats.ticks_skipped == 3
    assert len(cycle.runs) == 1


async def test_the_first_tick_after_a_slow_cycle_ends_starts_a_new_cycle() -> None:
    cycle = FakeCycle(BLOCK)
    async with running_loop(cycle) as running:
        running.ticker.tick()
        await running.recorded.next_start()
        running.ticker.tick()
        await running.recorded.next_skip()
        cycle.release.set()
        await running.recorded.next_outcome()

        running.ticker.tick()
        await running.recorded.next_outcome()
        stats = await running.stopped()

    assert len(cycle.runs) == 2
    assert stats == LoopStats(cycles_completed=2, cycles_failed=0, ticks_skipped=1)


async def test_each_cycle_gets_a_new_run_id_and_the_loop_clock_as_its_as_of() -> None:
    moments = iter([AS_OF, AS_OF + timedelta(minutes=5)])
    cycle = FakeCycle()
    async with running_loop(cycle, now=lambda: next(moments)) as running:
        for _ in range(2):
            running.ticker.tick()
            await running.recorded.next_outcome()
        await running.stopped()

    (first_id, first_as_of), (second_id, second_as_of) = cycle.runs
    assert first_id != second_id
    assert [first_as_of, second_as_of] == [AS_OF, AS_OF + timedelta(minutes=5)]
    assert running.recorded.started == [first_id, second_id]
    assert [result.run_id for result in running.recorded.completed] == [first_id, second_id]


# -- failures and the budget ----------------------------------------------------------------


async def test_a_cycle_that_raises_ends_failed_and_the_next_tick_runs_a_new_cycle() -> None:
    error = RuntimeError("connection lost")
    cycle = FakeCycle(error)
    async with running_loop(cycle) as running:
        running.ticker.tick()
        await running.recorded.next_outcome()

        assert _ends(running.recorded.failed) == [(CycleOutcome.FAILED, error)]
        assert not running.task.done()  # the loop survived the failed cycle

        running.ticker.tick()
        await running.recorded.next_outcome()
        stats = await running.stopped()

    assert len(cycle.runs) == 2
    assert len(running.recorded.completed) == 1
    assert stats == LoopStats(cycles_completed=1, cycles_failed=1, ticks_skipped=0)


async def test_a_cycle_over_its_budget_is_cancelled_and_ends_budget_exceeded() -> None:
    cycle = FakeCycle(BLOCK)  # never released: only the 0.05 s budget can end it
    async with running_loop(cycle, max_cycle_seconds=0.05) as running:
        running.ticker.tick()
        await running.recorded.next_outcome()

        assert cycle.cancelled.is_set()
        ((outcome, error),) = _ends(running.recorded.failed)
        assert outcome is CycleOutcome.BUDGET_EXCEEDED
        assert isinstance(error, TimeoutError)
        assert running.recorded.completed == []

        running.ticker.tick()  # the loop survives the abandoned cycle
        await running.recorded.next_outcome()
        stats = await running.stopped()

    assert len(running.recorded.completed) == 1
    assert stats == LoopStats(cycles_completed=1, cycles_failed=1, ticks_skipped=0)


async def test_a_timeout_raised_by_the_cycle_itself_ends_failed_not_budget_exceeded() -> None:
    error = TimeoutError("connect timeout")
    cycle = FakeCycle(error)
    async with running_loop(cycle, max_cycle_seconds=30.0) as running:
        running.ticker.tick()
        await running.recorded.next_outcome()
        await running.stopped()

    assert _ends(running.recorded.failed) == [(CycleOutcome.FAILED, error)]


# -- stopping -------------------------------------------------------------------------------


async def test_stop_with_no_cycle_in_flight_returns_the_loop_stats_and_reports_stopped() -> None:
    cycle = FakeCycle()
    async with running_loop(cycle) as running:
        running.ticker.tick()
        await running.recorded.next_outcome()

        stats = await running.stopped()

    assert stats is running.loop.stats
    assert stats == LoopStats(cycles_completed=1, cycles_failed=0, ticks_skipped=0)
    assert running.recorded.stopping_with_cycle_in_flight == [False]
    assert running.recorded.stopped is True


async def test_stop_before_any_tick_returns_empty_stats_without_running_a_cycle() -> None:
    cycle = FakeCycle()
    async with running_loop(cycle) as running:
        stats = await running.stopped()

    assert stats == LoopStats()
    assert cycle.runs == []
    assert running.recorded.stopped is True


async def test_on_stop_the_cycle_in_flight_may_complete_within_the_shutdown_grace() -> None:
    cycle = FakeCycle(BLOCK)
    async with running_loop(cycle, shutdown_grace_seconds=30.0) as running:
        running.ticker.tick()
        await running.recorded.next_start()

        running.stop.request()
        async with asyncio.timeout(SAFETY_SECONDS):
            await running.recorded.stopping.wait()
        assert running.recorded.stopping_with_cycle_in_flight == [True]
        for _ in range(10):
            await asyncio.sleep(0)  # yield: a loop that did not wait would cancel it now
        assert not cycle.cancelled.is_set()
        assert not running.task.done()  # the loop waits for the cycle in flight

        cycle.release.set()
        stats = await running.finished()

    assert not cycle.cancelled.is_set()
    assert len(running.recorded.completed) == 1
    assert running.recorded.failed == []
    assert stats == LoopStats(cycles_completed=1, cycles_failed=0, ticks_skipped=0)
    assert running.recorded.stopped is True


async def test_past_the_shutdown_grace_the_cycle_in_flight_is_cancelled_and_ends_interrupted() -> (
    None
):
    cycle = FakeCycle(BLOCK)  # never released: only the 0.05 s grace can end it
    async with running_loop(cycle, shutdown_grace_seconds=0.05) as running:
        running.ticker.tick()
        await running.recorded.next_start()

        stats = await running.stopped()

    assert cycle.cancelled.is_set()
    assert running.recorded.completed == []
    ((outcome, error),) = _ends(running.recorded.failed)
    assert outcome is CycleOutcome.INTERRUPTED
    assert isinstance(error, asyncio.CancelledError)
    assert stats == LoopStats(cycles_completed=0, cycles_failed=1, ticks_skipped=0)
    assert running.recorded.stopped is True


async def test_a_second_stop_request_cancels_the_cycle_at_once_even_with_a_long_grace() -> None:
    cycle = FakeCycle(BLOCK)
    async with running_loop(cycle, shutdown_grace_seconds=3_600.0) as running:
        running.ticker.tick()
        await running.recorded.next_start()
        running.stop.request()
        async with asyncio.timeout(SAFETY_SECONDS):
            await running.recorded.stopping.wait()
        assert not running.task.done()

        stats = await running.stopped()  # the second request: forced

    assert running.stop.forced.is_set()
    assert cycle.cancelled.is_set()
    assert [outcome for outcome, _ in _ends(running.recorded.failed)] == [CycleOutcome.INTERRUPTED]
    assert stats == LoopStats(cycles_completed=0, cycles_failed=1, ticks_skipped=0)
    assert running.recorded.stopped is True


async def test_a_forced_stop_before_the_loop_notices_also_cancels_the_cycle_in_flight() -> None:
    cycle = FakeCycle(BLOCK)
    async with running_loop(cycle, shutdown_grace_seconds=3_600.0) as running:
        running.ticker.tick()
        await running.recorded.next_start()
        running.stop.request()
        running.stop.request()

        stats = await running.finished()

    assert cycle.cancelled.is_set()
    assert stats.cycles_failed == 1
    assert running.recorded.stopped is True
