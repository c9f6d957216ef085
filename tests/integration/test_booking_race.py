"""The spec's race between book-slot and the worker at the StartAt boundary, on real
PostgreSQL: arbitrated by the row lock, every slot ends Booked or Expired, every caller
is told the truth, and a booking waits for at most the one batch that holds its row.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from dataclasses import dataclass
from datetime import timedelta
from uuid import UUID, uuid4

import pytest

from slot_expiration.domain import Slot, SlotRuleError, SlotStatus
from slot_expiration.slots import SlotNotAvailableError, SlotOperations, SlotPolicy, SlotRange
from tests.support.cycles import Outcome, run_cycle
from tests.support.database import SlotDatabase
from tests.support.gates import (
    SLOTS_APPLICATION,
    WORKER_APPLICATION,
    TransitionGates,
    sessions,
)
from tests.support.slot_context import Clock, operations
from tests.support.slots import AS_OF
from tests.support.waiting import eventually
from tests.support.witness import install_witness

pytestmark = pytest.mark.integration

TENANT, CONSULTANT = uuid4(), uuid4()
PUBLISHED_AT = AS_OF - timedelta(days=1)
# Bookings act before any slot starts (they start in the hours before AS_OF) and the
# worker's AsOf is past every start: with lead time 0 every slot is both bookable and
# expirable.
BOOKING_CLOCK = AS_OF - timedelta(hours=12)
ZERO_LEAD = SlotPolicy(min_lead_time=timedelta(0))
BOOKERS = 12
BATCH_SIZE = 20


async def publish_boundary_slots(url: str, count: int) -> list[Slot]:
    """`count` one-minute slots in the `count` minutes before AS_OF, the oldest first."""
    first = AS_OF - timedelta(minutes=count)
    batch = [
        SlotRange(first + timedelta(minutes=i), first + timedelta(minutes=i + 1))
        for i in range(count)
    ]
    async with operations(url, Clock(PUBLISHED_AT)) as ops:
        return await ops.publish(TENANT, CONSULTANT, batch)


@dataclass(frozen=True, slots=True)
class Attempt:
    """One booking and what its caller was told."""

    slot_id: UUID
    booked: Slot | None
    refused: SlotRuleError | None
    seconds: float


async def book_on_own_connection(url: str, slot_id: UUID) -> Attempt:
    async with SlotOperations.connect(url, ZERO_LEAD, lambda: BOOKING_CLOCK) as ops:
        started = time.monotonic()
        try:
            booked = await ops.book(TENANT, slot_id)
        except SlotRuleError as refused:
            return Attempt(slot_id, None, refused, time.monotonic() - started)
        return Attempt(slot_id, booked, None, time.monotonic() - started)


@dataclass
class Race:
    """Bookings on BOOKERS connections at once, beside worker cycles (AsOf = AS_OF).

    Only two things are ordered, so that both outcomes are sure to occur: the
    worker starts once a booking has succeeded, and the bookings of the `late`
    slots (the oldest, which the worker's first batch takes) are issued once its
    first cycle has committed. Everything else runs as it comes.
    """

    url: str
    early: list[UUID]
    late: list[UUID]
    attempts: list[Attempt]
    cycles: list[Outcome]

    async def run(self) -> None:
        queue: asyncio.Queue[UUID | None] = asyncio.Queue()
        for slot_id in self.early:
            queue.put_nowait(slot_id)
        first_booked, first_cycle = asyncio.Event(), asyncio.Event()

        async def booker() -> None:
            while (slot_id := await queue.get()) is not None:
                attempt = await book_on_own_connection(self.url, slot_id)
                self.attempts.append(attempt)
                if attempt.booked is not None:
                    first_booked.set()

        async def late_bookings() -> None:
            await first_cycle.wait()
            for slot_id in [*self.late, *[None] * BOOKERS]:
                queue.put_nowait(slot_id)

        async def worker() -> None:
            await first_booked.wait()
            while True:
                outcome = await run_cycle(
                    self.url, BATCH_SIZE, AS_OF, clock=lambda: AS_OF, witness=True
                )
                self.cycles.append(outcome)
                first_cycle.set()
                if outcome.selected_count == 0 and outcome.skipped_locked_count == 0:
                    return

        async with asyncio.timeout(90):
            await asyncio.gather(worker(), late_bookings(), *(booker() for _ in range(BOOKERS)))


async def test_concurrent_bookings_and_worker_cycles_leave_each_slot_booked_or_expired_truthfully(
    db: SlotDatabase,
) -> None:
    slots = await publish_boundary_slots(db.url, 240)
    late, contested = [s.id for s in slots[:30]], [s.id for s in slots[30:]]
    # Every fourth contested slot is wanted by two callers at once.
    early = contested + contested[::4]
    random.Random(7).shuffle(early)  # noqa: S311 - a reproducible order, not a secret
    race = Race(db.url, early, late, attempts=[], cycles=[])
    await install_witness(db.url)  # before any booking holds a row

    await race.run()

    rows = await db.rows()
    booked_by = {a.slot_id: a.booked for a in race.attempts if a.booked is not None}
    successes = [a for a in race.attempts if a.booked is not None]
    refusals = [a for a in race.attempts if a.refused is not None]
    assert len(race.attempts) == len(early) + len(late)
    # Every slot ends exactly Booked or Expired, after exactly one transition.
    assert {row.status for row in rows.values()} <= {SlotStatus.BOOKED, SlotStatus.EXPIRED}
    assert {row.version for row in rows.values()} == {2}
    # At most one caller per slot was told "booked", and that caller owns the Booked row.
    assert len(successes) == len(booked_by)
    for slot_id, booked in booked_by.items():
        assert booked is not None
        assert (rows[slot_id].status, rows[slot_id].version) == (SlotStatus.BOOKED, 2)
        assert (booked.status, booked.version) == (SlotStatus.BOOKED, 2)
    assert {s for s, row in rows.items() if row.status is SlotStatus.BOOKED} == set(booked_by)
    # Every refused caller was told CAL_SLOT_NOT_AVAILABLE, and its slot is not Booked by it:
    # either Expired (the worker won) or Booked by the one caller told so.
    for attempt in refusals:
        assert isinstance(attempt.refused, SlotNotAvailableError), attempt
        assert attempt.refused.code == "CAL_SLOT_NOT_AVAILABLE"
        assert attempt.refused.status is rows[attempt.slot_id].status
    # The worker expired exactly the slots nobody booked, each once.
    expired = [ref.id for cycle in race.cycles for ref in cycle.expired]
    assert sorted(expired) == sorted(
        s for s, row in rows.items() if row.status is SlotStatus.EXPIRED
    )
    # Both outcomes occurred.
    lost_to_expiry = [a for a in refusals if rows[a.slot_id].status is SlotStatus.EXPIRED]
    assert successes
    assert lost_to_expiry
    _report(race, successes, lost_to_expiry)


def _report(race: Race, successes: list[Attempt], lost_to_expiry: list[Attempt]) -> None:
    """Measured, not asserted: how long bookings took beside the worker's batches."""
    seconds = sorted(a.seconds for a in race.attempts)
    batches = [batch.duration_ms for cycle in race.cycles for batch in cycle.batches]
    print(
        f"\nrace: {len(race.attempts)} bookings, {len(successes)} booked, "
        f"{len(lost_to_expiry)} refused after expiry, "
        f"{len(race.attempts) - len(successes) - len(lost_to_expiry)} refused as taken; "
        f"{len(race.cycles)} cycles; booking ms p50 {1000 * statistics.median(seconds):.1f} "
        f"max {1000 * seconds[-1]:.1f}; longest batch ms {max(batches):.1f}"
    )


def booking_task(url: str, slot_id: UUID) -> asyncio.Task[Attempt]:
    return asyncio.create_task(book_on_own_connection(url, slot_id))


async def test_a_booking_meeting_a_row_the_worker_holds_waits_for_that_batch_only_then_is_refused(
    db: SlotDatabase,
) -> None:
    """Expiry wins: the booking waits for the batch that locked its row and no longer (the
    worker's next batch of the same cycle is still held), then is told the truth."""
    older, newer = await publish_boundary_slots(db.url, 2)
    gates = await TransitionGates.install(db)
    await gates.close(older.id, SlotStatus.EXPIRED)
    await gates.close(newer.id, SlotStatus.EXPIRED)
    cycle = asyncio.create_task(run_cycle(db.url, 1, AS_OF, max_batches=2, witness=True))
    await eventually(lambda: _worker_at_gate(db))

    booking = booking_task(db.url, older.id)
    await eventually(lambda: _booking_waits_on_worker(db))
    await gates.open(older.id, SlotStatus.EXPIRED)
    attempt = await asyncio.wait_for(booking, 30)
    cycle_in_flight = not cycle.done()
    await eventually(lambda: _worker_at_gate(db))  # its second batch, held at newer's gate
    await gates.open(newer.id, SlotStatus.EXPIRED)
    outcome = await asyncio.wait_for(cycle, 30)

    assert cycle_in_flight  # the booking did not wait for the rest of the cycle
    assert isinstance(attempt.refused, SlotNotAvailableError)
    assert attempt.refused.status is SlotStatus.EXPIRED
    assert [[ref.id for ref in batch] for batch in outcome.expired_batches] == [
        [older.id],
        [newer.id],
    ]
    assert (await db.statuses())[older.id] is SlotStatus.EXPIRED


async def test_a_booking_in_flight_is_passed_over_by_the_worker_and_ends_booked(
    db: SlotDatabase,
) -> None:
    """Booking wins: the worker skips the row the booking holds, without waiting for it,
    and the Booked slot is out of its reach afterwards."""
    wanted, *others = await publish_boundary_slots(db.url, 5)
    await install_witness(db.url)  # its DDL would wait for the booking's lock
    gates = await TransitionGates.install(db)
    await gates.close(wanted.id, SlotStatus.BOOKED)
    booking = booking_task(db.url, wanted.id)
    await eventually(lambda: _booking_at_gate(db))

    during = await run_cycle(db.url, 10, AS_OF, witness=True)
    still_in_flight = not booking.done()
    await gates.open(wanted.id, SlotStatus.BOOKED)
    attempt = await asyncio.wait_for(booking, 30)
    after = await run_cycle(db.url, 10, AS_OF)

    assert still_in_flight
    assert during.skipped_locked_count == 1
    assert sorted(ref.id for ref in during.expired) == sorted(s.id for s in others)
    assert attempt.booked is not None
    assert (attempt.booked.status, attempt.booked.version) == (SlotStatus.BOOKED, 2)
    assert (after.selected_count, after.skipped_locked_count) == (0, 0)
    row = (await db.rows())[wanted.id]
    assert (row.status, row.version) == (SlotStatus.BOOKED, 2)


async def _worker_at_gate(db: SlotDatabase) -> bool:
    return any(s.at_a_gate for s in await sessions(db, WORKER_APPLICATION))


async def _booking_at_gate(db: SlotDatabase) -> bool:
    return any(s.at_a_gate for s in await sessions(db, SLOTS_APPLICATION))


async def _booking_waits_on_worker(db: SlotDatabase) -> bool:
    workers = {s.pid for s in await sessions(db, WORKER_APPLICATION)}
    bookings = await sessions(db, SLOTS_APPLICATION)
    return any(s.on_a_row and set(s.blocked_by) <= workers and s.blocked_by for s in bookings)
