"""Once COMMIT is sent, no cancellation cuts it short: the batch is whole, and reported;
the cancellation is delivered after it, so nothing else starts."""

from __future__ import annotations

import asyncio

import pytest

from slot_expiration.domain import SlotStatus
from slot_expiration.expiry import CycleRun
from tests.support.cycles import BatchLog, make_cycle
from tests.support.database import GATE_KEY, SlotDatabase, install_deferred_trigger
from tests.support.slots import AS_OF, past_slots
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


async def test_cancelling_twice_during_commit_commits_reports_the_batch_then_cancels(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(8))
    # The COMMIT itself waits at the gate: deferred triggers run inside it.
    await install_deferred_trigger(db, f"PERFORM pg_advisory_xact_lock_shared({GATE_KEY});")
    await db.close_gate()
    log = BatchLog()
    cycle = make_cycle(db.url, batch_size=100)
    task = asyncio.create_task(cycle.run(CycleRun(as_of=AS_OF, emit=log)))

    async def committing() -> bool:
        return await db.worker_sessions(waiting_on_gate=True) == 1

    await eventually(committing)
    task.cancel()
    await asyncio.sleep(0)  # let the first cancellation land before the second
    task.cancel()
    await db.open_gate()
    with pytest.raises(asyncio.CancelledError):
        await task

    (committed,) = log.batches
    assert committed.expired_count == len(slots)
    assert set((await db.statuses()).values()) == {SlotStatus.EXPIRED}
    assert log.backlogs == []  # nothing new started once the cancel was delivered
    assert await db.worker_locks() == 0


async def test_cancelling_while_the_batch_statement_runs_rolls_it_back_at_once(
    db: SlotDatabase,
) -> None:
    """The batch statement and its COMMIT travel together: a cancellation while the statement
    still runs asks the server to cancel it, so nothing commits, not even once it could."""
    slots = await db.insert(past_slots(8))
    before = await db.rows()
    await db.install_spin_gate()  # inside the statement; no lock_timeout ends it
    log = BatchLog()
    cycle = make_cycle(db.url, batch_size=100)
    task = asyncio.create_task(cycle.run(CycleRun(as_of=AS_OF, emit=log)))

    await eventually(db.worker_spinning)
    task.cancel()
    with pytest.raises(asyncio.CancelledError) as cancelled:
        await task
    assert cancelled.value.__cause__ is None or "canceling statement due to user request" in str(
        cancelled.value.__cause__
    )
    await db.execute(
        "INSERT INTO spin_gate_open VALUES (true)"
    )  # had the statement gone on, its COMMIT would run now

    async def released() -> bool:
        return await db.worker_locks() == 0 and await db.worker_sessions() == 0

    await eventually(released)
    assert log.batches == []
    assert await db.rows() == before
    assert len(before) == len(slots)
