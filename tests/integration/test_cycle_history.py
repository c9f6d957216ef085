"""The cycle history on a real PostgreSQL: a row per cycle, written after it, purged past
the retention without holding anything a cycle needs."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from structlog.testing import capture_logs

from slot_expiration.domain import CycleOutcome, SlotStatus
from slot_expiration.expiry import ClockSkewError, CycleFailed, run_cycle
from slot_expiration.history.housekeeping import Housekeeping, record_cycle
from slot_expiration.history.sink import HistorySink
from slot_expiration.history.store import HistoryStore
from slot_expiration.loop import fan_out
from slot_expiration.status.store import StatusStore
from tests.support.cycles import make_cycle
from tests.support.cycles import run_cycle as run_one_cycle
from tests.support.database import SlotDatabase
from tests.support.doubles import RecordingSink
from tests.support.history import cycle_record, history_rows, recorded_run_ids
from tests.support.slots import AS_OF, past_slots

pytestmark = pytest.mark.integration

RETENTION = timedelta(days=14)


@pytest.fixture
def closed_port() -> int:
    """A local TCP port nothing listens on: bound a moment ago, then released."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def history_of(url: str, instance: str = "worker-a:101") -> HistorySink:
    housekeeping = Housekeeping(url, RETENTION)
    return HistorySink(lambda record: record_cycle(housekeeping, record), instance)


async def test_a_completed_cycle_is_recorded_once_with_its_instance_counts_and_backlog(
    db: SlotDatabase,
) -> None:
    await db.insert(past_slots(7))
    history = history_of(db.url)

    result = await run_cycle(make_cycle(db.url, batch_size=5), history, 30.0, AS_OF)
    await history.drain()

    (row,) = await history_rows(db)
    assert (row.run_id, row.instance, row.outcome) == (
        result.run_id,
        "worker-a:101",
        CycleOutcome.SUCCESS,
    )
    assert (row.as_of, row.expired_count, row.batches, row.backlog) == (AS_OF, 5, 1, 2)
    assert row.started_at <= row.ended_at
    assert (row.error_type, row.sqlstate, row.error) == (None, None, None)


async def test_a_cycle_refused_for_a_fast_clock_is_recorded_as_clock_skew_with_why(
    db: SlotDatabase,
) -> None:
    await db.insert(past_slots(2))
    history = history_of(db.url)
    fast = make_cycle(db.url, clock=lambda: datetime.now(UTC) + timedelta(hours=1))

    with pytest.raises(CycleFailed) as refused:
        await run_cycle(fast, history, 30.0, AS_OF)
    await history.drain()

    assert isinstance(refused.value.error, ClockSkewError)
    (row,) = await history_rows(db)
    assert (row.outcome, row.stop_reason, row.error_type) == (
        CycleOutcome.CLOCK_SKEW,
        None,
        "ClockSkewError",
    )
    assert row.error is not None
    assert "ahead of the database's" in row.error
    assert row.backlog == 2  # measured even though the cycle was refused


async def test_a_history_write_that_fails_is_logged_and_the_cycle_still_completes(
    db: SlotDatabase, closed_port: int
) -> None:
    await db.insert(past_slots(3))
    unreachable = f"postgresql://calendar:pw-secret@127.0.0.1:{closed_port}/calendar"
    history, seen = history_of(unreachable), RecordingSink()

    with capture_logs() as logs:
        result = await run_cycle(make_cycle(db.url), fan_out(seen, history), 30.0, AS_OF)
        await history.drain()

    assert result.expired_count == 3
    assert seen.completed == [result]
    (line,) = [entry for entry in logs if entry["event"] == "history.write_failed"]
    assert (line["run_id"], line["sqlstate"]) == (str(result.run_id), "08001")
    assert "pw-secret" not in str(line)
    assert await history_rows(db) == []


@pytest.mark.parametrize("outcome", list(CycleOutcome))
async def test_every_outcome_is_a_value_the_history_accepts(
    db: SlotDatabase, outcome: CycleOutcome
) -> None:
    """The history's CHECK constraint lists the outcomes: a new one needs a migration."""
    record = cycle_record(AS_OF, outcome)

    async with HistoryStore.connect(db.url, _LIMITS) as store, store.transaction():
        await store.record(record)

    (row,) = await history_rows(db)
    assert row.outcome is outcome


