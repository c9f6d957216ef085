"""Drain mode: several batches per cycle, each its own transaction, within the budget."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from slot_expiration.domain import CycleOutcome, SlotStatus
from slot_expiration.expiry import CycleFailed, CycleRun, StopReason
from slot_expiration.expiry import run_cycle as run_under_budget
from slot_expiration.loop import StopSignal
from slot_expiration.options import load_options
from slot_expiration.worker import build_loop
from tests.support.cycles import BatchLog, make_cycle, run_cycle
from tests.support.database import SlotDatabase
from tests.support.doubles import ManualTicker, RecordingSink
from tests.support.slots import AS_OF, past_slots
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration


async def gate_waiters(db: SlotDatabase) -> bool:
    return await db.worker_sessions(waiting_on_gate=True) == 1


async def test_drain_expires_the_whole_backlog_each_batch_its_own_transaction(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(23))

    outcome = await run_cycle(db.url, batch_size=5, max_batches=0, witness=True)

    result = outcome.result
    assert (result.batches, result.expired_count, result.stop_reason) == (
        5,
        23,
        StopReason.DRAINED,
    )
    assert [b.expired_count for b in outcome.batches] == [5, 5, 5, 5, 3]
    assert [s.id for s in outcome.expired] == [s.id for s in slots]  # oldest first, throughout
    rows = await db.rows()
    transactions = [{rows[s.id].xmin for s in batch} for batch in outcome.expired_batches]
    assert all(len(xmins) == 1 for xmins in transactions)
    assert len(set().union(*transactions)) == 5
    assert all(rows[s.id].version == s.version + 1 for s in slots)


async def test_drain_stops_at_the_first_batch_that_comes_back_short(db: SlotDatabase) -> None:
    await db.insert(past_slots(10))

    outcome = await run_cycle(db.url, batch_size=5, max_batches=50)

    assert [b.expired_count for b in outcome.batches] == [5, 5, 0]
    assert outcome.result.stop_reason is StopReason.DRAINED


async def test_max_batches_caps_a_cycle_and_leaves_the_rest_for_the_next(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(30))

    outcome = await run_cycle(db.url, batch_size=5, max_batches=2)

    assert (outcome.result.batches, outcome.expired_count) == (2, 10)
    assert outcome.result.stop_reason is StopReason.MAX_BATCHES
    statuses = await db.statuses()
    assert [statuses[s.id] for s in slots].count(SlotStatus.AVAILABLE) == 20
    assert outcome.result.backlog == 20


async def test_the_default_is_one_batch_per_cycle_as_the_spec_says(db: SlotDatabase) -> None:
    await db.insert(past_slots(12))

    outcome = await run_cycle(db.url, batch_size=5)

    assert (outcome.result.batches, outcome.expired_count) == (1, 5)


async def test_a_stop_between_batches_starts_no_further_batch(db: SlotDatabase) -> None:
    await db.insert(past_slots(20))
    log = BatchLog()

    run = CycleRun(AS_OF, emit=log, stop_requested=lambda: len(log.batches) >= 2)
    result = await make_cycle(db.url, batch_size=5, max_batches=0).run(run)

    assert (result.batches, result.expired_count) == (2, 10)
    assert result.stop_reason is StopReason.STOP_REQUESTED
    assert log.started == [1, 2]


async def test_a_batch_rejected_after_a_stop_was_asked_for_is_rolled_back_not_retried_row_by_row(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(15))
    await db.install_poison_trigger([slots[7].id], "P0001")  # in batch 2
    log = BatchLog()

    # The stop arrives while batch 2 runs: its rejection is the first thing to see it.
    run = CycleRun(AS_OF, emit=log, stop_requested=lambda: log.started == [1, 2])
    result = await make_cycle(db.url, batch_size=5, max_batches=0).run(run)

    assert (result.batches, result.expired_count, result.failed_count) == (1, 5, 0)
    assert result.stop_reason is StopReason.STOP_REQUESTED
    statuses = await db.statuses()
    assert [statuses[s.id] for s in slots[5:]] == [SlotStatus.AVAILABLE] * 10
    assert await db.quarantine() == {}  # nothing tried row by row, nothing quarantined


async def test_no_batch_starts_when_the_budget_left_is_below_twice_the_slowest(
    db: SlotDatabase,
) -> None:
    await db.insert(past_slots(20))
    ticks = itertools.count()  # a clock that moves one second each time it is read
    cycle = make_cycle(db.url, batch_size=5, max_batches=0, monotonic=lambda: float(next(ticks)))
    run = CycleRun(AS_OF, deadline=4.0)

    result = await cycle.run(run)

    # Batch 1 took 1 s (read at 1 and 2; the drain's progress read the clock at 0 and 3);
    # at 4, 4 + 2 x 1 s is past the deadline at 4.
    assert (result.batches, result.expired_count) == (1, 5)
    assert result.stop_reason is StopReason.BUDGET


async def test_the_budget_reached_mid_drain_rolls_back_only_the_batch_in_flight(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(15))
    await db.install_gate_for([s.id for s in slots[5:10]])  # batch 2 waits at the gate
    await db.close_gate()
    # The cycle's own clock stands still, so that however slow batch 1 is on a loaded
    # machine, the cycle never predicts batch 2 past the budget and starts it: the budget
    # (real time) is what stops it, at the gate.
    cycle = make_cycle(db.url, batch_size=5, max_batches=0, monotonic=lambda: 0.0)
    recorded = RecordingSink()

    with pytest.raises(CycleFailed) as overrun:
        await run_under_budget(cycle, recorded, 1.0, AS_OF)
    assert overrun.value.outcome is CycleOutcome.BUDGET_EXCEEDED

    statuses = await db.statuses()
    assert [statuses[s.id] for s in slots] == [SlotStatus.EXPIRED] * 5 + [SlotStatus.AVAILABLE] * 10
    assert [b.expired_count for b in recorded.batches] == [5]  # the committed batch was reported
    (ended,) = recorded.failed
    assert (ended.result.expired_count, ended.batch_in_flight) == (5, True)  # what committed
    await db.open_gate()


async def test_sigterm_between_batches_lets_the_batch_in_flight_commit_and_starts_no_other(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(15))
    await db.install_gate_for([s.id for s in slots[:5]])  # the first batch waits at the gate
    await db.close_gate()
    options = load_options(
        database_url=db.url, batch_size=5, drain_batch_size=5, max_batches_per_cycle=0
    )
    recorded, ticker, stop = RecordingSink(), ManualTicker(), StopSignal()
    loop = asyncio.create_task(build_loop(options, recorded, ticker).run(stop))
    ticker.tick()
    await eventually(lambda: gate_waiters(db))

    stop.request()  # what SIGTERM does
    await db.open_gate()
    stats = await loop

    (result,) = recorded.completed
    assert (stats.cycles_completed, result.batches, result.expired_count) == (1, 1, 5)
    assert result.stop_reason is StopReason.STOP_REQUESTED
    statuses = await db.statuses()
    assert [statuses[s.id] for s in slots].count(SlotStatus.EXPIRED) == 5


class PauseLog:
    """Stands in for the pause between batches: records it, and may ask for a stop."""

    def __init__(self, stop: StopSignal | None = None) -> None:
        self.pauses: list[float] = []
        self._stop = stop

    async def __call__(self, seconds: float) -> None:
        self.pauses.append(seconds)
        if self._stop is not None:
            self._stop.request()


async def test_a_paced_drain_pauses_between_batches_and_not_after_the_last(
    db: SlotDatabase,
) -> None:
    await db.insert(past_slots(12))
    pause = PauseLog()
    cycle = make_cycle(db.url, batch_size=5, max_batches=0, batch_pause_seconds=0.25)

    result = await cycle.run(CycleRun(AS_OF, pause=pause))

    assert (result.batches, result.expired_count, result.stop_reason) == (
        3,
        12,
        StopReason.DRAINED,
    )
    assert pause.pauses == [0.25, 0.25]


async def test_an_unpaced_drain_never_pauses(db: SlotDatabase) -> None:
    await db.insert(past_slots(12))
    pause = PauseLog()

    result = await make_cycle(db.url, batch_size=5, max_batches=0).run(CycleRun(AS_OF, pause=pause))

    assert (result.batches, pause.pauses) == (3, [])


async def test_a_stop_during_the_pause_starts_no_further_batch(db: SlotDatabase) -> None:
    await db.insert(past_slots(20))
    stop = StopSignal()
    run = CycleRun(AS_OF, stop_requested=stop.requested.is_set, pause=PauseLog(stop))

    result = await make_cycle(db.url, batch_size=5, max_batches=0, batch_pause_seconds=1).run(run)

    assert (result.batches, result.expired_count) == (1, 5)
    assert result.stop_reason is StopReason.STOP_REQUESTED


async def test_the_pause_counts_against_the_budget(db: SlotDatabase) -> None:
    await db.insert(past_slots(20))
    ticks = itertools.count()  # a clock that moves one second each time it is read
    cycle = make_cycle(
        db.url,
        batch_size=5,
        max_batches=0,
        batch_pause_seconds=3,
        monotonic=lambda: float(next(ticks)),
    )
    pause = PauseLog()

    result = await cycle.run(CycleRun(AS_OF, deadline=6.0, pause=pause))

    # Batch 1 took 1 s; at 4, 4 + the 3 s pause + 2 x 1 s is past the deadline at 6
    # (without the pause, 6 s, it would have gone on).
    assert (result.batches, result.stop_reason, pause.pauses) == (1, StopReason.BUDGET, [])


async def test_sigterm_during_the_loops_pause_ends_the_cycle_at_once_as_stopped(
    db: SlotDatabase,
) -> None:
    await db.insert(past_slots(15))
    options = load_options(
        database_url=db.url,
        batch_size=5,
        drain_batch_size=5,
        max_batches_per_cycle=0,
        batch_pause_seconds=60,
        max_cycle_seconds=600,
    )
    recorded, ticker, stop = RecordingSink(), ManualTicker(), StopSignal()
    loop = asyncio.create_task(build_loop(options, recorded, ticker).run(stop))
    ticker.tick()

    async def first_batch_committed() -> bool:
        return len(recorded.batches) == 1

    await eventually(first_batch_committed)
    stop.request()  # what SIGTERM does, during the 60 s pause
    stats = await loop

    # Had the pause not ended at the stop, the shutdown grace (10 s) would have
    # cancelled the cycle and it would count as failed.
    (result,) = recorded.completed
    assert (stats.cycles_completed, stats.cycles_failed) == (1, 0)
    assert (result.batches, result.expired_count) == (1, 5)
    assert result.stop_reason is StopReason.STOP_REQUESTED


async def test_a_drains_later_batches_take_the_drain_batch_size_and_its_first_the_batch_size(
    db: SlotDatabase,
) -> None:
    await db.insert(past_slots(12))
    log = BatchLog()

    run = CycleRun(AS_OF, emit=log)
    result = await make_cycle(db.url, batch_size=2, max_batches=0, drain_batch_size=5).run(run)

    # A full batch cannot know it took the last due row: one more, empty, says so.
    assert [batch.expired_count for batch in log.batches] == [2, 5, 5, 0]
    assert (result.expired_count, result.stop_reason) == (12, StopReason.DRAINED)


async def test_a_first_batch_of_a_few_rows_never_predicts_a_drains_batch_past_the_budget(
    db: SlotDatabase,
) -> None:
    # A clock that moves 10 ms each time it is read: the 3-row first batch takes some
    # 20 ms. Scaled row for row to the 2,000-row batches that follow, that was 13 s, twice
    # past the 10 s left: the drain stopped after its first batch.
    await db.insert(past_slots(20))
    ticks = itertools.count()
    cycle = make_cycle(
        db.url,
        batch_size=3,
        drain_batch_size=2_000,
        max_batches=0,
        monotonic=lambda: next(ticks) / 100,
    )

    result = await cycle.run(CycleRun(AS_OF, deadline=10.0))

    assert (result.batches, result.expired_count) == (2, 20)
    assert result.stop_reason is StopReason.DRAINED
