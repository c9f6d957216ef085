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
the new index only): the calendar's writes go on throughout.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

from slot_expiration.store import migration_context

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TABLE = "availability_slots"
INDEX = "ix_availability_slots_status_start"
BUILDING = "ix_availability_slots_status_start_new"
COLUMNS = ["start_at", "id"]
AVAILABLE = "status = 'Available'"


def upgrade() -> None:
    if migration_context.adopted():
        _index_the_calendars_table()
        return
    with migration_context.concurrently():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {BUILDING}")  # an interrupted build
        _build(BUILDING)
        op.drop_index(INDEX, table_name=TABLE, postgresql_concurrently=True, if_exists=True)
    op.execute(f"ALTER INDEX {BUILDING} RENAME TO {INDEX}")


def _index_the_calendars_table() -> None:
    existing = migration_context.selection_index()
    if existing is not None:
        definition, valid = existing
        invalid = "" if valid else " (INVALID: the selection cannot use it; rebuild it)"
        migration_context.note(f"kept the calendar's {INDEX}: {definition}{invalid}")
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
    op.execute(f"ALTER INDEX {BUILDING} RENAME TO {INDEX}")
    migration_context.note(f"built {INDEX} (start_at, id) WHERE {AVAILABLE}, concurrently")


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
