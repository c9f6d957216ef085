"""`migrate` on a database where the calendar's availability_slots already exists:
adopted when it fits the contract, every change limited to what the worker owns;
refused, naming every problem and changing nothing, when it does not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import psycopg
import pytest
from psycopg import sql

from slot_expiration.db.errors import ContractMismatchError
from slot_expiration.embedded import EmbeddedPostgres
from slot_expiration.schema.grants import grant_privileges
from slot_expiration.schema.migrate import current_revision, downgrade, head_revision, upgrade
from slot_expiration.status import collect_status
from slot_expiration.status.store import SchemaState, SelectionIndex
from tests.support.calendar import (
    SELECTION_INDEX,
    IndexShape,
    calendar_snapshot,
    create_calendar_table,
    selection_index_definition,
    worker_relations,
)
from tests.support.cycles import run_cycle
from tests.support.database import SlotDatabase
from tests.support.roles import password_role

pytestmark = pytest.mark.integration

ROWS = 2_000
WORKER_INDEX = "USING btree (start_at, id) WHERE (status = 'Available'::text)"
CALENDAR_INDEX = "USING btree (status, start_at)"
WORKER_TABLES = {
    "slot_expiration_failures",
    "slot_expiration_alembic_version",
    "slot_expiration_cycles",
    "slot_expiration_pauses",
}
SLOT_CONTEXT_INDEXES = {
    "ix_availability_slots_showcase",
    "ix_availability_slots_consultant_start",
    "ix_availability_slots_consultant_occupied_end",
}


@pytest.mark.parametrize("shape", list(IndexShape))
def test_adoption_leaves_the_calendars_data_constraints_triggers_indexes_and_grants_as_they_were(
    empty_database_url: str, shape: IndexShape
) -> None:
    create_calendar_table(empty_database_url, ROWS, shape)
    before = calendar_snapshot(empty_database_url)

    outcome = upgrade(empty_database_url)

    after = calendar_snapshot(empty_database_url)
    added = SELECTION_INDEX if shape is IndexShape.NONE else ""
    assert after.without_index(added) == before
    assert (outcome.before, outcome.after, outcome.adopted) == (None, head_revision(), True)
    assert worker_relations(empty_database_url) == WORKER_TABLES
    assert current_revision(empty_database_url) == head_revision()


def test_the_calendars_own_contract_index_is_kept_as_it_is(empty_database_url: str) -> None:
    create_calendar_table(empty_database_url, ROWS, IndexShape.CALENDARS)

    outcome = upgrade(empty_database_url)

    found = selection_index_definition(empty_database_url)
    assert found is not None
    assert found[0].endswith(CALENDAR_INDEX)
    assert any(note.startswith(f"kept the calendar's {SELECTION_INDEX}") for note in outcome.notes)


def test_without_a_contract_index_the_workers_is_built_valid(empty_database_url: str) -> None:
    create_calendar_table(empty_database_url, ROWS, IndexShape.NONE)

    outcome = upgrade(empty_database_url)

    found = selection_index_definition(empty_database_url)
    assert found is not None
    assert (found[0].endswith(WORKER_INDEX), found[1]) == (True, True)
    assert any(note.startswith(f"built {SELECTION_INDEX}") for note in outcome.notes)


def test_adoption_adds_no_slot_context_index_no_table_setting_and_no_foreign_key(
    empty_database_url: str,
) -> None:
    create_calendar_table(empty_database_url, ROWS)

    outcome = upgrade(empty_database_url)

    with psycopg.connect(empty_database_url) as conn:
        indexes = {r[0] for r in conn.execute("SELECT indexname::text FROM pg_indexes").fetchall()}
        options = conn.execute(
            "SELECT reloptions FROM pg_class WHERE oid = 'availability_slots'::regclass"
        ).fetchone()
        references = conn.execute(
            "SELECT count(*) FROM pg_constraint "
            "WHERE conrelid = 'slot_expiration_failures'::regclass AND contype = 'f'"
        ).fetchone()
    assert indexes.isdisjoint(SLOT_CONTEXT_INDEXES)
    assert options == (["fillfactor=90"],)  # the calendar's own, and nothing of 0005
    assert references == (0,)
    assert len(outcome.notes) == 4  # no foreign key, no 0003, the index kept, no 0005


def test_a_second_migrate_on_an_adopted_table_changes_nothing(empty_database_url: str) -> None:
    create_calendar_table(empty_database_url, ROWS)
    upgrade(empty_database_url)
    before = calendar_snapshot(empty_database_url)

    again = upgrade(empty_database_url)

    assert (again.changed, again.adopted, again.notes) == (False, False, ())
    assert calendar_snapshot(empty_database_url) == before


async def test_the_worker_expires_the_due_slots_of_an_adopted_table(
    empty_database_url: str,
) -> None:
    now = datetime.now(UTC)
    create_calendar_table(empty_database_url, ROWS, as_of=now)
    upgrade(empty_database_url)
    async with SlotDatabase.open(empty_database_url) as db:
        due_before = await _due(db, now)

        result = await run_cycle(empty_database_url, batch_size=ROWS, as_of=now)

        assert due_before > 0
        assert result.expired_count == due_before
        assert await _due(db, now) == 0


async def test_the_least_privileged_worker_role_expires_on_an_adopted_table(
    empty_database_url: str, pg_server: EmbeddedPostgres
) -> None:
    now = datetime.now(UTC)
    create_calendar_table(empty_database_url, ROWS, as_of=now)
    upgrade(empty_database_url)
    with password_role(pg_server) as role:
        await grant_privileges(empty_database_url, role.name)

        result = await run_cycle(role.url_for(empty_database_url), batch_size=ROWS, as_of=now)

    async with SlotDatabase.open(empty_database_url) as db:
        assert result.expired_count > 0
        assert await _due(db, now) == 0


async def test_a_quarantined_slot_the_calendar_deletes_leaves_the_quarantine_at_the_next_cycle(
    empty_database_url: str,
) -> None:
    now = datetime.now(UTC)
    create_calendar_table(empty_database_url, 40, as_of=now)
    upgrade(empty_database_url)
    async with SlotDatabase.open(empty_database_url) as db:
        poison = await _one_due_slot(db, now)
        await db.install_poison_trigger([poison], "P0001")
        await run_cycle(empty_database_url, as_of=now)
        assert set(await db.quarantine()) == {poison}

        # No foreign key cascades on an adopted table: the entry outlives the slot...
        await db.execute("DELETE FROM availability_slots WHERE id = %s", poison)
        assert set(await db.quarantine()) == {poison}
        await run_cycle(empty_database_url, as_of=now)

    assert await _quarantine(empty_database_url) == 0  # ... until the next cycle purges it


def test_an_adoption_cut_short_after_0001_is_finished_by_the_next_migrate_as_an_adoption(
    empty_database_url: str,
) -> None:
    create_calendar_table(empty_database_url, ROWS)
    upgrade(empty_database_url)
    downgrade(empty_database_url, "0001")  # as if the run had stopped after 0001
    before = calendar_snapshot(empty_database_url)

    resumed = upgrade(empty_database_url)

    assert (resumed.before, resumed.after, resumed.adopted) == ("0001", head_revision(), False)
    assert calendar_snapshot(empty_database_url) == before
    assert len(resumed.notes) == 4


def test_downgrading_an_adopted_schema_never_drops_the_calendars_table(
    empty_database_url: str,
) -> None:
    create_calendar_table(empty_database_url, ROWS)
    before = calendar_snapshot(empty_database_url)
    upgrade(empty_database_url)

    downgrade(empty_database_url, "base")

    assert calendar_snapshot(empty_database_url) == before
    assert worker_relations(empty_database_url) == {"slot_expiration_alembic_version"}


MISFITS = [
    pytest.param(
        "ALTER TABLE availability_slots RENAME COLUMN start_at TO starts_at",
        "column start_at is missing",
        id="renamed column",
    ),
    pytest.param(
        "ALTER TABLE availability_slots DROP COLUMN consultant_id",
        "column consultant_id is missing",
        id="missing column",
    ),
    pytest.param(
        "ALTER TABLE availability_slots ALTER COLUMN version TYPE numeric",
        "column version is numeric, not an integer type (smallint, integer or bigint)",
        id="wrong type",
    ),
    pytest.param(
        "ALTER TABLE availability_slots ALTER COLUMN updated_at DROP NOT NULL",
        "column updated_at is nullable, not NOT NULL",
        id="nullable column",
    ),
    pytest.param(
        "ALTER TABLE availability_slots DROP CONSTRAINT availability_slots_status_check; "
        "UPDATE availability_slots SET status = 'Cancelled' WHERE legacy_id IN (1, 2); "
        "UPDATE availability_slots SET status = 'Held' WHERE legacy_id = 3",
        "column status holds values outside the contract: 'Cancelled', 'Held'",
        id="unexpected status value in the rows",
    ),
    pytest.param(
        "ALTER TABLE availability_slots DROP CONSTRAINT availability_slots_status_check; "
        "UPDATE availability_slots SET status = 'Booked' WHERE status = 'Expired'; "
        "ALTER TABLE availability_slots ADD CONSTRAINT slots_no_expiry "
        "CHECK (status IN ('Available', 'Booked', 'Archived'))",
        "check constraint slots_no_expiry refuses status 'Expired'",
        id="a check that refuses a status of the contract",
    ),
    pytest.param(
        "ALTER TABLE calendar_bookings DROP CONSTRAINT calendar_bookings_slot_id_fkey; "
        "ALTER TABLE availability_slots DROP CONSTRAINT availability_slots_pkey; "
        "ALTER TABLE availability_slots ADD PRIMARY KEY (id, tenant_id)",
        "column id is not the primary key",
        id="another primary key",
    ),
]


MISFITS += [
    pytest.param(
        "ALTER TABLE calendar_bookings DROP CONSTRAINT calendar_bookings_slot_id_fkey; "
        "ALTER TABLE availability_slots RENAME TO calendar_slots; "
        "CREATE VIEW availability_slots AS SELECT * FROM calendar_slots",
        "availability_slots is a view, not a table: the worker locks, updates and indexes the "
        "table itself",
        id="a view",
    ),
    pytest.param(
        "ALTER TABLE availability_slots ALTER COLUMN version ADD GENERATED ALWAYS AS IDENTITY",
        "column version is GENERATED ALWAYS AS IDENTITY: the worker cannot set it, and an "
        "expiry does",
        id="an identity version",
    ),
    pytest.param(
        "ALTER TABLE availability_slots ALTER COLUMN version ADD GENERATED BY DEFAULT AS IDENTITY",
        "column version is GENERATED BY DEFAULT AS IDENTITY: a sequence numbers new slots "
        "there, while a version counts a slot's edits",
        id="a version numbered by a sequence",
    ),
    pytest.param(
        "ALTER TABLE availability_slots DROP CONSTRAINT availability_slots_status_check; "
        "UPDATE availability_slots SET status = 'Booked' WHERE status = 'Expired'; "
        "CREATE TYPE slot_status AS ENUM ('Available', 'Booked', 'Archived', 'Cancelled'); "
        "ALTER TABLE availability_slots ALTER COLUMN status TYPE slot_status "
        "USING status::slot_status",
        "column status is the enum slot_status, which has no value 'Expired' and also holds "
        "'Cancelled'",
        id="an enum without Expired",
    ),
    pytest.param(
        "ALTER TABLE availability_slots DROP CONSTRAINT availability_slots_status_check; "
        "UPDATE availability_slots SET status = 'Booked' WHERE status = 'Expired'; "
        "CREATE DOMAIN slot_status_text AS text "
        "CONSTRAINT no_expiry CHECK (VALUE IN ('Available', 'Booked', 'Archived')); "
        "ALTER TABLE availability_slots ALTER COLUMN status TYPE slot_status_text",
        "the domain slot_status_text of column status refuses 'Expired' (check constraint "
        "no_expiry)",
        id="a domain that refuses Expired",
    ),
]

# Spellings of the contract the worker's statements run on unchanged.
COMPATIBLE = [
    pytest.param(
        "ALTER TABLE availability_slots DROP CONSTRAINT availability_slots_status_check; "
        "CREATE TYPE slot_status AS ENUM ('Available', 'Booked', 'Expired', 'Archived'); "
        "ALTER TABLE availability_slots ALTER COLUMN status TYPE slot_status "
        "USING status::slot_status",
        id="status an enum of the four",
    ),
    pytest.param(
        "ALTER TABLE availability_slots ALTER COLUMN status TYPE varchar(20)",
        id="status varchar(20)",
    ),
    pytest.param(
        "ALTER TABLE availability_slots DROP CONSTRAINT availability_slots_status_check; "
        "CREATE DOMAIN slot_status_text AS text NOT NULL "
        "CHECK (VALUE IN ('Available', 'Booked', 'Expired', 'Archived')); "
        "ALTER TABLE availability_slots ALTER COLUMN status TYPE slot_status_text",
        id="status a domain over text of the four",
    ),
    pytest.param(
        "ALTER TABLE availability_slots ALTER COLUMN version TYPE bigint",
        id="version bigint",
    ),
    pytest.param(
        "ALTER TABLE availability_slots ALTER COLUMN start_at TYPE timestamptz(6), "
        "ALTER COLUMN updated_at TYPE timestamptz(3)",
        id="timestamptz with a precision",
    ),
]


@pytest.mark.parametrize("change", COMPATIBLE)
async def test_a_compatible_spelling_of_the_contract_is_adopted_and_expired(
    empty_database_url: str, change: str
) -> None:
    now = datetime.now(UTC)
    create_calendar_table(empty_database_url, ROWS, IndexShape.NONE, as_of=now)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        conn.execute(change)
    before = calendar_snapshot(empty_database_url)

    outcome = upgrade(empty_database_url)
    after = calendar_snapshot(empty_database_url)
    async with SlotDatabase.open(empty_database_url) as db:
        due = await _due(db, now)
        result = await run_cycle(empty_database_url, batch_size=ROWS, as_of=now)
        left = await _due(db, now)

    assert outcome.adopted
    assert after.without_index(SELECTION_INDEX) == before
    assert (due > 0, result.expired_count, left) == (True, due, 0)


@pytest.mark.parametrize(("change", "problem"), MISFITS)
def test_a_table_that_does_not_fit_the_contract_is_refused_and_nothing_changes(
    empty_database_url: str, change: str, problem: str
) -> None:
    create_calendar_table(empty_database_url, ROWS)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        conn.execute(change)
    before = calendar_snapshot(empty_database_url)

    with pytest.raises(ContractMismatchError) as refused:
        upgrade(empty_database_url)

    assert refused.value.problems == (problem,)
    assert str(refused.value) == (
        f"the existing availability_slots cannot be adopted, nothing changed: {problem}"
    )
    assert calendar_snapshot(empty_database_url) == before
    assert worker_relations(empty_database_url) == set()


def test_every_problem_of_a_misfit_table_is_named_in_contract_order(
    empty_database_url: str,
) -> None:
    create_calendar_table(empty_database_url, ROWS)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        conn.execute(
            "ALTER TABLE availability_slots RENAME COLUMN end_at TO ends_at; "
            "ALTER TABLE availability_slots ALTER COLUMN version TYPE numeric; "
            "ALTER TABLE availability_slots ALTER COLUMN created_at DROP NOT NULL; "
            "ALTER TABLE availability_slots DROP CONSTRAINT availability_slots_status_check; "
            "UPDATE availability_slots SET status = 'available' WHERE legacy_id = 7"
        )

    with pytest.raises(ContractMismatchError) as refused:
        upgrade(empty_database_url)

    assert refused.value.problems == (
        "column end_at is missing",
        "column version is numeric, not an integer type (smallint, integer or bigint)",
        "column created_at is nullable, not NOT NULL",
        "column status holds values outside the contract: 'available'",
    )
    assert worker_relations(empty_database_url) == set()


def test_migrate_as_a_role_that_is_not_the_tables_owner_is_refused_before_anything_changes(
    empty_database_url: str, pg_server: EmbeddedPostgres
) -> None:
    create_calendar_table(empty_database_url, ROWS)
    with password_role(pg_server) as role:
        with psycopg.connect(empty_database_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(sql.Identifier(role.name))
            )
        owner = _owner(empty_database_url)

        with pytest.raises(ContractMismatchError) as refused:
            upgrade(role.url_for(empty_database_url))

    assert refused.value.problems == (
        f"migrate runs as {role.name}, which does not act as the owner of availability_slots "
        f"({owner}): run it as that role",
    )
    assert worker_relations(empty_database_url) == set()


async def test_status_of_an_adopted_table_finds_it_fits_at_the_newest_revision(
    empty_database_url: str,
) -> None:
    create_calendar_table(empty_database_url, ROWS)
    upgrade(empty_database_url)

    report = await collect_status(empty_database_url, batch_size=500)

    assert report.schema == SchemaState(head_revision(), (), ())
    assert isinstance(report.index, SelectionIndex)
    assert (report.index.exists, report.index.valid) == (True, True)


async def _due(db: SlotDatabase, now: datetime) -> int:
    cursor = await db.conn.execute(
        "SELECT count(*) FROM availability_slots WHERE status = 'Available' AND start_at <= %s",
        [now],
    )
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def _one_due_slot(db: SlotDatabase, now: datetime) -> UUID:
    cursor = await db.conn.execute(
        "SELECT id FROM availability_slots WHERE status = 'Available' AND start_at <= %s "
        "ORDER BY start_at LIMIT 1",
        [now - timedelta(seconds=1)],
    )
    row = await cursor.fetchone()
    assert row is not None
    return UUID(str(row[0]))


async def _quarantine(url: str) -> int:
    async with SlotDatabase.open(url) as db:
        return len(await db.quarantine())


def _owner(url: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT pg_get_userbyid(relowner) FROM pg_class "
            "WHERE oid = 'availability_slots'::regclass"
        ).fetchone()
    assert row is not None
    return str(row[0])
