"""The worker's quarantine of poison rows: one row per slot the database keeps rejecting.

On a table the worker created, a foreign key drops a slot's entry with the
slot. On the calendar's (adopted) table there is none: a foreign key would add
triggers to the calendar's table and take a lock on it that blocks its writes
(SHARE ROW EXCLUSIVE); the worker purges the entries of slots that are gone
itself (quarantine.sql, forget_deleted_slots), and its views read only entries
whose slot still exists.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from slot_expiration.schema import migration_context

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


QUARANTINE = "slot_expiration_failures"


def upgrade() -> None:
    if not migration_context.table_missing(QUARANTINE):
        return
    adopted = migration_context.adopted()
    slot = [] if adopted else [sa.ForeignKey("availability_slots.id", ondelete="CASCADE")]
    op.create_table(
        QUARANTINE,
        sa.Column("slot_id", postgresql.UUID(as_uuid=True), *slot, primary_key=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("first_failed_at", sa.TIMESTAMP(timezone=True), nullable=False),
        sa.Column("last_failed_at", sa.TIMESTAMP(timezone=True), nullable=False),
        sa.Column("next_attempt_at", sa.TIMESTAMP(timezone=True), nullable=False),
        sa.Column("sqlstate", sa.Text(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.CheckConstraint("attempts >= 1", name="ck_slot_expiration_failures_attempts"),
    )
    migration_context.recreated(f"table {QUARANTINE}")
    if adopted and not migration_context.replaying():
        migration_context.note(
            "slot_expiration_failures has no foreign key to the calendar's table "
            "(it would block the calendar's writes to add): the worker purges the "
            "entries of deleted slots itself"
        )


def downgrade() -> None:
    op.drop_table(QUARANTINE)
