"""The operator's read-only view on a real PostgreSQL: status report and readiness."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta
from uuid import UUID

import psycopg
import pytest

from slot_expiration.db import SchemaMissingError
from slot_expiration.domain import SlotStatus
from slot_expiration.embedded import EmbeddedPostgres
from slot_expiration.expiry.store import CycleStore
from slot_expiration.options import load_options
from slot_expiration.quarantine import QuarantineStore
from slot_expiration.schema.grants import GrantMode, grant_privileges
from slot_expiration.schema.migrate import head_revision
from slot_expiration.status import Unreadable, collect_status, render_text
from slot_expiration.status.store import SchemaState, StatusStore
from slot_expiration.worker.observability import readiness_for
from tests.support.database import LIMITS, SlotDatabase
from tests.support.roles import password_role
from tests.support.slots import AS_OF, make_slot

pytestmark = pytest.mark.integration

APP = "slot-expiration-status"

# A calendar in steady state (as in test_selection_plan): most rows are history or
# future slots, the job's candidates a thin slice; large enough for the planner
# to prefer the index.
FILL = """
INSERT INTO availability_slots
SELECT gen_random_uuid(), gen_random_uuid(), gen_random_uuid(),
       %(as_of)s + (i - 150000) * interval '1 minute',
       %(as_of)s + (i - 150000) * interval '1 minute' + interval '30 minutes',
       CASE WHEN i > 149500 THEN 'Available'
            ELSE (ARRAY['Expired', 'Booked', 'Archived'])[1 + i %% 3] END,
       1, %(as_of)s, %(as_of)s
