"""Book-slot and archive: their guards and codes, the state machine, version + 1 per
transition (real PostgreSQL)."""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID, uuid4

import pytest

from slot_expiration.domain import ForbiddenTransitionError, SlotStatus
from slot_expiration.slots import (
    LeadTimeViolationError,
    SlotNotAvailableError,
    SlotNotFoundError,
    SlotOperations,
    SlotPolicy,
)
from tests.support.cycles import run_cycle
from tests.support.database import SlotDatabase
from tests.support.slot_context import Clock, in_minutes, operations
from tests.support.slots import AS_OF

pytestmark = pytest.mark.integration

TENANT, OTHER_TENANT, CONSULTANT = uuid4(), uuid4(), uuid4()
LATER = timedelta(hours=5)


async def published(ops: SlotOperations, start_minutes: float = 180) -> UUID:
    (slot,) = await ops.publish(TENANT, CONSULTANT, [in_minutes(start_minutes)])
    return slot.id


async def in_status(db: SlotDatabase, ops: SlotOperations, status: SlotStatus) -> UUID:
    """A slot of TENANT in `status`, brought there by the operations and the worker."""
    slot_id = await published(ops)
    if status is SlotStatus.BOOKED:
        await ops.book(TENANT, slot_id)
    elif status is SlotStatus.ARCHIVED:
        await ops.archive(TENANT, slot_id)
    elif status is SlotStatus.EXPIRED:
        await run_cycle(db.url, as_of=AS_OF + LATER)
    return slot_id


async def test_booking_moves_an_available_slot_to_booked_with_version_2(db: SlotDatabase) -> None:
    clock = Clock()
    async with operations(db.url, clock) as ops:
        slot_id = await published(ops)
        clock.advance(timedelta(minutes=5))
        booked = await ops.book(TENANT, slot_id)

    assert (booked.id, booked.status, booked.version) == (slot_id, SlotStatus.BOOKED, 2)
    assert booked.updated_at == AS_OF + timedelta(minutes=5)
    row = (await db.rows())[slot_id]
    assert (row.status, row.version, row.updated_at) == (SlotStatus.BOOKED, 2, booked.updated_at)


@pytest.mark.parametrize("status", [SlotStatus.BOOKED, SlotStatus.EXPIRED, SlotStatus.ARCHIVED])
async def test_booking_a_slot_that_is_not_available_is_refused_saying_its_status(
    db: SlotDatabase, status: SlotStatus
) -> None:
    async with operations(db.url) as ops:
        slot_id = await in_status(db, ops, status)
        before = (await db.rows())[slot_id]
        with pytest.raises(SlotNotAvailableError) as refused:
            await ops.book(TENANT, slot_id)

    assert refused.value.code == "CAL_SLOT_NOT_AVAILABLE"
    assert (refused.value.slot_id, refused.value.status) == (slot_id, status)
    assert (await db.rows())[slot_id] == before


async def test_another_tenants_slot_is_refused_exactly_like_an_unknown_id(
    db: SlotDatabase,
) -> None:
    unknown = uuid4()
    async with operations(db.url) as ops:
        theirs = await published(ops)
        before = await db.rows()
        with pytest.raises(SlotNotAvailableError) as foreign:
            await ops.book(OTHER_TENANT, theirs)
        with pytest.raises(SlotNotAvailableError) as missing:
            await ops.book(OTHER_TENANT, unknown)

    assert foreign.value.code == missing.value.code == "CAL_SLOT_NOT_AVAILABLE"
    assert (foreign.value.status, missing.value.status) == (None, None)
    assert str(foreign.value).replace(str(theirs), "<id>") == str(missing.value).replace(
        str(unknown), "<id>"
    )
    assert await db.rows() == before


async def test_a_slot_starting_sooner_than_the_lead_time_is_refused(db: SlotDatabase) -> None:
    clock = Clock()
    async with operations(db.url, clock) as ops:
        slot_id = await published(ops, start_minutes=90)
        clock.advance(timedelta(minutes=31))  # 59 minutes before its start
        with pytest.raises(LeadTimeViolationError) as refused:
            await ops.book(TENANT, slot_id)

    assert refused.value.code == "CAL_SLOT_LEAD_TIME_VIOLATION"
    assert refused.value.min_lead_time == timedelta(minutes=60)
    assert (await db.statuses())[slot_id] is SlotStatus.AVAILABLE


