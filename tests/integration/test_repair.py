"""`migrate` repairs what the worker owns: a table, column, index or check of its own that is
missing at the schema's revision is created again, as the migrations create it; one of its
tables altered otherwise is created again when empty, and refused, naming it and the way
out, when it holds rows. The shape the start check and `status` hold the worker's tables
to is the one the migrations create."""

from __future__ import annotations

from importlib.resources import files

import psycopg
import pytest

from slot_expiration.db.statements import parse_queries, query
from slot_expiration.schema.migrate import RepairRefusedError, head_revision, upgrade
from tests.support.calendar import (
    IndexShape,
    calendar_snapshot,
    create_calendar_table,
    schema_shape,
    selection_index_definition,
)
from tests.support.cycles import run_cycle
from tests.support.database import SlotDatabase
from tests.support.partitions import Months, create_monthly_calendar, partition_indexes
from tests.support.slots import AS_OF, past_slots

pytestmark = pytest.mark.integration

WORKER_INDEX = "USING btree (start_at, id) WHERE (status = 'Available'::text)"


def _declared_shape() -> str:
    """The shape the contract declares (contract.sql's fragment worker_table_shape), row by
    row: a statement of the test's own around the product's fragment."""
    contract = files("slot_expiration.schema").joinpath("contract.sql").read_text("utf-8")
    wrapped = contract + "\n-- name: declared_shape\n-- include: worker_table_shape\n;\n"
    return parse_queries(wrapped)["declared_shape"]


def _execute(url: str, statement: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement)


def test_the_declared_shape_of_the_workers_tables_is_what_the_migrations_create(
    database_url: str,
) -> None:
    with psycopg.connect(database_url) as conn:
        differences = conn.execute(query("worker_shape_mismatches")).fetchall()
        declared = conn.execute(
            "SELECT count(*) FROM (" + _declared_shape().rstrip(";") + ") AS s"
        ).fetchone()
        columns = conn.execute(
            "SELECT count(*) FROM pg_attribute WHERE attnum > 0 AND NOT attisdropped AND "
            "attrelid IN ('slot_expiration_failures'::regclass, "
            "'slot_expiration_cycles'::regclass, 'slot_expiration_alembic_version'::regclass, "
            "'slot_expiration_pauses'::regclass)"
        ).fetchone()

    assert differences == []
    assert declared == columns  # no column of theirs left out of the shape


MISSING = [
    pytest.param(
        "DROP TABLE slot_expiration_failures", "table slot_expiration_failures", id="the quarantine"
    ),
    pytest.param(
        "DROP TABLE slot_expiration_cycles", "table slot_expiration_cycles", id="the cycle history"
    ),
    pytest.param(
        "DROP INDEX ix_slot_expiration_cycles_ended_at",
        "index ix_slot_expiration_cycles_ended_at",
        id="the history's index",
    ),
    pytest.param(
        "DROP INDEX ix_slot_expiration_cycles_failure_ended_at",
        "index ix_slot_expiration_cycles_failure_ended_at",
        id="the history's index of failures",
    ),
    pytest.param(
        "DROP TABLE slot_expiration_pauses", "table slot_expiration_pauses", id="the pauses"
    ),
    pytest.param(
        "DROP INDEX ux_slot_expiration_pauses_current",
        "index ux_slot_expiration_pauses_current",
        id="the one pause in force",
    ),
    pytest.param(
        "DROP INDEX ix_slot_expiration_cycles_fault_ended_at",
        "index ix_slot_expiration_cycles_fault_ended_at",
        id="the history's index of faults",
    ),
    pytest.param(
        "ALTER TABLE slot_expiration_cycles DROP CONSTRAINT ck_slot_expiration_cycles_error_0009",
        "check constraint ck_slot_expiration_cycles_error_0009",
        id="the history's check admitting paused cycles",
    ),
    pytest.param(
        "DROP INDEX ix_availability_slots_status_start",
        "index ix_availability_slots_status_start",
        id="the worker's index",
    ),
    pytest.param(
        "DROP INDEX ix_availability_slots_showcase",
        "index ix_availability_slots_showcase",
        id="a slot context index",
    ),
    pytest.param(
        "ALTER TABLE slot_expiration_failures DROP COLUMN parked_at",
        "column slot_expiration_failures.parked_at",
        id="a nullable column",
    ),
    pytest.param(
        "ALTER TABLE slot_expiration_failures DROP CONSTRAINT ck_slot_expiration_failures_ended",
        "check constraint ck_slot_expiration_failures_ended",
        id="a check",
    ),
]


