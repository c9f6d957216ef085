"""Poison rows: isolated, quarantined with a doubling backoff, never holding back the rest."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from uuid import UUID, uuid4

import pytest

from slot_expiration.db import NotQuarantinedError
from slot_expiration.domain import SlotStatus
from slot_expiration.expiry import CycleRun
from slot_expiration.quarantine import PoisonBackoff, QuarantineStore
from slot_expiration.status.store import StatusStore
from tests.support.cycles import make_cycle, run_cycle
from tests.support.database import LIMITS, SlotDatabase
from tests.support.slots import AS_OF, past_slots

pytestmark = pytest.mark.integration

# The worker's wall clock, for the quarantine's backoff (AS_OF is the expiry cutoff).
NOW = AS_OF + timedelta(hours=1)


def frozen_at(moment: datetime) -> Callable[[], datetime]:
    return lambda: moment


async def test_a_batch_tops_up_past_more_poison_rows_than_three_batches(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(110))
    poison, healthy = slots[:70], slots[70:]  # 70 poison rows: more than 3 batches of 20
    await db.install_poison_trigger([p.id for p in poison], "P0001")

    first = await run_cycle(db.url, batch_size=20, witness=True)
    second = await run_cycle(db.url, batch_size=20, witness=True)

    assert [r.id for r in first.expired] == [s.id for s in healthy[:20]]
    assert [f.slot.id for f in first.failures] == [p.id for p in poison]
    # Quarantined, the poison rows are passed over: the next batch is healthy at once.
    assert [r.id for r in second.expired] == [s.id for s in healthy[20:40]]
    assert second.failed_count == 0


async def test_a_top_up_stops_once_half_the_remaining_budget_is_spent(db: SlotDatabase) -> None:
    slots = await db.insert(past_slots(30))
    await db.install_poison_trigger([s.id for s in slots[:25]], "P0001")
    cycle = make_cycle(db.url, batch_size=5)
    spent = CycleRun(run_id=uuid4(), as_of=AS_OF, deadline=time.monotonic() - 1)

    result = await cycle.run(spent)

    # The first five rows were tried; with no time left no further rows were locked.
    assert (result.expired_count, result.failed_count) == (0, 5)
    assert set(await db.quarantine()) == {s.id for s in slots[:5]}


async def test_a_rejected_row_is_quarantined_with_its_failure_and_next_attempt(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(3))
    await db.install_poison_trigger([slots[1].id], "23514")

    outcome = await run_cycle(db.url, clock=lambda: NOW)

    (failure,) = outcome.failures
    assert (failure.attempts, failure.next_attempt_at) == (1, NOW + timedelta(seconds=300))
    entry = (await db.quarantine())[slots[1].id]
    assert (entry.attempts, entry.sqlstate, entry.message) == (1, "23514", failure.message)
    assert entry.first_failed_at == entry.last_failed_at == NOW
    assert entry.next_attempt_at == NOW + timedelta(seconds=300)
    assert (await db.statuses())[slots[1].id] is SlotStatus.AVAILABLE


async def test_a_quarantined_row_is_passed_over_until_its_next_attempt(db: SlotDatabase) -> None:
    slots = await db.insert(past_slots(3))
    await db.install_poison_trigger([slots[0].id], "P0001")
    await run_cycle(db.url, clock=lambda: NOW)
    before = await db.rows()

    early = await run_cycle(db.url, clock=lambda: NOW + timedelta(seconds=299))
    due = await run_cycle(db.url, clock=lambda: NOW + timedelta(seconds=300))

    assert (early.expired_count, early.failed_count, early.skipped_locked_count) == (0, 0, 0)
    assert [f.slot.id for f in due.failures] == [slots[0].id]
    entry = (await db.quarantine())[slots[0].id]
    assert entry.attempts == 2
    assert entry.first_failed_at == NOW
    assert entry.last_failed_at == NOW + timedelta(seconds=300)
    assert entry.next_attempt_at == NOW + timedelta(seconds=300 + 600)
    assert (await db.rows())[slots[0].id] == before[slots[0].id]  # never rewritten


async def test_the_wait_doubles_per_failure_up_to_the_maximum(db: SlotDatabase) -> None:
    (slot,) = await db.insert(past_slots(1))
    await db.install_poison_trigger([slot.id], "P0001")
    backoff = PoisonBackoff(base_seconds=300, max_seconds=3_600)
    waits, moment = [], NOW

    for _ in range(6):
        outcome = await run_cycle(db.url, backoff=backoff, clock=frozen_at(moment))
        (failure,) = outcome.failures
        assert failure.next_attempt_at is not None
        waits.append((failure.next_attempt_at - moment).total_seconds())
        moment = failure.next_attempt_at

    assert waits == [300, 600, 1_200, 2_400, 3_600, 3_600]
    assert (await db.quarantine())[slot.id].attempts == 6


async def test_a_poison_row_once_fixed_expires_on_its_next_attempt_and_leaves_quarantine(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(3))
    await db.install_poison_trigger([slots[0].id], "P0001")
    first = await run_cycle(db.url, clock=lambda: NOW)
    await db.execute("DROP TRIGGER poison ON availability_slots")

    second = await run_cycle(db.url, clock=lambda: NOW + timedelta(minutes=5), witness=True)

    assert (first.expired_count, first.failed_count) == (2, 1)
    assert [s.id for s in second.expired] == [slots[0].id]
    assert await db.quarantine() == {}
    row = (await db.rows())[slots[0].id]
    assert (row.status, row.version) == (SlotStatus.EXPIRED, slots[0].version + 1)


@pytest.mark.parametrize("status", [SlotStatus.BOOKED, SlotStatus.ARCHIVED])
async def test_a_quarantined_row_that_leaves_available_otherwise_leaves_quarantine(
    db: SlotDatabase, status: SlotStatus
) -> None:
    slots = await db.insert(past_slots(2))
    await db.install_poison_trigger([slots[0].id], "P0001")
    await run_cycle(db.url, clock=lambda: NOW)
    await db.execute("DROP TRIGGER poison ON availability_slots")
    await db.execute(
        "UPDATE availability_slots SET status = %s, version = version + 1 WHERE id = %s",
        status.value,
        slots[0].id,
    )

    await run_cycle(db.url, clock=lambda: NOW + timedelta(seconds=1))

    assert await db.quarantine() == {}
    assert (await db.statuses())[slots[0].id] is status
    # The entry is kept, ended, with how it ended, for the retention period.
    ended = await db.ended_quarantine()
    assert ended == {slots[0].id: (NOW + timedelta(seconds=1), status.value)}


@pytest.mark.parametrize("path", ["one statement", "row by row"])
async def test_an_entry_whose_slot_expired_is_kept_ended_as_expired(
    db: SlotDatabase, path: str
) -> None:
    slots = await db.insert(past_slots(3))
    await db.install_poison_trigger([slots[0].id, slots[1].id], "P0001")
    await run_cycle(db.url, clock=lambda: NOW)
    await db.execute("DROP TRIGGER poison ON availability_slots")
    await db.execute("DROP FUNCTION poison()")
    if path == "row by row":  # another row, still poison, sends the batch down that path
        await db.install_poison_trigger([slots[1].id], "P0001")
    later = NOW + timedelta(minutes=5)

    await run_cycle(db.url, clock=lambda: later)

    assert slots[0].id not in await db.quarantine()
    assert (await db.ended_quarantine())[slots[0].id] == (later, "Expired")


async def test_a_parked_slot_is_passed_over_even_when_due_until_it_is_retried(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(2))
    await db.install_poison_trigger([slots[0].id], "P0001")
    first = await run_cycle(db.url, clock=lambda: NOW)
    async with QuarantineStore.connect(db.url, LIMITS) as store:
        assert await store.park([slots[0].id], NOW) == [slots[0].id]
    await db.execute("DROP TRIGGER poison ON availability_slots")
    much_later = NOW + timedelta(hours=2)  # past any backoff

    parked = await run_cycle(db.url, clock=lambda: much_later)
    async with QuarantineStore.connect(db.url, LIMITS) as store:
        await store.retry([slots[0].id], much_later)
    retried = await run_cycle(db.url, clock=lambda: much_later, witness=True)

    assert first.quarantined == [1]
    assert (parked.selected_count, parked.quarantined) == (0, [0])  # parked: not counted
    assert [s.id for s in retried.expired] == [slots[0].id]
    assert retried.quarantined == [0]


async def test_the_oldest_slot_in_quarantine_is_aged_from_its_first_rejection_parked_ones_apart(
    db: SlotDatabase,
) -> None:
    slots = await db.insert(past_slots(3))
    await db.install_poison_trigger([s.id for s in slots[:2]], "P0001")
    first = await run_cycle(db.url, clock=lambda: NOW)
    async with QuarantineStore.connect(db.url, LIMITS) as store:
        await store.park([slots[0].id], NOW)
    later = NOW + timedelta(hours=2)  # past any backoff: slot 1 is rejected again

    again = await run_cycle(db.url, clock=lambda: later)
    async with QuarantineStore.connect(db.url, LIMITS) as store:
        await store.park([slots[1].id], later)
    none_left = await run_cycle(db.url, clock=lambda: later)

    assert (first.quarantined, first.oldest_quarantined) == ([2], [0.0])
    assert (again.quarantined, again.oldest_quarantined) == ([1], [7_200.0])
    assert (none_left.quarantined, none_left.oldest_quarantined) == ([0], [None])


async def test_retry_all_leaves_parked_slots_parked(db: SlotDatabase) -> None:
    slots = await db.insert(past_slots(2))
    await db.install_poison_trigger([s.id for s in slots], "P0001")
    await run_cycle(db.url, clock=lambda: NOW)
    async with QuarantineStore.connect(db.url, LIMITS) as store:
        await store.park([slots[0].id], NOW)
    async with QuarantineStore.connect(db.url, LIMITS) as store:
        retried = await store.retry([], NOW, every=True)

    assert retried == [slots[1].id]


async def test_parking_a_slot_not_in_quarantine_changes_nothing(db: SlotDatabase) -> None:
    slots = await db.insert(past_slots(1))
    await db.install_poison_trigger([slots[0].id], "P0001")
    await run_cycle(db.url, clock=lambda: NOW)

    with pytest.raises(NotQuarantinedError):
        async with QuarantineStore.connect(db.url, LIMITS) as store:
            await store.park([slots[0].id, uuid4()], NOW)

    async with StatusStore.connect(db.url, "slot-expiration-status") as status:
        listing = await QuarantineStore(status.session).listing(10)
    assert (listing.total, listing.parked) == (1, 0)


async def test_a_slot_back_to_available_after_its_entry_ended_starts_a_new_entry(
    db: SlotDatabase,
) -> None:
    (slot,) = await db.insert(past_slots(1))
    await db.install_poison_trigger([slot.id], "P0001")
    await run_cycle(db.url, clock=lambda: NOW)
    await _set_status(db, slot.id, SlotStatus.BOOKED)
    await run_cycle(db.url, clock=lambda: NOW + timedelta(minutes=1))  # the entry ends
    await _set_status(db, slot.id, SlotStatus.AVAILABLE)  # not the state machine's doing
    again = NOW + timedelta(minutes=2)

    outcome = await run_cycle(db.url, clock=lambda: again)

    assert [f.attempts for f in outcome.failures] == [1]
    entry = (await db.quarantine())[slot.id]
    assert (entry.attempts, entry.first_failed_at) == (1, again)
    assert await db.ended_quarantine() == {}


async def test_deleting_a_quarantined_slot_drops_its_entry(db: SlotDatabase) -> None:
    slots = await db.insert(past_slots(2))
    await db.install_poison_trigger([slots[0].id], "P0001")
    await run_cycle(db.url, clock=lambda: NOW)

    await db.execute("DELETE FROM availability_slots WHERE id = %s", slots[0].id)

    assert await db.quarantine() == {}


async def _set_status(db: SlotDatabase, slot_id: UUID, status: SlotStatus) -> None:
    """Change a row behind the poison trigger's back (it refuses every update of it)."""
    await db.execute("ALTER TABLE availability_slots DISABLE TRIGGER poison")
    await db.execute(
        "UPDATE availability_slots SET status = %s WHERE id = %s", status.value, slot_id
    )
    await db.execute("ALTER TABLE availability_slots ENABLE TRIGGER poison")
