"""The server under the worker: stopped (fast, immediate) mid-cycle and started again, and
the worker's backend terminated mid-batch.

The worker (`run`) is never restarted: it logs each failed cycle, keeps
ticking, and drains the backlog once the server answers again.
"""

from __future__ import annotations

import time

import pytest

from tests.e2e.command import started, with_password
from tests.faults.workers import (
    FaultBooks,
    Record,
    events_of,
    failed_cycles,
    overdue,
    run_args,
    stopped,
    waiting_on_gate,
)
from tests.support.database import SlotDatabase
from tests.support.servers import ControlledServer

pytestmark = pytest.mark.faults

BACKLOG, BATCH = 60, 25
FAILED_CYCLES_WHILE_DOWN = 3


@pytest.mark.parametrize("mode", ["fast", "immediate"])
async def test_server_stopped_mid_cycle_then_started_again_loses_and_repeats_nothing(
    own_server: ControlledServer, own_database_url: str, record_fault: Record, mode: str
) -> None:
    url = with_password(own_database_url)
    async with SlotDatabase.open(own_database_url) as db:
        books = await FaultBooks.open(db, await db.insert(overdue(BACKLOG)), record_fault)
        await db.install_gate_trigger()
        # The suite's servers commit asynchronously (synchronous_commit=off): without this,
        # an immediate stop right after could lose the test's own setup, not the worker's.
        await db.execute("CHECKPOINT")
        await db.close_gate()
        async with started(*run_args(url, batch_size=BATCH)) as worker:
            await worker.until(lambda: waiting_on_gate(db), "the batch waiting on the gate")
            await books.strike(db)
            own_server.stop(mode)  # ends every session, the gate's with them
            await worker.until(
                lambda: failed_cycles(worker) >= FAILED_CYCLES_WHILE_DOWN,
                "cycles failing while the server is down",
            )
            own_server.start()
            back = time.monotonic()
            async with SlotDatabase.open(own_database_url) as again:
                recovery = await books.drain_time(again, [worker], back)
                done = await stopped(worker)
                after = await again.rows()

    audit = books.close(
        after,
        [done],
        fault=f"server stopped ({mode}) mid-cycle, then started again",
        injection=f"pg_ctl stop -m {mode} while a batch of {BATCH} waits inside the UPDATE; "
        f"started again after {FAILED_CYCLES_WHILE_DOWN} failed cycles; the worker runs on",
        recovery=recovery,
        note="from the server's restart",
    )
    assert done.returncode == 0, done.describe()
    failures = events_of(done, "cycle.failed")
    assert {e["error_type"] for e in failures} <= {"TransientStoreError", "StoreConnectError"}
    assert audit.clean, audit.describe()


async def test_worker_backend_terminated_mid_batch_fails_one_cycle_and_the_next_drains(
    db: SlotDatabase, secret_url: str, record_fault: Record
) -> None:
    books = await FaultBooks.open(db, await db.insert(overdue(BACKLOG)), record_fault)
    await db.install_gate_trigger()
    await db.close_gate()

    async with started(*run_args(secret_url, batch_size=BATCH)) as worker:
        await worker.until(lambda: waiting_on_gate(db), "the batch waiting on the gate")
        await books.strike(db)
        await db.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'slot-expiration' AND datname = current_database()"
        )
        terminated = time.monotonic()
        await db.open_gate()
        recovery = await books.drain_time(db, [worker], terminated)
        done = await stopped(worker)

    audit = books.close(
        await db.rows(),
        [done],
        fault="worker's backend terminated mid-batch",
        injection=f"pg_terminate_backend() while its batch of {BATCH} waits inside the UPDATE",
        recovery=recovery,
        note="from the termination",
    )
    assert done.returncode == 0, done.describe()
    failures = events_of(done, "cycle.failed")
    assert [e["error_type"] for e in failures] == ["TransientStoreError"], done.describe()
    assert audit.clean, audit.describe()
