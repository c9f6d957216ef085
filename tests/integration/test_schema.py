"""The migration creates the table contract exactly, and running it again is a no-op."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from slot_expiration.schema.migrate import current_revision, downgrade, head_revision, upgrade
from tests.support.cycles import run_cycle
from tests.support.database import SlotDatabase
from tests.support.slots import make_slot, past_slots

pytestmark = pytest.mark.integration

CONTRACT = {
    "id": ("uuid", "NO"),
    "tenant_id": ("uuid", "NO"),
    "consultant_id": ("uuid", "NO"),
    "start_at": ("timestamp with time zone", "NO"),
    "end_at": ("timestamp with time zone", "NO"),
    "status": ("text", "NO"),
    "version": ("integer", "NO"),
    "created_at": ("timestamp with time zone", "NO"),
    "updated_at": ("timestamp with time zone", "NO"),
}


def test_migrate_creates_the_schema_and_a_second_run_is_a_no_op(empty_database_url: str) -> None:
    first = upgrade(empty_database_url)
    second = upgrade(empty_database_url)

    assert (first.before, first.after) == (None, head_revision())
    assert not second.changed


def test_table_has_exactly_the_contract_columns(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
            "WHERE table_name = 'availability_slots'"
        ).fetchall()
        primary_key = conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a "
            "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            "WHERE i.indrelid = 'availability_slots'::regclass AND i.indisprimary"
        ).fetchall()

    assert {name: (kind, nullable) for name, kind, nullable in rows} == CONTRACT
    assert primary_key == [("id",)]


def test_selection_index_holds_available_slots_by_start_then_id(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_availability_slots_status_start'"
        ).fetchone()

    assert row is not None
    assert row[0].endswith("USING btree (start_at, id) WHERE (status = 'Available'::text)")


def _selection_index_and_table_options(url: str) -> tuple[str, list[str] | None]:
    with psycopg.connect(url) as conn:
        index = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_availability_slots_status_start'"
        ).fetchone()
        options = conn.execute(
            "SELECT reloptions FROM pg_class WHERE oid = 'availability_slots'::regclass"
        ).fetchone()
    assert index is not None
    assert options is not None
    return index[0], options[0]


def test_the_table_is_vacuumed_after_two_percent_of_it_changed(database_url: str) -> None:
    _, options = _selection_index_and_table_options(database_url)

    assert options == ["autovacuum_vacuum_scale_factor=0.02"]


def test_the_tuning_migrations_go_back_and_forth(empty_database_url: str) -> None:
    upgrade(empty_database_url)

    downgrade(empty_database_url, "0003")
    index, options = _selection_index_and_table_options(empty_database_url)
    assert current_revision(empty_database_url) == "0003"
    assert (index.endswith("USING btree (status, start_at)"), options) == (True, None)

    upgrade(empty_database_url)
    index, options = _selection_index_and_table_options(empty_database_url)
    assert index.endswith("USING btree (start_at, id) WHERE (status = 'Available'::text)")
    assert options == ["autovacuum_vacuum_scale_factor=0.02"]


@pytest.mark.parametrize("status", ["Available", "Booked", "Expired", "Archived"])
async def test_the_four_statuses_are_accepted(db: SlotDatabase, status: str) -> None:
    slot = make_slot(timedelta(minutes=1))
    await db.conn.execute(
        "INSERT INTO availability_slots VALUES (%s, %s, %s, %s, %s, %s, 1, now(), now())",
        (slot.id, slot.tenant_id, slot.consultant_id, slot.start_at, slot.end_at, status),
    )


@pytest.mark.parametrize("status", ["available", "Cancelled", ""])
async def test_any_other_status_is_rejected_by_the_check(db: SlotDatabase, status: str) -> None:
    slot = make_slot(timedelta(minutes=1))
    with pytest.raises(psycopg.errors.CheckViolation):
        await db.conn.execute(
            "INSERT INTO availability_slots VALUES (%s, %s, %s, %s, %s, %s, 1, now(), now())",
            (slot.id, slot.tenant_id, slot.consultant_id, slot.start_at, slot.end_at, status),
        )


def test_migrate_keeps_its_history_apart_from_the_calendars_own_alembic(
    empty_database_url: str,
) -> None:
    with psycopg.connect(empty_database_url) as conn:
        conn.execute("CREATE TABLE alembic_version (version_num varchar(32) PRIMARY KEY)")
        conn.execute("INSERT INTO alembic_version VALUES ('calendar_0042')")

    outcome = upgrade(empty_database_url)

    assert outcome.after == head_revision()
    with psycopg.connect(empty_database_url) as conn:
        theirs = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    assert theirs == [("calendar_0042",)]


async def test_options_in_the_url_are_kept_for_migrate_and_for_the_worker(
    empty_database_url: str,
) -> None:
    with psycopg.connect(empty_database_url) as conn:
        conn.execute("CREATE SCHEMA calendar")
    url = f"{empty_database_url}?options=-csearch_path%3Dcalendar"

    upgrade(url)
    async with SlotDatabase.open(url) as db:
        await db.insert(past_slots(3))
        result = await run_cycle(url, 10)

    assert result.expired_count == 3
    with psycopg.connect(empty_database_url) as conn:
        where = conn.execute("SELECT to_regclass('calendar.availability_slots')").fetchone()
    assert where == ("calendar.availability_slots",)
