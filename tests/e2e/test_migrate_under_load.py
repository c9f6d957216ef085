"""`migrate` adopting a live 1,000,000-row calendar table: the calendar's writes go on.

pgbench (PostgreSQL's own load tool, driven as the benchmark drives it:
bench/pgbench.py) updates random slots and inserts new ones at a fixed rate
while the real `migrate` adopts the table and builds the worker's index
CONCURRENTLY. A sampler watches pg_stat_activity meanwhile: a pgbench session
waiting on a lock held by a session of migrate would show there, with how long
it has waited. The assertion is the lock_timeout story: no write waits on
migrate longer than the lock timeout (in fact none waits on it at all), and
writes commit while the index builds. pgbench's latencies are reported, not
held to a bound (this machine is shared), beyond a generous sanity one.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

import psycopg
import pytest
from benchmarks.pgbench import LoggedTransaction, PgbenchSettings, between, run_pgbench

from slot_expiration.db.session import ApplicationName
from tests.e2e.command import eventually, run_command, started
from tests.support.calendar import (
    SELECTION_INDEX,
    IndexShape,
    create_calendar_table,
    selection_index_definition,
)
from tests.support.partitions import Months, create_monthly_calendar, partition_indexes

pytestmark = pytest.mark.e2e

ROWS = 1_000_000
LOCK_TIMEOUT_SECONDS = 2.0
LOAD = PgbenchSettings(seconds=10, rate_per_second=500, clients=8)
SHORT_LOAD = PgbenchSettings(seconds=3, rate_per_second=100, clients=2)
SANITY_LATENCY_MS = 30_000.0  # a write slower than this is broken, whatever the machine
SAMPLE_SECONDS = 0.02

# The calendar's writes: a booking-like update of a random slot, and a new slot.
WRITES = f"""\\set n random(1, {ROWS})
UPDATE availability_slots SET version = version + 1, updated_at = now() WHERE legacy_id = :n;
INSERT INTO availability_slots (id, tenant_id, consultant_id, start_at, end_at, status, version, created_at, updated_at) VALUES (gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), now() + interval '1 day', now() + interval '1 day 30 minutes', 'Available', 1, now(), now());
"""  # noqa: E501 - pgbench takes one statement per line

# A pgbench session waiting on a lock that a session of migrate holds, and for how
# long its statement has run (an upper bound of the wait).
BLOCKED_BY_MIGRATE = """
SELECT coalesce(max(extract(epoch FROM clock_timestamp() - w.query_start)), 0), count(*)
FROM pg_stat_activity AS w
WHERE w.datname = current_database() AND w.application_name = 'pgbench'
  AND w.wait_event_type = 'Lock'
  AND EXISTS (
      SELECT FROM pg_stat_activity AS m
      WHERE m.pid = ANY (pg_blocking_pids(w.pid)) AND m.application_name = %(migrate)s
  )
"""
BUILDING = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND application_name = %(migrate)s
  AND state = 'active' AND query ILIKE 'CREATE INDEX CONCURRENTLY%%'
"""


@dataclass
class Sampled:
    """What the sampler saw while migrate ran."""

    samples: int = 0
    blocked_samples: int = 0
    longest_wait_seconds: float = 0.0
    build_seen: list[float] = field(default_factory=list)  # Unix times the build was running


async def _sample(url: str, stop: asyncio.Event, seen: Sampled) -> None:
    params = {"migrate": ApplicationName.MIGRATE}
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while not stop.is_set():
            cursor = await conn.execute(BLOCKED_BY_MIGRATE, params)
            longest, blocked = await cursor.fetchone() or (0, 0)
            cursor = await conn.execute(BUILDING, params)
            building = await cursor.fetchone()
            seen.samples += 1
            seen.blocked_samples += int(blocked)
            seen.longest_wait_seconds = max(seen.longest_wait_seconds, float(longest))
            if building and building[0]:
                seen.build_seen.append(time.time())
            # Other sessions' state: polled, there is no event to wait on.
            await asyncio.sleep(SAMPLE_SECONDS)


