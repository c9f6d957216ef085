"""The availability_slots table: the calendar's own, adopted as it is; or, in a new
database (the demo, the tests), created here as the table contract fixes it.

Where availability_slots exists before any migration of ours (production: the
calendar created it), it is adopted: it must fit the table contract, which
store.migrate checked before Alembic started, changing nothing when it did not
(checked again here; offline, the script's first statement checks it). The
adoption is recorded on the worker's own history table, and no migration
creates, alters, indexes or drops anything of the calendar's table beyond the
worker's index (0004): each asks migration_context.adopted().

Every migration creates only what is missing (migration_context.table_missing and
the like): `migrate` runs them again (replaying) to repair what the worker owns
at the revision the schema is at.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from slot_expiration.db.errors import MigrationError
from slot_expiration.schema import migration_context

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    if migration_context.replaying():
        _create_again_unless_adopted()
        return
    if migration_context.slot_table_exists():
        migration_context.require_adoptable()
        migration_context.mark_adopted()
        return
    migration_context.require_no_slot_table()
    _create_table()
    # Serves the worker's selection: status = 'Available' AND start_at <= AsOf
    # ORDER BY start_at, read in index order (0004 makes it partial).
    op.create_index(
        "ix_availability_slots_status_start", "availability_slots", ["status", "start_at"]
    )


def _create_again_unless_adopted() -> None:
    """A repair: the table's origin is recorded. One this migration created (a test or
    demo database) is created again if it went; the calendar's, never (0004 builds the
    worker's index on it)."""
    if not migration_context.table_missing("availability_slots"):
        return
    if migration_context.adopted():
        raise MigrationError(
            "the calendar's availability_slots (adopted) is gone: restore it; migrate never "
            "creates the calendar's table"
        )
    _create_table()
    migration_context.recreated("table availability_slots")


def _create_table() -> None:
    op.create_table(
        "availability_slots",
        sa.Column("id", postgresql.UUID(as_uuid=True), primary_key=True),
        sa.Column("tenant_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("consultant_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("start_at", sa.TIMESTAMP(timezone=True), nullable=False),
        sa.Column("end_at", sa.TIMESTAMP(timezone=True), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.TIMESTAMP(timezone=True), nullable=False),
        sa.Column("updated_at", sa.TIMESTAMP(timezone=True), nullable=False),
        sa.CheckConstraint(
            "status IN ('Available', 'Booked', 'Expired', 'Archived')",
            name="ck_availability_slots_status",
        ),
    )


def downgrade() -> None:
    if migration_context.adopted():
        return  # the calendar's table, data and all: never dropped
    op.drop_index("ix_availability_slots_status_start", table_name="availability_slots")
    op.drop_table("availability_slots")