@pytest.mark.parametrize(("damage", "repaired"), MISSING)
async def test_what_the_worker_owns_and_is_missing_is_created_again_as_the_migrations_make_it(
    database_url: str, empty_database_url: str, damage: str, repaired: str
) -> None:
    upgrade(empty_database_url)  # a fresh schema, to compare with
    async with SlotDatabase.open(database_url) as db:
        await db.insert(past_slots(3))
        await run_cycle(database_url, as_of=AS_OF)  # a history row, expired slots
    _execute(database_url, damage)

    outcome = upgrade(database_url)
    again = upgrade(database_url)

    assert (outcome.before, outcome.after, outcome.changed) == (
        head_revision(),
        head_revision(),
        True,
    )
    assert outcome.notes == (f"repaired: {repaired} was missing, created again",)
    assert (again.changed, again.notes) == (False, ())
    assert schema_shape(database_url) == schema_shape(empty_database_url)


async def test_a_dropped_quarantine_made_again_lets_the_worker_run(database_url: str) -> None:
    _execute(database_url, "DROP TABLE slot_expiration_failures")
    upgrade(database_url)
    async with SlotDatabase.open(database_url) as db:
        await db.insert(past_slots(3))

    result = await run_cycle(database_url, as_of=AS_OF)

    assert result.expired_count == 3


def test_an_altered_empty_table_of_the_worker_is_created_again(
    database_url: str, empty_database_url: str
) -> None:
    upgrade(empty_database_url)
    _execute(database_url, "ALTER TABLE slot_expiration_failures RENAME COLUMN attempts TO tries")

    outcome = upgrade(database_url)

    assert outcome.notes == ("repaired: table slot_expiration_failures was missing, created again",)
    assert schema_shape(database_url) == schema_shape(empty_database_url)


async def test_an_altered_table_holding_rows_is_refused_naming_it_and_the_way_out(
    database_url: str,
) -> None:
    _execute(
        database_url,
        "INSERT INTO slot_expiration_cycles (run_id, instance, as_of, started_at, ended_at, "
        "outcome, expired_count, skipped_locked_count, failed_count, batches, duration_ms) "
        "VALUES (gen_random_uuid(), 'w1', now(), now(), now(), 'success', 0, 0, 0, 1, 1.0)",
    )
    _execute(database_url, "ALTER TABLE slot_expiration_cycles ALTER COLUMN batches TYPE bigint")
    before = schema_shape(database_url)

    with pytest.raises(RepairRefusedError) as refused:
        upgrade(database_url)

    assert str(refused.value) == (
        "cannot repair column slot_expiration_cycles.batches is bigint, not integer: "
        "recreating slot_expiration_cycles (1 rows) would lose its rows; restore what "
        "changed as the migrations made it, or empty it (TRUNCATE slot_expiration_cycles: "
        "the cycle history shown by status and ui) and run migrate again"
    )
    assert schema_shape(database_url) == before


def test_the_workers_index_dropped_from_an_adopted_table_is_built_again_concurrently(
    empty_database_url: str,
) -> None:
    create_calendar_table(empty_database_url, 2_000, IndexShape.NONE)
    upgrade(empty_database_url)
    _execute(empty_database_url, "DROP INDEX ix_availability_slots_status_start")
    before = calendar_snapshot(empty_database_url)

    outcome = upgrade(empty_database_url)

    found = selection_index_definition(empty_database_url)
    assert found is not None
    assert (found[0].endswith(WORKER_INDEX), found[1]) == (True, True)
    assert outcome.notes == (
        "repaired: index ix_availability_slots_status_start was missing, created again",
    )
    assert calendar_snapshot(empty_database_url).without_index(
        "ix_availability_slots_status_start"
    ) == before.without_index("ix_availability_slots_status_start")


def test_the_workers_index_dropped_from_a_partitioned_calendar_is_built_again_per_partition(
    empty_database_url: str,
) -> None:
    create_monthly_calendar(
        empty_database_url, 1_000, Months(AS_OF.replace(day=1, hour=0), 2), AS_OF, AS_OF
    )
    upgrade(empty_database_url)
    _execute(empty_database_url, "DROP INDEX ix_availability_slots_status_start")

    upgrade(empty_database_url)

    indexes = partition_indexes(empty_database_url)
    assert (indexes.valid, indexes.every_partition_indexed) == (True, True)


def test_a_dropped_version_table_is_recorded_again_without_touching_the_rest(
    database_url: str, empty_database_url: str
) -> None:
    upgrade(empty_database_url)
    _execute(database_url, "DROP TABLE slot_expiration_alembic_version")

    outcome = upgrade(database_url)

    assert (outcome.before, outcome.after) == (None, head_revision())
    assert schema_shape(database_url) == schema_shape(empty_database_url)