async def _pgbench_connected(url: str, clients: int = LOAD.clients) -> bool:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = 'pgbench'"
        )
        row = await cursor.fetchone()
    return row is not None and row[0] >= clients


def _latencies(transactions: list[LoggedTransaction]) -> list[float]:
    return sorted(t.latency_ms for t in transactions if t.latency_ms is not None)


async def test_adopting_a_million_row_table_never_makes_the_calendars_writes_wait_on_migrate(
    empty_database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = empty_database_url
    create_calendar_table(url, ROWS, IndexShape.NONE)
    load = asyncio.create_task(run_pgbench(url, WRITES, LOAD))
    await eventually(lambda: _pgbench_connected(url), "pgbench connected", 30)
    stop, seen = asyncio.Event(), Sampled()
    sampler = asyncio.create_task(_sample(url, stop, seen))

    started = time.time()
    migrated = await run_command(
        "migrate", "--database-url", url, "--lock-timeout-seconds", f"{LOCK_TIMEOUT_SECONDS:g}"
    )
    ended = time.time()
    stop.set()
    await sampler
    transactions = await load

    during = between(transactions, started, ended)
    during_build = (
        between(transactions, seen.build_seen[0], seen.build_seen[-1]) if seen.build_seen else []
    )
    everything, while_migrating = _latencies(transactions), _latencies(during)
    with capsys.disabled():
        print(
            f"\nmigrate adopted {ROWS:,} rows in {ended - started:.2f} s (lock_timeout "
            f"{LOCK_TIMEOUT_SECONDS:g} s) under pgbench at {LOAD.rate_per_second}/s, "
            f"{LOAD.clients} clients: {len(during)} writes committed meanwhile, "
            f"{len(during_build)} while the index built "
            f"({seen.build_seen[-1] - seen.build_seen[0] if seen.build_seen else 0:.2f} s seen); "
            f"write latency during migrate max {max(while_migrating, default=0):.1f} ms, "
            f"median {statistics.median(while_migrating) if while_migrating else 0:.1f} ms; "
            f"whole run max {max(everything, default=0):.1f} ms over {len(transactions)} writes; "
            f"sampled {seen.samples} times, writes waiting on migrate's locks in "
            f"{seen.blocked_samples} samples, longest {seen.longest_wait_seconds:.3f} s"
        )

    assert migrated.returncode == 0, migrated.describe()
    assert "adopting the calendar's availability_slots" in migrated.stdout
    built = selection_index_definition(url)
    assert built is not None
    assert (SELECTION_INDEX in built[0], built[1]) == (True, True)
    assert ended < max(t.ended_at for t in transactions), "the write load ended before migrate"
    assert all(t.ok for t in transactions), [t for t in transactions if not t.ok][:5]
    # The lock_timeout story: no write waited on migrate longer than the lock timeout.
    assert seen.longest_wait_seconds < LOCK_TIMEOUT_SECONDS
    assert seen.samples > 0
    # Writes committed while the index was being built (it takes no lock that stops them).
    assert seen.build_seen, "the sampler never saw the index build"
    assert during
    assert max(everything) < SANITY_LATENCY_MS


async def test_the_sampler_sees_writes_waiting_on_a_lock_that_migrate_would_hold(
    empty_database_url: str,
) -> None:
    """The control: what adding a foreign key to the calendar's table would do (the
    lock migration 0002 does not take on an adopted table) shows in the sampler."""
    url = empty_database_url
    create_calendar_table(url, 1_000, IndexShape.NONE)
    load = asyncio.create_task(run_pgbench(url, WRITES.replace(str(ROWS), "1000"), SHORT_LOAD))
    await eventually(lambda: _pgbench_connected(url, SHORT_LOAD.clients), "pgbench connected", 30)
    stop, seen = asyncio.Event(), Sampled()
    sampler = asyncio.create_task(_sample(url, stop, seen))

    async with await psycopg.AsyncConnection.connect(
        url, application_name=ApplicationName.MIGRATE
    ) as migrate:
        await migrate.execute("LOCK TABLE availability_slots IN SHARE ROW EXCLUSIVE MODE")
        await eventually(lambda: seen.blocked_samples > 0, "a write seen waiting on it", 30)
        await migrate.rollback()
    stop.set()
    await sampler
    await load

    assert seen.blocked_samples > 0
    assert seen.longest_wait_seconds > 0


async def test_adopting_a_million_row_pg_partman_calendar_keeps_writes_within_lock_timeout(
    empty_database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same under pgbench, on a calendar pg_partman keeps by month: the worker's index
    goes ON ONLY the parent (a brief SHARE lock on it, under lock_timeout), CONCURRENTLY on
    each partition, then each attached in a short transaction of its own."""
    url = empty_database_url
    now = datetime.now(UTC)
    this_month = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    months = Months(first=_months_after(this_month, -11), premake=2)
    create_monthly_calendar(url, ROWS, months, now, last=_months_after(this_month, 2))
    load = asyncio.create_task(run_pgbench(url, WRITES, LOAD))
    await eventually(lambda: _pgbench_connected(url), "pgbench connected", 30)
    stop, seen = asyncio.Event(), Sampled()
    sampler = asyncio.create_task(_sample(url, stop, seen))

    started = time.time()
    migrated = await run_command(
        "migrate", "--database-url", url, "--lock-timeout-seconds", f"{LOCK_TIMEOUT_SECONDS:g}"
    )
    ended = time.time()
    stop.set()
    await sampler
    transactions = await load

    indexes = partition_indexes(url)
    during = between(transactions, started, ended)
    everything, while_migrating = _latencies(transactions), _latencies(during)
    with capsys.disabled():
        print(
            f"\nmigrate adopted a pg_partman calendar of {ROWS:,} rows in "
            f"{len(indexes.partitions)} partitions in {ended - started:.2f} s (lock_timeout "
            f"{LOCK_TIMEOUT_SECONDS:g} s) under pgbench at {LOAD.rate_per_second}/s, "
            f"{LOAD.clients} clients: {len(during)} writes committed meanwhile; write latency "
            f"during migrate max {max(while_migrating, default=0):.1f} ms, median "
            f"{statistics.median(while_migrating) if while_migrating else 0:.1f} ms; whole run "
            f"max {max(everything, default=0):.1f} ms over {len(transactions)} writes; sampled "
            f"{seen.samples} times, writes waiting on migrate's locks in {seen.blocked_samples} "
            f"samples, longest {seen.longest_wait_seconds:.3f} s"
        )

    assert migrated.returncode == 0, migrated.describe()
    assert "adopting the calendar's availability_slots" in migrated.stdout
    assert (indexes.valid, indexes.every_partition_indexed) == (True, True), indexes
    assert len(indexes.partitions) >= 14  # eleven months back, this one, two ahead, default
    assert ended < max(t.ended_at for t in transactions), "the write load ended before migrate"
    assert all(t.ok for t in transactions), [t for t in transactions if not t.ok][:5]
    # The lock_timeout story: no write waited on migrate longer than the lock timeout.
    assert seen.longest_wait_seconds < LOCK_TIMEOUT_SECONDS
    assert seen.samples > 0
    assert seen.build_seen, "the sampler never saw a partition's index build"
    assert during
    assert max(everything) < SANITY_LATENCY_MS


def _months_after(month: datetime, count: int) -> datetime:
    """The first day of the month `count` months after `month` (a month's first day)."""
    index = month.year * 12 + month.month - 1 + count
    return month.replace(year=index // 12, month=index % 12 + 1)


LONG_TRANSACTION_ROWS = 200_000
# Each write waits behind migrate for one try (100 ms) at most; before the tries, a
# queued migrate held every write for its whole lock timeout (2 s).
WAIT_BOUND_SECONDS = 1.0
BLOCKED_SAMPLES_WANTED = 10
RETRYING = "a lock a step needs is held by another transaction: trying again"


async def test_a_long_write_transaction_during_adoption_never_queues_writes_behind_migrate(
    empty_database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A calendar transaction that wrote a slot and stays open (a slow request, a client
    that forgot to commit) while migrate adopts a pg_partman calendar under pgbench:
    migrate's lock on the parent (for the index ON ONLY) waits behind it, and every
    write arriving meanwhile would queue behind that request. Each try of migrate
    waits 100 ms at most, then steps aside and tries again later."""
    url = empty_database_url
    now = datetime.now(UTC)
    this_month = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    months = Months(first=_months_after(this_month, -11), premake=2)
    create_monthly_calendar(
        url, LONG_TRANSACTION_ROWS, months, now, last=_months_after(this_month, 2)
    )
    writes = WRITES.replace(str(ROWS), str(LONG_TRANSACTION_ROWS))
    load = asyncio.create_task(run_pgbench(url, writes, LOAD))
    await eventually(lambda: _pgbench_connected(url), "pgbench connected", 30)
    stop, seen = asyncio.Event(), Sampled()
    sampler = asyncio.create_task(_sample(url, stop, seen))
    async with await psycopg.AsyncConnection.connect(url) as long_one:
        await long_one.execute(
            "UPDATE availability_slots SET version = version + 1 WHERE legacy_id = 1"
        )
        started_at = time.time()
        async with started(
            "migrate", "--database-url", url, "--lock-timeout-seconds", "120"
        ) as migrate:
            await migrate.until(lambda: migrate.printed(RETRYING), "migrate trying again", 60)
            # Several tries more, each with writes queued behind it for its 100 ms.
            after_first = seen.blocked_samples
            await migrate.until(
                lambda: seen.blocked_samples >= after_first + BLOCKED_SAMPLES_WANTED,
                "writes seen waiting behind migrate's later tries",
                60,
            )
            held_until = time.time()
            await long_one.rollback()  # the long transaction ends: migrate goes on
            migrated = await migrate.wait()
    ended = time.time()
    stop.set()
    await sampler
    transactions = await load

    indexes = partition_indexes(url)
    while_held = _latencies(between(transactions, started_at, held_until))
    with capsys.disabled():
        print(
            f"\nmigrate on a pg_partman calendar of {LONG_TRANSACTION_ROWS:,} rows in "
            f"{len(indexes.partitions)} partitions beside a write transaction left open "
            f"{held_until - started_at:.2f} s, under pgbench at {LOAD.rate_per_second}/s, "
            f"{LOAD.clients} clients: migrate took {ended - started_at:.2f} s in all; "
            f"{len(while_held)} writes committed while the long transaction was open, latency "
            f"max {max(while_held, default=0):.1f} ms, median "
            f"{statistics.median(while_held) if while_held else 0:.1f} ms; writes waiting "
            f"behind migrate in {seen.blocked_samples} of {seen.samples} samples, the longest "
            f"{seen.longest_wait_seconds:.3f} s"
        )

    assert migrated.returncode == 0, migrated.describe()
    assert RETRYING in migrated.stdout, migrated.describe()
    assert (indexes.valid, indexes.every_partition_indexed) == (True, True), indexes
    assert all(t.ok for t in transactions), [t for t in transactions if not t.ok][:5]
    assert seen.blocked_samples >= BLOCKED_SAMPLES_WANTED
    # The server ends each try at 100 ms: a write behind it waited that, never a lock timeout.
    assert seen.longest_wait_seconds < WAIT_BOUND_SECONDS
    assert while_held
