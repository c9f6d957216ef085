"""The worker's index holds only what the worker reads: Available slots, by (start_at, id).

`ix_availability_slots_status_start` keeps its name (the table contract names it)
and now serves the selection exactly: its order is the worker's `(start_at, id)`,
so a batch reads its own rows and no more, the skipped-row count's window bound is
an index condition, and an expired row version adds no entry to it. Measured in
docs/benchmarks.md (tuning log). The new index is built CONCURRENTLY under a
temporary name before the old one goes, so the worker is never left without one.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TABLE = "availability_slots"
INDEX = "ix_availability_slots_status_start"
BUILDING = "ix_availability_slots_status_start_new"


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {BUILDING}")  # an interrupted build
        op.create_index(
            BUILDING,
            TABLE,
            ["start_at", "id"],
            postgresql_where=sa.text("status = 'Available'"),
            postgresql_concurrently=True,
        )
        op.drop_index(INDEX, table_name=TABLE, postgresql_concurrently=True)
        op.execute(f"ALTER INDEX {BUILDING} RENAME TO {INDEX}")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {BUILDING}")
        op.create_index(BUILDING, TABLE, ["status", "start_at"], postgresql_concurrently=True)
        op.drop_index(INDEX, table_name=TABLE, postgresql_concurrently=True)
        op.execute(f"ALTER INDEX {BUILDING} RENAME TO {INDEX}")
