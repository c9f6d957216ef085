"""The cycle history's latest success and latest failure, each found by one probe.

`status`, `status --check` and the page ask the history for its latest successful cycle
and its latest failed one. Walking ix_slot_expiration_cycles_ended_at backwards, a
failure's search reads every success since the last failure: with a cycle a second and
14 days of history and no failure at all, the whole history (4.3 s, p50); a success's,
every failure since the last success. Two partial indexes on ended_at, one over the
successes and one over the rest, answer each with one probe.

Built CONCURRENTLY: the worker writes its history meanwhile, and no write waits. An index
left INVALID by a build cut short is built again.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06
"""

from alembic import op

from slot_expiration.schema import migration_context

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

HISTORY = "slot_expiration_cycles"
# Each index and the outcomes it holds; history.sql's statements name the same predicates.
INDEXES = {
    "ix_slot_expiration_cycles_success_ended_at": "outcome = 'success'",
    "ix_slot_expiration_cycles_failure_ended_at": "outcome <> 'success'",
}


def upgrade() -> None:
    for index, outcomes in INDEXES.items():
        valid = migration_context.index_validity(index)
        if valid:
            continue
        with migration_context.concurrently():
            if valid is False:  # a build cut short: no query can use it
                op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index}")
            op.execute(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {index} "
                f"ON {HISTORY} (ended_at) WHERE {outcomes}"
            )
        migration_context.recreated(f"index {index}", part_of=HISTORY)


def downgrade() -> None:
    for index in INDEXES:
        op.execute(f"DROP INDEX IF EXISTS {index}")
