"""`slot-expiration run`: polling, its JSON logs, and the graceful stop on SIGTERM."""

from __future__ import annotations

import signal
from datetime import UTC, datetime, timedelta

import pytest

from slot_expiration.domain import SlotStatus
from tests.e2e.command import Running, event_names, eventually, started
from tests.support.database import SlotDatabase
from tests.support.slots import make_slot, past_slots

pytestmark = pytest.mark.e2e

SLOW_BATCH = ("--interval-seconds", "3600", "--batch-size", "50")


async def _no_worker_left(db: SlotDatabase) -> bool:
    # The server ends a backend a moment after its client went away.
    return await db.worker_sessions() == 0 and await db.worker_locks() == 0


async def _start_slow_batch(db: SlotDatabase, worker: Running) -> None:
    """Wait until the worker's first cycle holds its 50 row locks and waits on the gate."""

    async def waiting() -> bool:
        return await db.worker_sessions(waiting_on_gate=True) == 1

    await worker.until(waiting, "the cycle waiting on the gate")


async def _stop_requested(worker: Running) -> None:
    worker.send_signal(signal.SIGTERM)
    await worker.until(lambda: worker.logged("worker.stopping"), "logging worker.stopping")


async def test_sigterm_during_a_slow_batch_lets_it_commit_whole_then_exits_0(
    db: SlotDatabase, secret_url: str
) -> None:
    await db.insert(past_slots(50))
    await db.install_gate_trigger()
    await db.close_gate()

    async with started(
        "run", *SLOW_BATCH, "--shutdown-grace-seconds", "30", "--database-url", secret_url
    ) as worker:
        await _start_slow_batch(db, worker)
        await _stop_requested(worker)
        assert not worker.exited  # still waiting for the batch in flight
        await db.open_gate()
        done = await worker.wait()

    assert done.returncode == 0, done.describe()
    assert done.stdout == ""
    events = done.log_events()
    names = event_names(events)
    stopping = events[names.index("worker.stopping")]
    assert stopping["cycle_in_flight"] is True
    assert names.index("worker.stopping") < names.index("cycle.completed")
    assert names[-1] == "worker.stopped"
    assert events[names.index("cycle.completed")]["expired_count"] == 50
    rows = await db.rows()
    assert {row.status for row in rows.values()} == {SlotStatus.EXPIRED}
    assert {row.version for row in rows.values()} == {2}
    await eventually(lambda: _no_worker_left(db), "no worker session or lock left")


@pytest.mark.parametrize("how", ["no-grace", "second-signal"])
async def test_sigterm_past_the_grace_rolls_the_batch_back_whole_then_exits_0(
    db: SlotDatabase, secret_url: str, how: str
) -> None:
    await db.insert(past_slots(50))
    before = await db.rows()
    await db.install_gate_trigger()
    await db.close_gate()
    grace = "0" if how == "no-grace" else "30"

    async with started(
        "run", *SLOW_BATCH, "--shutdown-grace-seconds", grace, "--database-url", secret_url
    ) as worker:
        await _start_slow_batch(db, worker)
        await _stop_requested(worker)
        if how == "second-signal":
            worker.send_signal(signal.SIGTERM)
        done = await worker.wait()  # the gate stays closed: the batch cannot commit
        assert await db.rows() == before  # rolled back while the gate was still closed
        await eventually(lambda: _no_worker_left(db), "no worker session or lock left")

    assert done.returncode == 0, done.describe()
    assert done.stdout == ""
    events = done.log_events()
    names = event_names(events)
    assert "cycle.completed" not in names
    failed = events[names.index("cycle.failed")]
    assert (failed["reason"], failed["error_type"]) == ("interrupted", "CancelledError")
    assert events[names.index("worker.stopping")]["cycle_in_flight"] is True
    assert names[-1] == "worker.stopped"


async def test_run_expires_the_backlog_cycle_by_cycle_and_logs_json_events(
    db: SlotDatabase, secret_url: str
) -> None:
    now = datetime.now(UTC)
    due = await db.insert(make_slot(timedelta(minutes=-m), as_of=now) for m in range(1, 6))
    kept = await db.insert(
        [
            make_slot(timedelta(minutes=-5), SlotStatus.BOOKED, as_of=now),
            make_slot(timedelta(days=1), as_of=now),
        ]
    )
    before = await db.rows()

    async def backlog_gone() -> bool:
        statuses = await db.statuses()
        return all(statuses[slot.id] is SlotStatus.EXPIRED for slot in due)

    async with started(
        "run",
        "--interval-seconds",
        "1",
        "--batch-size",
        "2",
        "--database-url",
        secret_url,
    ) as worker:
        await worker.until(backlog_gone, "the backlog expired")
        worker.send_signal(signal.SIGTERM)
        done = await worker.wait()

    assert done.returncode == 0, done.describe()
    assert done.stdout == ""
    events = done.log_events()
    names = event_names(events)
    assert names[0] == "worker.started"
    assert events[0]["batch_size"] == 2
    assert events[0]["interval_seconds"] == 1.0
    assert {"cycle.started", "batch.selected", "cycle.completed", "worker.stopping"} <= set(names)
    assert names[-1] == "worker.stopped"
    for event in events:
        assert {"event", "level", "timestamp"} <= event.keys()
    started_runs = [e["run_id"] for e in events if e["event"] == "cycle.started"]
    completed = [e for e in events if e["event"] == "cycle.completed"]
    assert [e["run_id"] for e in completed] == started_runs[: len(completed)]
    assert [e["expired_count"] for e in completed][:3] == [2, 2, 1]
    assert sum(e["expired_count"] for e in completed) == 5
    rows = await db.rows()
    for slot in kept:
        assert rows[slot.id] == before[slot.id]
    await eventually(lambda: _no_worker_left(db), "no worker session or lock left")
