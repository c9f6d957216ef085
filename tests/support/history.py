"""Building cycle history rows for tests, and reading the history back (test-side SQL)."""

from __future__ import annotations

from datetime import datetime, timedelta
from uuid import UUID, uuid4

from psycopg.rows import kwargs_row

from slot_expiration.domain import CycleOutcome
from slot_expiration.history.store import CycleRecord
from tests.support.database import SlotDatabase

_ERROR_TYPES = {
    CycleOutcome.FAILED: "TransientStoreError",
    CycleOutcome.MISCONFIGURED: "MisconfiguredStoreError",
    CycleOutcome.CLOCK_SKEW: "ClockSkewError",
    CycleOutcome.BUDGET_EXCEEDED: "TimeoutError",
    CycleOutcome.INTERRUPTED: "CancelledError",
}


def cycle_record(
    ended_at: datetime,
    outcome: CycleOutcome = CycleOutcome.SUCCESS,
    *,
    instance: str = "worker-a:101",
    expired: int = 0,
    backlog: int | None = 0,
    error: str | None = None,
    sqlstate: str | None = None,
) -> CycleRecord:
    """A cycle of `instance` that ended at `ended_at` after 40 ms (a paused one ran no batch
    and has no error)."""
    failed = outcome.is_failure
    succeeded = outcome is CycleOutcome.SUCCESS
    return CycleRecord(
        run_id=uuid4(),
        instance=instance,
        as_of=ended_at - timedelta(milliseconds=40),
        started_at=ended_at - timedelta(milliseconds=40),
        ended_at=ended_at,
        outcome=outcome,
        stop_reason="drained" if succeeded else None,
        expired_count=expired,
        skipped_locked_count=0,
        failed_count=0,
        batches=1 if succeeded else 0,
        duration_ms=40.0,
        backlog=backlog,
        error_type=_ERROR_TYPES.get(outcome) if failed else None,
        sqlstate=sqlstate,
        error=(error or "the server went away") if failed else None,
    )


async def recorded_run_ids(db: SlotDatabase) -> list[UUID]:
    """The history's run ids, oldest first."""
    cursor = await db.conn.execute(
        "SELECT run_id FROM slot_expiration_cycles ORDER BY ended_at, run_id"
    )
    return [row[0] for row in await cursor.fetchall()]


async def history_rows(db: SlotDatabase) -> list[CycleRecord]:
    """Every row of the history, oldest first."""
    cursor = db.conn.cursor(row_factory=kwargs_row(CycleRecord.from_columns))
    await cursor.execute(
        "SELECT run_id, instance, as_of, started_at, ended_at, outcome, stop_reason, "
        "expired_count, skipped_locked_count, failed_count, batches, duration_ms, backlog, "
        "clock_skew_seconds, error_type, sqlstate, error "
        "FROM slot_expiration_cycles ORDER BY ended_at, run_id"
    )
    return await cursor.fetchall()


async def age_history(db: SlotDatabase, by: timedelta) -> None:
    """Move every cycle of the history `by` into the past: the clock of whoever judges it
    (the database's now) as if it ran `by` ahead, without waiting that long."""
    await db.execute(
        "UPDATE slot_expiration_cycles "
        "SET as_of = as_of - %s, started_at = started_at - %s, ended_at = ended_at - %s",
        by,
        by,
        by,
    )
