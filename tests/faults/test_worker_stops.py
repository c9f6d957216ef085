"""The worker process stopped under it: SIGKILL mid-batch, SIGTERM during and between cycles.

In each case a new worker finishes the backlog, and every row ends up expired
exactly once, with every expiry reported by some cycle.
"""

from __future__ import annotations

import signal
import time

import pytest

from tests.e2e.command import event_names, eventually, started
from tests.faults.workers import (
    FaultBooks,
    Record,
    events_of,
    no_worker_left,
    overdue,
    run_args,
    stopped,
    waiting_on_gate,
)
from tests.support.database import SlotDatabase

pytestmark = pytest.mark.faults

BACKLOG, BATCH = 60, 25
RESTART_NOTE = "from the new worker's launch, its start-up included"


async def test_sigkill_mid_batch_loses_nothing_and_a_new_worker_expires_each_row_once(
    db: SlotDatabase, secret_url: str, record_fault: Record
) -> None:
    books = await FaultBooks.open(db, await db.insert(overdue(BACKLOG)), record_fault)
    # A wait inside the UPDATE that no lock_timeout ends: only the server finding its
    # client gone stops it before the cycle's budget (statement_timeout) would.
    await db.install_spin_gate()

    async with started(*run_args(secret_url, batch_size=BATCH)) as victim:
        await victim.until(db.worker_spinning, "the batch spinning inside its UPDATE")
        await books.strike(db)
        victim.send_signal(signal.SIGKILL)
        killed = await victim.wait()
    # Its batch's COMMIT is already queued at the server (it went with the statement, in
    # one round trip), but its backend checks that its client is still there while the
    # statement runs (client_connection_check_interval): it finds none, aborts, and rolls
    # back, without the gate opening.
    await eventually(lambda: no_worker_left(db), "the killed worker's backend gone")
    await db.open_spin_gate()
    relaunched = time.monotonic()
    async with started(*run_args(secret_url, batch_size=BATCH)) as successor:
        recovery = await books.drain_time(db, [successor], relaunched)
        done = await stopped(successor)
    await eventually(lambda: no_worker_left(db), "no worker session or lock left")

    audit = books.close(
        await db.rows(),
        [killed, done],
        fault="worker killed mid-batch (SIGKILL)",
        injection=f"SIGKILL while its batch of {BATCH} waits inside the UPDATE (a trigger "
        "spinning on pg_sleep, no lock a lock_timeout would end); a new worker started",
        recovery=recovery,
        note=RESTART_NOTE,
    )
    assert killed.returncode == -signal.SIGKILL, killed.describe()
    assert "cycle.completed" not in event_names(killed.log_events())
    assert done.returncode == 0, done.describe()
    assert audit.clean, audit.describe()


@pytest.mark.parametrize(
    ("grace", "commits"), [("30", True), ("0", False)], ids=["within-grace", "past-grace"]
)
async def test_sigterm_during_a_cycle_commits_or_rolls_back_the_batch_whole(
    db: SlotDatabase, secret_url: str, record_fault: Record, grace: str, commits: bool
) -> None:
    books = await FaultBooks.open(db, await db.insert(overdue(BACKLOG)), record_fault)
    await db.install_gate_trigger()
    await db.close_gate()
    args = run_args(secret_url, "--shutdown-grace-seconds", grace, batch_size=BATCH)

    async with started(*args) as worker:
        await worker.until(lambda: waiting_on_gate(db), "the batch waiting on the gate")
        await books.strike(db)
        worker.send_signal(signal.SIGTERM)
        await worker.until(lambda: worker.logged("worker.stopping"), "worker.stopping logged")
        if commits:
            assert not worker.exited  # it waits for the batch in flight
            await db.open_gate()
        first = await worker.wait()
    await db.open_gate()
    relaunched = time.monotonic()
    async with started(*run_args(secret_url, batch_size=BATCH)) as successor:
        recovery = await books.drain_time(db, [successor], relaunched)
        second = await stopped(successor)

    injection = (
        "the gate opens within --shutdown-grace-seconds 30: the batch commits"
        if commits
        else "--shutdown-grace-seconds 0 and the gate stays closed: the batch rolls back"
    )
    audit = books.close(
        await db.rows(),
        [first, second],
        fault=f"SIGTERM during a cycle, {'within' if commits else 'past'} the shutdown grace",
        injection=f"SIGTERM while its batch of {BATCH} waits on the gate trigger; {injection}; "
        "a new worker started",
        recovery=recovery,
        note=RESTART_NOTE,
    )
    assert first.returncode == 0, first.describe()
    completed = [e["expired_count"] for e in events_of(first, "cycle.completed")]
    assert completed == ([BATCH] if commits else []), first.describe()
    assert event_names(first.log_events())[-1] == "worker.stopped"
    assert audit.clean, audit.describe()


async def test_sigterm_between_cycles_stops_at_once_and_a_new_worker_finishes(
    db: SlotDatabase, secret_url: str, record_fault: Record
) -> None:
    books = await FaultBooks.open(db, await db.insert(overdue(BACKLOG)), record_fault)

    async with started(*run_args(secret_url, batch_size=BATCH, interval="3600")) as worker:
        await worker.until(lambda: worker.logged("cycle.completed"), "its first cycle done")
        await books.strike(db)
        signalled = time.monotonic()
        first = await stopped(worker)
        stop_seconds = time.monotonic() - signalled
    relaunched = time.monotonic()
    async with started(*run_args(secret_url, batch_size=BATCH)) as successor:
        recovery = await books.drain_time(db, [successor], relaunched)
        second = await stopped(successor)

    audit = books.close(
        await db.rows(),
        [first, second],
        fault="SIGTERM between cycles",
        injection="SIGTERM while the worker sleeps until its next tick; a new worker started",
        recovery=recovery,
        note=f"{RESTART_NOTE}; the old one exited {stop_seconds:.2f} s after the signal",
    )
    assert first.returncode == 0, first.describe()
    stopping = events_of(first, "worker.stopping")
    assert [e["cycle_in_flight"] for e in stopping] == [False]
    assert [e["expired_count"] for e in events_of(first, "cycle.completed")] == [BATCH]
    assert audit.clean, audit.describe()
