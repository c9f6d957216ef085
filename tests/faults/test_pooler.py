"""pgbouncer (Debian's) in transaction mode in front of the database.

Each transaction may land on another server session, so nothing may rely on
session state: the limits are set per transaction (SET LOCAL), and a statement
prepared on one server session is unknown on the next. Drain mode repeats the
same statements many times on one client connection, which is exactly what
makes a driver prepare them; two workers share a small pool, so their
transactions interleave across the server sessions.
"""

from __future__ import annotations

import time
from contextlib import AsyncExitStack
from urllib.parse import urlsplit

import pytest

from tests.e2e.command import Running, started
from tests.faults.workers import (
    FaultBooks,
    Record,
    events_of,
    failed_cycles,
    overdue,
    run_args,
    stopped,
)
from tests.support.database import SlotDatabase
from tests.support.servers import pgbouncer

pytestmark = pytest.mark.faults

BACKLOG, BATCH, WORKERS = 300, 10, 2
# Eight batches per cycle: more than one cycle per worker, each repeating its statements.
DRAIN = ("--max-batches-per-cycle", "8")
# Healthy, this drains in a few seconds; the deadline only bounds a failing run.
POOLER_TIMEOUT_SECONDS = 20.0


def port_of(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


async def test_two_draining_workers_behind_pgbouncer_in_transaction_mode_expire_each_row_once(
    db: SlotDatabase, database_url: str, record_fault: Record
) -> None:
    books = await FaultBooks.open(db, await db.insert(overdue(BACKLOG)), record_fault)

    with pgbouncer(port_of(database_url), pool_size=2) as bouncer:
        url = bouncer.url_for(database_url)
        await books.strike(db)
        began = time.monotonic()
        async with AsyncExitStack() as stack:
            workers: list[Running] = [
                await stack.enter_async_context(started(*run_args(url, *DRAIN, batch_size=BATCH)))
                for _ in range(WORKERS)
            ]
            seconds = await books.drain_time(db, workers, began, POOLER_TIMEOUT_SECONDS)
            finished = [await stopped(worker) for worker in workers]

    failures = [e for f in finished for e in events_of(f, "cycle.failed")]
    audit = books.close(
        await db.rows(),
        finished,
        fault="pgbouncer in transaction mode in front of the database",
        injection=f"{WORKERS} draining `run` workers (--max-batches-per-cycle 8, batch {BATCH}) "
        "through pgbouncer 1.18, pool_mode=transaction, default_pool_size=2",
        recovery=seconds,
        note=f"time to drain {BACKLOG} rows; {len(failures)} failed cycles",
    )
    assert failures == [], [f"{e['error_type']}: {e['exception']}" for e in failures][:5]
    assert all(failed_cycles(f) == 0 and f.returncode == 0 for f in finished)
    assert audit.clean, audit.describe()


async def test_poison_rows_behind_pgbouncer_are_isolated_cycle_after_cycle(
    db: SlotDatabase, database_url: str, record_fault: Record
) -> None:
    slots = await db.insert(overdue(60))
    poison = [slots[3], slots[23], slots[43]]  # one in the first, third and fifth batch
    await db.install_poison_trigger([p.id for p in poison], "P0001")
    healthy = [s for s in slots if s not in poison]
    books = await FaultBooks.open(db, healthy, record_fault)

    with pgbouncer(port_of(database_url), pool_size=2) as bouncer:
        url = bouncer.url_for(database_url)
        await books.strike(db)
        began = time.monotonic()
        async with started(*run_args(url, batch_size=BATCH)) as worker:
            seconds = await books.drain_time(db, [worker], began, POOLER_TIMEOUT_SECONDS)
            done = await stopped(worker)

    failures = events_of(done, "cycle.failed")
    audit = books.close(
        await db.rows(),
        [done],
        fault="poison rows behind pgbouncer in transaction mode",
        injection="a trigger rejects 3 of 60 rows (one in the 1st, 3rd and 5th batch of "
        f"{BATCH}); one `run` worker through pgbouncer, pool_mode=transaction",
        recovery=seconds,
        note=f"time to expire the 57 healthy rows; {len(failures)} failed cycles",
    )
    assert failures == [], [f"{e['error_type']}: {e['exception']}" for e in failures][:5]
    assert audit.clean, audit.describe()
