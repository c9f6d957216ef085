"""The polling loop on a real PostgreSQL: skipped ticks, the budget, outages, the stop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest

from slot_expiration.db import TransientStoreError
from slot_expiration.domain import CycleOutcome, SlotStatus
from slot_expiration.embedded import EmbeddedPostgres
from slot_expiration.expiry import BatchCommitted, CycleEnded
from slot_expiration.loop import Event, LoopStats, PollingLoop, SinkFailures, StopSignal, fan_out
from slot_expiration.options import WorkerOptions, load_options
from slot_expiration.schema.migrate import upgrade
from slot_expiration.worker import build_loop
from tests.support.database import SlotDatabase
from tests.support.doubles import ManualTicker, RecordingSink
from tests.support.slots import past_slots
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


def worker_options(url: str, **overrides: Any) -> WorkerOptions:
    return load_options(database_url=url, batch_size=50, **overrides)


class Harness:
    """A loop driven by a manual ticker, running as a task the test can stop."""

    def __init__(self, options: WorkerOptions) -> None:
        self.ticker = ManualTicker()
        self.recorded = RecordingSink()
        self.stop = StopSignal()
        self.loop: PollingLoop = build_loop(options, self.recorded, self.ticker)
        self.task: asyncio.Task[object] | None = None

    async def tick_and_wait(self) -> None:
        self.ticker.tick()
        await self.recorded.next_outcome()


@asynccontextmanager
async def running(options: WorkerOptions) -> AsyncIterator[Harness]:
    harness = Harness(options)
    harness.task = asyncio.create_task(harness.loop.run(harness.stop))
    try:
        yield harness
    finally:
        harness.stop.request()
        harness.stop.request()  # forced: never leave a cycle behind a failing test
        await harness.task


async def blocked_on_gate(db: SlotDatabase) -> None:
    async def waiting() -> bool:
        return await db.worker_sessions(waiting_on_gate=True) == 1

    await eventually(waiting)


async def no_worker_left(db: SlotDatabase) -> None:
    async def gone() -> bool:
        return await db.worker_sessions() == 0

    await eventually(gone)
    assert await db.worker_locks() == 0


async def test_tick_during_a_running_cycle_is_skipped_not_queued(db: SlotDatabase) -> None:
    await db.insert(past_slots(10))
    await db.install_gate_trigger()
    await db.close_gate()

    async with running(worker_options(db.url)) as harness:
        harness.ticker.tick()
        await blocked_on_gate(db)
        harness.ticker.tick()  # arrives while the first cycle is still running

        async def skip_seen() -> bool:
            return harness.recorded.skipped == 1

        await eventually(skip_seen)
        await db.open_gate()
        await harness.recorded.next_outcome()

        assert len(harness.recorded.started) == 1  # the skipped tick never ran later
        assert harness.recorded.completed[0].expired_count == 10
        assert harness.loop.stats.ticks_skipped == 1


async def test_cycle_past_its_budget_is_rolled_back_and_its_locks_released(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(10))
    await db.install_gate_trigger()
    await db.close_gate()

    async with running(worker_options(db.url, max_cycle_seconds=0.5)) as harness:
        harness.ticker.tick()
        await harness.recorded.next_outcome()
        first, *_ = harness.recorded.failed

        assert first.result.outcome is CycleOutcome.BUDGET_EXCEEDED, first.error
        assert set((await db.statuses()).values()) == {SlotStatus.AVAILABLE}
        await no_worker_left(db)

        await db.open_gate()
        await harness.tick_and_wait()  # the backlog is picked up by the next cycle
        assert harness.recorded.completed[0].expired_count == len(slots)


async def test_lost_connection_fails_the_cycle_and_the_next_tick_retries(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(10))
    await db.install_gate_trigger()
    await db.close_gate()

    async with running(worker_options(db.url)) as harness:
        harness.ticker.tick()
        await blocked_on_gate(db)
        await db.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'slot-expiration'"
        )
        await harness.recorded.next_outcome()
        assert isinstance(harness.recorded.failed[0].error, TransientStoreError)
        assert set((await db.statuses()).values()) == {SlotStatus.AVAILABLE}

        await db.open_gate()
        await harness.tick_and_wait()
        assert harness.recorded.completed[0].expired_count == len(slots)


async def loop_inside_a_blocked_cycle(
    db: SlotDatabase, shutdown_grace_seconds: float
) -> tuple[Harness, asyncio.Task[LoopStats]]:
    """A running loop whose first cycle holds its batch and waits at the closed gate."""
    await db.install_gate_trigger()
    await db.close_gate()
    harness = Harness(worker_options(db.url, shutdown_grace_seconds=shutdown_grace_seconds))
    task = asyncio.create_task(harness.loop.run(harness.stop))
    harness.ticker.tick()
    await blocked_on_gate(db)
    return harness, task


async def test_stop_during_a_cycle_lets_the_batch_commit_whole(db: SlotDatabase) -> None:
    slots = await db.insert(past_slots(30))
    harness, task = await loop_inside_a_blocked_cycle(db, shutdown_grace_seconds=60)

    harness.stop.request()
    await db.open_gate()
    stats = await task

    assert (stats.cycles_completed, stats.cycles_failed) == (1, 0)
    assert set((await db.statuses()).values()) == {SlotStatus.EXPIRED}
    assert harness.recorded.completed[0].expired_count == len(slots)
    assert harness.recorded.stopped
    await no_worker_left(db)


async def test_second_stop_request_rolls_the_batch_back_whole(db: SlotDatabase) -> None:
    await db.insert(past_slots(30))
    harness, task = await loop_inside_a_blocked_cycle(db, shutdown_grace_seconds=600)

    harness.stop.request()
    harness.stop.request()
    stats = await task

    assert (stats.cycles_completed, stats.cycles_failed) == (0, 1)
    assert set((await db.statuses()).values()) == {SlotStatus.AVAILABLE}
    await no_worker_left(db)
    await db.open_gate()


@pytest.fixture
def own_server() -> Iterator[EmbeddedPostgres]:
    """A server of this test's own, so it can be stopped without disturbing the others."""
    with EmbeddedPostgres() as server:
        upgrade(server.url)
        yield server


