"""The cycle history, and quarantine entries that end instead of vanishing.

`slot_expiration_cycles`: one row per cycle of any worker instance (the spec's
log events kept as rows, like pg_cron's job_run_details): who ran it, when, how
it ended and what it did. `status` and `ui` read it; each worker purges rows
past the retention (14 days by default) in small deletes of its own.

`slot_expiration_failures` keeps an entry once it ends: `ended_at` and the
slot's status then (`Expired`: the worker expired it; `Booked` or `Archived`:
it left Available another way), purged after the same retention. `parked_at`:
an operator stopped its retries until `quarantine retry`. The worker's
selection passes over active entries only (`ended_at IS NULL`).

Both changes add columns without defaults and a new table: no table rewrite, a
brief ACCESS EXCLUSIVE lock on the quarantine only.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from slot_expiration.schema import migration_context

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

HISTORY = "slot_expiration_cycles"
QUARANTINE = "slot_expiration_failures"
OUTCOMES = ("success", "failed", "budget_exceeded", "misconfigured", "clock_skew", "interrupted")


HISTORY_INDEX = "ix_slot_expiration_cycles_ended_at"
ENDED_CHECK = "ck_slot_expiration_failures_ended"


def upgrade() -> None:
    _create_history()
    _quarantine_keeps_ended_entries()


def _create_history() -> None:
    if migration_context.table_missing(HISTORY):
        _create_history_table()
        migration_context.recreated(f"table {HISTORY}")
    if migration_context.table_missing(HISTORY_INDEX):
        # Every read (latest cycles, the last hour, the chart) and the retention purge
        # walk the history by its end.
        op.create_index(HISTORY_INDEX, HISTORY, ["ended_at"])
        migration_context.recreated(f"index {HISTORY_INDEX}", part_of=HISTORY)


def _create_history_table() -> None:
    outcomes = ", ".join(f"'{outcome}'" for outcome in OUTCOMES)
    op.create_table(
        HISTORY,
        sa.Column("run_id", postgresql.UUID(as_uuid=True), primary_key=True),
        sa.Column("instance", sa.Text(), nullable=False),  # hostname:pid, or --instance-id
        sa.Column("as_of", sa.TIMESTAMP(timezone=True), nullable=False),
        sa.Column("started_at", sa.TIMESTAMP(timezone=True), nullable=False),
        sa.Column("ended_at", sa.TIMESTAMP(timezone=True), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("stop_reason", sa.Text(), nullable=True),
        sa.Column("expired_count", sa.Integer(), nullable=False),
        sa.Column("skipped_locked_count", sa.Integer(), nullable=False),
        sa.Column("failed_count", sa.Integer(), nullable=False),
        sa.Column("batches", sa.Integer(), nullable=False),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.Column("backlog", sa.Integer(), nullable=True),  # None: it could not be counted
        sa.Column("clock_skew_seconds", sa.Float(), nullable=True),
        sa.Column("error_type", sa.Text(), nullable=True),
        sa.Column("sqlstate", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint(f"outcome IN ({outcomes})", name="ck_slot_expiration_cycles_outcome"),
        sa.CheckConstraint(
            "(outcome = 'success') = (error_type IS NULL)",
            name="ck_slot_expiration_cycles_error",
        ),
    )


def _quarantine_keeps_ended_entries() -> None:
    columns = (
        sa.Column("parked_at", sa.TIMESTAMP(timezone=True), nullable=True),
        sa.Column("ended_at", sa.TIMESTAMP(timezone=True), nullable=True),
        sa.Column("ended_status", sa.Text(), nullable=True),
    )
    for column in columns:
        if migration_context.column_missing(QUARANTINE, column.name):
            op.add_column(QUARANTINE, column)
            migration_context.recreated(f"column {QUARANTINE}.{column.name}", part_of=QUARANTINE)
    if migration_context.constraint_missing(QUARANTINE, ENDED_CHECK):
        op.create_check_constraint(
            ENDED_CHECK,
            QUARANTINE,
            "(ended_at IS NULL) = (ended_status IS NULL) "
            "AND ended_status IN ('Expired', 'Booked', 'Archived')",
        )
        migration_context.recreated(f"check constraint {ENDED_CHECK}", part_of=QUARANTINE)


def downgrade() -> None:
    # Entries that ended were deleted before this revision.
    op.execute(f"DELETE FROM {QUARANTINE} WHERE ended_at IS NOT NULL")
    op.drop_constraint(ENDED_CHECK, QUARANTINE)
    for column in ("ended_status", "ended_at", "parked_at"):
        op.drop_column(QUARANTINE, column)
    op.drop_index(HISTORY_INDEX, table_name=HISTORY)
    op.drop_table(HISTORY)
