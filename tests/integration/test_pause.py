"""The deployment's pause on a real PostgreSQL: a running loop reads it at its next tick and
records a paused cycle, expires again at the tick after `resume`; the worker's role reads
the pause and cannot set it; `status --check` judges it on the database's clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import pytest

from slot_expiration.cli.common import COMMAND_LIMITS
from slot_expiration.db import ApplicationName, MisconfiguredStoreError
from slot_expiration.domain import CycleOutcome, SlotStatus
from slot_expiration.history.housekeeping import Housekeeping, record_cycle
from slot_expiration.history.sink import HistorySink
from slot_expiration.loop import StopSignal, fan_out
from slot_expiration.options import load_options
from slot_expiration.pause import AlreadyPausedError, PauseStore
from slot_expiration.schema.grants import grant_privileges
from slot_expiration.status.check import Level, Section, judge
from slot_expiration.status.report import read_health
from slot_expiration.status.store import StatusStore
from slot_expiration.worker import build_loop
from tests.support.cycles import run_cycle
from tests.support.database import SlotDatabase
from tests.support.doubles import ManualTicker, RecordingSink
from tests.support.history import history_rows
from tests.support.roles import PasswordRole
from tests.support.slots import past_slots

pytestmark = pytest.mark.integration

REASON = "calendar database upgrade"


class Worker:
    """A running loop (one replica), ticked by hand, recording its cycles in the history."""

    def __init__(self, url: str) -> None:
        self.ticker = ManualTicker()
        self.recorded = RecordingSink()
        self.history = HistorySink(
            lambda record: record_cycle(Housekeeping(url, timedelta(days=14)), record),
            "worker-a:101",
        )
        options = load_options(database_url=url, batch_size=50)
        self.loop = build_loop(options, fan_out(self.recorded, self.history), self.ticker)

    async def tick(self) -> CycleOutcome:
        """One tick; the outcome of the cycle it ran, once its history row is written."""
        self.recorded.outcome.clear()
        self.ticker.tick()
        await self.recorded.outcome.wait()
        await self.history.drain()
        return self.recorded.completed[-1].outcome


@asynccontextmanager
async def running(url: str) -> AsyncIterator[Worker]:
    worker = Worker(url)
    stop = StopSignal()
    task = asyncio.create_task(worker.loop.run(stop))
    try:
        yield worker
    finally:
        stop.request()
        stop.request()  # forced: never leave a cycle behind a failing test
        await task


async def _pause(url: str, lasting: timedelta | None = timedelta(minutes=30)) -> None:
    async with PauseStore.connect(url, COMMAND_LIMITS) as store:
        await store.start(lasting, REASON)


async def _resume(url: str) -> None:
    async with PauseStore.connect(url, COMMAND_LIMITS) as store:
        assert await store.end() is not None


async def _pauses(db: SlotDatabase) -> int:
    cursor = await db.conn.execute("SELECT count(*) FROM slot_expiration_pauses")
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def _current_user(db: SlotDatabase) -> str:
    cursor = await db.conn.execute("SELECT current_user")
    row = await cursor.fetchone()
    assert row is not None
    return str(row[0])


async def test_a_running_loop_obeys_a_pause_at_its_next_tick_and_expires_again_after_resume(
    db: SlotDatabase,
) -> None:
    first = await db.insert(past_slots(3))
    async with running(db.url) as worker:
        assert await worker.tick() is CycleOutcome.SUCCESS
        await _pause(db.url)
        during = await db.insert(past_slots(4))

        paused = await worker.tick()
        statuses_while_paused = await db.statuses()
        await _resume(db.url)
        resumed = await worker.tick()

    assert paused is CycleOutcome.PAUSED
    assert {statuses_while_paused[s.id] for s in during} == {SlotStatus.AVAILABLE}
    assert resumed is CycleOutcome.SUCCESS
    assert set((await db.statuses()).values()) == {SlotStatus.EXPIRED}
    assert len(first) + len(during) == sum(r.expired_count for r in worker.recorded.completed)
    rows = await history_rows(db)
    assert [row.outcome for row in rows] == [
        CycleOutcome.SUCCESS,
        CycleOutcome.PAUSED,
        CycleOutcome.SUCCESS,
    ]
    paused_row = rows[1]
    assert (paused_row.expired_count, paused_row.batches, paused_row.error_type) == (0, 0, None)
    assert paused_row.backlog == len(during)  # counted while paused


async def test_the_workers_role_reads_the_pause_and_obeys_it(
    db: SlotDatabase, role: PasswordRole
) -> None:
    await db.insert(past_slots(2))
    await grant_privileges(db.url, role.name)
    await _pause(db.url)

    outcome = await run_cycle(role.url_for(db.url))

    assert outcome.result.outcome is CycleOutcome.PAUSED
    assert outcome.expired_count == 0
    assert set((await db.statuses()).values()) == {SlotStatus.AVAILABLE}


async def test_the_workers_role_cannot_pause_nor_resume_and_nothing_is_written(
    db: SlotDatabase, role: PasswordRole
) -> None:
    await grant_privileges(db.url, role.name)

    with pytest.raises(MisconfiguredStoreError, match="may not pause or resume") as refused:
        await _pause(role.url_for(db.url))
    assert await _pauses(db) == 0
    await _pause(db.url)
    with pytest.raises(MisconfiguredStoreError, match="may not pause or resume"):
        await _resume(role.url_for(db.url))

    assert refused.value.sqlstate == "42501"
    assert f"role {role.name} may not pause or resume the worker" in str(refused.value)
    async with PauseStore.connect(db.url, COMMAND_LIMITS) as store:
        assert await store.current() is not None  # still paused: the resume was refused


async def test_a_second_pause_is_refused_while_one_holds_and_replace_swaps_it_at_once(
    db: SlotDatabase,
) -> None:
    await _pause(db.url)

    with pytest.raises(AlreadyPausedError, match=f"already paused by .*: {REASON}"):
        await _pause(db.url, timedelta(hours=2))
    async with PauseStore.connect(db.url, COMMAND_LIMITS) as store:
        replaced = await store.end()
        started = await store.start(timedelta(hours=2), "longer")

    assert replaced is not None
    assert replaced.pause.reason == REASON
    assert started.limit == timedelta(hours=2)
    assert await _pauses(db) == 2


async def _succeeded_once(url: str) -> None:
    async with running(url) as worker:
        assert await worker.tick() is CycleOutcome.SUCCESS


async def _verdict(db: SlotDatabase) -> tuple[Level, str, list[Section]]:
    async with StatusStore.connect(db.url, ApplicationName.STATUS) as store:
        health = await read_health(store, 300, 20)
    verdict = judge(health, 300)
    return verdict.level, verdict.summary(), [f.section for f in verdict.ordered()]


async def test_status_check_says_warning_while_a_pause_holds_and_critical_past_its_end(
    db: SlotDatabase,
) -> None:
    await _succeeded_once(db.url)  # nothing else to judge
    user = await _current_user(db)
    await _pause(db.url)
    holding = await _verdict(db)
    # Two hours later, on the database's clock: the same pause, begun two hours ago.
    await db.execute(
        "UPDATE slot_expiration_pauses SET paused_at = paused_at - interval '2 hours', "
        "paused_until = paused_until - interval '2 hours'"
    )
    past_its_end = await _verdict(db)

    level, summary, sections = holding
    assert level is Level.WARNING
    assert summary.startswith(f"WARNING: paused by {user} until ")
    assert summary.endswith(f" left: {REASON}")
    assert sections == [Section.PAUSED]
    level, summary, sections = past_its_end
    assert level is Level.CRITICAL
    assert f"past its end: {REASON}" in summary
    assert Section.PAUSED in sections


async def test_status_check_holds_a_pause_given_no_end_to_four_hours(db: SlotDatabase) -> None:
    await _succeeded_once(db.url)
    await _pause(db.url, None)
    await db.execute("UPDATE slot_expiration_pauses SET paused_at = now() - interval '3 hours'")
    within = await _verdict(db)
    await db.execute("UPDATE slot_expiration_pauses SET paused_at = now() - interval '5 hours'")
    past = await _verdict(db)

    assert within[0] is Level.WARNING
    assert "no end given, for 3h 0m (limit 4h 0m)" in within[1]
    assert past[0] is Level.CRITICAL
    assert "no end given, for 5h 0m, past the limit of 4h 0m" in past[1]
