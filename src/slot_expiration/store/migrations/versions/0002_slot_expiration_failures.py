"""The worker's quarantine of poison rows: one row per slot the database keeps rejecting.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "slot_expiration_failures",
        # Deleting a slot drops its quarantine entry with it.
        sa.Column(
            "slot_id",
            postgresql.UUID(as_uuid=True),
            sa.ForeignKey("availability_slots.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("first_failed_at", sa.TIMESTAMP(timezone=True), nullable=False),
        sa.Column("last_failed_at", sa.TIMESTAMP(timezone=True), nullable=False),
        sa.Column("next_attempt_at", sa.TIMESTAMP(timezone=True), nullable=False),
        sa.Column("sqlstate", sa.Text(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.CheckConstraint("attempts >= 1", name="ck_slot_expiration_failures_attempts"),
    )


def downgrade() -> None:
    op.drop_table("slot_expiration_failures")
