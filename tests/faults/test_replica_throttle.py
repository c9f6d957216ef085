"""A streaming standby whose replay is paused (a report running on it, say): the drain stops
within about a second of the standby falling further behind than allowed, says why, and goes
on by itself once replay resumes; no row lost or done twice.

PostgreSQL's own replay_lag is refreshed only when the standby reports (on each receipt of
WAL, else every wal_receiver_status_interval, 10 s by default) and may be NULL or stale in
between; the worker also measures the lag itself, from when the primary's WAL went past the
standby's replay position, at each look (expiry/throttle.py, tests/unit/test_throttle.py).
Here the drain's own WAL keeps the standby reporting, so both figures pass the limit.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import psycopg
import pytest

from slot_expiration.domain import Slot, SlotStatus
from slot_expiration.embedded import EmbeddedPostgres
from slot_expiration.schema.migrate import upgrade
from tests.e2e.command import Finished, Running, started, with_password
from tests.faults.workers import FaultBooks, Record, events_of, overdue, run_args, stopped
from tests.support.database import SlotDatabase
from tests.support.servers import hot_standby, in_recovery

pytestmark = pytest.mark.faults

BACKLOG, BATCH = 3_000, 25
MAX_LAG_SECONDS = 1.0
# Between two batches: the drain lasts some 6 s, long enough to meet the limit half-way.
PAUSE_SECONDS = 0.05


@dataclass(frozen=True, slots=True)
class Pair:
    primary: EmbeddedPostgres
    standby: EmbeddedPostgres
    slots: list[Slot]


@pytest.fixture
async def pair() -> AsyncIterator[Pair]:
    """A migrated primary with an overdue backlog, and its streaming standby."""
    with EmbeddedPostgres() as primary:
        upgrade(primary.url)
        async with SlotDatabase.open(primary.url) as db:
            slots = await db.insert(overdue(BACKLOG))
        with hot_standby(primary) as standby:
            assert in_recovery(standby.url)
            yield Pair(primary, standby, slots)


def _replay(standby: EmbeddedPostgres, action: str) -> None:
    with psycopg.connect(standby.url, autocommit=True) as conn:
        conn.execute(f"SELECT pg_wal_replay_{action}()")


def _held(worker: Running | Finished) -> list[dict[str, object]]:
    return events_of(worker, "drain.throttled")


async def _expired(db: SlotDatabase) -> int:
    statuses = await db.statuses()
    return sum(status is SlotStatus.EXPIRED for status in statuses.values())


async def test_a_standby_whose_replay_is_paused_holds_the_drain_until_it_resumes(
    pair: Pair, record_fault: Record
) -> None:
    url = with_password(pair.primary.url)
    args = run_args(
        url,
        "--max-batches-per-cycle",
        "0",
        "--batch-pause-seconds",
        str(PAUSE_SECONDS),
        "--max-replica-lag-seconds",
        str(MAX_LAG_SECONDS),
        batch_size=BATCH,
    )
    async with SlotDatabase.open(pair.primary.url) as db:
        books = await FaultBooks.open(db, pair.slots, record_fault)
        _replay(pair.standby, "pause")
        paused = time.monotonic()
        async with started(*args) as worker:
            await worker.until(lambda: bool(_held(worker)), "the drain held by the standby")
            held_after = time.monotonic() - paused
            expired_when_held = await _expired(db)
            # Held for a while: the worker says so again every 10 s of waiting.
            await worker.until(lambda: len(_held(worker)) >= 2, "the drain still held")
            expired_while_held = await _expired(db)
            await books.strike(db)
            _replay(pair.standby, "resume")
            resumed = time.monotonic()
            recovery = await books.drain_time(db, [worker], resumed)
            done = await stopped(worker)
        after = await db.rows()

    audit = books.close(
        after,
        [done],
        fault="a streaming standby's replay paused during a drain",
        injection=f"pg_wal_replay_pause() on a hot standby (pg_basebackup -R) before a drain "
        f"of {BACKLOG} rows in batches of {BATCH}, --max-replica-lag-seconds "
        f"{MAX_LAG_SECONDS:g}; pg_wal_replay_resume() once the drain was held 10 s",
        recovery=recovery,
        note=f"held {held_after:.1f} s after the pause with {expired_when_held} rows expired, "
        "none while held; drain time from the resume",
    )
    first = _held(done)[0]
    assert first["reason"] == "replica_lag", first
    assert float(str(first["replica_lag_seconds"])) > MAX_LAG_SECONDS, first
    assert 0 < expired_when_held < BACKLOG  # it drained, then was held before the end
    assert expired_while_held == expired_when_held  # no batch while the standby was behind
    assert recovery is not None, done.describe()  # resumed by itself, never restarted
    assert done.returncode == 0, done.describe()
    assert audit.clean, audit.describe()
