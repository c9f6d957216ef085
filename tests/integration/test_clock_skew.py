"""The worker's clock is compared with the database's at each cycle: ahead by more than the
tolerance, the cycle expires nothing; behind, it runs and only reports it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from structlog.testing import capture_logs

from slot_expiration.domain import CycleOutcome, SlotStatus, utc_now
from slot_expiration.expiry import ClockSkewError, CycleRun, outcome_of
from slot_expiration.telemetry import LogSink
from tests.support.cycles import BatchLog, make_cycle, run_cycle
from tests.support.database import SlotDatabase
from tests.support.slots import AS_OF, make_slot, past_slots

pytestmark = pytest.mark.integration


async def test_a_worker_clock_two_hours_ahead_expires_nothing_and_fails_as_clock_skew(
    db: SlotDatabase,
) -> None:
    await db.insert(past_slots(5))
    log = BatchLog()
    cycle = make_cycle(db.url, clock=lambda: utc_now() + timedelta(hours=2))

    with pytest.raises(ClockSkewError) as refused:
        await cycle.run(CycleRun(as_of=AS_OF, emit=log))

    assert 7_100 < refused.value.skew_seconds < 7_300
    assert "ahead of the database's" in str(refused.value)
    assert outcome_of(refused.value) is CycleOutcome.CLOCK_SKEW
    assert log.batches == []
    assert set((await db.statuses()).values()) == {SlotStatus.AVAILABLE}
    assert await db.worker_locks() == 0


async def test_a_clock_ahead_within_the_tolerance_is_accepted(db: SlotDatabase) -> None:
    await db.insert(past_slots(3))

    outcome = await run_cycle(
        db.url, clock=lambda: utc_now() + timedelta(seconds=20), max_clock_skew_seconds=30
    )

    assert outcome.expired_count == 3
    assert outcome.result.clock_skew_seconds is not None
    assert 15 < outcome.result.clock_skew_seconds < 30


async def test_a_clock_behind_only_delays_expiry_and_is_reported(db: SlotDatabase) -> None:
    await db.insert(past_slots(3))
    behind = utc_now() - timedelta(hours=2)

    with capture_logs() as logs:
        cycle = make_cycle(db.url, clock=lambda: behind)
        result = await cycle.run(CycleRun(as_of=AS_OF, emit=LogSink(max_clock_skew_seconds=30)))

    assert result.expired_count == 3
    assert result.clock_skew_seconds is not None
    assert result.clock_skew_seconds < -7_000
    (warning,) = [entry for entry in logs if entry["event"] == "clock.behind"]
    assert warning["log_level"] == "warning"
    assert warning["clock_skew_seconds"] < -7_000


@pytest.mark.parametrize(("as_of_is_now", "left"), [(True, 3), (False, 0)])
async def test_the_backlog_on_the_clock_is_counted_on_the_databases_clock(
    db: SlotDatabase, as_of_is_now: bool, left: int
) -> None:
    now = utc_now()
    # Due by the database's clock, not yet by a clock two hours slow.
    await db.insert([make_slot(timedelta(minutes=-5 - i), as_of=now) for i in range(3)])
    behind = now - timedelta(hours=2)
    log = BatchLog()
    cycle = make_cycle(db.url, clock=lambda: behind)

    result = await cycle.run(CycleRun(as_of=behind, as_of_is_now=as_of_is_now, emit=log))

    assert result.expired_count == 0  # nothing had started by the slow clock's AsOf
    assert result.backlog == left == log.backlogs[0]
