"""1, 2, 4 and 8 workers on one backlog: SKIP LOCKED gives each row to exactly one of them.

All workers start with their first batch held on the gate, so they really
overlap; then the gate opens and they drain the rest side by side.
"""

from __future__ import annotations

import time
from contextlib import AsyncExitStack

import pytest

from tests.e2e.command import Running, eventually, started
from tests.faults.conftest import Measure
from tests.faults.workers import (
    INTERVAL_SECONDS,
    FaultBooks,
    Record,
    events_of,
    overdue,
    reported_expired,
    run_args,
    stopped,
    waiting_on_gate,
)
from tests.support.database import SlotDatabase

pytestmark = pytest.mark.faults

BACKLOG, BATCH = 400, 20
# The first batches wait on the gate until the last worker has started (seconds on a
# busy machine): a wait the test imposes, not a lock the worker should give up on.
PATIENT = ("--lock-timeout-seconds", "60")


@pytest.mark.parametrize("workers", [1, 2, 4, 8])
async def test_workers_side_by_side_expire_each_row_exactly_once(
    db: SlotDatabase, secret_url: str, record_fault: Record, measure: Measure, workers: int
) -> None:
    books = await FaultBooks.open(db, await db.insert(overdue(BACKLOG)), record_fault)
    await db.install_gate_trigger()
    await db.close_gate()

    async with AsyncExitStack() as stack:
        running: list[Running] = [
            await stack.enter_async_context(
                started(*run_args(secret_url, *PATIENT, batch_size=BATCH))
            )
            for _ in range(workers)
        ]
        await eventually(
            lambda: waiting_on_gate(db, workers), "every worker's first batch on the gate"
        )
        await books.strike(db)
        await db.open_gate()
        opened = time.monotonic()
        seconds = await books.drain_time(db, running, opened)
        finished = [await stopped(worker) for worker in running]

    audit = books.close(
        await db.rows(),
        finished,
        fault=f"{workers} worker{'s' if workers > 1 else ''} on one backlog",
        injection=f"{workers} `run` processes (batch {BATCH}, tick {INTERVAL_SECONDS} s) on "
        f"{BACKLOG} overdue rows, their first batches released together",
        recovery=seconds,
        note="time to drain the backlog, from the release",
    )
    per_worker = [reported_expired([f]) for f in finished]
    cycles = [e for f in finished for e in events_of(f, "cycle.completed")]
    skipped = sum(e["skipped_locked_count"] for e in cycles)
    measure(
        "parallel-workers",
        {
            "workers": workers,
            "backlog": BACKLOG,
            "batch size": BATCH,
            "seconds to drain": "not drained" if seconds is None else f"{seconds:.2f}",
            "rows expired by each worker": " + ".join(map(str, per_worker)),
            "rows passed over (skipped, locked)": skipped,
            "rows done twice": len(audit.done_twice),
        },
    )
    assert all(f.returncode == 0 for f in finished), [f.describe() for f in finished]
    assert not [e for f in finished for e in events_of(f, "cycle.failed")]
    assert all(count >= BATCH for count in per_worker), per_worker  # each had a batch
    assert audit.clean, audit.describe()