async def test_the_purge_deletes_only_rows_past_the_retention_a_batch_at_a_time(
    db: SlotDatabase,
) -> None:
    old = [cycle_record(AS_OF - RETENTION - timedelta(hours=h)) for h in (1, 2, 3)]
    kept = cycle_record(AS_OF - RETENTION + timedelta(minutes=1))
    async with HistoryStore.connect(db.url, _LIMITS) as store:
        for record in [*old, kept]:
            async with store.transaction():
                await store.record(record)

        async with store.transaction():
            first = await store.purge(AS_OF - RETENTION, limit=2)
        async with store.transaction():
            second = await store.purge(AS_OF - RETENTION, limit=2)

    assert (first, second) == (2, 1)
    assert await recorded_run_ids(db) == [kept.run_id]


async def test_recording_a_cycle_purges_the_history_that_ended_before(db: SlotDatabase) -> None:
    await record_cycle(Housekeeping(db.url, RETENTION), cycle_record(AS_OF - RETENTION * 2))

    purged = await record_cycle(Housekeeping(db.url, RETENTION), cycle_record(AS_OF))

    assert purged == 1
    assert len(await recorded_run_ids(db)) == 1


async def test_a_cycles_tail_purges_the_quarantine_entries_that_ended_before_the_retention(
    db: SlotDatabase,
) -> None:
    # Slots that left Available long ago (their entries ended), and one still waiting.
    slots = await db.insert(past_slots(3, SlotStatus.EXPIRED))
    ended_long_ago, ended_lately, waiting = (s.id for s in slots)
    await db.execute("UPDATE availability_slots SET status = 'Available' WHERE id = %s", waiting)
    await _quarantine(db, ended_long_ago, ended_at=AS_OF - RETENTION - timedelta(days=1))
    await _quarantine(db, ended_lately, ended_at=AS_OF - timedelta(days=1))
    await _quarantine(db, waiting, ended_at=None, next_attempt_at=AS_OF + timedelta(hours=1))

    await run_one_cycle(db.url, clock=lambda: AS_OF)

    assert set(await db.quarantine()) == {waiting}
    assert set(await db.ended_quarantine()) == {ended_lately}


async def test_the_quarantines_purge_passes_over_entries_another_session_holds_never_waiting(
    db: SlotDatabase,
) -> None:
    (slot,) = await db.insert(past_slots(1, SlotStatus.EXPIRED))
    await _quarantine(db, slot.id, ended_at=AS_OF - RETENTION - timedelta(days=1))

    async with await psycopg.AsyncConnection.connect(db.url) as holder:
        await holder.execute(
            "SELECT FROM slot_expiration_failures WHERE slot_id = %s FOR UPDATE", [slot.id]
        )
        outcome = await run_one_cycle(db.url, clock=lambda: AS_OF)
        await holder.rollback()

    assert outcome.result.outcome is CycleOutcome.SUCCESS
    assert set(await db.ended_quarantine()) == {slot.id}


async def test_a_cycle_runs_while_a_purge_of_the_history_is_in_flight(db: SlotDatabase) -> None:
    await db.insert(past_slots(4))
    await record_cycle(Housekeeping(db.url, RETENTION), cycle_record(AS_OF - RETENTION * 2))

    async with HistoryStore.connect(db.url, _LIMITS) as purging, purging.transaction():
        assert await purging.purge(AS_OF - RETENTION) == 1  # its row locks held till the end
        result = await run_cycle(make_cycle(db.url), history_of(db.url), 30.0, AS_OF)

    assert result.expired_count == 4


