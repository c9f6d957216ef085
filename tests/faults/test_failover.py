"""A read-only database: after a failover the worker's URL points at a hot standby.

Every cycle fails with an infrastructure error (SQLSTATE 25006, read-only
transaction) and writes nothing; once the standby is promoted, the same
worker, never restarted, expires every row exactly once.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from slot_expiration.domain import Slot
from slot_expiration.embedded import EmbeddedPostgres
from slot_expiration.schema.migrate import upgrade
from tests.e2e.command import started, with_password
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
from tests.support.servers import hot_standby, in_recovery, promote

pytestmark = pytest.mark.faults

BACKLOG, BATCH = 60, 25
READ_ONLY_CYCLES = 3


@dataclass(frozen=True, slots=True)
class Pair:
    primary: EmbeddedPostgres
    standby: EmbeddedPostgres
    slots: list[Slot]


@pytest.fixture
async def pair() -> AsyncIterator[Pair]:
    """A migrated primary with an overdue backlog, and its hot standby (read-only)."""
    with EmbeddedPostgres() as primary:
        upgrade(primary.url)
        async with SlotDatabase.open(primary.url) as db:
            slots = await db.insert(overdue(BACKLOG))
        with hot_standby(primary) as standby:
            assert in_recovery(standby.url)
            yield Pair(primary, standby, slots)


async def test_a_read_only_standby_fails_cycles_writes_nothing_then_drains_once_promoted(
    pair: Pair, record_fault: Record
) -> None:
    url = with_password(pair.standby.url)
    async with SlotDatabase.open(pair.standby.url) as replica:
        books = await FaultBooks.open(replica, pair.slots, record_fault)
        await books.strike(replica)
        async with started(*run_args(url, batch_size=BATCH)) as worker:
            await worker.until(
                lambda: failed_cycles(worker) >= READ_ONLY_CYCLES,
                "cycles failing on the read-only standby",
            )
            unchanged = await replica.rows() == books.ledger.before
            promote(pair.standby)
            promoted = time.monotonic()
            recovery = await books.drain_time(replica, [worker], promoted)
            done = await stopped(worker)
        after = await replica.rows()
    async with SlotDatabase.open(pair.primary.url) as primary:
        primary_after = await primary.rows()

    audit = books.close(
        after,
        [done],
        fault="read-only database (failover to a replica)",
        injection="the worker's URL points at a hot standby (pg_basebackup -R) for "
        f"{READ_ONLY_CYCLES} cycles, then the standby is promoted (pg_promote())",
        recovery=recovery,
        note="from the promotion; the worker is not restarted",
    )
    assert unchanged  # nothing written while read-only
    read_only = events_of(done, "cycle.failed")[:READ_ONLY_CYCLES]
    assert {e["error_type"] for e in read_only} == {"TransientStoreError"}, done.describe()
    assert all("read-only transaction" in e["exception"] for e in read_only), done.describe()
    assert primary_after == books.ledger.before  # the old primary was never written to either
    assert done.returncode == 0, done.describe()
    assert audit.clean, audit.describe()
