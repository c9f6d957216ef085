"""The worker's index holds only what the worker reads: Available slots, by (start_at, id).

`ix_availability_slots_status_start` keeps its name (the table contract names it)
and now serves the selection exactly: its order is the worker's `(start_at, id)`,
so a batch reads its own rows and no more, the skipped-row count's window bound is
an index condition, and an expired row version adds no entry to it. Measured in
docs/benchmarks.md (tuning log). The new index is built CONCURRENTLY under a
temporary name before the old one goes, so the worker is never left without one.

On the calendar's (adopted) table: an `ix_availability_slots_status_start` the
calendar already has is kept as it is, whatever its shape (its own queries may
rely on it; `(status, start_at)` serves the selection too, a little slower on
large backlogs; `status` shows which the planner reads). Where it has none, the
worker's is built CONCURRENTLY under the temporary name, then renamed (a lock on
the new index only): the calendar's writes go on throughout. A partitioned table
gets it partition by partition (see _index_each_partition).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

import re

import sqlalchemy as sa
from alembic import op

from slot_expiration.db.errors import MigrationError
from slot_expiration.schema import migration_context

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TABLE = "availability_slots"
INDEX = "ix_availability_slots_status_start"
BUILDING = "ix_availability_slots_status_start_new"
COLUMNS = ["start_at", "id"]
AVAILABLE = "status = 'Available'"


# The worker's shape in pg_get_indexdef's words, whatever the status column's type (the
# literal is cast to it: 'Available'::text, ::character varying, an enum's name).
WORKER_SHAPE = re.compile(
    r"USING btree \(start_at, id\) WHERE \(+status\)?(::[\w ]+)? = 'Available'::"
)


def upgrade() -> None:
    if migration_context.adopted():
        _index_the_calendars_table()
        return
    if migration_context.replaying() and migration_context.index_validity(INDEX):
        return  # swapped in already, and valid
    with migration_context.concurrently():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {BUILDING}")  # an interrupted build
        _build(BUILDING)
        op.drop_index(INDEX, table_name=TABLE, postgresql_concurrently=True, if_exists=True)
    op.execute(f"ALTER INDEX {BUILDING} RENAME TO {INDEX}")
    migration_context.recreated(f"index {INDEX}")


def _index_the_calendars_table() -> None:
    existing = migration_context.selection_index()
    if existing is not None:
        definition, valid = existing
        # Ours, cut short: the index on a partitioned table waits for its partitions'
        # (finished below), a plain build left INVALID is built again. Anything else
        # is the calendar's own, kept whatever its shape.
        ours_unfinished = not valid and WORKER_SHAPE.search(definition) is not None
        if not ours_unfinished:
            if not migration_context.replaying():
                invalid = "" if valid else " (INVALID: the selection cannot use it; rebuild it)"
                migration_context.note(f"kept the calendar's {INDEX}: {definition}{invalid}")
            return
    if migration_context.slot_table_partitioned():
        _index_each_partition()
        return
    if migration_context.offline():
        migration_context.note(
            f"builds {INDEX} unless the calendar has one, kept then whatever its shape "
            "(IF NOT EXISTS); a failed build leaves it INVALID: DROP INDEX CONCURRENTLY it "
            "and run this statement again"
        )
        with migration_context.concurrently():
            _build(INDEX, if_not_exists=True)
        return
    with migration_context.concurrently():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {BUILDING}")  # an interrupted build
        _build(BUILDING)
        if existing is not None:  # ours, left INVALID: the new one takes its name
            op.drop_index(INDEX, table_name=TABLE, postgresql_concurrently=True)
    op.execute(f"ALTER INDEX {BUILDING} RENAME TO {INDEX}")
    _built("concurrently")


def _index_each_partition() -> None:
    """PostgreSQL's recipe for a partitioned table, whose index cannot be built
    CONCURRENTLY at once: the index on the parent alone (ON ONLY: catalog only, invalid
    until every partition's is attached; a brief SHARE lock on the parent, under
    lock_timeout), each partition's built CONCURRENTLY (no write waits), then each
    attached (a brief lock on that partition's new index). The parent's index is valid
    once all are attached; partitions created later get it from PostgreSQL itself. A
    run cut short is finished by the next: what is attached stays, a partition's valid
    index is attached, an invalid one built again."""
    with migration_context.each_in_its_own_transaction():
        op.execute(
            f"CREATE INDEX IF NOT EXISTS {INDEX} ON ONLY {TABLE} (start_at, id) WHERE {AVAILABLE}"
        )
    with migration_context.concurrently():
        for partition, index, valid in migration_context.partitions_without_index():
            if index is not None and not valid:
                op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index}")
            if index is None or not valid:
                op.execute(
                    f"CREATE INDEX CONCURRENTLY ON {partition} (start_at, id) WHERE {AVAILABLE}"
                )
    partitions = migration_context.partitions_without_index()
    unbuilt = [partition for partition, index, valid in partitions if index is None or not valid]
    if unbuilt:  # a partition created by hand meanwhile, say: the next migrate takes it
        raise MigrationError(
            f"no valid index of the worker's shape on partition {', '.join(unbuilt)} after "
            f"building: run `slot-expiration migrate` again to finish {INDEX}"
        )
    with migration_context.each_in_its_own_transaction():
        for _, index, _ in partitions:
            op.execute(f"ALTER INDEX {INDEX} ATTACH PARTITION {index}")
    _built(f"on ONLY the parent, then on {len(partitions)} partitions concurrently, attached")


def _built(how: str) -> None:
    if migration_context.replaying():
        migration_context.recreated(f"index {INDEX}")
    else:
        migration_context.note(f"built {INDEX} (start_at, id) WHERE {AVAILABLE}, {how}")


def _build(name: str, *, if_not_exists: bool = False) -> None:
    op.create_index(
        name,
        TABLE,
        COLUMNS,
        postgresql_where=sa.text(AVAILABLE),
        postgresql_concurrently=True,
        if_not_exists=if_not_exists,
    )


def downgrade() -> None:
    if migration_context.adopted():
        return  # the index stays: the contract names it, the calendar may rely on it
    with migration_context.concurrently():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {BUILDING}")
        op.create_index(BUILDING, TABLE, ["status", "start_at"], postgresql_concurrently=True)
        op.drop_index(INDEX, table_name=TABLE, postgresql_concurrently=True)
    op.execute(f"ALTER INDEX {BUILDING} RENAME TO {INDEX}")