async def test_loop_recovers_after_the_database_went_away_and_came_back(
    own_server: EmbeddedPostgres,
) -> None:
    async with SlotDatabase.open(own_server.url) as db:
        slots = await db.insert(past_slots(20))

    async with running(worker_options(own_server.url)) as harness:
        own_server.stop()
        await harness.tick_and_wait()
        assert isinstance(harness.recorded.failed[0].error, TransientStoreError)

        own_server.start()
        await harness.tick_and_wait()
        assert harness.recorded.completed[0].expired_count == len(slots)

    with psycopg.connect(own_server.url) as conn:
        row = conn.execute("SELECT count(*) FROM availability_slots WHERE status = 'Expired'")
        assert row.fetchone() == (len(slots),)


class RaisingOn:
    """A sink that raises on every event of one kind: a broken observer."""

    def __init__(self, kind: type) -> None:
        self.kind = kind
        self.raised = 0

    def __call__(self, event: Event) -> None:
        if isinstance(event, self.kind):
            self.raised += 1
            message = f"broken sink on {self.kind.__name__}"
            raise OSError(message)


@pytest.mark.parametrize("kind", [BatchCommitted, CycleEnded], ids=["batch", "cycle-end"])
async def test_a_sink_that_raises_never_changes_a_cycles_outcome_nor_stops_the_loop(
    db: SlotDatabase, kind: type
) -> None:
    slots = await db.insert(past_slots(120))
    broken = RaisingOn(kind)
    counted: list[str] = []
    harness = Harness(worker_options(db.url))
    emit = fan_out(broken, harness.recorded, on_failure=SinkFailures(count=counted.append))
    harness.loop = build_loop(worker_options(db.url), emit, harness.ticker)
    harness.task = asyncio.create_task(harness.loop.run(harness.stop))
    try:
        await harness.tick_and_wait()
        await harness.tick_and_wait()  # the loop goes on after a sink raised
    finally:
        harness.stop.request()
        stats = await harness.task

    assert [r.outcome for r in harness.recorded.completed] == [CycleOutcome.SUCCESS] * 2
    assert [r.expired_count for r in harness.recorded.completed] == [50, 50]
    assert (stats.cycles_completed, stats.cycles_failed) == (2, 0)
    assert broken.raised == 2
    assert counted == ["RaisingOn"] * 2
    statuses = await db.statuses()
    assert sum(statuses[s.id] is SlotStatus.EXPIRED for s in slots) == 100
