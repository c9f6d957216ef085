"""The benchmark's repository on a real database: the load, the bare batch, the reset."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from benchmarks.dataset import reference_time, table_spec
from benchmarks.plan import TableShape
from benchmarks.store import BenchSchemaExistsError, BenchStore

from slot_expiration.embedded import EmbeddedPostgres
from slot_expiration.expiry.store import Selection
from tests.support.database import SlotDatabase
from tests.support.roles import password_role
from tests.support.slots import AS_OF

SHAPE = TableShape(slots=5_000, due=1_200, consultants=50, tenants=5)


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[BenchStore]:
    async with BenchStore.connect(database_url) as bench:
        yield bench


@pytest.fixture
async def loaded(store: BenchStore) -> BenchStore:
    await store.load_slots(table_spec(SHAPE, AS_OF))
    return store


async def _one(db: SlotDatabase, statement: str) -> object:
    cursor = await db.conn.execute(statement, {"as_of": AS_OF})
    row = await cursor.fetchone()
    assert row is not None
    return row[0]


async def test_the_load_writes_the_table_with_exactly_the_due_backlog(
    loaded: BenchStore, db: SlotDatabase
) -> None:
    counts = await loaded.count_by_status()

    assert sum(counts.values()) == SHAPE.slots
    assert set(counts) == {"Available", "Booked", "Expired", "Archived"}
    assert await loaded.count_due(AS_OF) == SHAPE.due
    # Mostly future slots, a fifth of them booked.
    future = await _one(db, "SELECT count(*) FROM availability_slots WHERE start_at > %(as_of)s")
    assert future == round((SHAPE.slots - SHAPE.due) * 0.7)


async def test_the_loaded_calendar_is_consistent(loaded: BenchStore, db: SlotDatabase) -> None:
    overlaps = await _one(
        db,
        "SELECT count(*) FROM (SELECT consultant_id, start_at FROM availability_slots "
        "GROUP BY 1, 2 HAVING count(*) > 1) AS twice",
    )
    touched_after_as_of = await _one(
        db, "SELECT count(*) FROM availability_slots WHERE updated_at >= %(as_of)s"
    )
    starting_soon = await _one(
        db,
        "SELECT count(*) FROM availability_slots "
        "WHERE start_at > %(as_of)s AND start_at < %(as_of)s + interval '1 day'",
    )
    consultants = await _one(db, "SELECT count(DISTINCT consultant_id) FROM availability_slots")

    assert overlaps == 0  # one slot per consultant and start
    assert touched_after_as_of == 0  # so a drain's rows are told apart by updated_at
    assert starting_soon == 0  # a worker on the real clock sees the same backlog
    assert consultants == SHAPE.consultants


async def test_the_bare_batch_expires_the_oldest_due_rows_once(
    loaded: BenchStore, db: SlotDatabase
) -> None:
    expired = await loaded.bare_batch(AS_OF, 500)

    rows = await db.rows()
    assert expired == 500
    newest_expired = await _one(
        db,
        "SELECT max(start_at) FROM availability_slots "
        "WHERE status = 'Expired' AND updated_at = %(as_of)s",
    )
    oldest_left = await _one(
        db,
        "SELECT min(start_at) FROM availability_slots "
        "WHERE status = 'Available' AND start_at <= %(as_of)s",
    )
    assert isinstance(newest_expired, type(AS_OF))
    assert isinstance(oldest_left, type(AS_OF))
    assert newest_expired <= oldest_left
    assert sum(1 for r in rows.values() if r.updated_at == AS_OF and r.version == 2) == 500
    assert await loaded.drained(AS_OF) == (500, 0)


async def test_the_reset_puts_the_backlog_back_as_loaded(
    loaded: BenchStore, db: SlotDatabase
) -> None:
    before = await db.rows()
    for _ in range(3):
        await loaded.bare_batch(AS_OF, 500)

    put_back = await loaded.reset_backlog(AS_OF)

    assert put_back == 1_200
    after = await db.rows()
    assert {i: (r.status, r.version, r.updated_at) for i, r in after.items()} == {
        i: (r.status, r.version, r.updated_at) for i, r in before.items()
    }
    assert await loaded.count_due(AS_OF) == SHAPE.due


async def test_drained_tells_the_rows_not_expired_exactly_once(
    loaded: BenchStore, db: SlotDatabase
) -> None:
    await loaded.bare_batch(AS_OF, 500)
    await db.execute(
        "UPDATE availability_slots SET version = version + 1 WHERE id IN (SELECT id "
        "FROM availability_slots WHERE status = 'Expired' AND updated_at = %s LIMIT 3)",
        AS_OF,
    )

    assert await loaded.drained(AS_OF) == (500, 3)


async def test_expire_oldest_leaves_the_given_number_of_dead_rows_behind(
    loaded: BenchStore,
) -> None:
    assert await loaded.expire_oldest(AS_OF, 700) == 700
    assert await loaded.count_due(AS_OF) == SHAPE.due - 700


async def test_a_wave_stamped_before_as_of_stays_expired_when_the_backlog_is_put_back(
    loaded: BenchStore,
) -> None:
    await loaded.expire_oldest(AS_OF, 300, stamp=AS_OF - timedelta(seconds=1))
    await loaded.bare_batch(AS_OF, 500)

    put_back = await loaded.reset_backlog(AS_OF)

    assert put_back == 500
    assert await loaded.count_due(AS_OF) == SHAPE.due - 300


async def test_the_single_statement_expires_every_row_due_now_once_and_nothing_else(
    store: BenchStore,
) -> None:
    as_of = reference_time(datetime.now(UTC))  # the statement runs on the database's clock
    await store.load_slots(table_spec(SHAPE, as_of))
    before = await store.count_by_status()

    expired = await store.expire_all_due()

    assert expired == SHAPE.due
    assert await store.count_due(as_of) == 0
    assert await store.drained(as_of) == (SHAPE.due, 0)
    after = await store.count_by_status()
    assert after["Expired"] - before["Expired"] == SHAPE.due
    assert after["Booked"] == before["Booked"]


async def test_explain_shows_the_executed_plan_and_changes_nothing(
    loaded: BenchStore, db: SlotDatabase
) -> None:
    before = await db.rows()
    params = Selection(AS_OF, AS_OF, 500).parameters()

    plan = await loaded.explain("expire_batch", params)

    assert "ix_availability_slots_status_start" in plan
    assert "Buffers: shared" in plan
    assert await db.rows() == before


async def test_the_benchmark_never_reuses_a_schema_of_its_name(store: BenchStore) -> None:
    await store.create_schema()
    try:
        with pytest.raises(BenchSchemaExistsError, match="DROP SCHEMA slot_expiration_bench"):
            await store.create_schema()
    finally:
        await store.drop_schema()


async def test_booking_candidates_are_future_available_slots(
    loaded: BenchStore, db: SlotDatabase
) -> None:
    await loaded.create_booking_candidates()

    filled = await loaded.fill_booking_candidates(AS_OF, 300)

    wrong = await _one(
        db,
        "SELECT count(*) FROM bench_booking_candidates c JOIN availability_slots s "
        "ON s.id = c.slot_id WHERE s.status <> 'Available' OR s.start_at <= %(as_of)s "
        "OR s.tenant_id <> c.tenant_id",
    )
    assert filled == 300
    assert wrong == 0
    assert sorted(await _numbers(db)) == list(range(1, 301))


async def _numbers(db: SlotDatabase) -> list[int]:
    cursor = await db.conn.execute("SELECT n FROM bench_booking_candidates")
    return [int(row[0]) for row in await cursor.fetchall()]


async def test_a_checkpoint_runs_for_a_superuser(store: BenchStore) -> None:
    assert await store.checkpoint() is True
    assert store.can_checkpoint


async def test_a_role_that_may_not_checkpoint_is_told_apart_and_not_asked_again(
    pg_server: EmbeddedPostgres, database_url: str
) -> None:
    with password_role(pg_server) as role:
        async with BenchStore.connect(role.url_for(database_url)) as plain:
            assert await plain.checkpoint() is False
            assert await plain.checkpoint() is False
            assert not plain.can_checkpoint
