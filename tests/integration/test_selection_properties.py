"""Properties of the selection over many generated layouts (Hypothesis, real PostgreSQL)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from slot_expiration.domain import Slot, SlotStatus
from tests.support.cycles import run_cycle
from tests.support.database import SlotDatabase, rows_locked
from tests.support.slots import AS_OF, make_slot

pytestmark = pytest.mark.integration

# Few distinct minutes on purpose: ties on start_at must be handled exactly too.
slot_specs = st.lists(
    st.tuples(
        st.integers(min_value=-6, max_value=3),  # start, minutes from AS_OF
        st.sampled_from(list(SlotStatus)),
        st.booleans(),  # held locked by another transaction
    ),
    max_size=25,
)


def expected_outcome(slots: list[tuple[Slot, bool]], batch_size: int) -> tuple[list[Slot], int]:
    """The model: oldest (start_at, id) unlocked candidates; locked ones up to the last taken."""
    candidates = sorted(
        (
            pair
            for pair in slots
            if pair[0].status is SlotStatus.AVAILABLE and pair[0].start_at <= AS_OF
        ),
        key=lambda pair: (pair[0].start_at, pair[0].id),
    )
    taken = [slot for slot, locked in candidates if not locked][:batch_size]
    if len(taken) < batch_size:
        return taken, sum(1 for _, locked in candidates if locked)
    last = (taken[-1].start_at, taken[-1].id)
    skipped = sum(1 for s, locked in candidates if locked and (s.start_at, s.id) <= last)
    return taken, skipped


@asynccontextmanager
async def maybe_locked(url: str, slots: list[Slot]) -> AsyncIterator[None]:
    if not slots:
        yield
        return
    async with rows_locked(url, [s.id for s in slots]):
        yield


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(specs=slot_specs, batch_size=st.integers(min_value=1, max_value=8))
async def test_expires_exactly_the_oldest_unlocked_and_counts_skipped_exactly(
    db: SlotDatabase, specs: list[tuple[int, SlotStatus, bool]], batch_size: int
) -> None:
    await db.execute("TRUNCATE availability_slots CASCADE")
    slots = [(make_slot(timedelta(minutes=m), status), locked) for m, status, locked in specs]
    await db.insert(slot for slot, _ in slots)

    async with maybe_locked(db.url, [slot for slot, locked in slots if locked]):
        result = await run_cycle(db.url, batch_size, witness=True)

    taken, skipped = expected_outcome(slots, batch_size)
    assert [r.id for r in result.expired] == [s.id for s in taken]
    assert result.skipped_locked_count == skipped
    statuses = await db.statuses()
    expired_now = {s.id for s, _ in slots if statuses[s.id] is not s.status}
    assert expired_now == {s.id for s in taken}


# What the quarantine holds for a slot: nothing, an entry due now, one waiting for its next
# attempt, a parked one, or one that ended (its slot left Available once).
QUARANTINE_STATES = ("none", "due", "waiting", "parked", "ended")
PASSED_OVER = frozenset({"waiting", "parked"})

quarantined_specs = st.lists(
    st.tuples(
        st.integers(min_value=-6, max_value=3),
        st.sampled_from(list(SlotStatus)),
        st.booleans(),
        st.sampled_from(QUARANTINE_STATES),
    ),
    max_size=25,
)


async def _put_in_quarantine(db: SlotDatabase, slot: Slot, state: str) -> None:
    """An entry as the cycle (or an operator) would have left it (test-side SQL)."""
    if state == "none":
        return
    now = datetime.now(UTC)
    far = timedelta(days=1)
    next_attempt = now - far if state in ("due", "parked") else now + far
    await db.conn.execute(
        "INSERT INTO slot_expiration_failures (slot_id, attempts, first_failed_at, "
        "last_failed_at, next_attempt_at, sqlstate, message, parked_at, ended_at, ended_status) "
        "VALUES (%s, 1, %s, %s, %s, 'P0001', 'refused', %s, %s, %s)",
        (
            slot.id,
            now - far,
            now - far,
            next_attempt,
            now - far if state == "parked" else None,
            now - far if state == "ended" else None,
            "Booked" if state == "ended" else None,
        ),
    )


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(specs=quarantined_specs, batch_size=st.integers(min_value=1, max_value=8))
async def test_the_selection_passes_over_waiting_and_parked_entries_only(
    db: SlotDatabase, specs: list[tuple[int, SlotStatus, bool, str]], batch_size: int
) -> None:
    await db.execute("TRUNCATE availability_slots CASCADE")
    slots = [(make_slot(timedelta(minutes=m), status), locked, q) for m, status, locked, q in specs]
    await db.insert(slot for slot, _, _ in slots)
    for slot, _, state in slots:
        await _put_in_quarantine(db, slot, state)

    async with maybe_locked(db.url, [slot for slot, locked, _ in slots if locked]):
        result = await run_cycle(db.url, batch_size, witness=True)

    # The model: the same as without a quarantine, over the slots it does not pass over.
    eligible = [(slot, locked) for slot, locked, state in slots if state not in PASSED_OVER]
    taken, skipped = expected_outcome(eligible, batch_size)
    assert [r.id for r in result.expired] == [s.id for s in taken]
    assert result.skipped_locked_count == skipped
    active = await db.quarantine()
    for slot in taken:
        assert slot.id not in active  # an expired slot's entry ended with it


Key = tuple[datetime, UUID]


def _key(slot: Slot) -> Key:
    return (slot.start_at, slot.id)


def drain_model(
    slots: list[tuple[Slot, bool, bool]], batch_size: int, max_batches: int
) -> tuple[list[list[UUID]], int]:
    """The model of a drain: each batch starts after the previous batch's window ended;
    a batch holding a poison row is redone row by row, topping up past rejected rows;
    each batch counts the locked rows of its own window. Returns the ids each batch
    expired, in order, and the skipped total."""
    candidates = sorted(
        (
            entry
            for entry in slots
            if entry[0].status is SlotStatus.AVAILABLE and entry[0].start_at <= AS_OF
        ),
        key=lambda entry: _key(entry[0]),
    )
    batches: list[list[UUID]] = []
    skipped, after = 0, None
    while True:
        window = [e for e in candidates if after is None or _key(e[0]) > after]
        expired, end = _one_batch(window, batch_size)
        batches.append(expired)
        skipped += sum(1 for s, locked, _ in window if locked and (end is None or _key(s) <= end))
        if end is None or len(batches) == max_batches:
            return batches, skipped
        after = end


def _one_batch(
    window: list[tuple[Slot, bool, bool]], batch_size: int
) -> tuple[list[UUID], Key | None]:
    unlocked = [(slot, poison) for slot, locked, poison in window if not locked]
    expired: list[UUID] = []
    tried: set[UUID] = set()
    while True:
        want = batch_size - len(expired)
        pick = [(s, p) for s, p in unlocked if s.id not in tried][:want]
        tried |= {s.id for s, _ in pick}
        expired += [s.id for s, poison in pick if not poison]
        rejected = any(poison for _, poison in pick)
        if not rejected or len(pick) < want:
            return expired, _key(pick[-1][0]) if pick and len(pick) == want else None


drain_specs = st.lists(
    st.tuples(
        st.integers(min_value=-6, max_value=3),  # start, minutes from AS_OF
        st.sampled_from(list(SlotStatus)),
        st.booleans(),  # held locked by another transaction
        st.booleans(),  # poison: the database rejects its expiry
    ),
    max_size=25,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    specs=drain_specs,
    batch_size=st.integers(min_value=1, max_value=6),
    max_batches=st.integers(min_value=0, max_value=4),
)
# A locked row at the head: the drain's second batch must not pass over it again.
@example(
    specs=[
        (-3, SlotStatus.AVAILABLE, True, False),
        (-2, SlotStatus.AVAILABLE, False, False),
        (-1, SlotStatus.AVAILABLE, False, False),
    ],
    batch_size=1,
    max_batches=0,
)
# A poison row in the first batch, a locked one after it, more rows behind.
@example(
    specs=[
        (-4, SlotStatus.AVAILABLE, False, True),
        (-3, SlotStatus.AVAILABLE, True, False),
        (-2, SlotStatus.AVAILABLE, False, False),
        (-1, SlotStatus.AVAILABLE, False, False),
        (0, SlotStatus.AVAILABLE, False, False),
    ],
    batch_size=2,
    max_batches=0,
)
async def test_a_drain_expires_and_counts_skipped_exactly_batch_after_batch_poison_included(
    db: SlotDatabase,
    specs: list[tuple[int, SlotStatus, bool, bool]],
    batch_size: int,
    max_batches: int,
) -> None:
    await db.execute("TRUNCATE availability_slots CASCADE")
    await db.execute("DROP TRIGGER IF EXISTS poison ON availability_slots")
    await db.execute("DROP FUNCTION IF EXISTS poison()")
    slots = [
        (make_slot(timedelta(minutes=m), status), locked, poison)
        for m, status, locked, poison in specs
    ]
    await db.insert(slot for slot, _, _ in slots)
    await db.install_poison_trigger([slot.id for slot, _, poison in slots if poison], "P0001")

    async with maybe_locked(db.url, [slot for slot, locked, _ in slots if locked]):
        outcome = await run_cycle(db.url, batch_size, max_batches=max_batches, witness=True)

    batches, skipped = drain_model(slots, batch_size, max_batches)
    assert [b.expired_count for b in outcome.batches] == [len(ids) for ids in batches]
    assert [[slot.id for slot in b] for b in outcome.expired_batches] == [
        ids for ids in batches if ids
    ]
    assert outcome.skipped_locked_count == skipped