async def test_a_slot_starting_exactly_the_lead_time_from_now_can_be_booked(
    db: SlotDatabase,
) -> None:
    clock = Clock()
    async with operations(db.url, clock) as ops:
        slot_id = await published(ops, start_minutes=90)
        clock.advance(timedelta(minutes=30))
        booked = await ops.book(TENANT, slot_id)

    assert booked.status is SlotStatus.BOOKED


async def test_lead_time_0_books_a_slot_up_to_its_start_and_not_after(db: SlotDatabase) -> None:
    clock = Clock()
    policy = SlotPolicy(min_lead_time=timedelta(0))
    async with operations(db.url, clock, policy) as ops:
        at_start, started = await ops.publish(TENANT, CONSULTANT, [in_minutes(60), in_minutes(30)])
        clock.advance(timedelta(minutes=60))
        booked = await ops.book(TENANT, at_start.id)
        with pytest.raises(LeadTimeViolationError):
            await ops.book(TENANT, started.id)

    assert booked.status is SlotStatus.BOOKED


async def test_a_lead_time_given_to_the_call_overrides_the_policy(db: SlotDatabase) -> None:
    clock = Clock()
    async with operations(db.url, clock) as ops:
        slot_id = await published(ops, start_minutes=90)
        with pytest.raises(LeadTimeViolationError):
            await ops.book(TENANT, slot_id, min_lead_time=timedelta(minutes=120))
        booked = await ops.book(TENANT, slot_id, min_lead_time=timedelta(minutes=90))

    assert booked.status is SlotStatus.BOOKED


async def test_an_expired_slot_too_late_to_book_is_refused_as_not_available(
    db: SlotDatabase,
) -> None:
    """Once the worker has expired it, the status is the truth a caller is told."""
    clock = Clock()
    async with operations(db.url, clock) as ops:
        slot_id = await published(ops)
        await run_cycle(db.url, as_of=AS_OF + LATER)
        clock.advance(LATER)
        with pytest.raises(SlotNotAvailableError) as refused:
            await ops.book(TENANT, slot_id)

    assert refused.value.status is SlotStatus.EXPIRED


@pytest.mark.parametrize("status", [SlotStatus.AVAILABLE, SlotStatus.EXPIRED])
async def test_archive_moves_an_available_or_expired_slot_to_archived_version_plus_one(
    db: SlotDatabase, status: SlotStatus
) -> None:
    clock = Clock()
    async with operations(db.url, clock) as ops:
        slot_id = await in_status(db, ops, status)
        version = (await db.rows())[slot_id].version
        clock.advance(timedelta(minutes=7))
        archived = await ops.archive(TENANT, slot_id)

    assert (archived.status, archived.version) == (SlotStatus.ARCHIVED, version + 1)
    assert archived.updated_at == AS_OF + timedelta(minutes=7)
    assert (await db.rows())[slot_id].version == version + 1


@pytest.mark.parametrize("status", [SlotStatus.BOOKED, SlotStatus.ARCHIVED])
async def test_archiving_a_booked_or_archived_slot_is_a_forbidden_transition(
    db: SlotDatabase, status: SlotStatus
) -> None:
    async with operations(db.url) as ops:
        slot_id = await in_status(db, ops, status)
        before = (await db.rows())[slot_id]
        with pytest.raises(ForbiddenTransitionError) as refused:
            await ops.archive(TENANT, slot_id)

    assert refused.value.code == "CAL_SLOT_FORBIDDEN_TRANSITION"
    assert (refused.value.source, refused.value.target) == (status, SlotStatus.ARCHIVED)
    assert str(slot_id) in str(refused.value)
    assert (await db.rows())[slot_id] == before


async def test_archiving_another_tenants_slot_is_refused_exactly_like_an_unknown_id(
    db: SlotDatabase,
) -> None:
    unknown = uuid4()
    async with operations(db.url) as ops:
        theirs = await published(ops)
        with pytest.raises(SlotNotFoundError) as foreign:
            await ops.archive(OTHER_TENANT, theirs)
        with pytest.raises(SlotNotFoundError) as missing:
            await ops.archive(OTHER_TENANT, unknown)

    assert foreign.value.code == missing.value.code == "CAL_SLOT_NOT_FOUND"
    assert str(foreign.value).replace(str(theirs), "<id>") == str(missing.value).replace(
        str(unknown), "<id>"
    )
    assert (await db.statuses())[theirs] is SlotStatus.AVAILABLE