FROM generate_series(1, 200000) AS i
"""


async def quarantine(db: SlotDatabase, slot_id: UUID, attempts: int, minutes_ago: int) -> None:
    """Record a slot in the quarantine as a cycle would have (test-side SQL)."""
    failed_at = AS_OF - timedelta(minutes=minutes_ago)
    await db.conn.execute(
        "INSERT INTO slot_expiration_failures (slot_id, attempts, first_failed_at, "
        "last_failed_at, next_attempt_at, sqlstate, message) "
        "VALUES (%s, %s, %s, %s, %s, 'P0001', 'slot refuses to expire')",
        (slot_id, attempts, failed_at, failed_at, failed_at + timedelta(minutes=5)),
    )


async def test_the_status_session_cannot_write_and_its_limits_end_with_it(
    database_url: str,
) -> None:
    async with StatusStore.connect(database_url, APP) as store:
        conn = store.session.connection  # the session itself, as a stray write would find it
        cursor = await conn.execute("SELECT current_setting('statement_timeout')")
        assert await cursor.fetchone() == ("10s",)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            await conn.execute("UPDATE availability_slots SET version = version")
        await conn.rollback()
        # Nothing was set for the session: a pooler may hand it to anyone next.
        cursor = await conn.execute(
            "SELECT current_setting('statement_timeout'), "
            "current_setting('default_transaction_read_only')"
        )
        assert await cursor.fetchone() == ("0", "off")


async def test_the_schema_revision_is_the_newest_migration(database_url: str) -> None:
    async with StatusStore.connect(database_url, APP) as store:
        assert await store.schema_revision() == head_revision()


async def test_a_database_never_migrated_has_no_schema(empty_database_url: str) -> None:
    async with StatusStore.connect(empty_database_url, APP) as store:
        with pytest.raises(SchemaMissingError):
            await store.schema_revision()


async def test_counts_backlog_and_oldest_overdue_slot(db: SlotDatabase) -> None:
    oldest = make_slot(timedelta(hours=-50))
    await db.insert(
        [
            oldest,
            make_slot(timedelta(minutes=-1)),
            make_slot(timedelta(minutes=-2)),
            make_slot(timedelta(hours=-90), SlotStatus.BOOKED),
            make_slot(timedelta(hours=-99), SlotStatus.EXPIRED),
            make_slot(timedelta(hours=2)),
        ]
    )

    async with StatusStore.connect(db.url, APP) as store:
        counts = await store.counts_by_status()
        backlog = await store.backlog(AS_OF, cap=100)
        capped = await store.backlog(AS_OF, cap=2)
        overdue = await store.oldest_overdue(AS_OF)

    assert counts == {
        SlotStatus.AVAILABLE: 4,
        SlotStatus.BOOKED: 1,
        SlotStatus.EXPIRED: 1,
        SlotStatus.ARCHIVED: 0,
    }
    assert (backlog, capped) == (3, 2)
    assert overdue is not None
    assert (overdue.id, overdue.tenant_id, overdue.start_at) == (
        oldest.id,
        oldest.tenant_id,
        oldest.start_at,
    )
    assert overdue.quarantined is False


async def test_no_overdue_slot_when_nothing_available_has_started(db: SlotDatabase) -> None:
    await db.insert(
        [make_slot(timedelta(hours=1)), make_slot(timedelta(hours=-1), SlotStatus.BOOKED)]
    )

    async with StatusStore.connect(db.url, APP) as store:
        assert await store.oldest_overdue(AS_OF) is None
        assert await store.backlog(AS_OF, cap=100) == 0


async def test_failed_slots_are_the_quarantined_ones_still_available_latest_first(
    db: SlotDatabase,
) -> None:
    older, newer, left = (make_slot(timedelta(hours=-h)) for h in (3, 2, 1))
    expired = make_slot(timedelta(hours=-4), SlotStatus.EXPIRED)
    await db.insert([older, newer, left, expired])
    await quarantine(db, older.id, attempts=4, minutes_ago=30)
    await quarantine(db, newer.id, attempts=1, minutes_ago=5)
    await quarantine(db, expired.id, attempts=2, minutes_ago=1)  # left Available since

    async with StatusStore.connect(db.url, APP) as store:
        first = await QuarantineStore(store.session).listing(limit=1)
        all_shown = (await QuarantineStore(store.session).listing(limit=10)).latest
        overdue = await store.oldest_overdue(AS_OF)

    assert (first.total, first.parked) == (2, 0)
    assert first.waiting_since == AS_OF - timedelta(minutes=30)
    assert [f.slot_id for f in first.latest] == [newer.id]
    assert [(f.slot_id, f.attempts) for f in all_shown] == [(newer.id, 1), (older.id, 4)]
    assert all_shown[0].tenant_id == newer.tenant_id
    assert all_shown[0].sqlstate == "P0001"
    assert all_shown[0].message == "slot refuses to expire"
    assert all_shown[0].next_attempt_at == AS_OF
    assert overdue is not None
    assert (overdue.id, overdue.quarantined) == (older.id, True)


async def test_an_overdue_slot_whose_quarantine_entry_ended_is_not_called_quarantined(
    db: SlotDatabase,
) -> None:
    slot = make_slot(timedelta(hours=-2))  # Available again after its entry ended
    await db.insert([slot])
    await quarantine(db, slot.id, attempts=1, minutes_ago=90)
    await db.conn.execute(
        "UPDATE slot_expiration_failures SET ended_at = %s, ended_status = 'Booked'",
        (AS_OF - timedelta(minutes=60),),
    )

    async with StatusStore.connect(db.url, APP) as store:
        overdue = await store.oldest_overdue(AS_OF)
        listing = await QuarantineStore(store.session).listing(limit=10)

    assert overdue is not None
    assert (overdue.id, overdue.quarantined) == (slot.id, False)
    assert (listing.total, listing.waiting_since) == (0, None)


async def test_worker_sessions_are_the_workers_own_not_the_status_session(
    db: SlotDatabase,
) -> None:
    async with StatusStore.connect(db.url, APP) as store:
        assert await store.worker_sessions() == ()
    # One status session reads one snapshot (pg_stat_activity included): look again anew.
    async with CycleStore.connect(db.url, LIMITS), StatusStore.connect(db.url, APP) as store:
        sessions = await store.worker_sessions()

    assert len(sessions) == 1
    assert sessions[0].pid > 0
    assert sessions[0].state == "idle"  # between two statements of the worker
    assert sessions[0].backend_start is not None


async def test_the_selection_index_serves_the_selection_on_a_realistic_table(
    db: SlotDatabase,
) -> None:
    await db.conn.execute(FILL, {"as_of": AS_OF})
    await db.execute("ANALYZE availability_slots")

    async with StatusStore.connect(db.url, APP) as store:
        index = await store.selection_index(AS_OF, batch_size=500)

    assert (index.exists, index.valid, index.table) == (True, True, "availability_slots")
    assert index.definition is not None
    assert "(start_at, id) WHERE (status = 'Available'" in index.definition
    assert index.serves_selection, index.scan
    assert "using ix_availability_slots_status_start" in index.scan


async def test_a_dropped_index_is_reported_missing_and_not_serving(db: SlotDatabase) -> None:
    await db.conn.execute(FILL, {"as_of": AS_OF})
    await db.execute("DROP INDEX ix_availability_slots_status_start")
    await db.execute("ANALYZE availability_slots")

    async with StatusStore.connect(db.url, APP) as store:
        index = await store.selection_index(AS_OF, batch_size=500)

    assert (index.exists, index.valid, index.serves_selection) == (False, False, False)
    # Without it the planner scans the table, or the showcase's partial index of Available
    # rows (migration 0003), never in the selection's order.
    assert "ix_availability_slots_status_start" not in index.scan
    assert "Seq Scan" in index.scan or "ix_availability_slots_showcase" in index.scan


async def test_an_invalid_index_is_reported_invalid_and_not_serving(db: SlotDatabase) -> None:
    await db.insert([make_slot(timedelta(minutes=-1))])
    # What an interrupted CREATE INDEX CONCURRENTLY leaves behind (we are superuser here).
    await db.execute(
        "UPDATE pg_index SET indisvalid = false "
        "WHERE indexrelid = 'ix_availability_slots_status_start'::regclass"
    )
    await db.execute("ANALYZE availability_slots")

    async with StatusStore.connect(db.url, APP) as store:
        index = await store.selection_index(AS_OF, batch_size=500)

    assert (index.exists, index.valid, index.serves_selection) == (True, False, False)


async def test_collect_status_gathers_the_whole_report_on_the_databases_clock(
    db: SlotDatabase,
) -> None:
    now = datetime.now(UTC)
    poison = make_slot(timedelta(hours=-5), as_of=now)
    await db.insert(
        [
            poison,
            make_slot(timedelta(minutes=-3), as_of=now),
            make_slot(timedelta(hours=1), as_of=now),
        ]
    )
    await quarantine(db, poison.id, attempts=3, minutes_ago=10)

    report = await collect_status(db.url, batch_size=500)

    document = report.as_json()
    assert document["schema"] == {
        "revision": head_revision(),
        "latest": head_revision(),
        "up_to_date": True,
        "ahead": False,
        "never_migrated": False,
        "contract_mismatches": [],
        "missing_tables": [],
        "worker_mismatches": [],
    }
    assert document["counts"] == {"Available": 3, "Booked": 0, "Expired": 0, "Archived": 0}
    assert document["backlog"] == {"count": 2, "capped": False, "cap": 100_000}
    assert document["oldest_overdue"]["slot_id"] == str(poison.id)
    # Measured from the database's now, a moment after `now` above.
    assert 5 * 3600 <= document["oldest_overdue"]["age_seconds"] < 5 * 3600 + 60
    assert document["oldest_overdue"]["quarantined"] is True
    assert document["worker_sessions"] == {
        "application_name": "slot-expiration",
        "count": 0,
        "sessions": [],
    }
    assert document["failed_slots"]["total"] == 1
    assert document["failed_slots"]["shown"][0]["slot_id"] == str(poison.id)
    assert document["failed_slots"]["shown"][0]["attempts"] == 3
    assert document["index"]["exists"] is True


async def test_readiness_is_ready_on_a_database_at_the_newest_migration(database_url: str) -> None:
    report = await readiness_for(load_options(database_url=database_url)).report()

    assert report.ready, report.detail
    assert report.schema_revision == head_revision()


async def test_readiness_is_not_ready_when_the_schema_is_behind(db: SlotDatabase) -> None:
    await db.execute("UPDATE slot_expiration_alembic_version SET version_num = '0001'")

    report = await readiness_for(load_options(database_url=db.url)).report()

    assert not report.ready
    assert report.schema_revision == "0001"
    assert "slot-expiration migrate" in report.detail


async def test_readiness_is_not_ready_when_the_database_cannot_be_reached(
    unreachable_url: str,
) -> None:
    report = await readiness_for(load_options(database_url=unreachable_url)).report()

    assert not report.ready
    assert report.detail.startswith("database: ")
    assert "pw-secret" not in report.detail


@pytest.fixture
def unreachable_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"postgresql://calendar:pw-secret@127.0.0.1:{port}/calendar"


async def test_readiness_is_ready_for_the_least_privileged_worker_role(
    db: SlotDatabase, pg_server: EmbeddedPostgres
) -> None:
    with password_role(pg_server) as role:
        await grant_privileges(db.url, role.name)
        options = load_options(database_url=role.url_for(db.url))

        report = await readiness_for(options).report()

    assert report.ready, report.detail
    assert report.schema_revision == head_revision()


async def test_status_as_a_read_only_account_reads_every_part(
    db: SlotDatabase, pg_server: EmbeddedPostgres
) -> None:
    await db.insert([make_slot(timedelta(minutes=-3))])
    with password_role(pg_server) as role:
        await grant_privileges(db.url, role.name, GrantMode.READ_ONLY)

        report = await collect_status(role.url_for(db.url), batch_size=500)

    parts = report.as_json()
    assert not [
        name for name, part in parts.items() if isinstance(part, dict) and "unreadable" in part
    ]
    assert parts["backlog"]["count"] == 1
    assert parts["index"]["serves_selection"] in (True, False)  # planned, not refused


async def test_a_part_the_role_may_not_read_says_why_and_the_rest_still_prints(
    db: SlotDatabase, pg_server: EmbeddedPostgres
) -> None:
    await db.insert([make_slot(timedelta(minutes=-3))])
    with password_role(pg_server) as role:
        await grant_privileges(db.url, role.name, GrantMode.READ_ONLY)
        await db.execute(f'REVOKE SELECT ON slot_expiration_failures FROM "{role.name}"')

        report = await collect_status(role.url_for(db.url), batch_size=500)

    assert isinstance(report.quarantine, Unreadable)
    assert report.quarantine.sqlstate == "42501"
    assert "permission denied" in str(report.quarantine)
    assert report.counts == {
        SlotStatus.AVAILABLE: 1,
        SlotStatus.BOOKED: 0,
        SlotStatus.EXPIRED: 0,
        SlotStatus.ARCHIVED: 0,
    }
    assert report.backlog == 1
    text = render_text(report)
    assert "failed slots   cannot read: permission denied" in text
    assert "backlog        1 Available slot has started" in text


async def test_a_dropped_column_and_table_are_named_in_the_schema_part(db: SlotDatabase) -> None:
    await db.execute("ALTER TABLE availability_slots DROP COLUMN version")
    await db.execute("DROP TABLE slot_expiration_failures")

    report = await collect_status(db.url, batch_size=500)

    assert isinstance(report.schema, SchemaState)
    assert report.schema.contract_mismatches == ("column version is missing",)
    assert report.schema.missing_tables == ("slot_expiration_failures",)
    assert "column version is missing" in render_text(report)


async def test_the_schema_part_tells_the_calendars_table_from_the_workers_own(
    db: SlotDatabase,
) -> None:
    await db.execute("ALTER TABLE availability_slots DROP COLUMN version")
    await db.execute("ALTER TABLE slot_expiration_failures RENAME COLUMN attempts TO tries")

    report = await collect_status(db.url, batch_size=500)

    assert isinstance(report.schema, SchemaState)
    assert report.schema.worker_mismatches == (
        "column slot_expiration_failures.attempts does not exist",
    )
    (line,) = [line for line in render_text(report).splitlines() if line.startswith("schema")]
    assert line == (
        f"schema         {head_revision()}, but column version is missing: availability_slots "
        "no longer fits "
        "the table contract, restore it (migrate cannot); and column "
        "slot_expiration_failures.attempts does not exist: run `slot-expiration migrate`"
    )
