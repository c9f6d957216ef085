"""Between the worker and its rows: a network that freezes mid-batch, a table lock held
by another session, overdue rows other transactions hold for longer than a cycle."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import psycopg
import pytest

from tests.e2e.command import started
from tests.faults.workers import (
    FaultBooks,
    Record,
    at_risk,
    events_of,
    failed_cycles,
    overdue,
    run_args,
    stopped,
    waiting_on_gate,
)
from tests.support.database import GATE_KEY, SlotDatabase, install_deferred_trigger, rows_locked
from tests.support.tcp_proxy import FreezableProxy

pytestmark = pytest.mark.faults

BACKLOG, BATCH = 60, 25
BUDGET_SECONDS = 2.0


async def test_network_frozen_mid_batch_changes_each_row_once_and_says_it_is_in_doubt(
    db: SlotDatabase, secret_url: str, record_fault: Record
) -> None:
    books = await FaultBooks.open(db, await db.insert(overdue(BACKLOG)), record_fault)
    await db.install_gate_trigger()
    await db.close_gate()
    budget = ("--max-cycle-seconds", str(BUDGET_SECONDS))

    async def committed() -> bool:
        return BACKLOG - await at_risk(db, books.ledger) == BATCH

    async with FreezableProxy.serving(secret_url) as proxy:
        url = proxy.url_through(secret_url)
        async with started(*run_args(url, *budget, batch_size=BATCH)) as worker:
            await worker.until(lambda: waiting_on_gate(db), "the batch waiting on the gate")
            await books.strike(db)
            proxy.freeze()
            frozen = time.monotonic()
            # The UPDATE ends at the server, and the COMMIT sent with it in one round trip
            # runs: the answer never arrives.
            await db.open_gate()
            await worker.until(committed, "the batch committed at the server")
            await worker.until(lambda: failed_cycles(worker) >= 1, "the frozen cycle given up")
            gave_up = time.monotonic() - frozen
            await worker.until(lambda: failed_cycles(worker) >= 2, "a second cycle failing")
            proxy.thaw()
            thawed = time.monotonic()
            recovery = await books.drain_time(db, [worker], thawed)
            done = await stopped(worker)

    audit = books.close(
        await db.rows(),
        [done],
        fault="network to the server frozen mid-batch",
        injection=f"a TCP proxy stops passing bytes (closes nothing) while a batch of {BATCH} is "
        f"inside its UPDATE; budget {BUDGET_SECONDS:g} s; thawed after 2 failed cycles",
        recovery=recovery,
        note=lambda audit: (
            f"from the thaw; the frozen cycle gave up {gave_up:.1f} s after the freeze; "
            f"{audit.unreported} rows committed that no cycle could report (the COMMIT went "
            "with the batch): the cycle.failed line says the batch may or may not have committed"
        ),
    )
    assert done.returncode == 0, done.describe()
    in_doubt = events_of(done, "cycle.failed")[0]
    assert "may or may not have committed" in in_doubt["exception"], done.describe()
    assert audit.rows_kept, audit.describe()
    assert audit.unreported == BATCH, audit.describe()  # the batch in doubt, and only it


async def test_network_frozen_during_commit_changes_each_row_once_and_says_it_is_in_doubt(
    db: SlotDatabase, secret_url: str, record_fault: Record
) -> None:
    books = await FaultBooks.open(db, await db.insert(overdue(BACKLOG)), record_fault)
    await install_deferred_trigger(db, f"PERFORM pg_advisory_xact_lock_shared({GATE_KEY});")
    await db.close_gate()  # deferred triggers run inside COMMIT: the batch waits there
    budget = ("--max-cycle-seconds", str(BUDGET_SECONDS))

    async def committed() -> bool:
        return BACKLOG - await at_risk(db, books.ledger) == BATCH

    async with FreezableProxy.serving(secret_url) as proxy:
        url = proxy.url_through(secret_url)
        async with started(*run_args(url, *budget, batch_size=BATCH)) as worker:
            await worker.until(lambda: waiting_on_gate(db), "the batch waiting inside COMMIT")
            await books.strike(db)
            proxy.freeze()
            await db.open_gate()  # the server commits; the answer never reaches the worker
            await worker.until(committed, "the batch committed at the server")
            await worker.until(lambda: failed_cycles(worker) >= 1, "the cycle given up")
            proxy.thaw()
            thawed = time.monotonic()
            recovery = await books.drain_time(db, [worker], thawed)
            done = await stopped(worker)

    audit = books.close(
        await db.rows(),
        [done],
        fault="network to the server frozen during COMMIT",
        injection=f"a TCP proxy freezes while the COMMIT of a batch of {BATCH} waits at the "
        "server (a deferred trigger); the server then commits, its answer never arrives",
        recovery=recovery,
        note=lambda audit: (
            f"from the thaw; {audit.unreported} rows committed that no cycle "
            "could report: the cycle.failed line says the batch may or may not have committed"
        ),
    )
    in_doubt = events_of(done, "cycle.failed")[0]
    assert "may or may not have committed" in in_doubt["exception"], done.describe()
    assert audit.rows_kept, audit.describe()
    assert audit.unreported == BATCH, audit.describe()  # the batch in doubt, and only it


@asynccontextmanager
async def table_locked(url: str) -> AsyncIterator[None]:
    """Another session holds the table lock a migration would take."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await conn.execute("LOCK TABLE availability_slots IN ACCESS EXCLUSIVE MODE")
        yield
        await conn.rollback()


