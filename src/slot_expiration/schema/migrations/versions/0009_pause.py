"""The deployment's pause, and the history's outcome `paused`.

`slot_expiration_pauses`: one row per pause, the worker's own table. `slot-expiration
pause` writes one (since now, by current_user, until an end or none, and why), `resume`
ends it (resumed_at, resumed_by); every replica reads the one in force at each tick and
expires nothing while it holds. A unique index over the rows without resumed_at allows
one in force at a time. The worker's role reads it (`grant`); writing it needs the role
`migrate` runs as, which owns it.

The history admits the outcome `paused` (a cycle that found the pause in force, with no
error, as a success has none): ck_slot_expiration_cycles_outcome_0009 and
ck_slot_expiration_cycles_error_0009 replace 0006's two checks, relaxed only (every row
0006's admit, they admit). Added NOT VALID with the old ones dropped, in one brief lock
of the history (the worker's own table: no calendar write waits), then validated in a
transaction of their own, which no history write waits for.

ix_slot_expiration_cycles_fault_ended_at: the latest cycle that failed is one probe again
(0007's failure index holds the paused cycles too, which a long pause makes many), built
CONCURRENTLY as 0007's.

A release before this one runs on it unchanged: it never names the new table, nor the
checks, and its writes (no `paused`) pass them. Its `status` and `ui` cannot read a paused
cycle's row (the outcome is not one of theirs): upgrade them with the workers.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-08
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from slot_expiration.schema import migration_context

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

PAUSES = "slot_expiration_pauses"
CURRENT_PAUSE_INDEX = "ux_slot_expiration_pauses_current"
HISTORY = "slot_expiration_cycles"
# 0006's outcomes and `paused`, as the checks name them (text frozen with the migration).
OUTCOMES = (
    "success",
    "failed",
    "budget_exceeded",
    "misconfigured",
    "clock_skew",
    "interrupted",
    "paused",
)
# Each check 0009 adds, what it holds, and 0006's it replaces.
CHECKS = {
    "ck_slot_expiration_cycles_outcome_0009": (
        "outcome IN ({})".format(", ".join(f"'{outcome}'" for outcome in OUTCOMES)),
        "ck_slot_expiration_cycles_outcome",
    ),
    "ck_slot_expiration_cycles_error_0009": (
        "(outcome IN ('success', 'paused')) = (error_type IS NULL)",
        "ck_slot_expiration_cycles_error",
    ),
}
FAULT_INDEX = "ix_slot_expiration_cycles_fault_ended_at"
FAULTS = "outcome NOT IN ('success', 'paused')"


def upgrade() -> None:
    _create_pauses()
    _history_admits_paused()
    _fault_index()


def _create_pauses() -> None:
    if migration_context.table_missing(PAUSES):
        op.create_table(
            PAUSES,
            sa.Column(
                "pause_id",
                postgresql.UUID(as_uuid=True),
                primary_key=True,
                server_default=sa.text("gen_random_uuid()"),
            ),
            sa.Column("paused_at", sa.TIMESTAMP(timezone=True), nullable=False),
            sa.Column("paused_by", sa.Text(), nullable=False),  # current_user of `pause`
            sa.Column("paused_until", sa.TIMESTAMP(timezone=True), nullable=True),  # no end
            sa.Column("reason", sa.Text(), nullable=False),
            sa.Column("resumed_at", sa.TIMESTAMP(timezone=True), nullable=True),  # in force
            sa.Column("resumed_by", sa.Text(), nullable=True),
            sa.CheckConstraint("reason <> ''", name="ck_slot_expiration_pauses_reason"),
            sa.CheckConstraint("paused_until > paused_at", name="ck_slot_expiration_pauses_until"),
            sa.CheckConstraint(
                "(resumed_at IS NULL) = (resumed_by IS NULL) AND resumed_at >= paused_at",
                name="ck_slot_expiration_pauses_resumed",
            ),
        )
        migration_context.recreated(f"table {PAUSES}")
    if migration_context.table_missing(CURRENT_PAUSE_INDEX):
        # At most one pause in force: `pause` inserts ON CONFLICT against it.
        op.execute(
            f"CREATE UNIQUE INDEX {CURRENT_PAUSE_INDEX} ON {PAUSES} ((true)) "
            "WHERE resumed_at IS NULL"
        )
        migration_context.recreated(f"index {CURRENT_PAUSE_INDEX}", part_of=PAUSES)


def _history_admits_paused() -> None:
    for name, (holds, replaces) in CHECKS.items():
        if migration_context.constraint_missing(HISTORY, name):
            # One statement, one brief lock: the new check on, the old one off.
            op.execute(
                f"ALTER TABLE {HISTORY} ADD CONSTRAINT {name} CHECK ({holds}) NOT VALID, "
                f"DROP CONSTRAINT IF EXISTS {replaces}"
            )
            migration_context.recreated(f"check constraint {name}", part_of=HISTORY)
        elif not migration_context.constraint_missing(HISTORY, replaces):
            # 0006 run again in a repair put the old check back beside the new one.
            op.execute(f"ALTER TABLE {HISTORY} DROP CONSTRAINT {replaces}")
    for name in CHECKS:
        if not migration_context.constraint_validated(HISTORY, name):
            # SHARE UPDATE EXCLUSIVE while it reads the rows: the history's writes go on.
            with migration_context.each_in_its_own_transaction():
                op.execute(f"ALTER TABLE {HISTORY} VALIDATE CONSTRAINT {name}")


def _fault_index() -> None:
    valid = migration_context.index_validity(FAULT_INDEX)
    if valid:
        return
    with migration_context.concurrently():
        if valid is False:  # a build cut short: no query can use it
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {FAULT_INDEX}")
        op.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {FAULT_INDEX} "
            f"ON {HISTORY} (ended_at) WHERE {FAULTS}"
        )
    migration_context.recreated(f"index {FAULT_INDEX}", part_of=HISTORY)


def downgrade() -> None:
    op.execute(f"DROP INDEX IF EXISTS {FAULT_INDEX}")
    # 0006's checks know no paused cycle: their rows go first.
    op.execute(f"DELETE FROM {HISTORY} WHERE outcome = 'paused'")
    op.execute(
        f"ALTER TABLE {HISTORY} "
        "ADD CONSTRAINT ck_slot_expiration_cycles_outcome CHECK (outcome IN ("
        + ", ".join(f"'{outcome}'" for outcome in OUTCOMES[:-1])
        + ")), ADD CONSTRAINT ck_slot_expiration_cycles_error "
        "CHECK ((outcome = 'success') = (error_type IS NULL)), "
        + ", ".join(f"DROP CONSTRAINT {name}" for name in CHECKS)
    )
    op.drop_table(PAUSES)
