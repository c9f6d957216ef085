"""The availability_slots table, as the calendar's table contract fixes it.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
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
    # Serves the worker's selection: status = 'Available' AND start_at <= AsOf
    # ORDER BY start_at, read in index order.
    op.create_index(
        "ix_availability_slots_status_start", "availability_slots", ["status", "start_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_availability_slots_status_start", table_name="availability_slots")
    op.drop_table("availability_slots")