async def test_table_lock_held_by_another_session_fails_cycles_quickly_then_drains(
    db: SlotDatabase, secret_url: str, record_fault: Record
) -> None:
    books = await FaultBooks.open(db, await db.insert(overdue(BACKLOG)), record_fault)
    await books.strike(db)  # the lock would make this query wait
    args = run_args(secret_url, "--lock-timeout-seconds", "0.3", batch_size=BATCH)

    async with AsyncExitStack() as lock:
        await lock.enter_async_context(table_locked(db.url))
        async with started(*args) as worker:
            await worker.until(lambda: failed_cycles(worker) >= 3, "cycles failing on the lock")
            await lock.aclose()
            released = time.monotonic()
            recovery = await books.drain_time(db, [worker], released)
            done = await stopped(worker)

    audit = books.close(
        await db.rows(),
        [done],
        fault="table lock held by another session",
        injection="LOCK TABLE availability_slots IN ACCESS EXCLUSIVE MODE in another session "
        "(as a migration would) for 3 cycles; --lock-timeout-seconds 0.3",
        recovery=recovery,
        note="from the release",
    )
    failures = events_of(done, "cycle.failed")
    assert all("lock timeout" in e["exception"] for e in failures), done.describe()
    assert done.returncode == 0, done.describe()
    assert audit.clean, audit.describe()


async def test_rows_held_by_other_transactions_are_passed_over_then_expired_once(
    db: SlotDatabase, secret_url: str, record_fault: Record
) -> None:
    slots = await db.insert(overdue(BACKLOG))
    held = slots[10:20]  # inside the first batch
    free = [s.id for s in slots if s not in held]
    books = await FaultBooks.open(db, slots, record_fault)
    await books.strike(db)

    async def passed_over_twice(worker_events: list[dict[str, object]]) -> bool:
        statuses = await db.statuses()
        if any(statuses[i].value != "Expired" for i in free):
            return False
        return sum(1 for e in worker_events if e["skipped_locked_count"] == len(held)) >= 2

    async with AsyncExitStack() as holding:
        await holding.enter_async_context(rows_locked(db.url, [s.id for s in held]))
        async with started(*run_args(secret_url, batch_size=BATCH)) as worker:
            await worker.until(
                lambda: passed_over_twice(events_of(worker, "cycle.completed")),
                "the free rows expired and the held ones passed over in two more cycles",
            )
            await holding.aclose()
            released = time.monotonic()
            recovery = await books.drain_time(db, [worker], released)
            done = await stopped(worker)

    audit = books.close(
        await db.rows(),
        [done],
        fault="overdue rows held by other transactions longer than a cycle",
        injection=f"another transaction holds {len(held)} of the oldest rows FOR UPDATE "
        "(as a booking would) over several cycles",
        recovery=recovery,
        note="from the release; the rest expired meanwhile",
    )
    assert failed_cycles(done) == 0, done.describe()
    assert audit.clean, audit.describe()