async def test_the_status_reads_the_last_success_and_failure_of_any_instance(
    db: SlotDatabase,
) -> None:
    records = [
        cycle_record(AS_OF - timedelta(minutes=50), instance="a:1"),
        cycle_record(AS_OF - timedelta(minutes=20), instance="b:2"),
        cycle_record(
            AS_OF - timedelta(minutes=10),
            CycleOutcome.MISCONFIGURED,
            instance="a:1",
            sqlstate="42501",
            error="no UPDATE (status)",
        ),
        cycle_record(AS_OF - timedelta(hours=3), CycleOutcome.FAILED, instance="c:3"),
    ]
    for record in records:
        await record_cycle(Housekeeping(db.url, RETENTION), record)

    async with StatusStore.connect(db.url, "slot-expiration-status") as store:
        success = await store.history.latest_success()
        failure = await store.history.latest_failure()
        recent = await store.history.outcomes_since(AS_OF - timedelta(hours=1))
        latest = await store.history.latest_per_instance(AS_OF - timedelta(hours=1))

    assert success is not None
    assert (success.instance, success.ended_at) == ("b:2", AS_OF - timedelta(minutes=20))
    assert failure is not None
    assert (failure.instance, failure.outcome) == ("a:1", CycleOutcome.MISCONFIGURED)
    assert [(c.instance, c.outcome.value, c.cycles) for c in recent] == [
        ("a:1", "misconfigured", 1),
        ("a:1", "success", 1),
        ("b:2", "success", 1),
    ]
    assert [(c.instance, c.outcome) for c in latest] == [
        ("a:1", CycleOutcome.MISCONFIGURED),
        ("b:2", CycleOutcome.SUCCESS),
    ]


async def test_the_backlogs_samples_are_every_cycle_since_a_moment_oldest_first(
    db: SlotDatabase,
) -> None:
    records = [
        cycle_record(AS_OF - timedelta(minutes=45), backlog=9_000, expired=500),
        cycle_record(AS_OF - timedelta(minutes=35), backlog=8_000, instance="b:2"),
        cycle_record(AS_OF - timedelta(minutes=31), CycleOutcome.FAILED, backlog=None),
        cycle_record(AS_OF - timedelta(minutes=5), backlog=6_000),
    ]
    for record in records:
        await record_cycle(Housekeeping(db.url, RETENTION), record)

    async with StatusStore.connect(db.url, "slot-expiration-status") as store:
        samples = await store.history.backlog_samples(AS_OF - timedelta(minutes=40))

    assert [(s.instance, s.outcome, s.backlog, s.expired_count) for s in samples] == [
        ("b:2", CycleOutcome.SUCCESS, 8_000, 0),
        ("worker-a:101", CycleOutcome.FAILED, None, 0),
        ("worker-a:101", CycleOutcome.SUCCESS, 6_000, 0),
    ]


_LIMITS = Housekeeping("postgresql://unused", RETENTION).limits


async def _quarantine(
    db: SlotDatabase,
    slot_id: object,
    ended_at: datetime | None,
    next_attempt_at: datetime = AS_OF,
) -> None:
    await db.conn.execute(
        "INSERT INTO slot_expiration_failures (slot_id, attempts, first_failed_at, "
        "last_failed_at, next_attempt_at, sqlstate, message, ended_at, ended_status) "
        "VALUES (%s, 1, %s, %s, %s, 'P0001', 'slot refuses to expire', %s, %s)",
        (
            slot_id,
            AS_OF,
            AS_OF,
            next_attempt_at,
            ended_at,
            None if ended_at is None else "Expired",
        ),
    )


async def test_the_charts_points_are_each_buckets_largest_backlog_at_its_cycles_own_time(
    db: SlotDatabase,
) -> None:
    """A point stood at its bucket's start: two minutes off the cycle the chart's words
    named (a cycle at 12:04:50 in the bucket of 12:03 read "at 12:03")."""
    noon = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    records = [
        cycle_record(noon + timedelta(minutes=4, seconds=50), backlog=20_000, instance="a:1"),
        cycle_record(noon + timedelta(minutes=5, seconds=10), backlog=19_500, instance="b:2"),
        cycle_record(noon + timedelta(minutes=7), backlog=19_000, instance="a:1"),
        cycle_record(noon + timedelta(minutes=8), CycleOutcome.FAILED, backlog=None),
    ]
    for record in records:
        await record_cycle(Housekeeping(db.url, RETENTION), record)

    async with StatusStore.connect(db.url, "slot-expiration-status") as store:
        points = await store.history.backlog_since(noon, 180.0)

    assert [(p.at, p.backlog) for p in points] == [
        (noon + timedelta(minutes=4, seconds=50), 20_000),  # the bucket of 12:03
        (noon + timedelta(minutes=7), 19_000),  # the bucket of 12:06
    ]
